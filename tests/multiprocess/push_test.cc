// push_test: THE REQUESTER PUSH between two real processes (nic/carrier_host.cc, PushLocked;
// fabric/shm/region_table.h). A librpma server and its forked librpma client; once connected,
// the server holds its fabric thread (host::ScopedFabricThreadHeldForTest) and calls nothing,
// so its NIC executes nothing: a write of the client's completes only if the client wrote it
// into place itself (an 8-byte one, then one of 9 MiB, written in pieces). Then the server deregisters its region and the client's next write must
// not land: it goes to the server's NIC as a request, which refuses it.
//
// Every wait is bounded (alarm() in the children, deadlines on pipes): a bound against hangs,
// never a timing assertion.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "gtest/gtest.h"
#include "librpma.h"
#include "simverbs/sim/fabric/host.h"

namespace softrpma {
namespace {

constexpr char kAddr[] = "127.0.0.1";
constexpr size_t kBigOffset = 4096;
constexpr size_t kBigBytes = (size_t{9} << 20) + 5;  // pushed in pieces (4 MiB), the last cut
constexpr size_t kRegionBytes = kBigOffset + kBigBytes;
constexpr int kReplyMs = 20000;   // a bound against hangs on a pipe
constexpr int kHeldWaitMs = 2000;  // how long the client polls while the server is held
constexpr int kChildLimitS = 60;

alignas(64) uint8_t g_region[kRegionBytes];
alignas(64) uint8_t g_big[kBigBytes];  // the client's large source

uint8_t BigByte(size_t i) { return static_cast<uint8_t>(i * 7 + 1); }

// Reads `n` bytes within `limit_ms`; false on timeout or end.
bool ReadWithin(int fd, void* into, size_t n, int limit_ms) {
  uint8_t* at = static_cast<uint8_t*>(into);
  while (n > 0) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, limit_ms) <= 0) return false;
    const ssize_t got = read(fd, at, n);
    if (got <= 0) return false;
    at += got;
    n -= static_cast<size_t>(got);
  }
  return true;
}

bool WriteAll(int fd, const void* from, size_t n) {
  return write(fd, from, n) == static_cast<ssize_t>(n);
}

uint64_t NowMs() {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1000 + static_cast<uint64_t>(now.tv_nsec) / 1000000;
}

struct Descriptor {
  uint32_t size;
  uint8_t bytes[64];
};

// The client's outcome of one write: 'S' completed successfully, 'E' completed with an error,
// 'T' no completion within its wait, 'F' a call failed.
char WriteAndWait(rpma_conn* conn, rpma_mr_remote* remote, size_t offset, rpma_mr_local* src,
                  size_t src_offset, int limit_ms, size_t bytes = 8) {
  if (rpma_write(conn, remote, offset, src, src_offset, bytes, RPMA_F_COMPLETION_ALWAYS,
                 nullptr) != 0) {
    return 'F';
  }
  rpma_cq* cq = nullptr;
  if (rpma_conn_get_cq(conn, &cq) != 0) return 'F';
  const uint64_t deadline = NowMs() + static_cast<uint64_t>(limit_ms);
  while (NowMs() < deadline) {
    ibv_wc wc;
    int got = 0;
    const int ret = rpma_cq_get_wc(cq, 1, &wc, &got);
    if (ret == RPMA_E_NO_COMPLETION) continue;
    if (ret != 0 || got != 1) return 'F';
    return wc.status == IBV_WC_SUCCESS ? 'S' : 'E';
  }
  return 'T';
}

// The client: waits for the server's descriptor, connects, waits for 'G' (the server holds its
// fabric thread), writes "AAAAAAAA" at 0 and reports, then kBigBytes at kBigOffset and reports;
// waits for 'D' (deregistered), writes "BBBBBBBB" at 8 and reports.
[[noreturn]] void ClientMain(int from_server, int to_server) {
  alarm(kChildLimitS);
  rpma_log_set_threshold(RPMA_LOG_THRESHOLD, RPMA_LOG_DISABLED);
  rpma_log_set_threshold(RPMA_LOG_THRESHOLD_AUX, RPMA_LOG_DISABLED);
  Descriptor desc;
  const char* port = std::getenv("PUSH_TEST_PORT");
  if (!ReadWithin(from_server, &desc, sizeof(desc), kReplyMs)) _exit(2);
  ibv_context* ctx = nullptr;
  rpma_peer* peer = nullptr;
  if (rpma_utils_get_ibv_context(kAddr, RPMA_UTIL_IBV_CONTEXT_REMOTE, &ctx) != 0 ||
      rpma_peer_new(ctx, &peer) != 0) {
    _exit(3);
  }
  rpma_conn_req* req = nullptr;
  rpma_conn* conn = nullptr;
  rpma_conn_event event = RPMA_CONN_UNDEFINED;
  if (rpma_conn_req_new(peer, kAddr, port, nullptr, &req) != 0 ||
      rpma_conn_req_connect(&req, nullptr, &conn) != 0 ||
      rpma_conn_next_event(conn, &event) != 0 || event != RPMA_CONN_ESTABLISHED) {
    _exit(4);
  }
  static uint8_t src[16];
  std::memset(src, 'A', 8);
  std::memset(src + 8, 'B', 8);
  rpma_mr_local* mr = nullptr;
  rpma_mr_remote* remote = nullptr;
  if (rpma_mr_reg(peer, src, sizeof(src), RPMA_MR_USAGE_WRITE_SRC, &mr) != 0 ||
      rpma_mr_remote_from_descriptor(desc.bytes, desc.size, &remote) != 0) {
    _exit(5);
  }
  char go = 0;
  if (!ReadWithin(from_server, &go, 1, kReplyMs) || go != 'G') _exit(6);
  char outcome = WriteAndWait(conn, remote, 0, mr, 0, kHeldWaitMs);
  if (!WriteAll(to_server, &outcome, 1)) _exit(7);
  if (outcome != 'S') _exit(0);  // the server has what it needs to judge
  for (size_t i = 0; i < kBigBytes; ++i) g_big[i] = BigByte(i);
  rpma_mr_local* big = nullptr;
  if (rpma_mr_reg(peer, g_big, kBigBytes, RPMA_MR_USAGE_WRITE_SRC, &big) != 0) _exit(10);
  outcome = WriteAndWait(conn, remote, kBigOffset, big, 0, kReplyMs, kBigBytes);
  if (!WriteAll(to_server, &outcome, 1)) _exit(11);
  if (outcome != 'S') _exit(0);
  char deregistered = 0;
  if (!ReadWithin(from_server, &deregistered, 1, kReplyMs) || deregistered != 'D') _exit(8);
  outcome = WriteAndWait(conn, remote, 8, mr, 8, kReplyMs);
  if (!WriteAll(to_server, &outcome, 1)) _exit(9);
  _exit(0);
}

// What the server saw, as its exit status.
enum ServerExit : int {
  kPushedAndFenced = 0,      // writes 1 and the large one landed while held; write 2 refused
                             // after the dereg
  kNotWhileHeld = 1,         // write 1 did not complete while held, and did not land
  kSetupFailed = 10,
  kWrongFirst = 11,          // write 1: an outcome that is neither of the above
  kFirstNotInPlace = 12,     // write 1 completed, but its bytes are not in the region
  kSecondLanded = 13,        // write 2 wrote into the deregistered region
  kSecondNotRefused = 14,    // write 2 did not complete with an error
  kClientFailed = 15,
  kBigNotInPlace = 16,       // the large write did not complete, or its bytes are not all there
};

// The server, in a process of its own: forks the client, serves one connection, holds its
// fabric thread once connected, judges. `push` is RPMA_SIM_PUSH for both.
int ServerMain(const char* push, const char* port) {
  alarm(kChildLimitS);
  setenv("RPMA_SIM_PUSH", push, 1);
  setenv("PUSH_TEST_PORT", port, 1);
  int to_client[2];
  int to_server[2];
  if (pipe(to_client) != 0 || pipe(to_server) != 0) return kSetupFailed;
  const pid_t client = fork();
  if (client < 0) return kSetupFailed;
  if (client == 0) {
    close(to_client[1]);
    close(to_server[0]);
    ClientMain(to_client[0], to_server[1]);
  }
  close(to_client[0]);
  close(to_server[1]);
  struct Reaper {
    pid_t pid;
    ~Reaper() {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  } reaper{client};
  rpma_log_set_threshold(RPMA_LOG_THRESHOLD, RPMA_LOG_DISABLED);
  rpma_log_set_threshold(RPMA_LOG_THRESHOLD_AUX, RPMA_LOG_DISABLED);
  ibv_context* ctx = nullptr;
  rpma_peer* peer = nullptr;
  rpma_ep* ep = nullptr;
  rpma_mr_local* mr = nullptr;
  if (rpma_utils_get_ibv_context(kAddr, RPMA_UTIL_IBV_CONTEXT_LOCAL, &ctx) != 0 ||
      rpma_peer_new(ctx, &peer) != 0 || rpma_ep_listen(peer, kAddr, port, &ep) != 0 ||
      rpma_mr_reg(peer, g_region, kRegionBytes, RPMA_MR_USAGE_WRITE_DST, &mr) != 0) {
    return kSetupFailed;
  }
  Descriptor desc;
  size_t size = 0;
  if (rpma_mr_get_descriptor_size(mr, &size) != 0 || size > sizeof(desc.bytes) ||
      rpma_mr_get_descriptor(mr, desc.bytes) != 0) {
    return kSetupFailed;
  }
  desc.size = static_cast<uint32_t>(size);
  if (!WriteAll(to_client[1], &desc, sizeof(desc))) return kSetupFailed;
  rpma_conn_req* req = nullptr;
  rpma_conn* conn = nullptr;
  rpma_conn_event event = RPMA_CONN_UNDEFINED;
  if (rpma_ep_next_conn_req(ep, nullptr, &req) != 0 ||
      rpma_conn_req_connect(&req, nullptr, &conn) != 0 ||
      rpma_conn_next_event(conn, &event) != 0 || event != RPMA_CONN_ESTABLISHED) {
    return kSetupFailed;
  }
  auto hold = std::make_unique<sim::host::ScopedFabricThreadHeldForTest>();
  if (!WriteAll(to_client[1], "G", 1)) return kSetupFailed;
  char first = 0;
  if (!ReadWithin(to_server[0], &first, 1, kReplyMs)) return kClientFailed;
  const volatile uint8_t* region = g_region;
  bool landed = true;
  for (int i = 0; i < 8; ++i) landed = landed && region[i] == 'A';
  if (first == 'T') return landed ? kWrongFirst : kNotWhileHeld;
  if (first != 'S') return kWrongFirst;
  if (!landed) return kFirstNotInPlace;
  char big = 0;
  if (!ReadWithin(to_server[0], &big, 1, kReplyMs)) return kClientFailed;
  if (big != 'S') return kBigNotInPlace;
  for (size_t i = 0; i < kBigBytes; ++i) {
    if (region[kBigOffset + i] != BigByte(i)) return kBigNotInPlace;
  }
  if (rpma_mr_dereg(&mr) != 0) return kSetupFailed;
  if (!WriteAll(to_client[1], "D", 1)) return kSetupFailed;
  hold.reset();  // the refused write is answered by this NIC
  char second = 0;
  if (!ReadWithin(to_server[0], &second, 1, kReplyMs)) return kClientFailed;
  for (int i = 8; i < 16; ++i) {
    if (region[i] != 0) return kSecondLanded;
  }
  return second == 'E' ? kPushedAndFenced : kSecondNotRefused;
}

int RunServer(const char* push, const char* port) {
  std::fflush(nullptr);
  const pid_t server = fork();
  if (server == 0) _exit(ServerMain(push, port));
  int status = 0;
  if (server < 0 || waitpid(server, &status, 0) != server) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Whether this process may write a child's memory (the kernel's ptrace rules): the push needs it.
bool CrossMemoryAttachAllowed() {
  const pid_t child = fork();
  if (child == 0) {
    pause();
    _exit(0);
  }
  uint8_t byte = 1;
  iovec local{&byte, 1};
  iovec remote{g_region, 1};
  const bool allowed = process_vm_writev(child, &local, 1, &remote, 1, 0) == 1;
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  return allowed;
}

TEST(PushTest, AWriteLandsWhileTheTargetsNicIsHeldAndNotAfterItsDeregistration) {
  if (!CrossMemoryAttachAllowed()) GTEST_SKIP() << "the kernel refuses cross-memory attach here";
  EXPECT_EQ(RunServer("1", "7431"), kPushedAndFenced);
}

// The same with the push off: the write waits for the target's NIC (the scenario can fail).
TEST(PushTest, WithThePushOffTheWriteWaitsForTheTargetsNic) {
  EXPECT_EQ(RunServer("0", "7432"), kNotWhileHeld);
}

}  // namespace
}  // namespace softrpma
