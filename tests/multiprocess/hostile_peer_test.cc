// hostile_peer_test: a HOSTILE PEER PROCESS against a real librpma server on the simulated NIC
// (issue 18). The test process is the attacker: it speaks the host fabric's wire by hand
// (hostile_wire.h) to a VICTIM it forked, a real librpma server (or, for the CM-less QPs, a
// verbs program) with a fabric of its own. Because of fork, g_secret has the same address in
// the victim and in the attacker: the victim fills it with a pattern and never registers it,
// and the attacker aims at it.
//
// Each attack is checked against the behaviour the NIC must have (docs/FABRIC.md, "Untrusted
// bytes"; wire.h): what a peer's messages claim is checked against what the kernel says of the
// connection (SO_PEERCRED), a malformed message ends that connection only, and a peer can
// neither freeze the victim's NIC nor make it buffer without bound. After each attack the victim
// must be alive, g_secret unchanged, and a legit librpma client (another child) must still
// connect and complete an RDMA write.
//
// Every wait is bounded (a deadline, or alarm() in the children): a bound against hangs, never
// a timing assertion. Memory is measured as behaviour (the victim's peak RSS, VmHWM) against
// a bound twice the cap a correct NIC keeps to.

#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "librpma.h"
#include "simverbs/backend.h"
#include "simverbs/sim/fabric/cma.h"
#include "simverbs/sim/fabric/host.h"
#include "simverbs/sim/fabric/wire.h"
#include "simverbs/sim/sim_backend.h"
#include "tests/multiprocess/hostile_wire.h"

namespace softrpma::hostile {
namespace {

constexpr char kAddr[] = "127.0.0.1";
constexpr uint16_t kPort = 7420;
constexpr char kPortText[] = "7420";
constexpr size_t kSecretBytes = 4096;
constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kRegionBytes = kMiB;
constexpr size_t kClientBytes = 64;  // the legit client's write: the region's last bytes

// A correct NIC caps what it buffers for a peer at ~256 MiB per connection; the victim's peak
// RSS must stay under twice that. Under a sanitizer every byte costs several (shadow memory,
// ASan's quarantine of freed blocks), so the bound grows with it; what still fails there is
// a connection the flood does not end.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr long kMaxVictimRssKiB = 3 * 1024 * 1024;
#else
constexpr long kMaxVictimRssKiB = 512 * 1024;
#endif

// Bounds against hangs (not timing assertions).
constexpr int kReplyMs = 10000;       // a child's answer on its pipe; a response on the wire
constexpr int kEndMs = 10000;         // a connection the victim must end now
constexpr int kStuckEndMs = 60000;    // a connection stuck in a copy (the fix: ~10 s)
constexpr int kClientLimitS = 30;     // the legit client's whole run (its alarm)
constexpr int kChildLifetimeS = 280;  // every child's alarm: none outlives the test

alignas(64) uint8_t g_secret[kSecretBytes];
// The proof-of-reach word (wire::kProbeMagic) at one address in every process of the test.
alignas(8) const volatile uint64_t g_probe_word = wire::kProbeMagic;

uint64_t ProbeAddr() { return reinterpret_cast<uintptr_t>(&g_probe_word); }
uint64_t SecretAddr() { return reinterpret_cast<uintptr_t>(g_secret); }

uint8_t SecretByte(size_t i) { return static_cast<uint8_t>(i * 7 + 3); }
uint8_t RegionByte(size_t i) { return static_cast<uint8_t>(0x5a ^ (i * 13)); }
uint8_t ClientByte(size_t i) { return static_cast<uint8_t>(0xc0 + i); }

void FillSecret() {
  for (size_t i = 0; i < kSecretBytes; ++i) g_secret[i] = SecretByte(i);
}

bool SecretIntact(const uint8_t* secret) {
  for (size_t i = 0; i < kSecretBytes; ++i) {
    if (secret[i] != SecretByte(i)) return false;
  }
  return true;
}

uint64_t Fnv1a(const uint8_t* data, size_t size) {
  uint64_t hash = 1469598103934665603ULL;
  for (size_t i = 0; i < size; ++i) hash = (hash ^ data[i]) * 1099511628211ULL;
  return hash;
}

// ---- Children and their pipes ------------------------------------------------------------

// What a child tells the parent: once when it is ready (its hello), then once per command.
struct Report {
  int32_t pid = 0;
  int32_t error_line = 0;  // a setup step of the child failed at this line
  uint64_t region_addr = 0;
  uint64_t region_len = 0;
  uint32_t rkey = 0;
  uint32_t qp_num = 0;  // verbs children: their QP
  uint32_t desc_size = 0;
  uint8_t desc[64] = {};
  uint32_t requests_seen = 0;  // CONNECT_REQUESTs the victim's application got
  uint32_t conns_open = 0;
  uint32_t secret_intact = 0;
  uint32_t recv_completions = 0;  // verbs victim: receives completed successfully
  uint64_t region_hash = 0;       // of the region but its last kClientBytes
  uint32_t client_tail_ok = 0;    // the region's last kClientBytes are the legit client's
  int32_t wc_status = -1;         // verbs peer: its SEND's completion (-1: none came)
};

// What the parent asks.
struct Command {
  char op = 0;  // 'S' status, 'R' re-arm the secret then status, 'C' (verbs peer) connect
  int32_t pid = 0;
  uint32_t qp_num = 0;
};

bool WriteFull(int fd, const void* data, size_t size) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (size > 0) {
    const ssize_t n = write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// Reads exactly `size` bytes within `timeout_ms`; false on EOF (the writer died) or timeout.
bool ReadFull(int fd, void* data, size_t size, int timeout_ms) {
  auto* p = static_cast<uint8_t*>(data);
  const int64_t deadline = NowMs() + timeout_ms;
  while (size > 0) {
    const int64_t left = deadline - NowMs();
    if (left <= 0) return false;
    pollfd pfd{fd, POLLIN, 0};
    const int ready = poll(&pfd, 1, static_cast<int>(left));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return false;
    const ssize_t n = read(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

struct Child {
  pid_t pid = -1;
  int to = -1;    // commands, parent -> child
  int from = -1;  // reports, child -> parent
};

// Forks a child that runs `main(from_parent, to_parent)` and then _exit(0)s. The child dies
// with the parent (PR_SET_PDEATHSIG) and at its alarm at the latest.
Child Spawn(const std::function<void(int, int)>& main) {
  int down[2];
  int up[2];
  Child child;
  if (pipe2(down, O_CLOEXEC) != 0) return child;
  if (pipe2(up, O_CLOEXEC) != 0) {
    close(down[0]);
    close(down[1]);
    return child;
  }
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(99);
    alarm(kChildLifetimeS);
    signal(SIGPIPE, SIG_IGN);
    close(down[1]);
    close(up[0]);
    main(down[0], up[1]);
    _exit(0);
  }
  close(down[0]);
  close(up[1]);
  if (pid < 0) {
    close(down[1]);
    close(up[0]);
    return child;
  }
  child.pid = pid;
  child.to = down[1];
  child.from = up[0];
  return child;
}

// Waits up to `timeout_ms` for `pid` to exit. Returns its wait status, or -1 (still running).
int WaitExit(pid_t pid, int timeout_ms) {
  const int64_t deadline = NowMs() + timeout_ms;
  while (true) {
    int status = 0;
    const pid_t got = waitpid(pid, &status, WNOHANG);
    if (got == pid) return status;
    if (got < 0) return -1;
    if (NowMs() >= deadline) return -1;
    usleep(10 * 1000);
  }
}

std::string DescribeExit(int status) {
  if (status == -1) return "still running at the bound";
  if (WIFEXITED(status)) return "exited " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("killed by ") + strsignal(WTERMSIG(status));
  return "status " + std::to_string(status);
}

// The peak (field "VmHWM") or current ("VmRSS") resident size of `pid` in KiB, from
// /proc/<pid>/status; -1 when it is gone.
long ProcKiB(pid_t pid, const char* field) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  const std::string prefix = std::string(field) + ":";
  while (std::getline(status, line)) {
    if (line.compare(0, prefix.size(), prefix) == 0) return std::atol(line.c_str() + prefix.size());
  }
  return -1;
}

// ---- The CM victim: a librpma server ------------------------------------------------------

#define VICTIM_CHECK(cond)                     \
  do {                                         \
    if (!(cond)) {                             \
      report.error_line = __LINE__;            \
      WriteFull(out, &report, sizeof(report)); \
      _exit(1);                                \
    }                                          \
  } while (0)

void SetNonBlocking(int fd) {
  const int flags = fcntl(fd, F_GETFL);
  if (flags >= 0) fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

// A connection the victim accepted ends: its completions taken, disconnected, deleted.
void EndConn(rpma_conn** conn) {
  rpma_cq* cq = nullptr;
  if (rpma_conn_get_cq(*conn, &cq) == 0) {
    ibv_wc wc[8];
    int got = 0;
    while (rpma_cq_get_wc(cq, 8, wc, &got) == 0 && got > 0) {
    }
  }
  rpma_conn_disconnect(*conn);
  rpma_conn_delete(conn);
}

// Listens at kAddr:kPort with a registered region of `region_len` bytes (never g_secret),
// accepts every connection request (posting no receive), ends a connection when its peer does,
// and answers the parent's commands.
void CmVictimMain(int in, int out, size_t region_len) {
  Report report;
  report.pid = getpid();
  FillSecret();
  auto* region = static_cast<uint8_t*>(aligned_alloc(4096, region_len));
  VICTIM_CHECK(region != nullptr);
  for (size_t i = 0; i < region_len; ++i) region[i] = RegionByte(i);
  rpma_log_set_threshold(RPMA_LOG_THRESHOLD, RPMA_LOG_DISABLED);
  rpma_log_set_threshold(RPMA_LOG_THRESHOLD_AUX, RPMA_LOG_DISABLED);
  ibv_context* ctx = nullptr;
  VICTIM_CHECK(rpma_utils_get_ibv_context(kAddr, RPMA_UTIL_IBV_CONTEXT_LOCAL, &ctx) == 0);
  rpma_peer* peer = nullptr;
  VICTIM_CHECK(rpma_peer_new(ctx, &peer) == 0);
  rpma_ep* ep = nullptr;
  VICTIM_CHECK(rpma_ep_listen(peer, kAddr, kPortText, &ep) == 0);
  rpma_mr_local* mr = nullptr;
  const int usage = RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_RECV |
                    RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY;
  VICTIM_CHECK(rpma_mr_reg(peer, region, region_len, usage, &mr) == 0);
  size_t desc_size = 0;
  VICTIM_CHECK(rpma_mr_get_descriptor_size(mr, &desc_size) == 0 &&
               desc_size <= sizeof(report.desc));
  VICTIM_CHECK(rpma_mr_get_descriptor(mr, report.desc) == 0);
  report.desc_size = static_cast<uint32_t>(desc_size);
  std::memcpy(&report.region_addr, report.desc, 8);  // mr.cc's layout, this host's order
  std::memcpy(&report.rkey, report.desc + 16, 4);
  VICTIM_CHECK(report.region_addr == reinterpret_cast<uintptr_t>(region));
  report.region_len = region_len;
  int ep_fd = -1;
  VICTIM_CHECK(rpma_ep_get_fd(ep, &ep_fd) == 0);
  SetNonBlocking(ep_fd);
  VICTIM_CHECK(WriteFull(out, &report, sizeof(report)));

  std::vector<rpma_conn*> conns;
  std::vector<int> conn_fds;
  while (true) {
    std::vector<pollfd> fds = {{in, POLLIN, 0}, {ep_fd, POLLIN, 0}};
    for (int fd : conn_fds) fds.push_back({fd, POLLIN, 0});
    poll(fds.data(), fds.size(), 100);
    if ((fds[0].revents & (POLLIN | POLLHUP)) != 0) {
      Command command;
      if (!ReadFull(in, &command, sizeof(command), kReplyMs)) _exit(0);  // the parent is gone
      if (command.op == 'R') FillSecret();
      report.conns_open = static_cast<uint32_t>(conns.size());
      report.secret_intact = SecretIntact(g_secret) ? 1 : 0;
      report.region_hash = Fnv1a(region, region_len - kClientBytes);
      bool tail = true;
      for (size_t i = 0; i < kClientBytes; ++i) {
        tail = tail && region[region_len - kClientBytes + i] == ClientByte(i);
      }
      report.client_tail_ok = tail ? 1 : 0;
      if (!WriteFull(out, &report, sizeof(report))) _exit(0);
    }
    rpma_conn_req* req = nullptr;
    while (rpma_ep_next_conn_req(ep, nullptr, &req) == 0) {
      ++report.requests_seen;
      rpma_conn* conn = nullptr;
      if (rpma_conn_req_connect(&req, nullptr, &conn) != 0) continue;  // its peer went
      int fd = -1;
      rpma_conn_get_event_fd(conn, &fd);
      SetNonBlocking(fd);
      conns.push_back(conn);
      conn_fds.push_back(fd);
    }
    for (size_t i = 0; i < conns.size();) {
      rpma_conn_event event = RPMA_CONN_UNDEFINED;
      bool ended = false;
      while (rpma_conn_next_event(conns[i], &event) == 0) {
        if (event != RPMA_CONN_ESTABLISHED) ended = true;
      }
      if (ended) {
        EndConn(&conns[i]);
        conns.erase(conns.begin() + static_cast<long>(i));
        conn_fds.erase(conn_fds.begin() + static_cast<long>(i));
      } else {
        ++i;
      }
    }
  }
}

// ---- The legit client ---------------------------------------------------------------------

// Connects to the victim as any librpma client does, writes kClientBytes to the end of its
// region and disconnects. Exits 0, or the number of the step that failed; its alarm bounds it.
// Connects to the victim as any librpma client does (its alarm bounds it); exits with the
// number of the step that failed (2 to 6).
rpma_conn* ConnectOrExit(rpma_peer** peer) {
  alarm(kClientLimitS);
  rpma_log_set_threshold(RPMA_LOG_THRESHOLD, RPMA_LOG_DISABLED);
  rpma_log_set_threshold(RPMA_LOG_THRESHOLD_AUX, RPMA_LOG_DISABLED);
  ibv_context* ctx = nullptr;
  if (rpma_utils_get_ibv_context(kAddr, RPMA_UTIL_IBV_CONTEXT_REMOTE, &ctx) != 0) _exit(2);
  if (rpma_peer_new(ctx, peer) != 0) _exit(3);
  rpma_conn_req* req = nullptr;
  if (rpma_conn_req_new(*peer, kAddr, kPortText, nullptr, &req) != 0) _exit(4);
  rpma_conn* conn = nullptr;
  if (rpma_conn_req_connect(&req, nullptr, &conn) != 0) _exit(5);
  rpma_conn_event event = RPMA_CONN_UNDEFINED;
  if (rpma_conn_next_event(conn, &event) != 0 || event != RPMA_CONN_ESTABLISHED) _exit(6);
  return conn;
}

void LegitClientMain(const Report& victim) {
  rpma_peer* peer = nullptr;
  rpma_conn* conn = ConnectOrExit(&peer);
  rpma_conn_event event = RPMA_CONN_UNDEFINED;
  static uint8_t buf[kClientBytes];
  for (size_t i = 0; i < kClientBytes; ++i) buf[i] = ClientByte(i);
  rpma_mr_local* mr = nullptr;
  if (rpma_mr_reg(peer, buf, kClientBytes, RPMA_MR_USAGE_WRITE_SRC, &mr) != 0) _exit(7);
  rpma_mr_remote* remote = nullptr;
  if (rpma_mr_remote_from_descriptor(victim.desc, victim.desc_size, &remote) != 0) _exit(8);
  if (rpma_write(conn, remote, victim.region_len - kClientBytes, mr, 0, kClientBytes,
                 RPMA_F_COMPLETION_ALWAYS, nullptr) != 0) {
    _exit(9);
  }
  rpma_cq* cq = nullptr;
  if (rpma_conn_get_cq(conn, &cq) != 0) _exit(10);
  ibv_wc wc;
  int got = 0;
  int ret = 0;
  while ((ret = rpma_cq_get_wc(cq, 1, &wc, &got)) == RPMA_E_NO_COMPLETION) {
    if (rpma_cq_wait(cq) != 0) _exit(11);
  }
  if (ret != 0 || got != 1 || wc.status != IBV_WC_SUCCESS) _exit(12);
  if (rpma_conn_disconnect(conn) != 0) _exit(13);
  if (rpma_conn_next_event(conn, &event) != 0 || event != RPMA_CONN_CLOSED) _exit(14);
  if (rpma_conn_delete(&conn) != 0) _exit(15);
  _exit(0);
}

// ---- Verbs children (CM-less QPs, docs/FABRIC.md "QPs without the CM") --------------------

struct Verbs {
  Backend* backend = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;
  ibv_mr* mr = nullptr;
  uint8_t* buf = nullptr;
};

constexpr size_t kVerbsBufBytes = 4096;
constexpr int kRemoteAccess =
    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

// A PD, a CQ, an RC QP and a registered buffer on this process's simulated NIC. False when a
// step failed.
bool MakeVerbs(Verbs* v) {
  absl::StatusOr<Backend*> backend = sim::GetSimBackend();
  absl::StatusOr<ibv_context*> ctx = sim::GetSimContext();
  if (!backend.ok() || !ctx.ok()) return false;
  v->backend = *backend;
  if (v->backend->IbvAllocPd(*ctx, &v->pd) != 0) return false;
  if (v->backend->IbvCreateCq(*ctx, 64, nullptr, nullptr, 0, &v->cq) != 0) return false;
  ibv_qp_init_attr attr;
  std::memset(&attr, 0, sizeof(attr));
  attr.send_cq = v->cq;
  attr.recv_cq = v->cq;
  attr.cap.max_send_wr = 16;
  attr.cap.max_recv_wr = 16;
  attr.cap.max_send_sge = 1;
  attr.cap.max_recv_sge = 1;
  attr.qp_type = IBV_QPT_RC;
  if (v->backend->IbvCreateQp(v->pd, &attr, &v->qp) != 0) return false;
  v->buf = static_cast<uint8_t*>(aligned_alloc(4096, kVerbsBufBytes));
  if (v->buf == nullptr) return false;
  std::memset(v->buf, 0, kVerbsBufBytes);
  return v->backend->IbvRegMr(v->pd, v->buf, kVerbsBufBytes, kRemoteAccess, &v->mr) == 0;
}

constexpr int kInitMask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
constexpr int kRtrMask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                         IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
constexpr int kRtsMask = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                         IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;

// RESET -> INIT -> RTR (toward `dest_qp_num` of process `dest_pid`) -> RTS.
bool ConnectVerbs(Verbs* v, pid_t dest_pid, uint32_t dest_qp_num) {
  ibv_qp_attr attr;
  std::memset(&attr, 0, sizeof(attr));
  attr.qp_state = IBV_QPS_INIT;
  attr.port_num = 1;
  attr.qp_access_flags = kRemoteAccess;
  if (v->backend->IbvModifyQp(v->qp, &attr, kInitMask) != 0) return false;
  std::memset(&attr, 0, sizeof(attr));
  attr.qp_state = IBV_QPS_RTR;
  attr.path_mtu = IBV_MTU_1024;
  attr.dest_qp_num = dest_qp_num;
  attr.rq_psn = 1;
  attr.max_dest_rd_atomic = 1;
  attr.min_rnr_timer = 12;
  attr.ah_attr.is_global = 1;
  GidOfPid(dest_pid, attr.ah_attr.grh.dgid.raw);
  attr.ah_attr.grh.hop_limit = 1;
  attr.ah_attr.port_num = 1;
  if (v->backend->IbvModifyQp(v->qp, &attr, kRtrMask) != 0) return false;
  std::memset(&attr, 0, sizeof(attr));
  attr.qp_state = IBV_QPS_RTS;
  attr.sq_psn = 1;
  attr.timeout = 14;
  attr.retry_cnt = 7;
  attr.rnr_retry = 7;
  attr.max_rd_atomic = 1;
  return v->backend->IbvModifyQp(v->qp, &attr, kRtsMask) == 0;
}

// The verbs victim: its QP connected to `peer_qp_num` of process `peer_pid` (a third
// process), kVictimReceives receives posted; reports the receives that completed.
constexpr int kVictimReceives = 8;
void VerbsVictimMain(int in, int out, pid_t peer_pid, uint32_t peer_qp_num) {
  Report report;
  report.pid = getpid();
  FillSecret();
  Verbs v;
  VICTIM_CHECK(MakeVerbs(&v));
  report.qp_num = v.qp->qp_num;
  VICTIM_CHECK(ConnectVerbs(&v, peer_pid, peer_qp_num));
  for (int i = 0; i < kVictimReceives; ++i) {
    ibv_sge sge{reinterpret_cast<uintptr_t>(v.buf) + 64 * i, 64, v.mr->lkey};
    ibv_recv_wr wr;
    std::memset(&wr, 0, sizeof(wr));
    wr.wr_id = i;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    VICTIM_CHECK(v.backend->IbvPostRecv(v.qp, &wr, &bad) == 0);
  }
  VICTIM_CHECK(WriteFull(out, &report, sizeof(report)));
  while (true) {
    Command command;
    if (!ReadFull(in, &command, sizeof(command), 1000 * kChildLifetimeS)) _exit(0);
    ibv_wc wc[8];
    int polled = 0;
    while (v.backend->IbvPollCq(v.cq, 8, wc, &polled) == 0 && polled > 0) {
      for (int i = 0; i < polled; ++i) {
        if (wc[i].status == IBV_WC_SUCCESS && wc[i].opcode == IBV_WC_RECV) {
          ++report.recv_completions;
        }
      }
    }
    report.secret_intact = SecretIntact(g_secret) ? 1 : 0;
    if (!WriteFull(out, &report, sizeof(report))) _exit(0);
  }
}

// The verbs peer the victim's QP is connected to (the third process whose GID an attacker
// claims). On 'C' it connects its own QP back and sends one 64-byte message, and reports its
// completion's status.
void VerbsPeerMain(int in, int out) {
  Report report;
  report.pid = getpid();
  Verbs v;
  VICTIM_CHECK(MakeVerbs(&v));
  report.qp_num = v.qp->qp_num;
  VICTIM_CHECK(WriteFull(out, &report, sizeof(report)));
  Command command;
  if (!ReadFull(in, &command, sizeof(command), 1000 * kChildLifetimeS)) _exit(0);
  VICTIM_CHECK(command.op == 'C');
  VICTIM_CHECK(ConnectVerbs(&v, command.pid, command.qp_num));
  std::memset(v.buf, 0x77, 64);
  ibv_sge sge{reinterpret_cast<uintptr_t>(v.buf), 64, v.mr->lkey};
  ibv_send_wr wr;
  std::memset(&wr, 0, sizeof(wr));
  wr.wr_id = 1;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  VICTIM_CHECK(v.backend->IbvPostSend(v.qp, &wr, &bad) == 0);
  const int64_t deadline = NowMs() + kReplyMs;
  while (NowMs() < deadline) {
    ibv_wc wc;
    int polled = 0;
    if (v.backend->IbvPollCq(v.cq, 1, &wc, &polled) == 0 && polled == 1) {
      report.wc_status = wc.status;
      break;
    }
    usleep(1000);
  }
  WriteFull(out, &report, sizeof(report));
  ReadFull(in, &command, sizeof(command), 1000 * kChildLifetimeS);  // until the parent is done
}

// ---- The attacker's side ------------------------------------------------------------------

wire::Header Request(wire::Type type, uint64_t seq) {
  wire::Header header = wire::MakeHeader(type);
  header.seq = seq;
  return header;
}

// A raw connection to the victim's listener. Closed with the object.
struct RawConn {
  int fd = -1;
  bool accepted = false;  // the victim's NIC answered the REQ with a REP
  bool refused = false;   // it ended the connection (REJ or close) instead
  wire::AcceptBody accept{};
  RawConn() = default;
  RawConn(const RawConn&) = delete;
  RawConn& operator=(const RawConn&) = delete;
  ~RawConn() {
    if (fd >= 0) close(fd);
  }
};

std::string TypeName(uint16_t type) {
  switch (static_cast<wire::Type>(type)) {
    case wire::Type::kAccept:
      return "kAccept";
    case wire::Type::kReject:
      return "kReject";
    case wire::Type::kAck:
      return "kAck";
    case wire::Type::kReadResponse:
      return "kReadResponse";
    case wire::Type::kDisconnect:
      return "kDisconnect";
    default:
      return "type " + std::to_string(type);
  }
}

// Dials the victim's listener and sends a CONNECT_REQUEST claiming process `pid` with the
// proof word at `probe_addr`. When the victim accepts, sends the RTU (no kFlagCma: the victim
// does not copy toward us on its own). *conn says which came.
void Connect(const std::string& fabric, int32_t pid, uint64_t probe_addr, RawConn* conn) {
  conn->fd = DialAbstract(ListenerSocketName(fabric, kAddr, kPort));
  ASSERT_GE(conn->fd, 0) << "dial: " << strerror(errno);
  const wire::ConnectBody body = MakeConnectBody(kPort, 40000, pid, probe_addr, 0x4242);
  ASSERT_EQ(SendMessage(conn->fd, wire::MakeHeader(wire::Type::kConnectRequest), &body,
                        sizeof(body), kReplyMs),
            SendResult::kSent);
  wire::Header header;
  std::vector<uint8_t> reply;
  const ReadResult got = ReadMessage(conn->fd, kReplyMs, &header, &reply);
  if (got == ReadResult::kClosed) {
    conn->refused = true;
    return;
  }
  ASSERT_EQ(got, ReadResult::kMessage) << "no answer to the REQ within the bound";
  if (header.type == static_cast<uint16_t>(wire::Type::kReject)) {
    conn->refused = true;
    return;
  }
  ASSERT_EQ(header.type, static_cast<uint16_t>(wire::Type::kAccept)) << TypeName(header.type);
  // A REP is sent up to its private data (wire.h): as long as the body that came, at most.
  ASSERT_LE(reply.size(), sizeof(conn->accept));
  wire::ReadCmBody(reply.data(), static_cast<uint32_t>(reply.size()), &conn->accept);
  conn->accepted = true;
  ASSERT_EQ(SendMessage(conn->fd, wire::MakeHeader(wire::Type::kReady), nullptr, 0, kReplyMs),
            SendResult::kSent);
}

// What came back for a request: a response, or the end of the connection.
struct Outcome {
  bool closed = false;
  bool answered = false;
  wire::Header response{};
  std::string Describe() const {
    if (closed) return "the connection ended";
    if (!answered) return "nothing within the bound";
    return TypeName(response.type) + " status " + std::to_string(response.status);
  }
};

Outcome AwaitResponse(int fd, int timeout_ms) {
  Outcome outcome;
  wire::Header header;
  std::vector<uint8_t> body;
  const ReadResult got = ReadMessage(fd, timeout_ms, &header, &body);
  if (got == ReadResult::kClosed) outcome.closed = true;
  if (got == ReadResult::kMessage) {
    outcome.answered = true;
    outcome.response = header;
  }
  return outcome;
}

// Pages of this process that fault for ever: registered with a userfaultfd in missing mode
// whose faults nobody resolves. Whoever touches them (a process_vm_readv of another process
// too) waits until the userfaultfd is closed.
class StuckPages {
 public:
  StuckPages() = default;
  StuckPages(const StuckPages&) = delete;
  StuckPages& operator=(const StuckPages&) = delete;
  ~StuckPages() {
    if (uffd_ >= 0) close(uffd_);  // first: wakes whoever waits, the mapping is theirs again
    if (addr_ != MAP_FAILED) munmap(addr_, bytes_);
  }

  // Maps `bytes` and registers them. Returns 0, or the errno of the step named in *step.
  // A child forked after this holds the userfaultfd open (the pages stay stuck until it exits
  // too); one forked before it knows nothing of it.
  int Make(size_t bytes, const char** step) {
    uffd_ = static_cast<int>(syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK));
    if (uffd_ < 0) {
      *step = "userfaultfd";
      return errno;
    }
    uffdio_api api;
    std::memset(&api, 0, sizeof(api));
    api.api = UFFD_API;
    if (ioctl(uffd_, UFFDIO_API, &api) != 0) {
      *step = "UFFDIO_API";
      return errno;
    }
    bytes_ = bytes;
    addr_ = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (addr_ == MAP_FAILED) {
      *step = "mmap";
      return errno;
    }
    uffdio_register reg;
    std::memset(&reg, 0, sizeof(reg));
    reg.range.start = reinterpret_cast<uintptr_t>(addr_);
    reg.range.len = bytes;
    reg.mode = UFFDIO_REGISTER_MODE_MISSING;
    if (ioctl(uffd_, UFFDIO_REGISTER, &reg) != 0) {
      *step = "UFFDIO_REGISTER";
      return errno;
    }
    return 0;
  }

  uint64_t addr() const { return reinterpret_cast<uintptr_t>(addr_); }

  // True when somebody faulted on the pages within `timeout_ms`.
  bool AwaitFault(int timeout_ms) {
    pollfd p{uffd_, POLLIN, 0};
    if (poll(&p, 1, timeout_ms) != 1) return false;
    uffd_msg msg;
    return read(uffd_, &msg, sizeof(msg)) == sizeof(msg) && msg.event == UFFD_EVENT_PAGEFAULT;
  }

 private:
  int uffd_ = -1;
  void* addr_ = MAP_FAILED;
  size_t bytes_ = 0;
};

// ---- The fixture --------------------------------------------------------------------------

class HostilePeerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static int serial = 0;
    fabric_ = "hostile-" + std::to_string(getpid()) + "-" + std::to_string(++serial);
    setenv("RPMA_BACKEND", "sim", 1);
    setenv("RPMA_SIM_FABRIC", fabric_.c_str(), 1);
    signal(SIGPIPE, SIG_IGN);
    FillSecret();  // the parent's copy: what every child (a sleeping third one too) inherits
  }

  void TearDown() override {
    for (Child& child : children_) {
      if (child.pid > 0) {
        kill(child.pid, SIGKILL);
        const int status = WaitExit(child.pid, 10000);
        EXPECT_NE(status, -1) << "child " << child.pid << " did not die";
      }
      if (child.to >= 0) close(child.to);
      if (child.from >= 0) close(child.from);
    }
    children_.clear();
  }

  // Forks `main` and reads its hello. A child that fails its setup fails the test.
  Child& Start(const std::function<void(int, int)>& main, Report* hello) {
    children_.push_back(Spawn(main));
    Child& child = children_.back();
    EXPECT_GT(child.pid, 0) << "fork: " << strerror(errno);
    if (child.pid <= 0) return child;
    const bool got = ReadFull(child.from, hello, sizeof(*hello), kReplyMs);
    EXPECT_TRUE(got) << "child " << child.pid
                     << " sent no hello: " << DescribeExit(WaitExit(child.pid, 0));
    if (got) {
      EXPECT_EQ(hello->error_line, 0) << "child setup failed at line " << hello->error_line;
    }
    return child;
  }

  void StartCmVictim(size_t region_len) {
    victim_ = &Start([region_len](int in, int out) { CmVictimMain(in, out, region_len); }, &hello_);
    ASSERT_GT(victim_->pid, 0);
    ASSERT_EQ(hello_.error_line, 0);
    ASSERT_NE(hello_.region_addr, 0u);
  }

  // The victim's report on `op`; false when it did not answer within the bound (dead or hung).
  bool Ask(const Child& child, char op, Report* report) {
    Command command;
    command.op = op;
    if (!WriteFull(child.to, &command, sizeof(command))) return false;
    return ReadFull(child.from, report, sizeof(*report), kReplyMs);
  }

  // The victim is running (not reaped) and answers.
  bool VictimAlive(Report* report, std::string* why) {
    if (victim_ == nullptr || victim_->pid <= 0) {
      *why = "the victim is gone";
      return false;
    }
    int status = 0;
    if (waitpid(victim_->pid, &status, WNOHANG) == victim_->pid) {
      *why = "the victim died: " + DescribeExit(status);
      victim_->pid = -1;
      return false;
    }
    if (!Ask(*victim_, 'S', report)) {
      const int exited = WaitExit(victim_->pid, 1000);
      if (exited != -1) victim_->pid = -1;
      *why = "the victim does not answer: " + DescribeExit(exited);
      return false;
    }
    return true;
  }

  // A legit librpma client (a child) connects and completes an RDMA write: "" or what failed.
  std::string LegitClientWrites() {
    const Report victim = hello_;
    children_.push_back(Spawn([victim](int, int) { LegitClientMain(victim); }));
    Child& client = children_.back();
    if (client.pid <= 0) return "fork failed";
    const int status = WaitExit(client.pid, (kClientLimitS + 5) * 1000);
    if (status != -1) client.pid = -1;  // reaped
    if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      return "the legit client " + DescribeExit(status) +
             " (exit n: the step of LegitClientMain that failed; SIGALRM: it hung)";
    }
    Report report;
    if (!Ask(*victim_, 'S', &report)) return "the victim does not answer";
    if (report.client_tail_ok == 0) return "the client's write did not land";
    return "";
  }

  // After an attack: the victim is alive, g_secret intact, a legit client still served.
  void ExpectVictimUnharmed(const std::string& after) {
    Report report;
    std::string why;
    ASSERT_TRUE(VictimAlive(&report, &why)) << after << ": " << why;
    EXPECT_EQ(report.secret_intact, 1u) << after << ": the victim's g_secret was written";
    EXPECT_EQ(LegitClientWrites(), "") << after;
  }

  std::string fabric_;
  std::deque<Child> children_;  // a deque: push_back keeps references to the others valid
  Child* victim_ = nullptr;
  Report hello_;
};

// ---- Attack 0: an 8-byte atomic write flagged as cross-memory attach -----------------------

// kFlagCma belongs to kWrite / kSend / kRead (and their responses, kReady): on a kAtomicWrite
// it made the responder skip the rkey check (a zero "length" of CMA bytes) and store the word
// anywhere. A flag that does not belong to the type makes the message malformed: the victim
// ends that connection and stores nothing.
TEST_F(HostilePeerTest, Attack0_AtomicWriteWithCmaFlag_EndsConnectionAndStoresNothing) {
  ASSERT_NO_FATAL_FAILURE(StartCmVictim(kRegionBytes));
  const uint64_t word = 0x4141414141414141ULL;
  // Regression: a well-formed atomic with the right key at a wild address is refused by the
  // key check (REM_ACCESS_ERR; the connection may end too) and crashes nothing. (First: the
  // malformed ones below crash the victim on the current code.)
  {
    SCOPED_TRACE("well-formed, right key, at a wild address");
    RawConn conn;
    ASSERT_NO_FATAL_FAILURE(Connect(fabric_, getpid(), 0, &conn));
    ASSERT_TRUE(conn.accepted);
    wire::Header atomic = Request(wire::Type::kAtomicWrite, 1);
    atomic.remote_addr = 0xdead0000;
    atomic.rkey = hello_.rkey;
    ASSERT_EQ(SendMessage(conn.fd, atomic, &word, sizeof(word), kReplyMs), SendResult::kSent);
    const Outcome outcome = AwaitResponse(conn.fd, kReplyMs);
    EXPECT_TRUE(outcome.closed ||
                (outcome.answered && outcome.response.status == IBV_WC_REM_ACCESS_ERR))
        << outcome.Describe();
  }
  struct Variant {
    const char* name;
    uint16_t flags;
    uint64_t length;
    uint64_t remote_addr;
  };
  const Variant variants[] = {
      {"kFlagCma, length 0, at g_secret", wire::kFlagCma, 0, SecretAddr()},
      {"no flag, length 8 (an atomic has no length), at g_secret", 0, 8, SecretAddr()},
      {"kFlagCma, length 0, at a wild address", wire::kFlagCma, 0, 0xdead0000},
  };
  for (const Variant& variant : variants) {
    SCOPED_TRACE(variant.name);
    RawConn conn;
    ASSERT_NO_FATAL_FAILURE(Connect(fabric_, getpid(), 0, &conn));
    ASSERT_TRUE(conn.accepted);
    wire::Header atomic = Request(wire::Type::kAtomicWrite, 1);
    atomic.flags = variant.flags;
    atomic.length = variant.length;
    atomic.remote_addr = variant.remote_addr;
    atomic.rkey = hello_.rkey ^ 0x5a5a;  // a wrong key
    // Malformed in its header: the victim may end the connection before the body is written
    // (EPIPE: seen under ThreadSanitizer's slower victim); the end is what is checked below.
    const SendResult sent = SendMessage(conn.fd, atomic, &word, sizeof(word), kReplyMs);
    ASSERT_TRUE(sent == SendResult::kSent || sent == SendResult::kClosed)
        << "the victim took no header: " << static_cast<int>(sent);
    std::vector<wire::Header> seen;
    const bool closed = AwaitClosed(conn.fd, kEndMs, &seen);
    std::string answers;
    for (const wire::Header& h : seen) {
      answers += TypeName(h.type) + " " + std::to_string(h.status) + "; ";
    }
    EXPECT_TRUE(closed) << "the victim kept the connection of a malformed atomic; answers: "
                        << answers;
    for (const wire::Header& h : seen) {
      EXPECT_NE(h.status, IBV_WC_SUCCESS) << "the malformed atomic was acknowledged";
    }
    Report report;
    std::string why;
    ASSERT_TRUE(VictimAlive(&report, &why)) << why;
    EXPECT_EQ(report.secret_intact, 1u) << "the atomic stored into g_secret";
    ASSERT_TRUE(Ask(*victim_, 'R', &report));  // the pattern again, for the next variant
  }
  ExpectVictimUnharmed("after the malformed atomics");
}

// ---- One connection, one CM exchange ------------------------------------------------------

// A second REQ on a connection that already carried one, right behind a DREQ: the fabric
// fuzzer found that when the victim's application deleted the first connection's id while its
// fabric thread was handing that REQ over, the REQ became a new CONNECT_REQUEST on the old
// connection, which the next accept answered there (so a later good client's REP never came).
// A second REQ must end the connection and reach no application, whenever it comes. (The
// window is narrow: on the old code this failed only now and then; the fuzzer's input is a
// seed of fabric_listener.)
TEST_F(HostilePeerTest, SecondReqOnOneConnection_EndsItAndReachesNoApplication) {
  ASSERT_NO_FATAL_FAILURE(StartCmVictim(kRegionBytes));
  Report report;
  ASSERT_TRUE(Ask(*victim_, 'Q', &report));
  RawConn conn;
  ASSERT_NO_FATAL_FAILURE(Connect(fabric_, getpid(), 0, &conn));
  ASSERT_TRUE(conn.accepted);
  const uint32_t requests_before = report.requests_seen + 1;  // the first REQ's
  const wire::ConnectBody body = MakeConnectBody(kPort, 40001, getpid(), 0, 0x4343);
  ASSERT_EQ(SendMessage(conn.fd, wire::MakeHeader(wire::Type::kDisconnect), nullptr, 0,
                        kReplyMs),
            SendResult::kSent);
  // The victim may have closed the connection already (its id gone): then the REQ is not sent.
  SendMessage(conn.fd, wire::MakeHeader(wire::Type::kConnectRequest), &body, sizeof(body),
              kReplyMs);
  std::vector<wire::Header> seen;
  const bool closed = AwaitClosed(conn.fd, kEndMs, &seen);
  std::string answers;
  for (const wire::Header& h : seen) answers += TypeName(h.type) + "; ";
  EXPECT_TRUE(closed) << "a second REQ on one connection left it open; it answered: " << answers;
  for (const wire::Header& h : seen) {
    EXPECT_NE(h.type, static_cast<uint16_t>(wire::Type::kAccept)) << "the second REQ was accepted";
  }
  // The victim's application sees its first connection end (and deletes it) in its own time.
  const int64_t deadline = NowMs() + kEndMs;
  do {
    ASSERT_TRUE(Ask(*victim_, 'Q', &report));
  } while (report.conns_open != 0 && NowMs() < deadline);
  EXPECT_EQ(report.conns_open, 0u) << "the victim still holds a connection";
  EXPECT_EQ(report.requests_seen, requests_before) << "the second REQ reached the application";
  ExpectVictimUnharmed("after a second REQ on one connection");
}

// A REQ is sent up to its private data (wire.h, PRIVATE DATA): one whose private_data_len
// claims more than its body holds lies, and must end at the REQ, reaching no application,
// whatever the length (here 255, the most, in a body holding 10).
TEST_F(HostilePeerTest, ReqClaimingMorePrivateDataThanItsBody_EndsItAndReachesNoApplication) {
  ASSERT_NO_FATAL_FAILURE(StartCmVictim(kRegionBytes));
  Report report;
  ASSERT_TRUE(Ask(*victim_, 'Q', &report));
  const uint32_t requests_before = report.requests_seen;
  RawConn conn;
  conn.fd = DialAbstract(ListenerSocketName(fabric_, kAddr, kPort));
  ASSERT_GE(conn.fd, 0) << "dial: " << strerror(errno);
  wire::ConnectBody body = MakeConnectBody(kPort, 40002, getpid(), 0, 0x4444);
  body.private_data_len = 10;
  const uint32_t body_len = wire::CmBodyBytes(body);
  body.private_data_len = wire::kMaxPrivateData;

  ASSERT_EQ(SendMessage(conn.fd, wire::MakeHeader(wire::Type::kConnectRequest), &body, body_len,
                        kReplyMs),
            SendResult::kSent);

  std::vector<wire::Header> seen;
  const bool closed = AwaitClosed(conn.fd, kEndMs, &seen);
  std::string answers;
  for (const wire::Header& h : seen) answers += TypeName(h.type) + "; ";
  EXPECT_TRUE(closed) << "a REQ lying about its private data left the connection open; it "
                         "answered: "
                      << answers;
  for (const wire::Header& h : seen) {
    EXPECT_NE(h.type, static_cast<uint16_t>(wire::Type::kAccept)) << "the lying REQ was accepted";
  }
  ASSERT_TRUE(Ask(*victim_, 'Q', &report));
  EXPECT_EQ(report.requests_seen, requests_before) << "the lying REQ reached the application";
  ExpectVictimUnharmed("after a REQ claiming more private data than it sent");
}

// A SIDR REQ (wire::kFlagSidr, an RDMA_PS_UDP id's) at a listener of RC ids names a service
// nobody offers there: it is refused with a REJ of reason "no listener" (which a UD requester
// reports as IB_SIDR_UNSUPPORTED), the connection closes, and no application sees it. Its
// private data may claim the whole 255 bytes: none of it is taken.
TEST_F(HostilePeerTest, SidrReqAtAnRcListener_RefusedAndReachesNoApplication) {
  ASSERT_NO_FATAL_FAILURE(StartCmVictim(kRegionBytes));
  Report report;
  ASSERT_TRUE(Ask(*victim_, 'Q', &report));
  const uint32_t requests_before = report.requests_seen;
  RawConn conn;
  conn.fd = DialAbstract(ListenerSocketName(fabric_, kAddr, kPort));
  ASSERT_GE(conn.fd, 0) << "dial: " << strerror(errno);
  wire::ConnectBody body = MakeConnectBody(kPort, 40003, getpid(), 0, 0);
  body.private_data_len = wire::kMaxPrivateData;
  wire::Header header = wire::MakeHeader(wire::Type::kConnectRequest);
  header.flags = wire::kFlagSidr;

  ASSERT_EQ(SendMessage(conn.fd, header, &body, wire::CmBodyBytes(body), kReplyMs),
            SendResult::kSent);

  std::vector<wire::Header> seen;
  const bool closed = AwaitClosed(conn.fd, kEndMs, &seen);
  EXPECT_TRUE(closed) << "a SIDR REQ at an RC listener left the connection open";
  ASSERT_EQ(seen.size(), 1u) << "expected one answer, a REJ";
  EXPECT_EQ(seen[0].type, static_cast<uint16_t>(wire::Type::kReject));
  EXPECT_EQ(seen[0].status, 8);  // IB_CM_REJ_INVALID_SERVICE_ID (cm.h, kRejectNoListener)
  ASSERT_TRUE(Ask(*victim_, 'Q', &report));
  EXPECT_EQ(report.requests_seen, requests_before) << "the SIDR REQ reached the application";
  ExpectVictimUnharmed("after a SIDR REQ at a listener of RC ids");
}

// A fault's broken exchange (wire::kFlagBroken) on a REJ or a DREQ only ends what it names: a
// peer may end its own connection with it (any status, even an absurd one), never more. A
// broken REJ toward the passive side, which never sent a REQ of its own, is ignored; the broken
// DREQ ends the connection as the victim's application sees a connection end.
TEST_F(HostilePeerTest, BrokenRejAndDreq_EndOnlyThePeersOwnConnection) {
  ASSERT_NO_FATAL_FAILURE(StartCmVictim(kRegionBytes));
  RawConn conn;
  ASSERT_NO_FATAL_FAILURE(Connect(fabric_, getpid(), 0, &conn));
  ASSERT_TRUE(conn.accepted);
  Report report;
  const int64_t accepted_by = NowMs() + kEndMs;
  do {
    ASSERT_TRUE(Ask(*victim_, 'Q', &report));
  } while (report.conns_open != 1 && NowMs() < accepted_by);
  ASSERT_EQ(report.conns_open, 1u) << "the victim's application holds no connection to end";
  wire::RejectBody reject{};
  wire::Header rej = wire::MakeHeader(wire::Type::kReject);
  rej.flags = wire::kFlagBroken;
  rej.status = -12345;
  ASSERT_EQ(SendMessage(conn.fd, rej, &reject, sizeof(reject), kReplyMs), SendResult::kSent);
  wire::Header dreq = wire::MakeHeader(wire::Type::kDisconnect);
  dreq.flags = wire::kFlagBroken;
  dreq.status = 0x7fffffff;
  ASSERT_EQ(SendMessage(conn.fd, dreq, nullptr, 0, kReplyMs), SendResult::kSent);
  const int64_t deadline = NowMs() + kEndMs;
  do {
    ASSERT_TRUE(Ask(*victim_, 'Q', &report));
  } while (report.conns_open != 0 && NowMs() < deadline);
  EXPECT_EQ(report.conns_open, 0u) << "a broken DREQ left the victim's connection open";
  ExpectVictimUnharmed("after a broken REJ and DREQ");
}

// ---- Attack 1: a forged pid, and CMA without a proof of reach -----------------------------

// The victim reads a CMA request's bytes from (or writes a CMA read's into) the process the REQ
// names. A REQ naming a process other than the one at the other end of the socket
// (SO_PEERCRED) must end at the REQ: no CONNECT_REQUEST reaches the application, no copy is
// ever made toward that process. Here the follow-up shows why: a CMA read whose destination is
// g_secret, in the named process.
TEST_F(HostilePeerTest, Attack1_ForgedPid_RefusedAtTheRequestAndNoCmaTowardIt) {
  ASSERT_NO_FATAL_FAILURE(StartCmVictim(kRegionBytes));
  // A third process that only sleeps (it has g_secret, filled, at the same address).
  Report sleeper_hello;
  Child& sleeper = Start(
      [](int in, int out) {
        Report r;
        r.pid = getpid();
        WriteFull(out, &r, sizeof(r));
        Command c;
        ReadFull(in, &c, sizeof(c), 1000 * kChildLifetimeS);
      },
      &sleeper_hello);
  ASSERT_GT(sleeper.pid, 0);
  const pid_t sleeper_pid = sleeper.pid;

  struct Forged {
    const char* name;
    pid_t pid;
  };
  const Forged forged[] = {{"the victim's own pid", hello_.pid},
                           {"an unrelated process's pid", sleeper_pid}};
  for (const Forged& f : forged) {
    SCOPED_TRACE(f.name);
    Report before;
    std::string why;
    ASSERT_TRUE(VictimAlive(&before, &why)) << why;
    RawConn conn;
    ASSERT_NO_FATAL_FAILURE(Connect(fabric_, f.pid, ProbeAddr(), &conn));
    EXPECT_TRUE(conn.refused) << "the victim's NIC accepted a REQ whose pid is not its sender's";
    if (conn.accepted) {
      // What a NIC that believed the pid does: copies the region into g_secret of that process.
      wire::Header read = Request(wire::Type::kRead, 1);
      read.flags = wire::kFlagCma;
      read.length = kSecretBytes;
      read.remote_addr = hello_.region_addr;
      read.rkey = hello_.rkey;
      const wire::CmaSegment segment{SecretAddr(), kSecretBytes};
      ASSERT_EQ(SendMessage(conn.fd, read, &segment, sizeof(segment), kReplyMs), SendResult::kSent);
      const Outcome outcome = AwaitResponse(conn.fd, kReplyMs);
      EXPECT_FALSE(outcome.answered && outcome.response.status == IBV_WC_SUCCESS)
          << "a CMA read toward " << f.name << " succeeded";
    } else {
      EXPECT_TRUE(AwaitClosed(conn.fd, kEndMs, nullptr)) << "refused, yet left open";
    }
    Report after;
    ASSERT_TRUE(VictimAlive(&after, &why)) << why;
    EXPECT_EQ(after.requests_seen, before.requests_seen)
        << "the forged REQ reached the application as a CONNECT_REQUEST";
    EXPECT_EQ(after.secret_intact, 1u) << "the victim's g_secret was written";
    uint8_t theirs[kSecretBytes];
    iovec local{theirs, sizeof(theirs)};
    iovec remote{g_secret, sizeof(theirs)};
    ASSERT_EQ(process_vm_readv(sleeper_pid, &local, 1, &remote, 1, 0),
              static_cast<ssize_t>(sizeof(theirs)));
    EXPECT_TRUE(SecretIntact(theirs)) << "the third process's g_secret was written";
    Report rearmed;
    ASSERT_TRUE(Ask(*victim_, 'R', &rearmed));
  }

  // The true pid but no proof of reach (probe_addr 0): the victim never proved it may copy,
  // so a CMA write must be refused, not copied.
  {
    SCOPED_TRACE("true pid, no proof of reach");
    Report before;
    std::string why;
    ASSERT_TRUE(VictimAlive(&before, &why)) << why;
    RawConn conn;
    ASSERT_NO_FATAL_FAILURE(Connect(fabric_, getpid(), 0, &conn));
    ASSERT_TRUE(conn.accepted);
    EXPECT_EQ(conn.accept.can_reach_you, 0) << "the victim claims a proof we never offered";
    static uint8_t source[kSecretBytes];
    std::memset(source, 0xee, sizeof(source));
    wire::Header write = Request(wire::Type::kWrite, 1);
    write.flags = wire::kFlagCma;
    write.length = sizeof(source);
    write.remote_addr = hello_.region_addr;
    write.rkey = hello_.rkey;
    const wire::CmaSegment segment{reinterpret_cast<uintptr_t>(source), sizeof(source)};
    ASSERT_EQ(SendMessage(conn.fd, write, &segment, sizeof(segment), kReplyMs), SendResult::kSent);
    const Outcome outcome = AwaitResponse(conn.fd, kReplyMs);
    EXPECT_TRUE(outcome.closed || (outcome.answered && outcome.response.status != IBV_WC_SUCCESS))
        << "a CMA write without a proof of reach: " << outcome.Describe();
    Report after;
    ASSERT_TRUE(VictimAlive(&after, &why)) << why;
    EXPECT_EQ(after.region_hash, before.region_hash) << "the victim copied from us anyway";
  }

  // Regression: the true pid and a proof, but an address outside the region: REM_ACCESS_ERR.
  {
    SCOPED_TRACE("true pid, proof, outside the region");
    RawConn conn;
    ASSERT_NO_FATAL_FAILURE(Connect(fabric_, getpid(), ProbeAddr(), &conn));
    ASSERT_TRUE(conn.accepted);
    static uint8_t source[kSecretBytes];
    wire::Header write = Request(wire::Type::kWrite, 1);
    write.flags = wire::kFlagCma;
    write.length = sizeof(source);
    write.remote_addr = hello_.region_addr + hello_.region_len;
    write.rkey = hello_.rkey;
    const wire::CmaSegment segment{reinterpret_cast<uintptr_t>(source), sizeof(source)};
    ASSERT_EQ(SendMessage(conn.fd, write, &segment, sizeof(segment), kReplyMs), SendResult::kSent);
    const Outcome outcome = AwaitResponse(conn.fd, kReplyMs);
    ASSERT_TRUE(outcome.answered) << outcome.Describe();
    EXPECT_EQ(outcome.response.type, static_cast<uint16_t>(wire::Type::kAck));
    EXPECT_EQ(outcome.response.status, IBV_WC_REM_ACCESS_ERR) << outcome.Describe();
  }
  ExpectVictimUnharmed("after the forged pids");
}

// ---- Attack 3: a forged kQpBind toward a CM-less QP ----------------------------------------

// A verbs victim's QP is connected (ibv_modify_qp to RTR) to a QP of a third process. The
// attacker dials the victim's endpoint and binds claiming that third process's GID and QP;
// the bind names a process the socket is not (SO_PEERCRED): refused, the connection ends, and
// none of its SENDs lands in a receive. The true peer then still gets through.
TEST_F(HostilePeerTest, Attack3_ForgedQpBind_RefusedAndNoReceiveCompletes) {
  Report peer_hello;
  Child& peer = Start([](int in, int out) { VerbsPeerMain(in, out); }, &peer_hello);
  ASSERT_GT(peer.pid, 0);
  ASSERT_EQ(peer_hello.error_line, 0);
  const pid_t peer_pid = peer.pid;
  const uint32_t peer_qp_num = peer_hello.qp_num;
  const int peer_to = peer.to;
  const int peer_from = peer.from;
  Report victim_hello;
  victim_ = &Start(
      [peer_pid, peer_qp_num](int in, int out) { VerbsVictimMain(in, out, peer_pid, peer_qp_num); },
      &victim_hello);
  ASSERT_GT(victim_->pid, 0);
  ASSERT_EQ(victim_hello.error_line, 0);

  uint8_t victim_gid[16];
  uint8_t peer_gid[16];
  GidOfPid(victim_->pid, victim_gid);
  GidOfPid(peer_pid, peer_gid);
  struct Forged {
    const char* name;
    int32_t pid;
  };
  const Forged forged[] = {{"claiming the third process's pid too", peer_pid},
                           {"with our own pid but its GID", getpid()}};
  uint64_t seq = 1;
  uint32_t landed = 0;  // receives completed so far
  for (const Forged& f : forged) {
    SCOPED_TRACE(f.name);
    const int fd = DialAbstract(EndpointSocketName(fabric_, victim_gid));
    ASSERT_GE(fd, 0) << "dial the victim's endpoint: " << strerror(errno);
    wire::QpBindBody bind;
    std::memset(&bind, 0, sizeof(bind));
    bind.version = wire::kQpBindVersion;
    bind.src_qp_num = peer_qp_num;
    bind.dst_qp_num = victim_hello.qp_num;
    bind.pid = f.pid;
    std::memcpy(bind.src_gid, peer_gid, 16);
    std::memcpy(bind.dst_gid, victim_gid, 16);
    SendResult sent =
        SendMessage(fd, wire::MakeHeader(wire::Type::kQpBind), &bind, sizeof(bind), kReplyMs);
    uint8_t message[64];
    std::memset(message, 0x66, sizeof(message));
    for (int i = 0; i < 2 && sent == SendResult::kSent; ++i) {
      sent = SendMessage(fd, Request(wire::Type::kSend, seq++), message, sizeof(message), kReplyMs);
    }
    std::vector<wire::Header> seen;
    const bool closed = AwaitClosed(fd, kEndMs, &seen);
    close(fd);
    EXPECT_TRUE(closed) << "the victim kept a connection whose bind it cannot believe";
    for (const wire::Header& h : seen) {
      EXPECT_NE(h.status, IBV_WC_SUCCESS) << "a forged SEND was acknowledged";
    }
    Report report;
    ASSERT_TRUE(Ask(*victim_, 'S', &report)) << "the verbs victim does not answer";
    EXPECT_EQ(report.recv_completions, landed) << "a forged SEND landed in the victim's receive";
    landed = report.recv_completions;
  }

  // The true peer connects back and sends: served.
  Command connect;
  connect.op = 'C';
  connect.pid = victim_->pid;
  connect.qp_num = victim_hello.qp_num;
  ASSERT_TRUE(WriteFull(peer_to, &connect, sizeof(connect)));
  Report peer_report;
  ASSERT_TRUE(ReadFull(peer_from, &peer_report, sizeof(peer_report), 2 * kReplyMs));
  EXPECT_EQ(peer_report.error_line, 0);
  EXPECT_EQ(peer_report.wc_status, IBV_WC_SUCCESS) << "the true peer's SEND";
  Report report;
  ASSERT_TRUE(Ask(*victim_, 'S', &report));
  const int64_t deadline = NowMs() + kReplyMs;
  while (report.recv_completions == landed && NowMs() < deadline) {
    usleep(10 * 1000);
    ASSERT_TRUE(Ask(*victim_, 'S', &report));
  }
  EXPECT_EQ(report.recv_completions, landed + 1) << "the true peer's SEND never landed";
  EXPECT_EQ(report.secret_intact, 1u);
}

// ---- Attack 4: the victim's fabric thread frozen by a page that never faults in ----------

// A CMA write whose source is a page of the attacker's that faults for ever (userfaultfd): the
// victim's copy (process_vm_readv) waits in the kernel. That must stop neither the victim's
// other connections (a legit client connects and writes meanwhile) nor last for ever (the stuck
// connection ends within a bound; the fix times the copy out after ~10 s).
TEST_F(HostilePeerTest, Attack4_CmaFromAFaultingPage_OtherConnectionsWorkAndItEnds) {
  ASSERT_NO_FATAL_FAILURE(StartCmVictim(kRegionBytes));
  constexpr size_t kStuckBytes = 64 * 1024;  // (a raw CMA write: any length is one)
  StuckPages stuck;  // after the victim's fork: the victim must not hold the userfaultfd
  const char* step = "";
  const int err = stuck.Make(kStuckBytes, &step);
  if (err == EPERM || err == ENOSYS) {
    GTEST_SKIP() << step << ": " << strerror(err)
                 << " (userfaultfd not allowed here: vm.unprivileged_userfaultfd=0 and not "
                    "root, or no kernel support); attack 4 not run";
  }
  ASSERT_EQ(err, 0) << step << ": " << strerror(err);
  RawConn conn;
  ASSERT_NO_FATAL_FAILURE(Connect(fabric_, getpid(), ProbeAddr(), &conn));
  ASSERT_TRUE(conn.accepted);
  if (conn.accept.can_reach_you == 0) {
    GTEST_SKIP() << "the victim's NIC may not reach this process (ptrace rules): it never "
                    "copies by CMA, so there is nothing to freeze";
  }
  wire::Header write = Request(wire::Type::kWrite, 1);
  write.flags = wire::kFlagCma;
  write.length = kStuckBytes;
  write.remote_addr = hello_.region_addr;
  write.rkey = hello_.rkey;
  const wire::CmaSegment segment{stuck.addr(), kStuckBytes};
  ASSERT_EQ(SendMessage(conn.fd, write, &segment, sizeof(segment), kReplyMs), SendResult::kSent);
  EXPECT_TRUE(stuck.AwaitFault(kReplyMs))
      << "the victim never touched the faulting page: the attack did not engage";

  EXPECT_EQ(LegitClientWrites(), "") << "while the victim's copy from a faulting page is stuck";
  std::vector<wire::Header> seen;
  EXPECT_TRUE(AwaitClosed(conn.fd, kStuckEndMs, &seen))
      << "the stuck connection was not ended within " << kStuckEndMs / 1000 << " s";
  for (const wire::Header& h : seen) {
    EXPECT_NE(h.status, IBV_WC_SUCCESS) << "a copy that never completed was acknowledged";
  }
  Report report;
  std::string why;
  ASSERT_TRUE(VictimAlive(&report, &why)) << why;
  EXPECT_EQ(report.secret_intact, 1u);
}

// ---- Not an attack: a busy poller and the copy its peer makes of its memory ---------------

// A client whose 1 MiB write the victim copies out of the client's memory by cross-memory attach
// (kFlagCma): from the request's send until the WR leaves the send queue, cma::Pending() is true
// in the client (its busy poller gives its CPU to the victim's copy), and false again after
// both ways a WR leaves: answered, and flushed with its connection. The victim is stopped
// (SIGSTOP) while the client looks, so that the answer cannot come first. Exits 0, or the
// number of the step that failed; writes one byte per look to `out`: 1 pending, 0 not.
void PeerCopyClientMain(const Report& victim, int in, int out) {
  // The write must go as a request the victim copies: not written into place by this client
  // itself (the requester push, docs/FABRIC.md), which would complete it with the victim stopped.
  setenv(sim::host::kPushEnvVar, "0", 1);
  if (!sim::host::ConfigureFabric().ok()) _exit(19);
  rpma_peer* peer = nullptr;
  rpma_conn* conn = ConnectOrExit(&peer);
  static uint8_t buf[kMiB];
  for (size_t i = 0; i < kClientBytes; ++i) buf[kMiB - kClientBytes + i] = ClientByte(i);
  rpma_mr_local* mr = nullptr;
  if (rpma_mr_reg(peer, buf, kMiB, RPMA_MR_USAGE_WRITE_SRC, &mr) != 0) _exit(20);
  rpma_mr_remote* remote = nullptr;
  if (rpma_mr_remote_from_descriptor(victim.desc, victim.desc_size, &remote) != 0) _exit(21);
  rpma_cq* cq = nullptr;
  if (rpma_conn_get_cq(conn, &cq) != 0) _exit(22);
  const auto look = [out] {
    const uint8_t pending = sim::cma::Pending() ? 1 : 0;
    if (!WriteFull(out, &pending, 1)) _exit(23);
  };
  char go = 0;
  for (int round = 0; round < 2; ++round) {
    if (!WriteFull(out, "r", 1) || !ReadFull(in, &go, 1, kReplyMs)) _exit(24);  // victim stopped
    look();  // nothing sent yet
    if (rpma_write(conn, remote, 0, mr, 0, kMiB, RPMA_F_COMPLETION_ALWAYS, nullptr) != 0) {
      _exit(25);
    }
    ibv_wc wc;
    if (rpma_cq_get_wc(cq, 1, &wc, nullptr) != RPMA_E_NO_COMPLETION) _exit(26);  // sends it
    look();
    if (round == 1) break;  // the second is flushed below
    if (!ReadFull(in, &go, 1, kReplyMs)) _exit(27);  // the victim runs again
    int ret;
    while ((ret = rpma_cq_get_wc(cq, 1, &wc, nullptr)) == RPMA_E_NO_COMPLETION) {
    }
    if (ret != 0 || wc.status != IBV_WC_SUCCESS) _exit(28);
    look();
  }
  // The victim is stopped: the disconnect's answer comes from its timeout, and the write
  // still out is flushed.
  rpma_conn_disconnect(conn);
  rpma_conn_event event = RPMA_CONN_UNDEFINED;
  rpma_conn_next_event(conn, &event);
  if (rpma_conn_delete(&conn) != 0) _exit(29);
  look();
  _exit(0);
}

TEST_F(HostilePeerTest, PeerCopy_PendingFromTheRequestUntilItsWrLeavesTheQueue) {
  std::ifstream yama("/proc/sys/kernel/yama/ptrace_scope");
  int scope = 0;
  if (yama >> scope && scope != 0) {
    GTEST_SKIP() << "Yama ptrace_scope " << scope << ": the victim may not copy from a "
                    "sibling process, so no write goes by cross-memory attach";
  }
  ASSERT_NO_FATAL_FAILURE(StartCmVictim(kRegionBytes));
  const Report victim = hello_;
  children_.push_back(Spawn([victim](int in, int out) { PeerCopyClientMain(victim, in, out); }));
  Child& client = children_.back();
  ASSERT_GT(client.pid, 0);
  const auto next = [&client](char* got) { return ReadFull(client.from, got, 1, kReplyMs); };
  std::string looks;
  char got = 0;
  for (int round = 0; round < 2; ++round) {
    ASSERT_TRUE(next(&got) && got == 'r') << "the client did not connect";
    ASSERT_EQ(kill(victim_->pid, SIGSTOP), 0);
    ASSERT_TRUE(WriteFull(client.to, "g", 1));
    ASSERT_TRUE(next(&got));
    looks += static_cast<char>('0' + got);
    ASSERT_TRUE(next(&got));
    looks += static_cast<char>('0' + got);
    if (round == 0) {
      ASSERT_EQ(kill(victim_->pid, SIGCONT), 0);
      ASSERT_TRUE(WriteFull(client.to, "g", 1));
      ASSERT_TRUE(next(&got));
      looks += static_cast<char>('0' + got);
    }
  }
  const bool last = next(&got);
  kill(victim_->pid, SIGCONT);
  ASSERT_TRUE(last) << "the client did not end its connection";
  looks += static_cast<char>('0' + got);
  const int status = WaitExit(client.pid, kReplyMs);
  if (status != -1) client.pid = -1;
  EXPECT_TRUE(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "the client " << DescribeExit(status);
  // Before the write, while it is out, answered; before the second, while it is out, flushed.
  EXPECT_EQ(looks, "010010");
  Report report;
  std::string why;
  ASSERT_TRUE(VictimAlive(&report, &why)) << why;
  EXPECT_EQ(report.client_tail_ok, 1u) << "the 1 MiB write did not land";
}

// ---- Attack 6: unbounded buffering --------------------------------------------------------

// (a) SENDs that find no receive wait, in order, for one (RC's RNR retry): a peer that sends
// 600 MiB of them to a victim that posts no receive must not make it buffer 600 MiB. The
// victim ends the connection before buffering more than its cap (~256 MiB).
TEST_F(HostilePeerTest, Attack6a_SendsWithoutReceives_ConnectionEndsBeforeUnboundedBuffering) {
  ASSERT_NO_FATAL_FAILURE(StartCmVictim(kRegionBytes));
  RawConn conn;
  ASSERT_NO_FATAL_FAILURE(Connect(fabric_, getpid(), 0, &conn));
  ASSERT_TRUE(conn.accepted);
  constexpr int kSends = 600;
  const std::vector<uint8_t> message(kMiB, 0x33);
  int sent = 0;
  SendResult last = SendResult::kSent;
  long peak_kib = 0;
  for (int i = 0; i < kSends; ++i) {
    last = SendMessage(conn.fd, Request(wire::Type::kSend, i + 1), message.data(), message.size(),
                       2 * kReplyMs);
    if (last != SendResult::kSent) break;
    ++sent;
    if (i % 16 == 0) {
      peak_kib = std::max(peak_kib, ProcKiB(victim_->pid, "VmHWM"));
      if (peak_kib > kMaxVictimRssKiB) break;  // failed already: no need to make it worse
    }
  }
  std::vector<wire::Header> seen;
  const bool closed = last == SendResult::kClosed || AwaitClosed(conn.fd, kEndMs, &seen);
  peak_kib = std::max(peak_kib, ProcKiB(victim_->pid, "VmHWM"));
  EXPECT_LT(peak_kib, kMaxVictimRssKiB)
      << "the victim's peak RSS after " << sent << " SENDs of 1 MiB with no receive";
  EXPECT_TRUE(closed) << "the victim kept buffering: " << sent << " of " << kSends
                      << " SENDs of 1 MiB went (the attack stops once the RSS bound is passed)"
                      << " and the connection is still open";
  for (const wire::Header& h : seen) {
    EXPECT_NE(h.status, IBV_WC_SUCCESS) << "a SEND acknowledged without a receive posted";
  }
  ExpectVictimUnharmed("after SENDs without receives");
}

// (b) Every RDMA READ is answered with its data: a peer that asks 2000 reads of 1 MiB and
// never reads its socket must not make the victim queue 2 GiB of responses. Its memory stays
// bounded, and it lives.
TEST_F(HostilePeerTest, Attack6b_ReadResponsesNeverCollected_VictimMemoryStaysBounded) {
  ASSERT_NO_FATAL_FAILURE(StartCmVictim(kRegionBytes));
  RawConn conn;
  ASSERT_NO_FATAL_FAILURE(Connect(fabric_, getpid(), 0, &conn));
  ASSERT_TRUE(conn.accepted);
  constexpr int kReads = 2000;
  int sent = 0;
  long peak_kib = 0;
  for (int i = 0; i < kReads; ++i) {
    wire::Header read = Request(wire::Type::kRead, i + 1);
    read.length = kMiB;
    read.remote_addr = hello_.region_addr;
    read.rkey = hello_.rkey;
    // A victim that stops reading us (backpressure) or ends the connection has defended itself.
    if (SendMessage(conn.fd, read, nullptr, 0, kReplyMs) != SendResult::kSent) break;
    ++sent;
    if (i % 64 == 0) {
      peak_kib = std::max(peak_kib, ProcKiB(victim_->pid, "VmHWM"));
      if (peak_kib > kMaxVictimRssKiB) break;
    }
  }
  // Until the victim has served what it took: its RSS steady for 2 s (bounded by 15 s).
  long last_rss = -2;
  int64_t steady_since = NowMs();
  const int64_t deadline = NowMs() + 15000;
  while (NowMs() < deadline && peak_kib <= kMaxVictimRssKiB) {
    const long rss = ProcKiB(victim_->pid, "VmRSS");
    peak_kib = std::max(peak_kib, ProcKiB(victim_->pid, "VmHWM"));
    if (rss != last_rss) {
      last_rss = rss;
      steady_since = NowMs();
    } else if (NowMs() - steady_since >= 2000) {
      break;
    }
    usleep(100 * 1000);
  }
  EXPECT_LT(peak_kib, kMaxVictimRssKiB)
      << "the victim's peak RSS with " << sent << " READ responses of 1 MiB never collected";
  ExpectVictimUnharmed("after READ responses never collected");
}

}  // namespace
}  // namespace softrpma::hostile
