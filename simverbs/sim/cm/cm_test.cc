// The simulated connection manager, through the Backend interface: getaddrinfo, binding and
// listening, connect / accept / reject with private data, REJECTED without a listener,
// disconnect as on IB (DREQ / DREP, their timers in simulated time, TIMEWAIT_EXIT), destroy
// rules, migration of pending events, the pollable event channel; and, under the siw profile,
// iWARP's establishment, disconnect and private data (CmSiwTest).

#include "simverbs/sim/cm/cm.h"

#include <netdb.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "simverbs/backend.h"
#include "simverbs/sim/fabric/host.h"
#include "simverbs/sim/nic/qp.h"
#include "simverbs/sim/sched/sched.h"
#include "simverbs/sim/sim_control.h"
#include "simverbs/sim/test_util.h"

namespace softrpma::sim::testing {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::Field;
using ::testing::UnorderedElementsAre;

sockaddr_in Ipv4(const char* text, uint16_t port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  inet_pton(AF_INET, text, &addr.sin_addr);
  return addr;
}

sockaddr* AsSockaddr(sockaddr_in* addr) { return reinterpret_cast<sockaddr*>(addr); }

class CmTest : public ::testing::Test {
 protected:
  // A synchronous id whose address is resolved (127.0.0.1:7204): it has the device.
  void CreateResolvedId(rdma_cm_id** id) {
    ASSERT_EQ(backend_->RdmaCreateId(nullptr, id, nullptr, RDMA_PS_TCP), 0);
    sockaddr_in dst = Ipv4("127.0.0.1", 7204);
    ASSERT_EQ(backend_->RdmaResolveAddr(*id, nullptr, AsSockaddr(&dst), 100), 0);
  }

  Backend* backend_ = SimBackend();
};

TEST_F(CmTest, Getaddrinfo_PassiveFillsSrc_ActiveFillsDst) {
  rdma_addrinfo hints{};
  hints.ai_flags = RAI_PASSIVE;
  hints.ai_port_space = RDMA_PS_TCP;
  rdma_addrinfo* passive = nullptr;
  ASSERT_EQ(backend_->RdmaGetaddrinfo("127.0.0.1", "7204", &hints, &passive), 0);
  ASSERT_NE(passive->ai_src_addr, nullptr);
  EXPECT_EQ(passive->ai_dst_addr, nullptr);
  EXPECT_EQ(ntohs(reinterpret_cast<sockaddr_in*>(passive->ai_src_addr)->sin_port), 7204);
  EXPECT_EQ(passive->ai_qp_type, IBV_QPT_RC);
  EXPECT_EQ(passive->ai_port_space, RDMA_PS_TCP);
  backend_->RdmaFreeaddrinfo(passive);

  hints.ai_flags = 0;
  rdma_addrinfo* active = nullptr;
  ASSERT_EQ(backend_->RdmaGetaddrinfo("::1", "7204", &hints, &active), 0);
  EXPECT_EQ(active->ai_src_addr, nullptr);
  ASSERT_NE(active->ai_dst_addr, nullptr);
  EXPECT_EQ(active->ai_family, AF_INET6);
  EXPECT_EQ(active->ai_dst_addr->sa_family, AF_INET6);
  backend_->RdmaFreeaddrinfo(active);
}

TEST_F(CmTest, Getaddrinfo_Unparsable_Einval) {
  rdma_addrinfo hints{};
  hints.ai_flags = RAI_NUMERICHOST;
  rdma_addrinfo* res = nullptr;

  // As librdmacm: getaddrinfo's own code.
  EXPECT_EQ(backend_->RdmaGetaddrinfo("not-an-address", "1", &hints, &res), GaiError(EAI_NONAME));
  EXPECT_EQ(res, nullptr);
}

TEST_F(CmTest, Getaddrinfo_NoNodeServiceOrHints_Einval) {
  rdma_addrinfo* res = nullptr;

  EXPECT_EQ(backend_->RdmaGetaddrinfo(nullptr, nullptr, nullptr, &res), EINVAL);

  EXPECT_EQ(res, nullptr);
}

// As rdma-core's addrinfo.c (libfabric's verbs provider asks so for its source address): with
// neither node nor service, the result is the hints, their addresses copied.
TEST_F(CmTest, Getaddrinfo_NoNodeNoService_CopiesHints) {
  sockaddr_in src = Ipv4("127.0.0.1", 0);
  sockaddr_in dst = Ipv4("192.0.2.7", 7204);
  rdma_addrinfo hints{};
  hints.ai_flags = RAI_PASSIVE;
  hints.ai_family = AF_INET;
  hints.ai_qp_type = IBV_QPT_RC;
  hints.ai_port_space = RDMA_PS_TCP;
  hints.ai_src_addr = AsSockaddr(&src);
  hints.ai_src_len = sizeof(src);
  hints.ai_dst_addr = AsSockaddr(&dst);
  hints.ai_dst_len = sizeof(dst);
  rdma_addrinfo* res = nullptr;

  ASSERT_EQ(backend_->RdmaGetaddrinfo(nullptr, nullptr, &hints, &res), 0);

  ASSERT_NE(res, nullptr);
  EXPECT_EQ(res->ai_flags, RAI_PASSIVE);
  EXPECT_EQ(res->ai_family, AF_INET);
  EXPECT_EQ(res->ai_qp_type, IBV_QPT_RC);
  EXPECT_EQ(res->ai_port_space, RDMA_PS_TCP);
  ASSERT_EQ(res->ai_src_len, sizeof(src));
  ASSERT_NE(res->ai_src_addr, AsSockaddr(&src));  // a copy
  EXPECT_EQ(std::memcmp(res->ai_src_addr, &src, sizeof(src)), 0);
  ASSERT_EQ(res->ai_dst_len, sizeof(dst));
  EXPECT_EQ(std::memcmp(res->ai_dst_addr, &dst, sizeof(dst)), 0);
  backend_->RdmaFreeaddrinfo(res);
}

// A source the resolution did not give (an active lookup) is also the hints'.
TEST_F(CmTest, Getaddrinfo_Active_SourceFromHints) {
  sockaddr_in src = Ipv4("127.0.0.1", 5000);
  rdma_addrinfo hints{};
  hints.ai_src_addr = AsSockaddr(&src);
  hints.ai_src_len = sizeof(src);
  rdma_addrinfo* res = nullptr;

  ASSERT_EQ(backend_->RdmaGetaddrinfo("127.0.0.1", "7204", &hints, &res), 0);

  ASSERT_NE(res->ai_dst_addr, nullptr);
  ASSERT_EQ(res->ai_src_len, sizeof(src));
  EXPECT_EQ(std::memcmp(res->ai_src_addr, &src, sizeof(src)), 0);
  backend_->RdmaFreeaddrinfo(res);
}

TEST_F(CmTest, SyncId_ResolveAddrAndRoute_SetVerbs) {
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(backend_->RdmaCreateId(nullptr, &id, nullptr, RDMA_PS_TCP), 0);
  EXPECT_EQ(id->verbs, nullptr);
  EXPECT_EQ(backend_->RdmaResolveRoute(id, 100), EINVAL);  // address not resolved yet
  sockaddr_in dst = Ipv4("192.0.2.7", 7204);

  ASSERT_EQ(backend_->RdmaResolveAddr(id, nullptr, AsSockaddr(&dst), 100), 0);
  ASSERT_EQ(backend_->RdmaResolveRoute(id, 100), 0);

  ASSERT_NE(id->verbs, nullptr);
  EXPECT_STREQ(id->verbs->device->name, "softrpma_sim0");
  EXPECT_EQ(id->ps, RDMA_PS_TCP);
  EXPECT_EQ(backend_->RdmaDestroyId(id), 0);
}

TEST_F(CmTest, AsyncId_ResolveQueuesEvents) {
  rdma_event_channel* channel = nullptr;
  ASSERT_EQ(backend_->RdmaCreateEventChannel(&channel), 0);
  rdma_cm_id* id = nullptr;
  int marker = 0;
  ASSERT_EQ(backend_->RdmaCreateId(channel, &id, &marker, RDMA_PS_TCP), 0);
  EXPECT_EQ(id->channel, channel);
  EXPECT_EQ(id->context, &marker);
  sockaddr_in dst = Ipv4("127.0.0.1", 7204);

  ASSERT_EQ(backend_->RdmaResolveAddr(id, nullptr, AsSockaddr(&dst), 100), 0);
  EXPECT_TRUE(ExpectCmEvent(backend_, channel, RDMA_CM_EVENT_ADDR_RESOLVED).ok());
  ASSERT_EQ(backend_->RdmaResolveRoute(id, 100), 0);
  EXPECT_TRUE(ExpectCmEvent(backend_, channel, RDMA_CM_EVENT_ROUTE_RESOLVED).ok());

  EXPECT_EQ(backend_->RdmaDestroyId(id), 0);
  backend_->RdmaDestroyEventChannel(channel);
}

// rdma-core's rdma_destroy_event_channel closes the fd, which does not wake a thread blocked in
// rdma_get_cm_event's read(2) on it: that thread sleeps on (rping destroys its channel so while
// its CM thread waits). The simulator keeps the channel for the sleeper instead of freeing it
// under it (which woke it with EBADF, or on a reused fd).
TEST_F(CmTest, DestroyEventChannel_WithAWaiter_TheWaiterSleepsOn) {
  rdma_event_channel* channel = nullptr;
  ASSERT_EQ(backend_->RdmaCreateEventChannel(&channel), 0);
  std::atomic<bool> returned{false};
  std::thread waiter([this, channel, &returned] {
    rdma_cm_event* event = nullptr;
    backend_->RdmaGetCmEvent(channel, &event);
    returned.store(true);
  });
  SimEventChannel* sim_channel = to_sim(channel);
  for (;;) {  // until the waiter sleeps in the channel's read(2)
    {
      softrpma::MutexLock lock(&sim_channel->mu);
      if (sim_channel->signal.waiters() > 0) break;
    }
    std::this_thread::yield();
  }

  const int fd = channel->fd;
  backend_->RdmaDestroyEventChannel(channel);

  EXPECT_NE(fcntl(fd, F_GETFD), -1) << "the sleeper's fd was closed under it";
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(returned.load());
  waiter.detach();  // asleep until the test process exits, as with rdma-core
}

// A thread on its way into rdma_get_cm_event (inside it, not yet asleep: here held at the
// channel's lock) when the channel is destroyed: the channel was freed under it, and it then
// took the channel's lock in freed memory (ThreadSanitizer: heap-use-after-free in
// DrepToSettle, with rping's CM thread). Counted from its first instruction, it keeps the
// channel, and the last caller out frees it.
TEST_F(CmTest, DestroyEventChannel_WithACallerOnItsWayIn_KeptUntilItLeaves) {
  rdma_event_channel* channel = nullptr;
  ASSERT_EQ(backend_->RdmaCreateEventChannel(&channel), 0);
  // Non-blocking: the caller finds no event and returns EAGAIN instead of sleeping on.
  ASSERT_EQ(fcntl(channel->fd, F_SETFL, fcntl(channel->fd, F_GETFL) | O_NONBLOCK), 0);
  SimEventChannel* sim_channel = to_sim(channel);
  std::atomic<int> result{-1};
  sim_channel->mu.Lock();
  std::thread caller([this, channel, &result] {
    rdma_cm_event* event = nullptr;
    result.store(backend_->RdmaGetCmEvent(channel, &event));
  });
  while (sim_channel->callers.load() == 0) std::this_thread::yield();
  sim_channel->mu.Unlock();  // the caller goes on as the channel is destroyed

  backend_->RdmaDestroyEventChannel(channel);

  caller.join();
  EXPECT_EQ(result.load(), EAGAIN);
}

TEST_F(CmTest, BindAddr_SpecificSetsVerbs_WildcardDoesNot) {
  rdma_cm_id* specific = nullptr;
  rdma_cm_id* wildcard = nullptr;
  ASSERT_EQ(backend_->RdmaCreateId(nullptr, &specific, nullptr, RDMA_PS_TCP), 0);
  ASSERT_EQ(backend_->RdmaCreateId(nullptr, &wildcard, nullptr, RDMA_PS_TCP), 0);
  sockaddr_in a = Ipv4("127.0.0.1", 0);
  sockaddr_in any = Ipv4("0.0.0.0", 0);

  ASSERT_EQ(backend_->RdmaBindAddr(specific, AsSockaddr(&a)), 0);
  ASSERT_EQ(backend_->RdmaBindAddr(wildcard, AsSockaddr(&any)), 0);

  EXPECT_NE(specific->verbs, nullptr);
  EXPECT_EQ(wildcard->verbs, nullptr);
  // Port 0 picks ports from a counter: consecutive binds get consecutive ports.
  const uint16_t p1 =
      ntohs(reinterpret_cast<sockaddr_in*>(&specific->route.addr.src_addr)->sin_port);
  const uint16_t p2 =
      ntohs(reinterpret_cast<sockaddr_in*>(&wildcard->route.addr.src_addr)->sin_port);
  EXPECT_GE(p1, 49152);
  EXPECT_EQ(p2, p1 + 1);
  EXPECT_EQ(backend_->RdmaDestroyId(specific), 0);
  EXPECT_EQ(backend_->RdmaDestroyId(wildcard), 0);
}

// Ports for port 0 are reserved on the fabric a block at a time: 300 ids bound to port 0 get
// 300 ports and cost this process a descriptor per 64 of them, not one each (the kernel's
// rdma_cm takes none; a program near its descriptor limit, or with 1,000 connections under
// the default limit of 1,024, must not fail to bind), all given back when the ids go.
TEST_F(CmTest, Port0_ManyIds_FewDescriptorsAndAllGivenBack) {
  auto open_fds = [] {
    int count = 0;
    DIR* dir = opendir("/proc/self/fd");
    if (dir == nullptr) return -1;
    while (readdir(dir) != nullptr) ++count;
    closedir(dir);
    return count;
  };
  rdma_event_channel* channel = nullptr;
  ASSERT_EQ(backend_->RdmaCreateEventChannel(&channel), 0);
  const int before = open_fds();
  ASSERT_GT(before, 0);
  std::vector<rdma_cm_id*> ids;
  std::set<uint16_t> ports;
  for (int i = 0; i < 300; ++i) {
    rdma_cm_id* id = nullptr;
    ASSERT_EQ(backend_->RdmaCreateId(channel, &id, nullptr, RDMA_PS_TCP), 0);
    sockaddr_in any = Ipv4("0.0.0.0", 0);
    ASSERT_EQ(backend_->RdmaBindAddr(id, AsSockaddr(&any)), 0) << i;
    ports.insert(ntohs(reinterpret_cast<sockaddr_in*>(&id->route.addr.src_addr)->sin_port));
    ids.push_back(id);
  }
  EXPECT_EQ(ports.size(), 300u);
  EXPECT_LE(open_fds() - before, 300 / 64 + 1);
  for (rdma_cm_id* id : ids) EXPECT_EQ(backend_->RdmaDestroyId(id), 0);
  EXPECT_EQ(open_fds(), before);
  backend_->RdmaDestroyEventChannel(channel);
}

// The child of Port0_TwoProcessesOfOneFabric_GetDifferentPorts (fork + exec of this test
// program, which runs this test alone): binds 0.0.0.0:0, listens, and writes "<port> <bind's
// answer> <listen's answer>" to the descriptor named by kPort0ChildFdVar. Skipped otherwise.
constexpr char kPort0ChildFdVar[] = "SOFTRPMA_CM_TEST_PORT0_CHILD_FD";

TEST_F(CmTest, Port0_ChildProcess) {
  const char* fd_text = std::getenv(kPort0ChildFdVar);
  if (fd_text == nullptr) GTEST_SKIP() << "the child of Port0_TwoProcessesOfOneFabric_...";
  rdma_event_channel* channel = nullptr;
  ASSERT_EQ(backend_->RdmaCreateEventChannel(&channel), 0);
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(backend_->RdmaCreateId(channel, &id, nullptr, RDMA_PS_TCP), 0);
  sockaddr_in any = Ipv4("0.0.0.0", 0);
  const int bind_err = backend_->RdmaBindAddr(id, AsSockaddr(&any));
  const int listen_err = bind_err == 0 ? backend_->RdmaListen(id, 1) : -1;
  const std::string answer =
      absl::StrCat(ntohs(reinterpret_cast<sockaddr_in*>(&id->route.addr.src_addr)->sin_port),
                   " ", bind_err, " ", listen_err, "\n");
  ASSERT_EQ(write(std::atoi(fd_text), answer.data(), answer.size()),
            static_cast<ssize_t>(answer.size()));
  EXPECT_EQ(backend_->RdmaDestroyId(id), 0);
  backend_->RdmaDestroyEventChannel(channel);
}

// As the kernel's rdma_cm, port 0 is unique across the processes of a fabric: each process
// counts from the same first port, and a process skips what another one holds (libfabric's
// verbs provider listens on port 0 in both fi_pingpong processes).
TEST_F(CmTest, Port0_TwoProcessesOfOneFabric_GetDifferentPorts) {
  rdma_event_channel* channel = nullptr;
  ASSERT_EQ(backend_->RdmaCreateEventChannel(&channel), 0);
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(backend_->RdmaCreateId(channel, &id, nullptr, RDMA_PS_TCP), 0);
  sockaddr_in any = Ipv4("0.0.0.0", 0);
  ASSERT_EQ(backend_->RdmaBindAddr(id, AsSockaddr(&any)), 0);
  ASSERT_EQ(backend_->RdmaListen(id, 1), 0);
  const uint16_t port = ntohs(reinterpret_cast<sockaddr_in*>(&id->route.addr.src_addr)->sin_port);
  int fds[2];
  ASSERT_EQ(pipe2(fds, O_CLOEXEC), 0);
  const std::string fd_text = std::to_string(fds[1]);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // (The child keeps the write end open across exec; the read end closes.)
    fcntl(fds[1], F_SETFD, 0);
    setenv(kPort0ChildFdVar, fd_text.c_str(), 1);
    // Bazel's files are the parent's: the child's gtest writes none of them.
    for (const char* var : {"XML_OUTPUT_FILE", "GTEST_OUTPUT", "TEST_PREMATURE_EXIT_FILE",
                            "TEST_SHARD_STATUS_FILE", "TEST_TOTAL_SHARDS", "TEST_SHARD_INDEX",
                            "GTEST_SHARD_INDEX", "GTEST_TOTAL_SHARDS"}) {
      unsetenv(var);
    }
    execl("/proc/self/exe", "cm_test", "--gtest_filter=CmTest.Port0_ChildProcess",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[1]);
  // At most 30 s for the child's answer and its exit; killed after that.
  std::string answer;
  char buffer[64];
  for (int waited_ms = 0; waited_ms < 30000; waited_ms += 10) {
    pollfd readable = {fds[0], POLLIN, 0};
    if (poll(&readable, 1, 10) <= 0) continue;
    const ssize_t n = read(fds[0], buffer, sizeof(buffer));
    if (n <= 0) break;
    answer.append(buffer, static_cast<size_t>(n));
  }
  close(fds[0]);
  int status = 0;
  for (int waited_ms = 0; waited_ms < 30000 && waitpid(child, &status, WNOHANG) == 0;
       waited_ms += 10) {
    usleep(10000);
  }
  if (waitpid(child, &status, WNOHANG) == 0) {
    kill(child, SIGKILL);
    waitpid(child, &status, 0);
    ADD_FAILURE() << "the child did not end within 30 s";
  }

  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  int child_port = -1, bind_err = -1, listen_err = -1;
  ASSERT_EQ(std::sscanf(answer.c_str(), "%d %d %d", &child_port, &bind_err, &listen_err), 3)
      << "child's answer: " << answer;
  EXPECT_EQ(bind_err, 0);
  EXPECT_EQ(listen_err, 0);  // was EADDRINUSE: both processes picked the first port
  EXPECT_NE(child_port, port);
  EXPECT_GE(child_port, 49152);
  EXPECT_EQ(backend_->RdmaDestroyId(id), 0);
  backend_->RdmaDestroyEventChannel(channel);
}

TEST_F(CmTest, BindAddr_SameAddrPortTwice_Eaddrinuse_WildcardOverlaps) {
  const uint16_t port = NextTestPort();
  rdma_cm_id* first = nullptr;
  rdma_cm_id* second = nullptr;
  ASSERT_EQ(backend_->RdmaCreateId(nullptr, &first, nullptr, RDMA_PS_TCP), 0);
  ASSERT_EQ(backend_->RdmaCreateId(nullptr, &second, nullptr, RDMA_PS_TCP), 0);
  sockaddr_in addr = Ipv4("127.0.0.1", port);
  sockaddr_in any = Ipv4("0.0.0.0", port);
  sockaddr_in other = Ipv4("127.0.0.2", port);
  ASSERT_EQ(backend_->RdmaBindAddr(first, AsSockaddr(&addr)), 0);

  EXPECT_EQ(backend_->RdmaBindAddr(second, AsSockaddr(&addr)), EADDRINUSE);
  EXPECT_EQ(backend_->RdmaBindAddr(second, AsSockaddr(&any)), EADDRINUSE);
  EXPECT_EQ(backend_->RdmaBindAddr(second, AsSockaddr(&other)), 0);  // another address

  EXPECT_EQ(backend_->RdmaDestroyId(first), 0);
  EXPECT_EQ(backend_->RdmaDestroyId(second), 0);
}

// The kernel's ib_modify_qp_is_ok table, RTS -> RTS row (RC): a CM QP takes the row's optional
// attributes (libfabric's verbs provider sets IBV_QP_MIN_RNR_TIMER on its connected QPs); what
// the row does not allow, another transition, or a bad value stays EINVAL.
TEST_F(CmTest, ModifyQp_CmQpRtsToRtsOptionalAttributes_Ok_OthersEinval) {
  TestConnection conn(backend_);
  ASSERT_TRUE(conn.Connect(ConnectionOptions()).ok());
  ibv_qp* qp = conn.active.qp();
  ASSERT_EQ(qp->state, IBV_QPS_RTS);
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTS;
  attr.cur_qp_state = IBV_QPS_RTS;
  attr.min_rnr_timer = 12;
  attr.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                         IBV_ACCESS_REMOTE_READ;
  attr.path_mig_state = IBV_MIG_MIGRATED;

  EXPECT_EQ(backend_->IbvModifyQp(qp, &attr, IBV_QP_MIN_RNR_TIMER), 0);
  EXPECT_EQ(backend_->IbvModifyQp(qp, &attr, IBV_QP_STATE | IBV_QP_MIN_RNR_TIMER), 0);
  EXPECT_EQ(backend_->IbvModifyQp(qp, &attr, IBV_QP_STATE | IBV_QP_CUR_STATE), 0);
  EXPECT_EQ(backend_->IbvModifyQp(qp, &attr, IBV_QP_ACCESS_FLAGS), 0);
  EXPECT_EQ(backend_->IbvModifyQp(qp, &attr, IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE), 0);

  EXPECT_EQ(backend_->IbvModifyQp(qp, &attr, IBV_QP_SQ_PSN), EINVAL);  // not in the row
  EXPECT_EQ(backend_->IbvModifyQp(qp, &attr, IBV_QP_TIMEOUT | IBV_QP_MIN_RNR_TIMER), EINVAL);
  attr.qp_state = IBV_QPS_RTR;  // RTS -> RTR: no such transition
  EXPECT_EQ(backend_->IbvModifyQp(qp, &attr, IBV_QP_STATE), EINVAL);
  attr.qp_state = IBV_QPS_RTS;
  attr.cur_qp_state = IBV_QPS_INIT;  // not the QP's state
  EXPECT_EQ(backend_->IbvModifyQp(qp, &attr, IBV_QP_CUR_STATE), EINVAL);
  attr.min_rnr_timer = 32;  // 5 bits
  EXPECT_EQ(backend_->IbvModifyQp(qp, &attr, IBV_QP_MIN_RNR_TIMER), EINVAL);
  EXPECT_EQ(qp->state, IBV_QPS_RTS);
}

// As rdma-core's rdma_create_qp_ex: no PD is the id's device's; no CQs are CQs made with the
// QP (max_send_wr / max_recv_wr entries, each on a completion channel) and destroyed with it.
TEST_F(CmTest, CreateQp_NullPdAndCqs_DevicePdAndCqsOfItsOwn) {
  rdma_cm_id* id = nullptr;
  ASSERT_NO_FATAL_FAILURE(CreateResolvedId(&id));
  ibv_qp_init_attr_ex attr{};
  attr.qp_type = IBV_QPT_RC;
  attr.cap.max_send_wr = 8;
  attr.cap.max_recv_wr = 4;
  attr.cap.max_send_sge = 1;
  attr.cap.max_recv_sge = 1;

  ASSERT_EQ(backend_->RdmaCreateQpEx(id, &attr), 0);

  ASSERT_NE(id->qp, nullptr);
  ASSERT_NE(id->pd, nullptr);
  EXPECT_EQ(id->pd->context, id->verbs);
  EXPECT_EQ(id->qp->pd, id->pd);
  ASSERT_NE(id->send_cq, nullptr);
  ASSERT_NE(id->recv_cq, nullptr);
  EXPECT_NE(id->send_cq, id->recv_cq);
  EXPECT_GE(id->send_cq->cqe, 8);
  EXPECT_GE(id->recv_cq->cqe, 4);
  EXPECT_NE(id->send_cq_channel, nullptr);
  EXPECT_EQ(id->qp->send_cq, id->send_cq);
  backend_->RdmaDestroyQp(id);
  EXPECT_EQ(id->qp, nullptr);
  EXPECT_EQ(id->send_cq, nullptr);
  EXPECT_EQ(id->recv_cq, nullptr);
  // The device's PD is the same for the next QP.
  ibv_pd* device_pd = id->pd;
  attr = {};
  attr.qp_type = IBV_QPT_RC;
  attr.cap.max_send_wr = 1;
  attr.cap.max_recv_wr = 1;
  ASSERT_EQ(backend_->RdmaCreateQpEx(id, &attr), 0);
  EXPECT_EQ(id->pd, device_pd);
  backend_->RdmaDestroyQp(id);
  EXPECT_EQ(backend_->RdmaDestroyId(id), 0);
}

// No CQ and a queue of 0 WRs: rdma-core makes no CQ for it, and the QP fails without one.
TEST_F(CmTest, CreateQp_NullCqForAnEmptyQueue_Einval) {
  rdma_cm_id* id = nullptr;
  ASSERT_NO_FATAL_FAILURE(CreateResolvedId(&id));
  ibv_qp_init_attr_ex attr{};
  attr.qp_type = IBV_QPT_RC;
  attr.cap.max_send_wr = 8;

  EXPECT_EQ(backend_->RdmaCreateQpEx(id, &attr), EINVAL);

  EXPECT_EQ(id->qp, nullptr);
  EXPECT_EQ(backend_->RdmaDestroyId(id), 0);
}

TEST_F(CmTest, Listen_SyncId_Einval) {
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(backend_->RdmaCreateId(nullptr, &id, nullptr, RDMA_PS_TCP), 0);
  sockaddr_in addr = Ipv4("127.0.0.1", NextTestPort());
  ASSERT_EQ(backend_->RdmaBindAddr(id, AsSockaddr(&addr)), 0);

  EXPECT_EQ(backend_->RdmaListen(id, 0), EINVAL);
  EXPECT_EQ(backend_->RdmaDestroyId(id), 0);
}

TEST_F(CmTest, Connect_Accept_EstablishedWithPrivateDataBothWays) {
  TestConnection conn(backend_);
  ConnectionOptions options;
  options.connect_private_data = std::vector<uint8_t>(kMaxConnectPrivateData, 0x11);
  options.accept_private_data = std::vector<uint8_t>(kMaxAcceptPrivateData, 0x22);
  ASSERT_TRUE(conn.Listen(options.address, NextTestPort()).ok());
  ASSERT_TRUE(conn.StartActive(options, conn.port).ok());
  EXPECT_FALSE(FdReadable(conn.active.channel->fd));  // nothing for the active side yet

  absl::StatusOr<rdma_cm_event*> request = GetCmEventNow(backend_, conn.listen_channel);
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ((*request)->event, RDMA_CM_EVENT_CONNECT_REQUEST);
  EXPECT_EQ((*request)->listen_id, conn.listener);
  EXPECT_NE((*request)->id, conn.listener);
  EXPECT_NE((*request)->id->verbs, nullptr);
  ASSERT_EQ((*request)->param.conn.private_data_len, kMaxConnectPrivateData);
  EXPECT_EQ(std::memcmp((*request)->param.conn.private_data, options.connect_private_data.data(),
                        kMaxConnectPrivateData),
            0);
  conn.passive.id = (*request)->id;
  EXPECT_EQ(backend_->RdmaAckCmEvent(*request), 0);
  // Finish by hand what TestConnection::Connect would do.
  ibv_context* ctx = conn.passive.id->verbs;
  ASSERT_EQ(backend_->IbvAllocPd(ctx, &conn.passive.pd), 0);
  ASSERT_EQ(backend_->IbvCreateCq(ctx, 8, nullptr, nullptr, 0, &conn.passive.send_cq), 0);
  conn.passive.recv_cq = conn.passive.send_cq;
  ibv_qp_init_attr_ex attr{};
  attr.comp_mask = IBV_QP_INIT_ATTR_PD;
  attr.pd = conn.passive.pd;
  attr.send_cq = attr.recv_cq = conn.passive.send_cq;
  attr.cap.max_send_wr = attr.cap.max_recv_wr = 4;
  attr.cap.max_send_sge = attr.cap.max_recv_sge = 1;
  attr.qp_type = IBV_QPT_RC;
  ASSERT_EQ(backend_->RdmaCreateQpEx(conn.passive.id, &attr), 0);
  EXPECT_EQ(conn.passive.id->qp->state, IBV_QPS_INIT);
  rdma_conn_param param{};
  param.private_data = options.accept_private_data.data();
  param.private_data_len = kMaxAcceptPrivateData;

  ASSERT_EQ(backend_->RdmaAccept(conn.passive.id, &param), 0);

  // As librdmacm on IB: the passive QP is ready once it accepted; the active one, and the
  // passive side's ESTABLISHED (the RTU), only once the active side got the connect response.
  EXPECT_EQ(conn.passive.id->qp->state, IBV_QPS_RTS);
  EXPECT_EQ(conn.active.qp()->state, IBV_QPS_INIT);
  EXPECT_FALSE(FdReadable(conn.listen_channel->fd)) << "passive ESTABLISHED before the RTU";
  absl::StatusOr<rdma_cm_event*> established = GetCmEventNow(backend_, conn.active.channel);
  ASSERT_TRUE(established.ok()) << established.status();
  EXPECT_EQ(conn.active.qp()->state, IBV_QPS_RTS);
  EXPECT_EQ((*established)->event, RDMA_CM_EVENT_ESTABLISHED);
  EXPECT_EQ((*established)->id, conn.active.id);
  ASSERT_EQ((*established)->param.conn.private_data_len, kMaxAcceptPrivateData);
  EXPECT_EQ(std::memcmp((*established)->param.conn.private_data, options.accept_private_data.data(),
                        kMaxAcceptPrivateData),
            0);
  EXPECT_EQ(backend_->RdmaAckCmEvent(*established), 0);
  // The passive side's ESTABLISHED went to the listener's channel (no migration here).
  EXPECT_TRUE(ExpectCmEvent(backend_, conn.listen_channel, RDMA_CM_EVENT_ESTABLISHED).ok());
  ASSERT_EQ(backend_->RdmaDisconnect(conn.active.id), 0);
  EXPECT_TRUE(ExpectCmEvent(backend_, conn.active.channel, RDMA_CM_EVENT_DISCONNECTED).ok());
  EXPECT_TRUE(ExpectCmEvent(backend_, conn.listen_channel, RDMA_CM_EVENT_DISCONNECTED).ok());
}

TEST_F(CmTest, PrivateDataTooLong_Einval) {
  TestConnection conn(backend_);
  ConnectionOptions options;
  options.connect_private_data = std::vector<uint8_t>(kMaxConnectPrivateData + 1, 0);
  ASSERT_TRUE(conn.Listen(options.address, NextTestPort()).ok());

  absl::Status status = conn.StartActive(options, conn.port);

  EXPECT_THAT(std::string(status.message()), ::testing::HasSubstr("rdma_connect failed: 22"));
  EXPECT_FALSE(FdReadable(conn.listen_channel->fd));
}

TEST_F(CmTest, AcceptPrivateDataTooLong_Einval) {
  TestConnection conn(backend_);
  ConnectionOptions options;
  options.accept_private_data = std::vector<uint8_t>(kMaxAcceptPrivateData + 1, 0);

  absl::Status status = conn.Connect(options);

  EXPECT_THAT(std::string(status.message()), ::testing::HasSubstr("rdma_accept failed: 22"));
}

TEST_F(CmTest, Connect_NoListener_Rejected) {
  TestConnection conn(backend_);

  ASSERT_TRUE(conn.StartActive(ConnectionOptions(), NextTestPort()).ok());

  int status = 0;
  ASSERT_TRUE(ExpectCmEvent(backend_, conn.active.channel, RDMA_CM_EVENT_REJECTED, &status).ok());
  EXPECT_EQ(status, kRejectNoListener);
  // As in the kernel, disconnecting a rejected id succeeds and only moves its QP to ERROR.
  EXPECT_EQ(backend_->RdmaDisconnect(conn.active.id), 0);
  EXPECT_EQ(conn.active.qp()->state, IBV_QPS_ERR);
  EXPECT_FALSE(FdReadable(conn.active.channel->fd));
}

TEST_F(CmTest, QpNumbersAndPortsComeFromCounters) {
  TestConnection conn(backend_);

  ASSERT_TRUE(conn.Connect(ConnectionOptions()).ok());

  // Created one after the other: consecutive numbers (no randomness).
  EXPECT_EQ(conn.passive.qp()->qp_num, conn.active.qp()->qp_num + 1);
}

TEST_F(CmTest, Reject_WithPrivateData_ActiveGetsRejectedWithIt) {
  TestConnection conn(backend_);
  ASSERT_TRUE(conn.Listen("127.0.0.1", NextTestPort()).ok());
  ASSERT_TRUE(conn.StartActive(ConnectionOptions(), conn.port).ok());
  absl::StatusOr<rdma_cm_event*> request = GetCmEventNow(backend_, conn.listen_channel);
  ASSERT_TRUE(request.ok());
  rdma_cm_id* request_id = (*request)->id;
  const char reason[] = "go away";
  EXPECT_EQ(backend_->RdmaReject(request_id, reason, kMaxRejectPrivateData + 1), EINVAL);

  ASSERT_EQ(backend_->RdmaReject(request_id, reason, sizeof(reason)), 0);
  ASSERT_EQ(backend_->RdmaAckCmEvent(*request), 0);

  absl::StatusOr<rdma_cm_event*> rejected = GetCmEventNow(backend_, conn.active.channel);
  ASSERT_TRUE(rejected.ok());
  EXPECT_EQ((*rejected)->event, RDMA_CM_EVENT_REJECTED);
  EXPECT_EQ((*rejected)->status, kRejectConsumer);
  // IB reports the REJ's whole private data field, zero-padded.
  ASSERT_EQ((*rejected)->param.conn.private_data_len, kMaxRejectPrivateData);
  EXPECT_STREQ(static_cast<const char*>((*rejected)->param.conn.private_data), reason);
  EXPECT_EQ(backend_->RdmaAckCmEvent(*rejected), 0);
  EXPECT_EQ(backend_->RdmaDestroyId(request_id), 0);
}

TEST_F(CmTest, DestroyListener_WithPendingRequest_RequesterRejected) {
  TestConnection conn(backend_);
  ASSERT_TRUE(conn.Listen("127.0.0.1", NextTestPort()).ok());
  ASSERT_TRUE(conn.StartActive(ConnectionOptions(), conn.port).ok());

  ASSERT_EQ(backend_->RdmaDestroyId(conn.listener), 0);
  conn.listener = nullptr;

  EXPECT_FALSE(FdReadable(conn.listen_channel->fd));  // the request went with the listener
  int status = 0;
  ASSERT_TRUE(ExpectCmEvent(backend_, conn.active.channel, RDMA_CM_EVENT_REJECTED, &status).ok());
  EXPECT_EQ(status, kRejectConsumer);
}

TEST_F(CmTest, WildcardListener_AcceptsAnyAddressOfItsPort) {
  TestConnection conn(backend_);
  ConnectionOptions options;
  options.address = "127.0.0.5";
  ASSERT_TRUE(conn.Listen("0.0.0.0", NextTestPort()).ok());
  ASSERT_TRUE(conn.StartActive(options, conn.port).ok());

  absl::StatusOr<rdma_cm_event*> request = GetCmEventNow(backend_, conn.listen_channel);
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ((*request)->event, RDMA_CM_EVENT_CONNECT_REQUEST);
  rdma_cm_id* request_id = (*request)->id;
  ASSERT_EQ(backend_->RdmaAckCmEvent(*request), 0);
  ASSERT_EQ(backend_->RdmaDestroyId(request_id), 0);  // not accepted: rejects it
  EXPECT_TRUE(ExpectCmEvent(backend_, conn.active.channel, RDMA_CM_EVENT_REJECTED).ok());
}

TEST_F(CmTest, Disconnect_BothSidesGetDisconnected_SecondIsHarmless) {
  TestConnection conn(backend_);
  ASSERT_TRUE(conn.Connect(ConnectionOptions()).ok());

  ASSERT_TRUE(conn.Disconnect().ok());

  EXPECT_EQ(backend_->RdmaDisconnect(conn.active.id), 0);
  EXPECT_EQ(backend_->RdmaDisconnect(conn.passive.id), 0);
  // Only the timewait ends are left: no second DISCONNECTED.
  EXPECT_TRUE(ExpectCmEvent(backend_, conn.active.channel, RDMA_CM_EVENT_TIMEWAIT_EXIT).ok());
  EXPECT_TRUE(ExpectCmEvent(backend_, conn.passive.channel, RDMA_CM_EVENT_TIMEWAIT_EXIT).ok());
  EXPECT_FALSE(FdReadable(conn.active.channel->fd));
  EXPECT_FALSE(FdReadable(conn.passive.channel->fd));
}

// A thread asleep in rdma_get_cm_event handles what its ids' connections to other processes
// bring itself (one wake-up per message, not the fabric thread's and then its own): with the
// fabric thread held, the peer's DREQ still wakes it with DISCONNECTED.
TEST_F(CmTest, Sleeper_HandlesItsConnectionsCmMessagesItself) {
  if (CurrentTransport() != TransportKind::kHost) GTEST_SKIP() << "a connection's carrier only";
  TestConnection conn(backend_);
  ASSERT_TRUE(conn.Connect(ConnectionOptions()).ok());
  std::optional<host::ScopedFabricThreadHeldForTest> held(std::in_place);
  std::atomic<pid_t> tid{0};
  std::promise<int> woke;
  std::thread sleeper([&] {
    tid.store(gettid());
    rdma_cm_event* event = nullptr;
    const int err = backend_->RdmaGetCmEvent(conn.active.channel, &event);
    woke.set_value(err == 0 ? static_cast<int>(event->event) : -err);
    if (err == 0) backend_->RdmaAckCmEvent(event);
  });
  // Asleep first: a call of this process on the host transport waits (at most 5 s) for its
  // connections to itself to be idle, which only the sleeper can make them now.
  EXPECT_TRUE(ThreadAsleep(&tid));
  ASSERT_EQ(backend_->RdmaDisconnect(conn.passive.id), 0);
  // A bound for a hang, not a time measured.
  std::future<int> event = woke.get_future();
  const bool ready = event.wait_for(std::chrono::seconds(30)) == std::future_status::ready;
  held.reset();  // (lets a sleeper that missed its message be woken, so that the test ends)
  sleeper.join();
  ASSERT_TRUE(ready) << "the sleeper was not woken by its connection's DREQ";
  EXPECT_EQ(event.get(), RDMA_CM_EVENT_DISCONNECTED);
}

TEST_F(CmTest, Disconnect_PeerQpStaysRts_ItsReceivesStayPosted) {
  TestConnection conn(backend_);
  ASSERT_TRUE(conn.Connect(ConnectionOptions()).ok());
  TestBuffer buf(backend_, conn.passive.pd, 16, IBV_ACCESS_LOCAL_WRITE);
  ibv_sge sge = buf.Sge(0, 16);
  ASSERT_EQ(PostRecvBuf(backend_, conn.passive.qp(), 7, &sge, 1), 0);

  ASSERT_EQ(backend_->RdmaDisconnect(conn.active.id), 0);

  EXPECT_EQ(conn.active.qp()->state, IBV_QPS_ERR);
  ASSERT_TRUE(ExpectCmEvent(backend_, conn.passive.channel, RDMA_CM_EVENT_DISCONNECTED).ok());
  EXPECT_EQ(conn.passive.qp()->state, IBV_QPS_RTS);
  EXPECT_TRUE(PollAll(backend_, conn.passive.recv_cq).empty());  // the receive is still posted
  // Its own rdma_disconnect moves it to ERROR: now the receive flushes.
  ASSERT_EQ(backend_->RdmaDisconnect(conn.passive.id), 0);
  EXPECT_EQ(conn.passive.qp()->state, IBV_QPS_ERR);
  EXPECT_THAT(PollAll(backend_, conn.passive.recv_cq),
              ElementsAre(AllOf(Field(&ibv_wc::wr_id, 7u),
                                Field(&ibv_wc::status, IBV_WC_WR_FLUSH_ERR))));
}

TEST_F(CmTest, Disconnect_PeerSend_RetryExceededAfterTheRetryTimeout) {
  TestConnection conn(backend_);
  ASSERT_TRUE(conn.Connect(ConnectionOptions()).ok());
  TestBuffer buf(backend_, conn.passive.pd, 16, IBV_ACCESS_LOCAL_WRITE);
  ibv_sge sge = buf.Sge(0, 8);
  ASSERT_EQ(PostRecvBuf(backend_, conn.passive.qp(), 1, &sge, 1), 0);
  ASSERT_EQ(backend_->RdmaDisconnect(conn.active.id), 0);
  ASSERT_TRUE(ExpectCmEvent(backend_, conn.passive.channel, RDMA_CM_EVENT_DISCONNECTED).ok());
  const uint64_t posted_ns = SimClockNs();

  ASSERT_EQ(PostSendMsg(backend_, conn.passive.qp(), 2, &sge, 1), 0);
  ASSERT_EQ(PostSendMsg(backend_, conn.passive.qp(), 3, &sge, 1), 0);

  // One CQ: the timed-out send first; it moves the QP to ERROR, which flushes the receive and
  // the send behind it (in an order verbs leaves open: both queues flush).
  std::vector<ibv_wc> wcs = PollAll(backend_, conn.passive.send_cq);
  ASSERT_EQ(wcs.size(), 3u);
  EXPECT_THAT(wcs[0],
              AllOf(Field(&ibv_wc::wr_id, 2u), Field(&ibv_wc::status, IBV_WC_RETRY_EXC_ERR)));
  EXPECT_THAT(std::vector<ibv_wc>(wcs.begin() + 1, wcs.end()),
              UnorderedElementsAre(
                  AllOf(Field(&ibv_wc::wr_id, 1u), Field(&ibv_wc::status, IBV_WC_WR_FLUSH_ERR)),
                  AllOf(Field(&ibv_wc::wr_id, 3u), Field(&ibv_wc::status, IBV_WC_WR_FLUSH_ERR))));
  EXPECT_GE(SimClockNs() - posted_ns, kRetryTimeoutNs);  // polling waited for the timeout
  EXPECT_EQ(conn.passive.qp()->state, IBV_QPS_ERR);
}

TEST_F(CmTest, Disconnect_InitiatorDisconnectedComesWithTheDrep_ThenTimewaitExit) {
  TestConnection conn(backend_);
  ASSERT_TRUE(conn.Connect(ConnectionOptions()).ok());
  ASSERT_EQ(backend_->RdmaDisconnect(conn.active.id), 0);
  EXPECT_TRUE(FdReadable(conn.active.channel->fd));  // its timer is pending
  ASSERT_TRUE(ExpectCmEvent(backend_, conn.passive.channel, RDMA_CM_EVENT_DISCONNECTED).ok());
  const uint64_t drep_ns = SimClockNs();

  ASSERT_EQ(backend_->RdmaDisconnect(conn.passive.id), 0);  // the DREP

  int status = -1;
  ASSERT_TRUE(
      ExpectCmEvent(backend_, conn.active.channel, RDMA_CM_EVENT_DISCONNECTED, &status).ok());
  EXPECT_EQ(status, 0);
  EXPECT_EQ(SimClockNs(), drep_ns);  // no wait for the DREQ's timeout
  ASSERT_TRUE(ExpectCmEvent(backend_, conn.active.channel, RDMA_CM_EVENT_TIMEWAIT_EXIT).ok());
  EXPECT_EQ(SimClockNs(), drep_ns + kTimewaitNs);
  ASSERT_TRUE(ExpectCmEvent(backend_, conn.passive.channel, RDMA_CM_EVENT_TIMEWAIT_EXIT).ok());
  EXPECT_FALSE(FdReadable(conn.active.channel->fd));
  EXPECT_FALSE(FdReadable(conn.passive.channel->fd));
}

TEST_F(CmTest, Disconnect_NoDrep_InitiatorDisconnectedAfterTheDreqTimeout) {
  TestConnection conn(backend_);
  ASSERT_TRUE(conn.Connect(ConnectionOptions()).ok());
  const uint64_t dreq_ns = SimClockNs();

  ASSERT_EQ(backend_->RdmaDisconnect(conn.active.id), 0);

  // The peer never answers: the blocking get waits (in simulated time) for the timeout.
  int status = 0;
  ASSERT_TRUE(
      ExpectCmEvent(backend_, conn.active.channel, RDMA_CM_EVENT_DISCONNECTED, &status).ok());
  EXPECT_EQ(status, -ETIMEDOUT);
  EXPECT_GE(SimClockNs() - dreq_ns, kDreqTimeoutActiveNs);
  ASSERT_TRUE(ExpectCmEvent(backend_, conn.active.channel, RDMA_CM_EVENT_TIMEWAIT_EXIT).ok());
  EXPECT_GE(SimClockNs() - dreq_ns, kDreqTimeoutActiveNs + kTimewaitNs);
  // A DREP after the timeout changes nothing on the active side.
  ASSERT_TRUE(ExpectCmEvent(backend_, conn.passive.channel, RDMA_CM_EVENT_DISCONNECTED).ok());
  ASSERT_EQ(backend_->RdmaDisconnect(conn.passive.id), 0);
  EXPECT_FALSE(FdReadable(conn.active.channel->fd));
  EXPECT_TRUE(ExpectCmEvent(backend_, conn.passive.channel, RDMA_CM_EVENT_TIMEWAIT_EXIT).ok());
}

TEST_F(CmTest, Disconnect_PassiveFirst_UsesThePassiveDreqTimeout) {
  TestConnection conn(backend_);
  ASSERT_TRUE(conn.Connect(ConnectionOptions()).ok());
  const uint64_t dreq_ns = SimClockNs();

  ASSERT_EQ(backend_->RdmaDisconnect(conn.passive.id), 0);

  int status = 0;
  ASSERT_TRUE(
      ExpectCmEvent(backend_, conn.passive.channel, RDMA_CM_EVENT_DISCONNECTED, &status).ok());
  EXPECT_EQ(status, -ETIMEDOUT);
  EXPECT_EQ(SimClockNs() - dreq_ns, kDreqTimeoutPassiveNs);
  EXPECT_TRUE(ExpectCmEvent(backend_, conn.active.channel, RDMA_CM_EVENT_DISCONNECTED).ok());
  EXPECT_EQ(conn.active.qp()->state, IBV_QPS_RTS);
}

TEST_F(CmTest, DestroyId_DropsItsUndeliveredEvents) {
  TestConnection conn(backend_);
  ASSERT_TRUE(conn.Connect(ConnectionOptions()).ok());
  ASSERT_TRUE(conn.Disconnect().ok());  // leaves TIMEWAIT_EXIT queued on both
  ASSERT_TRUE(FdReadable(conn.active.channel->fd));
  backend_->RdmaDestroyQp(conn.active.id);

  ASSERT_EQ(backend_->RdmaDestroyId(conn.active.id), 0);
  conn.active.id = nullptr;

  EXPECT_FALSE(FdReadable(conn.active.channel->fd));
}

// An id destroyed while it owes a DREP (it got DISCONNECTED and never called rdma_disconnect)
// answers the DREQ as it goes, and leaves no TIMEWAIT_EXIT behind: an event of a freed id would
// hand the next rdma_get_cm_event on its channel freed memory (libfabric's rxm destroys such
// ids with rdma_destroy_ep and reads its channel on).
TEST_F(CmTest, DestroyId_OwingADrep_AnswersTheDreqAndLeavesNoEvent) {
  TestConnection conn(backend_);
  ASSERT_TRUE(conn.Connect(ConnectionOptions()).ok());
  const uint64_t dreq_ns = SimClockNs();
  ASSERT_EQ(backend_->RdmaDisconnect(conn.active.id), 0);
  ASSERT_TRUE(ExpectCmEvent(backend_, conn.passive.channel, RDMA_CM_EVENT_DISCONNECTED).ok());
  backend_->RdmaDestroyQp(conn.passive.id);

  ASSERT_EQ(backend_->RdmaDestroyId(conn.passive.id), 0);
  conn.passive.id = nullptr;

  EXPECT_FALSE(FdReadable(conn.passive.channel->fd));
  int status = -1;
  ASSERT_TRUE(
      ExpectCmEvent(backend_, conn.active.channel, RDMA_CM_EVENT_DISCONNECTED, &status).ok());
  EXPECT_EQ(status, 0);  // the DREP, not the DREQ's timeout
  EXPECT_LT(SimClockNs() - dreq_ns, kDreqTimeoutActiveNs);
}

TEST_F(CmTest, Disconnect_NotConnected_Einval) {
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(backend_->RdmaCreateId(nullptr, &id, nullptr, RDMA_PS_TCP), 0);

  EXPECT_EQ(backend_->RdmaDisconnect(id), EINVAL);
  EXPECT_EQ(backend_->RdmaDestroyId(id), 0);
}

TEST_F(CmTest, DestroyId_WithUnackedEvent_Ebusy) {
  TestConnection conn(backend_);
  ASSERT_TRUE(conn.Connect(ConnectionOptions()).ok());
  ASSERT_EQ(backend_->RdmaDisconnect(conn.active.id), 0);
  backend_->RdmaDestroyQp(conn.active.id);
  absl::StatusOr<rdma_cm_event*> event = GetCmEventNow(backend_, conn.active.channel);
  ASSERT_TRUE(event.ok());

  EXPECT_EQ(backend_->RdmaDestroyId(conn.active.id), EBUSY);  // event not acked
  EXPECT_EQ(backend_->RdmaAckCmEvent(*event), 0);
  EXPECT_EQ(backend_->RdmaDestroyId(conn.active.id), 0);
  conn.active.id = nullptr;
}

// As rdma-core's rdma_destroy_id (perftest -R destroys ids with their QPs on them): the id goes, its
// QP stays, the caller's to destroy with ibv_destroy_qp; while the id lives that QP is
// RdmaDestroyQp's.
TEST_F(CmTest, DestroyId_WithQp_LeavesTheQpForIbvDestroyQp) {
  TestConnection conn(backend_);
  ASSERT_TRUE(conn.Connect(ConnectionOptions()).ok());
  ibv_qp* qp = conn.active.id->qp;
  ASSERT_NE(qp, nullptr);
  EXPECT_EQ(backend_->IbvDestroyQp(qp), EINVAL);  // the id's still

  ASSERT_EQ(backend_->RdmaDestroyId(conn.active.id), 0);
  conn.active.id = nullptr;

  ibv_qp_attr attr;
  ibv_qp_init_attr init;
  ASSERT_EQ(backend_->IbvQueryQp(qp, &attr, IBV_QP_STATE, &init), 0);
  EXPECT_EQ(attr.qp_state, IBV_QPS_RTS);  // left as it was
  // It still talks to its peer, whose QP is RTS too (in one process the link stays).
  TestBuffer src(backend_, conn.active.pd, 16, IBV_ACCESS_LOCAL_WRITE);
  TestBuffer dst(backend_, conn.passive.pd, 16, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  std::memcpy(src.data(), "orphan", 7);
  ibv_sge sge = src.Sge(0, 7);
  ASSERT_EQ(PostWrite(backend_, qp, 5, &sge, 1, dst.addr(0), dst.mr()->rkey), 0);
  ExecutePosted(backend_, conn.active.send_cq);
  std::vector<ibv_wc> done = PollAll(backend_, conn.active.send_cq);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].status, IBV_WC_SUCCESS);
  EXPECT_STREQ(reinterpret_cast<char*>(dst.data()), "orphan");
  EXPECT_EQ(backend_->IbvDestroyQp(qp), 0);
  // The peer was told, as by a DREQ.
  absl::StatusOr<rdma_cm_event*> event = GetCmEventNow(backend_, conn.passive.channel);
  ASSERT_TRUE(event.ok());
  EXPECT_EQ((*event)->event, RDMA_CM_EVENT_DISCONNECTED);
  EXPECT_EQ(backend_->RdmaAckCmEvent(*event), 0);
}

TEST_F(CmTest, DestroyConnectedId_PeerGetsDisconnected) {
  TestConnection conn(backend_);
  ASSERT_TRUE(conn.Connect(ConnectionOptions()).ok());
  backend_->RdmaDestroyQp(conn.active.id);

  ASSERT_EQ(backend_->RdmaDestroyId(conn.active.id), 0);
  conn.active.id = nullptr;

  // As a DREQ: the peer's QP stays RTS; what it sends toward the destroyed QP times out.
  EXPECT_TRUE(ExpectCmEvent(backend_, conn.passive.channel, RDMA_CM_EVENT_DISCONNECTED).ok());
  EXPECT_EQ(conn.passive.qp()->state, IBV_QPS_RTS);
  TestBuffer buf(backend_, conn.passive.pd, 8, IBV_ACCESS_LOCAL_WRITE);
  ibv_sge sge = buf.Sge(0, 8);
  ASSERT_EQ(PostSendMsg(backend_, conn.passive.qp(), 1, &sge, 1), 0);
  EXPECT_THAT(PollAll(backend_, conn.passive.send_cq),
              ElementsAre(Field(&ibv_wc::status, IBV_WC_RETRY_EXC_ERR)));
  EXPECT_EQ(conn.passive.qp()->state, IBV_QPS_ERR);
}

TEST_F(CmTest, Accept_ActiveGone_Unreachable) {
  TestConnection conn(backend_);
  ASSERT_TRUE(conn.Listen("127.0.0.1", NextTestPort()).ok());
  ASSERT_TRUE(conn.StartActive(ConnectionOptions(), conn.port).ok());
  absl::StatusOr<rdma_cm_event*> request = GetCmEventNow(backend_, conn.listen_channel);
  ASSERT_TRUE(request.ok());
  rdma_cm_id* request_id = (*request)->id;
  ASSERT_EQ(backend_->RdmaAckCmEvent(*request), 0);
  backend_->RdmaDestroyQp(conn.active.id);
  ASSERT_EQ(backend_->RdmaDestroyId(conn.active.id), 0);
  conn.active.id = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ASSERT_EQ(backend_->IbvAllocPd(request_id->verbs, &pd), 0);
  ASSERT_EQ(backend_->IbvCreateCq(request_id->verbs, 4, nullptr, nullptr, 0, &cq), 0);
  ibv_qp_init_attr_ex attr{};
  attr.comp_mask = IBV_QP_INIT_ATTR_PD;
  attr.pd = pd;
  attr.send_cq = attr.recv_cq = cq;
  attr.cap.max_send_wr = attr.cap.max_recv_wr = 1;
  attr.qp_type = IBV_QPT_RC;
  ASSERT_EQ(backend_->RdmaCreateQpEx(request_id, &attr), 0);

  ASSERT_EQ(backend_->RdmaAccept(request_id, nullptr), 0);

  int status = 0;
  ASSERT_TRUE(
      ExpectCmEvent(backend_, conn.listen_channel, RDMA_CM_EVENT_UNREACHABLE, &status).ok());
  EXPECT_EQ(status, -ETIMEDOUT);
  backend_->RdmaDestroyQp(request_id);
  EXPECT_EQ(backend_->RdmaDestroyId(request_id), 0);
  EXPECT_EQ(backend_->IbvDestroyCq(cq), 0);
  EXPECT_EQ(backend_->IbvDeallocPd(pd), 0);
}

TEST_F(CmTest, Accept_ActiveQpGone_BothUnreachable) {
  TestConnection conn(backend_);
  ASSERT_TRUE(conn.Listen("127.0.0.1", NextTestPort()).ok());
  ASSERT_TRUE(conn.StartActive(ConnectionOptions(), conn.port).ok());
  backend_->RdmaDestroyQp(conn.active.id);  // its id stays, connecting

  ASSERT_TRUE(conn.AcceptPassive(ConnectionOptions()).ok());

  // Nothing can answer the REP: it times out (on the host transport, once the active side
  // has refused it).
  for (rdma_event_channel* channel : {conn.passive.channel, conn.active.channel}) {
    rdma_cm_event* event = nullptr;
    ASSERT_EQ(backend_->RdmaGetCmEvent(channel, &event), 0);
    EXPECT_EQ(event->event, RDMA_CM_EVENT_UNREACHABLE) << rdma_event_str(event->event);
    EXPECT_EQ(event->status, -ETIMEDOUT);
    backend_->RdmaAckCmEvent(event);
  }
}

TEST_F(CmTest, DestroyId_ConnectingBeforeItsRequestIsDelivered_TheRequestVanishes) {
  TestConnection conn(backend_);
  ASSERT_TRUE(conn.Listen("127.0.0.1", NextTestPort()).ok());
  ASSERT_TRUE(conn.StartActive(ConnectionOptions(), conn.port).ok());
  backend_->RdmaDestroyQp(conn.active.id);

  ASSERT_EQ(backend_->RdmaDestroyId(conn.active.id), 0);
  conn.active.id = nullptr;

  // Its listener never sees it (on the host transport: once the connection's end arrived).
  ASSERT_EQ(fcntl(conn.listen_channel->fd, F_SETFL,
                  fcntl(conn.listen_channel->fd, F_GETFL) | O_NONBLOCK),
            0);
  rdma_cm_event* event = nullptr;
  EXPECT_EQ(backend_->RdmaGetCmEvent(conn.listen_channel, &event), EAGAIN);
  EXPECT_FALSE(FdReadable(conn.listen_channel->fd));
  if (event != nullptr) {  // the failure's request: the test's to end
    rdma_cm_id* request = event->id;
    backend_->RdmaAckCmEvent(event);
    backend_->RdmaDestroyId(request);
  }
}

TEST_F(CmTest, MigrateId_MovesPendingEvents) {
  rdma_event_channel* from = nullptr;
  rdma_event_channel* to = nullptr;
  ASSERT_EQ(backend_->RdmaCreateEventChannel(&from), 0);
  ASSERT_EQ(backend_->RdmaCreateEventChannel(&to), 0);
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(backend_->RdmaCreateId(from, &id, nullptr, RDMA_PS_TCP), 0);
  sockaddr_in dst = Ipv4("127.0.0.1", 7204);
  ASSERT_EQ(backend_->RdmaResolveAddr(id, nullptr, AsSockaddr(&dst), 100), 0);
  EXPECT_TRUE(FdReadable(from->fd));

  ASSERT_EQ(backend_->RdmaMigrateId(id, to), 0);

  EXPECT_EQ(id->channel, to);
  EXPECT_FALSE(FdReadable(from->fd));
  EXPECT_TRUE(ExpectCmEvent(backend_, to, RDMA_CM_EVENT_ADDR_RESOLVED).ok());
  EXPECT_EQ(backend_->RdmaDestroyId(id), 0);
  backend_->RdmaDestroyEventChannel(from);
  backend_->RdmaDestroyEventChannel(to);
}

TEST_F(CmTest, EventChannel_NonBlockingAndEmpty_Eagain) {
  rdma_event_channel* channel = nullptr;
  ASSERT_EQ(backend_->RdmaCreateEventChannel(&channel), 0);
  ASSERT_EQ(fcntl(channel->fd, F_SETFL, fcntl(channel->fd, F_GETFL) | O_NONBLOCK), 0);
  rdma_cm_event* event = nullptr;

  EXPECT_EQ(backend_->RdmaGetCmEvent(channel, &event), EAGAIN);

  EXPECT_EQ(event, nullptr);
  backend_->RdmaDestroyEventChannel(channel);
}

TEST_F(CmTest, CreateQp_NonRc_Einval_CapsAboveLimits_Einval) {
  TestConnection conn(backend_);
  ASSERT_TRUE(conn.Connect(ConnectionOptions()).ok());
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(backend_->RdmaCreateId(nullptr, &id, nullptr, RDMA_PS_TCP), 0);
  sockaddr_in dst = Ipv4("127.0.0.1", 7204);
  ASSERT_EQ(backend_->RdmaResolveAddr(id, nullptr, AsSockaddr(&dst), 100), 0);
  ibv_qp_init_attr_ex attr{};
  attr.comp_mask = IBV_QP_INIT_ATTR_PD;
  attr.pd = conn.active.pd;
  attr.send_cq = attr.recv_cq = conn.active.send_cq;
  attr.cap.max_send_wr = attr.cap.max_recv_wr = 1;
  attr.qp_type = IBV_QPT_UD;

  EXPECT_EQ(backend_->RdmaCreateQpEx(id, &attr), EINVAL);
  attr.qp_type = IBV_QPT_RC;
  attr.cap.max_send_sge = 1000;
  EXPECT_EQ(backend_->RdmaCreateQpEx(id, &attr), EINVAL);
  attr.cap.max_send_sge = 1;
  // (No PD is the device's: CreateQp_NullPdAndCqs_DevicePdAndCqsOfItsOwn.)
  attr.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS;
  attr.create_flags = IBV_QP_CREATE_SCATTER_FCS;  // a create flag (0 is a plain QP)
  EXPECT_EQ(backend_->RdmaCreateQpEx(id, &attr), EINVAL);
  attr.create_flags = 0;
  // The extended post API: the modelled ops only (qp.h), atomic write only on a device that
  // reports it.
  attr.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  attr.send_ops_flags = IBV_QP_EX_WITH_ATOMIC_WRITE;
  EXPECT_EQ(backend_->RdmaCreateQpEx(id, &attr), EOPNOTSUPP);
  attr.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_LOCAL_INV;
  EXPECT_EQ(backend_->RdmaCreateQpEx(id, &attr), EOPNOTSUPP);
  EXPECT_EQ(id->qp, nullptr);
  EXPECT_EQ(backend_->RdmaDestroyId(id), 0);
}

// librdmacm's order on IB: the active QP becomes RTS, and the passive side's ESTABLISHED (the
// RTU) is sent, only when the active side gets its connect response. A server waiting for its
// ESTABLISHED before the client looked at its own waits, as on IB / RoCE; the passive side's
// WRs toward the not-yet-ready active QP wait (the requester retries) and then execute.
TEST_F(CmTest, PassiveEstablished_ComesOnlyAfterTheActiveSideGotItsOwn) {
  TestConnection conn(backend_);
  ConnectionOptions options;
  options.connect_private_data = {'h', 'i'};
  ASSERT_TRUE(conn.Listen(options.address, NextTestPort()).ok());
  ASSERT_TRUE(conn.StartActive(options, conn.port).ok());
  ASSERT_TRUE(conn.AcceptPassive(options).ok());
  EXPECT_EQ(conn.passive.id->qp->state, IBV_QPS_RTS);
  EXPECT_EQ(conn.active.qp()->state, IBV_QPS_INIT);
  EXPECT_FALSE(FdReadable(conn.passive.channel->fd)) << "no RTU yet";
  // The active QP is not RTS: it cannot post (EINVAL, as a real provider says).
  char byte = 0;
  ibv_sge no_sge{reinterpret_cast<uintptr_t>(&byte), 0, 0};
  EXPECT_EQ(PostSendMsg(backend_, conn.active.qp(), 1, &no_sge, 0), EINVAL);
  // The passive side writes at once: the write waits for the active QP.
  TestBuffer source(backend_, conn.passive.pd, 8, IBV_ACCESS_LOCAL_WRITE);
  TestBuffer target(backend_, conn.active.pd, 8,
                    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  std::memcpy(source.data(), "written", 8);
  ibv_sge sge = source.Sge(0, 8);
  ASSERT_EQ(PostWrite(backend_, conn.passive.qp(), 7, &sge, 1, target.addr(), target.mr()->rkey),
            0);
  EXPECT_TRUE(PollAll(backend_, conn.passive.send_cq).empty());
  EXPECT_EQ(target.data()[0], 0);

  absl::StatusOr<rdma_cm_event*> established = GetCmEventNow(backend_, conn.active.channel);
  ASSERT_TRUE(established.ok()) << established.status();
  EXPECT_EQ((*established)->event, RDMA_CM_EVENT_ESTABLISHED);
  EXPECT_EQ(conn.active.qp()->state, IBV_QPS_RTS);
  EXPECT_EQ(backend_->RdmaAckCmEvent(*established), 0);

  EXPECT_TRUE(ExpectCmEvent(backend_, conn.passive.channel, RDMA_CM_EVENT_ESTABLISHED).ok());
  EXPECT_EQ(std::memcmp(target.data(), "written", 8), 0);
  EXPECT_EQ(PollAll(backend_, conn.passive.send_cq).size(), 1u);
  EXPECT_TRUE(conn.Disconnect().ok());
}

// Connects with `options` and disconnects: `request` receives the passive side's
// CONNECT_REQUEST's param.conn, `reply` the active side's ESTABLISHED's (private_data nullptr).
absl::Status ConnectForParams(Backend* backend, const ConnectionOptions& options,
                              rdma_conn_param* request, rdma_conn_param* reply) {
  TestConnection conn(backend);
  absl::Status status = conn.Listen(options.address, NextTestPort());
  if (status.ok()) status = conn.StartActive(options, conn.port);
  if (status.ok()) status = conn.AcceptPassive(options, request);
  if (!status.ok()) return status;
  absl::StatusOr<rdma_cm_event*> established = GetCmEventNow(backend, conn.active.channel);
  if (!established.ok()) return established.status();
  const rdma_cm_event_type type = (*established)->event;
  *reply = (*established)->param.conn;
  reply->private_data = nullptr;
  backend->RdmaAckCmEvent(*established);
  if (type != RDMA_CM_EVENT_ESTABLISHED) {
    return absl::InternalError(absl::StrCat("active side: got ", rdma_event_str(type)));
  }
  status = ExpectCmEvent(backend, conn.passive.channel, RDMA_CM_EVENT_ESTABLISHED);
  if (!status.ok()) return status;
  EXPECT_EQ(request->qp_num, conn.active.qp()->qp_num);
  EXPECT_EQ(reply->qp_num, conn.passive.qp()->qp_num);
  return conn.Disconnect();
}

// Each side's event reports the connection parameters of the CM message it came with, on
// both transports: the passive side's CONNECT_REQUEST those of the REQ, the active side's
// ESTABLISHED those of the REP, which has no retry count (the kernel's CMA reports 0: a REP
// carries only its sender's RNR retry count), and the other end's QP number (checked by
// ConnectForParams) and SRQ use.
TEST_F(CmTest, ConnParam_EachSideGetsWhatTheOtherSent) {
  ConnectionOptions options;
  options.connect_param.responder_resources = 2;
  options.connect_param.initiator_depth = 3;
  options.connect_param.flow_control = 1;
  options.connect_param.retry_count = 5;
  options.connect_param.rnr_retry_count = 6;
  options.accept_param.responder_resources = 1;
  options.accept_param.initiator_depth = 2;
  options.accept_param.flow_control = 1;
  options.accept_param.retry_count = 4;  // ignored when accepting
  options.accept_param.rnr_retry_count = 3;
  options.passive_srq = true;  // the REP says so, whatever the accept's param.srq (0) says
  rdma_conn_param request{};
  rdma_conn_param reply{};

  ASSERT_TRUE(ConnectForParams(backend_, options, &request, &reply).ok());

  EXPECT_EQ(request.srq, 0);
  EXPECT_EQ(request.responder_resources, 2);
  EXPECT_EQ(request.initiator_depth, 3);
  EXPECT_EQ(request.flow_control, 1);
  EXPECT_EQ(request.retry_count, 5);
  EXPECT_EQ(request.rnr_retry_count, 6);
  EXPECT_EQ(reply.srq, 1);
  EXPECT_EQ(reply.responder_resources, 1);
  EXPECT_EQ(reply.initiator_depth, 2);
  EXPECT_EQ(reply.flow_control, 1);
  EXPECT_EQ(reply.retry_count, 0);
  EXPECT_EQ(reply.rnr_retry_count, 3);
}

// The IB CM's messages hold the retry counts in 3 bits and flow control in 1: the kernel's CMA
// cuts the counts to 7 (min(7, count)) and the message keeps flow control's low bit. What the
// other side reports is what fits, whichever transport carried it (across processes a count
// above 7 is a hostile peer's, and ends the connection: wire.h).
TEST_F(CmTest, ConnParam_CutToTheIbCmFields) {
  ConnectionOptions options;
  options.connect_param.flow_control = 3;
  options.connect_param.retry_count = 9;
  options.connect_param.rnr_retry_count = 200;
  options.accept_param.flow_control = 2;
  options.accept_param.rnr_retry_count = 8;
  rdma_conn_param request{};
  rdma_conn_param reply{};

  ASSERT_TRUE(ConnectForParams(backend_, options, &request, &reply).ok());

  EXPECT_EQ(request.flow_control, 1);
  EXPECT_EQ(request.retry_count, 7);
  EXPECT_EQ(request.rnr_retry_count, 7);
  EXPECT_EQ(reply.flow_control, 0);
  EXPECT_EQ(reply.rnr_retry_count, 7);
}

// IB reports the whole private data field of the CM message, zero-padded: the REQ's 56 bytes
// to the passive side, the REP's 196 to the active side, also when less (or nothing) was sent.
TEST_F(CmTest, PrivateData_ReportedAsTheWholeIbField_ZeroPadded) {
  TestConnection conn(backend_);
  ConnectionOptions options;
  options.connect_private_data = {'h', 'i'};
  options.accept_private_data = {};  // nothing
  ASSERT_TRUE(conn.Listen(options.address, NextTestPort()).ok());
  ASSERT_TRUE(conn.StartActive(options, conn.port).ok());
  absl::StatusOr<rdma_cm_event*> request = GetCmEventNow(backend_, conn.listen_channel);
  ASSERT_TRUE(request.ok()) << request.status();
  ASSERT_EQ((*request)->param.conn.private_data_len, kMaxConnectPrivateData);
  const auto* got = static_cast<const uint8_t*>((*request)->param.conn.private_data);
  EXPECT_EQ(got[0], 'h');
  EXPECT_EQ(got[1], 'i');
  for (int i = 2; i < kMaxConnectPrivateData; ++i) EXPECT_EQ(got[i], 0) << "byte " << i;
  ASSERT_EQ(backend_->RdmaReject((*request)->id, nullptr, 0), 0);
  rdma_cm_id* request_id = (*request)->id;
  ASSERT_EQ(backend_->RdmaAckCmEvent(*request), 0);
  EXPECT_EQ(backend_->RdmaDestroyId(request_id), 0);

  TestConnection accepted(backend_);
  std::vector<uint8_t> established;
  ASSERT_TRUE(accepted.Connect(options, &established).ok());
  EXPECT_EQ(established, std::vector<uint8_t>(kMaxAcceptPrivateData, 0));
}

// ---- UD ids (RDMA_PS_UDP): SIDR, rdma_cm's exchange for UD QPs (cm.h, "UD IDS"). Each case
// runs on both transports.

class CmUdTest : public CmTest {
 protected:
  // One UD end: its channel, id, and a QP with a PD, a CQ and a registered buffer.
  struct UdEnd {
    rdma_event_channel* channel = nullptr;
    rdma_cm_id* id = nullptr;
    ibv_pd* pd = nullptr;
    ibv_cq* cq = nullptr;
    ibv_mr* mr = nullptr;
    ibv_ah* ah = nullptr;
    std::vector<uint8_t> buf = std::vector<uint8_t>(4096, 0);
  };

  void SetUp() override {
    ASSERT_EQ(backend_->RdmaCreateEventChannel(&listen_channel_), 0);
    ASSERT_EQ(backend_->RdmaCreateEventChannel(&active_.channel), 0);
  }

  void TearDown() override {
    for (UdEnd* end : {&active_, &passive_}) DestroyEnd(end);
    if (listener_ != nullptr) {
        EXPECT_EQ(backend_->RdmaDestroyId(listener_), 0);
      }
    backend_->RdmaDestroyEventChannel(listen_channel_);
    backend_->RdmaDestroyEventChannel(active_.channel);
    ClearFaultPlan();
    SetActiveProfile(DeviceProfiles()[0]);  // (a case that failed under another profile)
  }

  // Destroys what `end` has but its channel (its AH, QP, id, MR, CQ and PD).
  void DestroyEnd(UdEnd* end) {
    if (end->ah != nullptr) {
      EXPECT_EQ(backend_->IbvDestroyAh(end->ah), 0);
    }
    if (end->id != nullptr) {
      if (end->id->qp != nullptr) backend_->RdmaDestroyQp(end->id);
      EXPECT_EQ(backend_->RdmaDestroyId(end->id), 0);
    }
    if (end->mr != nullptr) {
      EXPECT_EQ(backend_->IbvDeregMr(end->mr), 0);
    }
    if (end->cq != nullptr) {
      EXPECT_EQ(backend_->IbvDestroyCq(end->cq), 0);
    }
    if (end->pd != nullptr) {
      EXPECT_EQ(backend_->IbvDeallocPd(end->pd), 0);
    }
    end->ah = nullptr;
    end->id = nullptr;
    end->mr = nullptr;
    end->cq = nullptr;
    end->pd = nullptr;
  }

  // A listener of `ps` at 127.0.0.1:port_.
  void Listen(rdma_port_space ps = RDMA_PS_UDP) {
    ASSERT_EQ(backend_->RdmaCreateId(listen_channel_, &listener_, nullptr, ps), 0);
    sockaddr_in addr = Ipv4("127.0.0.1", port_);
    ASSERT_EQ(backend_->RdmaBindAddr(listener_, AsSockaddr(&addr)), 0);
    ASSERT_EQ(backend_->RdmaListen(listener_, 8), 0);
  }

  // The active UD id, its address and route resolved toward 127.0.0.1:port_.
  void Resolve() {
    ASSERT_EQ(backend_->RdmaCreateId(active_.channel, &active_.id, nullptr, RDMA_PS_UDP), 0);
    EXPECT_EQ(active_.id->qp_type, IBV_QPT_UD);
    sockaddr_in dst = Ipv4("127.0.0.1", port_);
    ASSERT_EQ(backend_->RdmaResolveAddr(active_.id, nullptr, AsSockaddr(&dst), 100), 0);
    ASSERT_TRUE(ExpectCmEvent(backend_, active_.channel, RDMA_CM_EVENT_ADDR_RESOLVED).ok());
    ASSERT_EQ(backend_->RdmaResolveRoute(active_.id, 100), 0);
    ASSERT_TRUE(ExpectCmEvent(backend_, active_.channel, RDMA_CM_EVENT_ROUTE_RESOLVED).ok());
  }

  // end->pd and end->cq on end->id's device, and the attributes of a QP of `type` on them.
  void QpAttr(UdEnd* end, ibv_qp_type type, ibv_qp_init_attr_ex* attr) {
    ibv_context* ctx = end->id->verbs;
    ASSERT_NE(ctx, nullptr);
    ASSERT_EQ(backend_->IbvAllocPd(ctx, &end->pd), 0);
    ASSERT_EQ(backend_->IbvCreateCq(ctx, 16, nullptr, nullptr, 0, &end->cq), 0);
    *attr = ibv_qp_init_attr_ex{};
    attr->comp_mask = IBV_QP_INIT_ATTR_PD;
    attr->pd = end->pd;
    attr->send_cq = attr->recv_cq = end->cq;
    attr->cap.max_send_wr = attr->cap.max_recv_wr = 4;
    attr->cap.max_send_sge = attr->cap.max_recv_sge = 1;
    attr->qp_type = type;
  }

  // A UD QP on end->id (through rdma_create_qp), with a receive posted.
  void MakeQp(UdEnd* end) {
    ibv_qp_init_attr_ex attr;
    ASSERT_NO_FATAL_FAILURE(QpAttr(end, IBV_QPT_UD, &attr));
    ASSERT_EQ(backend_->IbvRegMr(end->pd, end->buf.data(), end->buf.size(),
                                 IBV_ACCESS_LOCAL_WRITE, &end->mr),
              0);
    ASSERT_EQ(backend_->RdmaCreateQpEx(end->id, &attr), 0);
    ibv_sge sge{reinterpret_cast<uintptr_t>(end->buf.data() + 2048), 1024 + 40, end->mr->lkey};
    ASSERT_EQ(PostRecvBuf(backend_, end->id->qp, 7, &sge, 1), 0);
  }

  // Sends `text` from `from` (its first 2 KiB) through `ah` to (qpn, qkey), with its own QP
  // number as immediate data, signaled; returns the send's status.
  int Send(UdEnd* from, ibv_ah* ah, uint32_t qpn, uint32_t qkey, const char* text) {
    std::strcpy(reinterpret_cast<char*>(from->buf.data()), text);
    ibv_sge sge{reinterpret_cast<uintptr_t>(from->buf.data()),
                static_cast<uint32_t>(std::strlen(text) + 1), from->mr->lkey};
    ibv_send_wr wr{};
    wr.wr_id = 1;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND_WITH_IMM;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.imm_data = htonl(from->id->qp->qp_num);
    wr.wr.ud.ah = ah;
    wr.wr.ud.remote_qpn = qpn;
    wr.wr.ud.remote_qkey = qkey;
    ibv_send_wr* bad = nullptr;
    return backend_->IbvPostSend(from->id->qp, &wr, &bad);
  }

  // The completions of end->cq until `count` came (10 s at most: on the host transport a
  // datagram is delivered by the fabric thread).
  std::vector<ibv_wc> PollFor(UdEnd* end, size_t count) {
    std::vector<ibv_wc> got;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (got.size() < count && std::chrono::steady_clock::now() < deadline) {
      std::vector<ibv_wc> more = PollAll(backend_, end->cq);
      got.insert(got.end(), more.begin(), more.end());
      if (got.size() < count) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return got;
  }

  // Gets the listener's CONNECT_REQUEST: passive_.id is the request's id.
  void TakeRequest(rdma_ud_param* ud = nullptr, std::vector<uint8_t>* private_data = nullptr) {
    absl::StatusOr<rdma_cm_event*> request = GetCmEventNow(backend_, listen_channel_);
    ASSERT_TRUE(request.ok()) << request.status();
    ASSERT_EQ((*request)->event, RDMA_CM_EVENT_CONNECT_REQUEST);
    passive_.id = (*request)->id;
    if (ud != nullptr) *ud = (*request)->param.ud;
    if (private_data != nullptr) {
      const auto* bytes = static_cast<const uint8_t*>((*request)->param.ud.private_data);
      private_data->assign(bytes, bytes + (*request)->param.ud.private_data_len);
    }
    ASSERT_EQ(backend_->RdmaAckCmEvent(*request), 0);
  }

  // The active side's next event, which must be `type`; its param.ud, status and private data.
  void TakeAnswer(rdma_cm_event_type type, rdma_ud_param* ud, int* status,
                  std::vector<uint8_t>* private_data) {
    absl::StatusOr<rdma_cm_event*> event = GetCmEventNow(backend_, active_.channel);
    ASSERT_TRUE(event.ok()) << event.status();
    EXPECT_EQ((*event)->event, type);
    EXPECT_EQ((*event)->id, active_.id);
    *ud = (*event)->param.ud;
    *status = (*event)->status;
    const auto* bytes = static_cast<const uint8_t*>((*event)->param.ud.private_data);
    private_data->assign(bytes, bytes + (*event)->param.ud.private_data_len);
    ASSERT_EQ(backend_->RdmaAckCmEvent(*event), 0);
  }

  uint16_t port_ = NextTestPort();
  rdma_event_channel* listen_channel_ = nullptr;
  rdma_cm_id* listener_ = nullptr;
  UdEnd active_;
  UdEnd passive_;
};

TEST_F(CmUdTest, Getaddrinfo_UdpPortSpace_UdQps) {
  rdma_addrinfo hints{};
  hints.ai_port_space = RDMA_PS_UDP;
  rdma_addrinfo* res = nullptr;

  ASSERT_EQ(backend_->RdmaGetaddrinfo("127.0.0.1", "7174", &hints, &res), 0);

  EXPECT_EQ(res->ai_qp_type, IBV_QPT_UD);
  EXPECT_EQ(res->ai_port_space, RDMA_PS_UDP);
  backend_->RdmaFreeaddrinfo(res);
}

// rdma_create_qp moves a UD id's QP to RTS itself (ucma_init_ud_qp) with the CMA's Q_Key; an
// RC QP on a UD id is EINVAL; the QP is rdma_destroy_qp's while the id lives.
TEST_F(CmUdTest, CreateQp_UdQpInRtsWithTheCmaQkey_RcEinval) {
  ASSERT_NO_FATAL_FAILURE(Resolve());
  ibv_qp_init_attr_ex attr;
  ASSERT_NO_FATAL_FAILURE(QpAttr(&active_, IBV_QPT_RC, &attr));
  EXPECT_EQ(backend_->RdmaCreateQpEx(active_.id, &attr), EINVAL);
  EXPECT_EQ(active_.id->qp, nullptr);

  attr.qp_type = IBV_QPT_UD;
  ASSERT_EQ(backend_->RdmaCreateQpEx(active_.id, &attr), 0);

  ASSERT_NE(active_.id->qp, nullptr);
  EXPECT_EQ(active_.id->qp->qp_type, IBV_QPT_UD);
  ibv_qp_attr got{};
  ibv_qp_init_attr init{};
  ASSERT_EQ(backend_->IbvQueryQp(active_.id->qp, &got, IBV_QP_STATE | IBV_QP_QKEY, &init), 0);
  EXPECT_EQ(got.qp_state, IBV_QPS_RTS);
  EXPECT_EQ(got.qkey, kUdpQkey);
  EXPECT_EQ(init.qp_type, IBV_QPT_UD);
  EXPECT_EQ(backend_->IbvDestroyQp(active_.id->qp), EINVAL);  // the id's, for rdma_destroy_qp
}

// The whole exchange, as udaddy makes it: the SIDR REQ's private data at the listener (its
// 180-byte field), the REP's QP number, Q_Key, private data (136-byte field) and an address
// the active side makes an AH of; then datagrams both ways, the reply through an AH made from
// the request's completion.
TEST_F(CmUdTest, ConnectAccept_EstablishedWithTheRepsQpAndAddress_DatagramsBothWays) {
  ASSERT_NO_FATAL_FAILURE(Listen());
  ASSERT_NO_FATAL_FAILURE(Resolve());
  ASSERT_NO_FATAL_FAILURE(MakeQp(&active_));
  std::vector<uint8_t> hello(kMaxSidrRequestPrivateData, 0x5a);
  rdma_conn_param param{};
  param.private_data = hello.data();
  param.private_data_len = kMaxSidrRequestPrivateData + 1;
  EXPECT_EQ(backend_->RdmaConnect(active_.id, &param), EINVAL);
  param.private_data_len = kMaxSidrRequestPrivateData;
  ASSERT_EQ(backend_->RdmaConnect(active_.id, &param), 0);

  rdma_ud_param request_ud{};
  std::vector<uint8_t> request_data;
  ASSERT_NO_FATAL_FAILURE(TakeRequest(&request_ud, &request_data));
  EXPECT_EQ(request_data, hello);
  EXPECT_EQ(request_ud.qp_num, 0u);
  EXPECT_EQ(request_ud.qkey, 0u);
  EXPECT_EQ(passive_.id->qp_type, IBV_QPT_UD);
  EXPECT_EQ(passive_.id->ps, RDMA_PS_UDP);
  ASSERT_NO_FATAL_FAILURE(MakeQp(&passive_));
  const char welcome[] = "welcome";
  rdma_conn_param reply{};
  reply.private_data = welcome;
  reply.private_data_len = kMaxSidrReplyPrivateData + 1;
  EXPECT_EQ(backend_->RdmaAccept(passive_.id, &reply), EINVAL);
  reply.private_data_len = sizeof(welcome);
  ASSERT_EQ(backend_->RdmaAccept(passive_.id, &reply), 0);
  EXPECT_EQ(backend_->RdmaAccept(passive_.id, &reply), EINVAL);  // answered already

  rdma_ud_param ud{};
  int status = -1;
  std::vector<uint8_t> data;
  ASSERT_NO_FATAL_FAILURE(TakeAnswer(RDMA_CM_EVENT_ESTABLISHED, &ud, &status, &data));
  EXPECT_EQ(status, 0);
  EXPECT_EQ(ud.qp_num, passive_.id->qp->qp_num);
  EXPECT_EQ(ud.qkey, kUdpQkey);
  ASSERT_EQ(data.size(), static_cast<size_t>(kMaxSidrReplyPrivateData));
  EXPECT_STREQ(reinterpret_cast<const char*>(data.data()), welcome);
  EXPECT_EQ(ud.ah_attr.is_global, 1);
  EXPECT_EQ(ud.ah_attr.port_num, 1);
  uint8_t our_gid[16];
  ProcessGid(our_gid);  // both ends are this process
  EXPECT_EQ(std::memcmp(ud.ah_attr.grh.dgid.raw, our_gid, 16), 0);
  // The SIDR REP queues nothing on the passive side (no RTU, no ESTABLISHED there).
  EXPECT_FALSE(FdReadable(listen_channel_->fd));

  ASSERT_EQ(backend_->IbvCreateAh(active_.pd, &ud.ah_attr, &active_.ah), 0);
  ASSERT_EQ(Send(&active_, active_.ah, ud.qp_num, ud.qkey, "ping"), 0);
  std::vector<ibv_wc> at_passive = PollFor(&passive_, 1);
  ASSERT_EQ(at_passive.size(), 1u);
  EXPECT_EQ(at_passive[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(at_passive[0].opcode, IBV_WC_RECV);
  EXPECT_EQ(at_passive[0].src_qp, active_.id->qp->qp_num);
  EXPECT_EQ(ntohl(at_passive[0].imm_data), active_.id->qp->qp_num);
  EXPECT_STREQ(reinterpret_cast<const char*>(passive_.buf.data() + 2048 + 40), "ping");
  // udaddy's reply: to the sender's QP (its immediate data), the Q_Key from ibv_query_qp (the
  // shim's ibv_create_ah_from_wc reading the GRH is ud_pingpong_test's and udaddy_test's).
  ibv_ah_attr back = ud.ah_attr;
  ASSERT_EQ(backend_->IbvCreateAh(passive_.pd, &back, &passive_.ah), 0);
  ibv_qp_attr qp_attr{};
  ibv_qp_init_attr init{};
  ASSERT_EQ(backend_->IbvQueryQp(passive_.id->qp, &qp_attr, IBV_QP_QKEY, &init), 0);
  ASSERT_EQ(Send(&passive_, passive_.ah, ntohl(at_passive[0].imm_data), qp_attr.qkey, "pong"),
            0);
  // The active side: its send's completion and the reply.
  std::vector<ibv_wc> at_active = PollFor(&active_, 2);
  ASSERT_EQ(at_active.size(), 2u);
  for (const ibv_wc& wc : at_active) EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_STREQ(reinterpret_cast<const char*>(active_.buf.data() + 2048 + 40), "pong");
}

// Nobody listening there (or only a listener of RC ids): the IB CM answers a SIDR REQ with
// IB_SIDR_UNSUPPORTED, which the requester gets as UNREACHABLE of that status, with the REP's
// private data field.
TEST_F(CmUdTest, Connect_NoUdpListener_UnreachableUnsupported) {
  ASSERT_NO_FATAL_FAILURE(Resolve());
  ASSERT_NO_FATAL_FAILURE(MakeQp(&active_));
  ASSERT_EQ(backend_->RdmaConnect(active_.id, nullptr), 0);
  rdma_ud_param ud{};
  int status = 0;
  std::vector<uint8_t> data;
  ASSERT_NO_FATAL_FAILURE(TakeAnswer(RDMA_CM_EVENT_UNREACHABLE, &ud, &status, &data));
  EXPECT_EQ(status, kSidrUnsupported);
  EXPECT_EQ(data, std::vector<uint8_t>(kMaxSidrReplyPrivateData, 0));
  EXPECT_EQ(ud.qp_num, 0u);
}

TEST_F(CmUdTest, Connect_ToAListenerOfRcIds_UnreachableUnsupported_AndTheReverseRejected) {
  ASSERT_NO_FATAL_FAILURE(Listen(RDMA_PS_TCP));
  ASSERT_NO_FATAL_FAILURE(Resolve());
  ASSERT_NO_FATAL_FAILURE(MakeQp(&active_));
  ASSERT_EQ(backend_->RdmaConnect(active_.id, nullptr), 0);
  rdma_ud_param ud{};
  int status = 0;
  std::vector<uint8_t> data;
  ASSERT_NO_FATAL_FAILURE(TakeAnswer(RDMA_CM_EVENT_UNREACHABLE, &ud, &status, &data));
  EXPECT_EQ(status, kSidrUnsupported);
  EXPECT_FALSE(FdReadable(listen_channel_->fd));  // the RC listener saw nothing
  ASSERT_EQ(backend_->RdmaDestroyId(listener_), 0);
  listener_ = nullptr;

  // An RC id toward a UDP listener: no such service either (REJECTED, as with no listener).
  ASSERT_NO_FATAL_FAILURE(Listen(RDMA_PS_UDP));
  TestConnection rc(backend_);
  ASSERT_TRUE(rc.StartActive(ConnectionOptions(), port_).ok());
  int rc_status = 0;
  ASSERT_TRUE(ExpectCmEvent(backend_, rc.active.channel, RDMA_CM_EVENT_REJECTED, &rc_status).ok());
  EXPECT_EQ(rc_status, kRejectNoListener);
  EXPECT_FALSE(FdReadable(listen_channel_->fd));
}

// UD ids have a port space of their own, as RDMA_PS_UDP in the kernel: a UDP listener and a TCP
// listener on one address and port, each reached by its own kind of id.
TEST_F(CmUdTest, UdpAndTcpListenersOnOnePort_EachGetsItsOwnKindOfRequest) {
  ASSERT_NO_FATAL_FAILURE(Listen(RDMA_PS_UDP));
  TestConnection rc(backend_);
  ASSERT_TRUE(rc.Listen("127.0.0.1", port_).ok());  // the same address and port, RDMA_PS_TCP
  ASSERT_NO_FATAL_FAILURE(Resolve());
  ASSERT_NO_FATAL_FAILURE(MakeQp(&active_));

  ASSERT_EQ(backend_->RdmaConnect(active_.id, nullptr), 0);
  ASSERT_TRUE(rc.StartActive(ConnectionOptions(), port_).ok());

  ASSERT_NO_FATAL_FAILURE(TakeRequest());  // the UDP listener's: a UD request
  EXPECT_EQ(passive_.id->qp_type, IBV_QPT_UD);
  absl::StatusOr<rdma_cm_event*> rc_request = GetCmEventNow(backend_, rc.listen_channel);
  ASSERT_TRUE(rc_request.ok()) << rc_request.status();
  EXPECT_EQ((*rc_request)->event, RDMA_CM_EVENT_CONNECT_REQUEST);
  EXPECT_EQ((*rc_request)->id->qp_type, IBV_QPT_RC);
  rdma_cm_id* rc_request_id = (*rc_request)->id;
  ASSERT_EQ(backend_->RdmaAckCmEvent(*rc_request), 0);
  EXPECT_EQ(backend_->RdmaReject(rc_request_id, nullptr, 0), 0);
  EXPECT_EQ(backend_->RdmaDestroyId(rc_request_id), 0);
  EXPECT_FALSE(FdReadable(listen_channel_->fd));  // nothing more at the UDP listener
}

// rdma_reject of a UD request is a SIDR REP of status IB_SIDR_REJECT (its private data up to
// the REP's 136 bytes); destroying an unanswered request, or the listener holding it, too.
TEST_F(CmUdTest, Reject_UnreachableSidrRejectWithThePrivateData) {
  ASSERT_NO_FATAL_FAILURE(Listen());
  ASSERT_NO_FATAL_FAILURE(Resolve());
  ASSERT_EQ(backend_->RdmaConnect(active_.id, nullptr), 0);  // no QP: a SIDR REQ names none
  ASSERT_NO_FATAL_FAILURE(TakeRequest());
  const char reason[] = "busy";
  std::vector<uint8_t> too_long(kMaxSidrReplyPrivateData + 1, 1);
  EXPECT_EQ(backend_->RdmaReject(passive_.id, too_long.data(), kMaxSidrReplyPrivateData + 1),
            EINVAL);

  ASSERT_EQ(backend_->RdmaReject(passive_.id, reason, sizeof(reason)), 0);

  rdma_ud_param ud{};
  int status = 0;
  std::vector<uint8_t> data;
  ASSERT_NO_FATAL_FAILURE(TakeAnswer(RDMA_CM_EVENT_UNREACHABLE, &ud, &status, &data));
  EXPECT_EQ(status, kSidrReject);
  ASSERT_EQ(data.size(), static_cast<size_t>(kMaxSidrReplyPrivateData));
  EXPECT_STREQ(reinterpret_cast<const char*>(data.data()), reason);
  EXPECT_EQ(backend_->RdmaAccept(passive_.id, nullptr), EINVAL);  // answered already
}

TEST_F(CmUdTest, DestroyUnansweredRequest_UnreachableSidrReject) {
  ASSERT_NO_FATAL_FAILURE(Listen());
  ASSERT_NO_FATAL_FAILURE(Resolve());
  ASSERT_EQ(backend_->RdmaConnect(active_.id, nullptr), 0);
  ASSERT_NO_FATAL_FAILURE(TakeRequest());

  ASSERT_EQ(backend_->RdmaDestroyId(passive_.id), 0);
  passive_.id = nullptr;

  rdma_ud_param ud{};
  int status = 0;
  std::vector<uint8_t> data;
  ASSERT_NO_FATAL_FAILURE(TakeAnswer(RDMA_CM_EVENT_UNREACHABLE, &ud, &status, &data));
  EXPECT_EQ(status, kSidrReject);
}

// SIDR makes no connection: after it, rdma_disconnect only moves the QP to ERROR (the kernel's
// DREQ fails on a SIDR id) and destroying either id tells the other nothing.
TEST_F(CmUdTest, AfterTheExchange_DisconnectOnlyErrorsTheQp_DestroySendsNothing) {
  ASSERT_NO_FATAL_FAILURE(Listen());
  ASSERT_NO_FATAL_FAILURE(Resolve());
  ASSERT_NO_FATAL_FAILURE(MakeQp(&active_));
  ASSERT_EQ(backend_->RdmaConnect(active_.id, nullptr), 0);
  ASSERT_NO_FATAL_FAILURE(TakeRequest());
  ASSERT_NO_FATAL_FAILURE(MakeQp(&passive_));
  ASSERT_EQ(backend_->RdmaAccept(passive_.id, nullptr), 0);
  ASSERT_TRUE(ExpectCmEvent(backend_, active_.channel, RDMA_CM_EVENT_ESTABLISHED).ok());

  ASSERT_EQ(backend_->RdmaDisconnect(active_.id), 0);

  EXPECT_EQ(active_.id->qp->state, IBV_QPS_ERR);
  EXPECT_EQ(passive_.id->qp->state, IBV_QPS_RTS);
  backend_->RdmaDestroyQp(passive_.id);
  ASSERT_EQ(backend_->RdmaDestroyId(passive_.id), 0);
  passive_.id = nullptr;
  // Give a host connection's end the time to arrive, were one sent.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(FdReadable(active_.channel->fd));
  EXPECT_FALSE(FdReadable(listen_channel_->fd));
}

// The fault kinds of rdma_connect and rdma_accept on a UD id: what a refused or lost SIDR REQ
// or REP gives the requester (UNREACHABLE, IB_SIDR_REJECT or -ETIMEDOUT); the passive side
// gets nothing.
TEST_F(CmUdTest, Faults_ConnectRejectAndLost_AcceptRejectAndLost) {
  ASSERT_NO_FATAL_FAILURE(Listen());
  ASSERT_NO_FATAL_FAILURE(Resolve());
  struct Case {
    const char* spec;
    int status;
  };
  for (const Case& c : {Case{"rdma_connect:reject", kSidrReject},
                        Case{"rdma_connect:lost", -ETIMEDOUT},
                        Case{"rdma_connect:unreachable", -ETIMEDOUT},
                        Case{"rdma_accept:reject", kSidrReject},
                        Case{"rdma_accept:lost", -ETIMEDOUT},
                        Case{"rdma_accept:disconnect", -ETIMEDOUT}}) {
    SCOPED_TRACE(c.spec);
    if (active_.id == nullptr) {
      ASSERT_NO_FATAL_FAILURE(Resolve());
    }
    ASSERT_TRUE(SetFaultPlan(c.spec).ok());
    ASSERT_EQ(backend_->RdmaConnect(active_.id, nullptr), 0);
    if (std::string(c.spec).rfind("rdma_accept", 0) == 0) {
      ASSERT_NO_FATAL_FAILURE(TakeRequest());
      ASSERT_NO_FATAL_FAILURE(MakeQp(&passive_));
      ASSERT_EQ(backend_->RdmaAccept(passive_.id, nullptr), 0);
      EXPECT_FALSE(FdReadable(listen_channel_->fd));
    }
    rdma_ud_param ud{};
    int status = 0;
    std::vector<uint8_t> data;
    ASSERT_NO_FATAL_FAILURE(TakeAnswer(RDMA_CM_EVENT_UNREACHABLE, &ud, &status, &data));
    EXPECT_EQ(status, c.status);
    EXPECT_EQ(data.size(), c.status > 0 ? static_cast<size_t>(kMaxSidrReplyPrivateData) : 0u);
    ClearFaultPlan();
    // Fresh ends for the next case.
    DestroyEnd(&active_);
    DestroyEnd(&passive_);
  }
}

// siw has no UD QPs, and iWARP's CM no SIDR: both refused, not half done.
TEST_F(CmUdTest, Siw_UdQpAndConnect_Eopnotsupp) {
  absl::StatusOr<const DeviceProfile*> siw = FindDeviceProfile("siw");
  ASSERT_TRUE(siw.ok()) << siw.status();
  SetActiveProfile(**siw);
  ASSERT_NO_FATAL_FAILURE(Resolve());
  ibv_qp_init_attr_ex attr;
  ASSERT_NO_FATAL_FAILURE(QpAttr(&active_, IBV_QPT_UD, &attr));

  const int create = backend_->RdmaCreateQpEx(active_.id, &attr);
  const int connect = backend_->RdmaConnect(active_.id, nullptr);

  SetActiveProfile(DeviceProfiles()[0]);
  EXPECT_EQ(create, EOPNOTSUPP);
  EXPECT_EQ(connect, EOPNOTSUPP);
}

// ---- iWARP (the siw profile): the kernel's iw_cm under rdma_cm's cma_iw_handler, not the IB CM
// (docs/DEVICES.md, "iWARP's connection manager"). Each case runs on both transports.

class CmSiwTest : public CmTest {
 protected:
  void SetUp() override {
    absl::StatusOr<const DeviceProfile*> siw = FindDeviceProfile("siw");
    ASSERT_TRUE(siw.ok()) << siw.status();
    SetActiveProfile(**siw);
  }
  void TearDown() override { SetActiveProfile(DeviceProfiles()[0]); }
};

// The passive side is established once its MPA reply is sent (siw_accept): its ESTABLISHED
// is there at the accept, before the active side got its own.
TEST_F(CmSiwTest, PassiveEstablished_ComesAtTheAccept) {
  TestConnection conn(backend_);
  ConnectionOptions options;
  ASSERT_TRUE(conn.Listen(options.address, NextTestPort()).ok());
  ASSERT_TRUE(conn.StartActive(options, conn.port).ok());

  ASSERT_TRUE(conn.AcceptPassive(options).ok());

  EXPECT_EQ(conn.passive.id->qp->state, IBV_QPS_RTS);
  EXPECT_EQ(conn.active.qp()->state, IBV_QPS_INIT);  // the active side has not got its event
  EXPECT_TRUE(ExpectCmEvent(backend_, conn.passive.channel, RDMA_CM_EVENT_ESTABLISHED).ok());
  EXPECT_TRUE(ExpectCmEvent(backend_, conn.active.channel, RDMA_CM_EVENT_ESTABLISHED).ok());
  EXPECT_EQ(conn.active.qp()->state, IBV_QPS_RTS);
  // The RTU that follows queues no second ESTABLISHED; the connection carries data as on IB.
  EXPECT_FALSE(FdReadable(conn.passive.channel->fd));
  TestBuffer source(backend_, conn.active.pd, 8, IBV_ACCESS_LOCAL_WRITE);
  TestBuffer target(backend_, conn.passive.pd, 8,
                    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  std::memcpy(source.data(), "written", 8);
  ibv_sge sge = source.Sge(0, 8);
  ASSERT_EQ(PostWrite(backend_, conn.active.qp(), 9, &sge, 1, target.addr(), target.mr()->rkey),
            0);
  EXPECT_THAT(PollAll(backend_, conn.active.send_cq),
              ElementsAre(AllOf(Field(&ibv_wc::wr_id, 9u),
                                Field(&ibv_wc::status, IBV_WC_SUCCESS))));
  EXPECT_EQ(std::memcmp(target.data(), "written", 8), 0);
  EXPECT_TRUE(conn.Disconnect().ok());
}

// A disconnect closes the stream: the peer's QP goes to ERROR and its posted receive flushes
// (siw_qp_llp_close), both sides get DISCONNECTED (status 0) at once, with no DREQ timer
// and no TIMEWAIT_EXIT after.
TEST_F(CmSiwTest, Disconnect_PeerQpToError_ItsReceivesFlush_NoTimewaitExit) {
  TestConnection conn(backend_);
  ASSERT_TRUE(conn.Connect(ConnectionOptions()).ok());
  TestBuffer buf(backend_, conn.passive.pd, 16, IBV_ACCESS_LOCAL_WRITE);
  ibv_sge sge = buf.Sge(0, 16);
  ASSERT_EQ(PostRecvBuf(backend_, conn.passive.qp(), 7, &sge, 1), 0);
  const uint64_t disconnect_ns = SimClockNs();

  ASSERT_EQ(backend_->RdmaDisconnect(conn.active.id), 0);

  EXPECT_EQ(conn.active.qp()->state, IBV_QPS_ERR);
  int status = -1;
  ASSERT_TRUE(
      ExpectCmEvent(backend_, conn.active.channel, RDMA_CM_EVENT_DISCONNECTED, &status).ok());
  EXPECT_EQ(status, 0);
  status = -1;
  ASSERT_TRUE(
      ExpectCmEvent(backend_, conn.passive.channel, RDMA_CM_EVENT_DISCONNECTED, &status).ok());
  EXPECT_EQ(status, 0);
  EXPECT_EQ(conn.passive.qp()->state, IBV_QPS_ERR);
  EXPECT_THAT(PollAll(backend_, conn.passive.recv_cq),
              ElementsAre(AllOf(Field(&ibv_wc::wr_id, 7u),
                                Field(&ibv_wc::status, IBV_WC_WR_FLUSH_ERR))));
  // No timer was waited for (the calls' own costs only; IB's DREQ timer is 98 s, timewait 2 s).
  EXPECT_LT(SimClockNs() - disconnect_ns, kTimewaitNs);
  // The peer's own rdma_disconnect afterwards is harmless, and nothing more comes.
  EXPECT_EQ(backend_->RdmaDisconnect(conn.passive.id), 0);
  EXPECT_FALSE(FdReadable(conn.active.channel->fd));
  EXPECT_FALSE(FdReadable(conn.passive.channel->fd));
}

// Destroying a connected id closes its stream too: the peer's QP to ERROR, DISCONNECTED.
TEST_F(CmSiwTest, DestroyConnectedId_PeerQpToErrorAndDisconnected) {
  TestConnection conn(backend_);
  ASSERT_TRUE(conn.Connect(ConnectionOptions()).ok());
  backend_->RdmaDestroyQp(conn.active.id);

  ASSERT_EQ(backend_->RdmaDestroyId(conn.active.id), 0);
  conn.active.id = nullptr;

  int status = -1;
  ASSERT_TRUE(
      ExpectCmEvent(backend_, conn.passive.channel, RDMA_CM_EVENT_DISCONNECTED, &status).ok());
  EXPECT_EQ(status, 0);
  EXPECT_EQ(conn.passive.qp()->state, IBV_QPS_ERR);
  EXPECT_EQ(backend_->RdmaDisconnect(conn.passive.id), 0);
  EXPECT_FALSE(FdReadable(conn.passive.channel->fd));
}

// iWARP's MPA request and reply carry up to 255 bytes, reported exactly as sent (no zero
// padding, also for a short one): in one process and through the wire's CM bodies.
TEST_F(CmSiwTest, PrivateData_UpTo255Bytes_DeliveredExactlyAsSent) {
  std::vector<uint8_t> longest(kMaxPrivateDataAnyDevice);
  for (size_t i = 0; i < longest.size(); ++i) longest[i] = static_cast<uint8_t>(i + 1);
  for (const std::vector<uint8_t>& data : {longest, std::vector<uint8_t>{'h', 'i'}}) {
    TestConnection conn(backend_);
    ConnectionOptions options;
    options.connect_private_data = data;
    options.accept_private_data = data;
    ASSERT_TRUE(conn.Listen(options.address, NextTestPort()).ok());
    ASSERT_TRUE(conn.StartActive(options, conn.port).ok());
    absl::StatusOr<rdma_cm_event*> request = GetCmEventNow(backend_, conn.listen_channel);
    ASSERT_TRUE(request.ok()) << request.status();
    const auto* got = static_cast<const uint8_t*>((*request)->param.conn.private_data);
    EXPECT_EQ(std::vector<uint8_t>(got, got + (*request)->param.conn.private_data_len), data);
    ASSERT_EQ(backend_->RdmaReject((*request)->id, data.data(), static_cast<uint8_t>(data.size())),
              0);
    rdma_cm_id* request_id = (*request)->id;
    ASSERT_EQ(backend_->RdmaAckCmEvent(*request), 0);
    EXPECT_EQ(backend_->RdmaDestroyId(request_id), 0);
    absl::StatusOr<rdma_cm_event*> rejected = GetCmEventNow(backend_, conn.active.channel);
    ASSERT_TRUE(rejected.ok()) << rejected.status();
    EXPECT_EQ((*rejected)->event, RDMA_CM_EVENT_REJECTED);
    got = static_cast<const uint8_t*>((*rejected)->param.conn.private_data);
    EXPECT_EQ(std::vector<uint8_t>(got, got + (*rejected)->param.conn.private_data_len), data);
    ASSERT_EQ(backend_->RdmaAckCmEvent(*rejected), 0);

    TestConnection accepted(backend_);
    std::vector<uint8_t> established;
    ASSERT_TRUE(accepted.Connect(options, &established).ok());
    EXPECT_EQ(established, data);
  }
}

}  // namespace
}  // namespace softrpma::sim::testing
