// demo: softrpma's main job. A client and a server in one process, on the simulated NIC,
// through nothing but the public librpma API, printed as a timeline: connect, register, write,
// read back, send/recv, rpma_conn_wait wake-ups, disconnect.
//
// Then the same program runs again (as a child process, so that RPMA_SIM_FAULTS is read afresh)
// under each of a few fault specs, and shows which librpma call failed with which code: what a
// user of softrpma does to reach the error paths of an unmodified program.
//
// Usage: demo            the clean run, then the fault runs
//        demo --once [--quiet]  one run with whatever RPMA_SIM_FAULTS says (what the children
//                               do); --quiet prints only the calls that failed
//        demo --once --reuse-early  the same run with a classic RDMA bug: the write's source
//                               buffer is overwritten before its completion. Whether the NIC
//                               sends the old or the new bytes depends on when it executes the
//                               write: on the simulated NIC the seed decides, and its race
//                               detector (rpma-sim run / sweep) reports it.

#include <unistd.h>
#include <sys/wait.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "librpma.h"

namespace {

constexpr char kAddress[] = "127.0.0.1";
constexpr char kPort[] = "7204";
constexpr size_t kBufferSize = 4096;

const char* ErrName(int ret) {
  switch (ret) {
    case 0: return "OK";
    case RPMA_E_UNKNOWN: return "RPMA_E_UNKNOWN";
    case RPMA_E_NOSUPP: return "RPMA_E_NOSUPP";
    case RPMA_E_PROVIDER: return "RPMA_E_PROVIDER";
    case RPMA_E_NOMEM: return "RPMA_E_NOMEM";
    case RPMA_E_INVAL: return "RPMA_E_INVAL";
    case RPMA_E_NO_COMPLETION: return "RPMA_E_NO_COMPLETION";
    case RPMA_E_NO_EVENT: return "RPMA_E_NO_EVENT";
    case RPMA_E_AGAIN: return "RPMA_E_AGAIN";
    case RPMA_E_SHARED_CHANNEL: return "RPMA_E_SHARED_CHANNEL";
    case RPMA_E_NOT_SHARED_CHNL: return "RPMA_E_NOT_SHARED_CHNL";
    default: return "?";
  }
}

int g_step = 0;
bool g_quiet = false;  // fault runs print only the calls that failed
bool g_reuse_early = false;  // --reuse-early: the buffer bug

// op_context values, so that completions can be told apart in the timeline.
void* const kWriteCtx = reinterpret_cast<void*>(0x1);
void* const kReadCtx = reinterpret_cast<void*>(0x2);
void* const kRecvCtx = reinterpret_cast<void*>(0x3);
void* const kSendCtx = reinterpret_cast<void*>(0x4);

const char* OpcodeName(ibv_wc_opcode opcode) {
  switch (opcode) {
    case IBV_WC_SEND: return "IBV_WC_SEND";
    case IBV_WC_RDMA_WRITE: return "IBV_WC_RDMA_WRITE";
    case IBV_WC_RDMA_READ: return "IBV_WC_RDMA_READ";
    case IBV_WC_RECV: return "IBV_WC_RECV";
    case IBV_WC_RECV_RDMA_WITH_IMM: return "IBV_WC_RECV_RDMA_WITH_IMM";
    default: return "other";
  }
}

// Prints one timeline line for a librpma call and returns its result.
int Step(const char* who, const char* call, int ret) {
  ++g_step;
  if (g_quiet && ret == 0) return ret;
  std::printf("%3d  %-7s %s -> %s", g_step, who, call, ErrName(ret));
  if (ret != 0) std::printf("  (%s)", rpma_err_2str(ret));
  std::printf("\n");
  return ret;
}

void Note(const char* who, const std::string& text) {
  if (g_quiet) return;
  std::printf("     %-7s   %s\n", who, text.c_str());
}

#define CALL(who, expr)                                      \
  do {                                                       \
    if (Step(who, #expr, (expr)) != 0) return Fail(#expr);   \
  } while (0)

// Everything one run creates, released in reverse order whatever happened (Release()).
struct Run {
  rpma_peer* peer = nullptr;
  rpma_ep* ep = nullptr;
  rpma_conn_cfg* cfg = nullptr;
  rpma_conn_req* client_req = nullptr;
  rpma_conn_req* server_req = nullptr;
  rpma_conn* client = nullptr;
  rpma_conn* server = nullptr;
  rpma_mr_local* server_mr = nullptr;
  rpma_mr_local* client_src = nullptr;
  rpma_mr_local* client_dst = nullptr;
  rpma_mr_remote* remote_mr = nullptr;
  std::vector<char> server_buf = std::vector<char>(kBufferSize);
  std::vector<char> client_src_buf = std::vector<char>(kBufferSize);
  std::vector<char> client_dst_buf = std::vector<char>(kBufferSize);
  std::string failed_call;

  int Fail(const char* call) {
    failed_call = call;
    return 1;
  }

  // Releases what is still held, in reverse order of creation, checking every call; returns
  // the calls that failed ("rpma_mr_dereg(&client_dst) -> RPMA_E_PROVIDER"), none when
  // everything was released. An object whose release failed may still be held by librpma: it
  // is not tried again.
  std::vector<std::string> Release() {
    std::vector<std::string> failed;
    auto check = [&failed](const char* call, int ret) {
      if (ret != 0) failed.push_back(std::string(call) + " -> " + ErrName(ret));
    };
#define RELEASE(object, call)                     \
  do {                                            \
    if ((object) != nullptr) {                    \
      check(#call, (call));                       \
      (object) = nullptr;                         \
    }                                             \
  } while (0)
    RELEASE(remote_mr, rpma_mr_remote_delete(&remote_mr));
    if (client != nullptr) check("rpma_conn_disconnect(client)", rpma_conn_disconnect(client));
    RELEASE(client, rpma_conn_delete(&client));
    RELEASE(server, rpma_conn_delete(&server));
    RELEASE(client_req, rpma_conn_req_delete(&client_req));
    RELEASE(server_req, rpma_conn_req_delete(&server_req));
    RELEASE(client_dst, rpma_mr_dereg(&client_dst));
    RELEASE(client_src, rpma_mr_dereg(&client_src));
    RELEASE(server_mr, rpma_mr_dereg(&server_mr));
    RELEASE(ep, rpma_ep_shutdown(&ep));
    RELEASE(cfg, rpma_conn_cfg_delete(&cfg));
    RELEASE(peer, rpma_peer_delete(&peer));
#undef RELEASE
    return failed;
  }

  ~Run() { Release(); }  // (after an explicit Release(): nothing left)

  // Waits on the connection's shared completion channel and collects one completion.
  int WaitOne(const char* who, rpma_conn* conn, ibv_wc* wc) {
    rpma_cq* cq = nullptr;
    bool is_rcq = false;
    CALL(who, rpma_conn_wait(conn, 0, &cq, &is_rcq));
    Note(who, std::string("woken by the ") + (is_rcq ? "receive CQ" : "CQ"));
    int got = 0;
    CALL(who, rpma_cq_get_wc(cq, 1, wc, &got));
    // verbs defines byte_len only for receives, RDMA READ and atomics (the simulator hands out
    // poison elsewhere, as a NIC leaves whatever was there).
    const bool has_byte_len =
        wc->status == IBV_WC_SUCCESS &&
        (wc->opcode == IBV_WC_RECV || wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM ||
         wc->opcode == IBV_WC_RDMA_READ);
    char line[160];
    std::snprintf(line, sizeof(line),
                  "completion: wr_id=%#" PRIx64 " status=%s opcode=%s%s qp_num=%u", wc->wr_id,
                  ibv_wc_status_str(wc->status),
                  wc->status == IBV_WC_SUCCESS ? OpcodeName(wc->opcode) : "(undefined)",
                  has_byte_len ? (" byte_len=" + std::to_string(wc->byte_len)).c_str() : "",
                  wc->qp_num);
    Note(who, line);
    return wc->status == IBV_WC_SUCCESS ? 0 : Fail("work completion status");
  }

  int Go() {
    ibv_context* dev = nullptr;
    CALL("both", rpma_utils_get_ibv_context(kAddress, RPMA_UTIL_IBV_CONTEXT_LOCAL, &dev));
    Note("both", std::string("device: ") + ibv_get_device_name(dev->device));
    CALL("both", rpma_peer_new(dev, &peer));

    // Both sides share one completion channel per connection, with a separate receive CQ.
    CALL("both", rpma_conn_cfg_new(&cfg));
    CALL("both", rpma_conn_cfg_set_compl_channel(cfg, true));
    CALL("both", rpma_conn_cfg_set_rcq_size(cfg, 10));

    CALL("server", rpma_ep_listen(peer, kAddress, kPort, &ep));
    CALL("server", rpma_mr_reg(peer, server_buf.data(), kBufferSize,
                               RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_READ_SRC |
                                   RPMA_MR_USAGE_RECV,
                               &server_mr));

    const char hello[] = "hello from the client";
    rpma_conn_private_data client_pdata{const_cast<char*>(hello), sizeof(hello)};
    CALL("client", rpma_conn_req_new(peer, kAddress, kPort, cfg, &client_req));
    CALL("client", rpma_conn_req_connect(&client_req, &client_pdata, &client));

    CALL("server", rpma_ep_next_conn_req(ep, cfg, &server_req));
    rpma_conn_private_data got_pdata{};
    CALL("server", rpma_conn_req_get_private_data(server_req, &got_pdata));
    Note("server", std::string("private data: \"") +
                       std::string(static_cast<char*>(got_pdata.ptr), got_pdata.len - 1) + "\"");

    // The server's answer carries the descriptor of its memory region.
    size_t desc_size = 0;
    CALL("server", rpma_mr_get_descriptor_size(server_mr, &desc_size));
    std::vector<char> desc(desc_size);
    CALL("server", rpma_mr_get_descriptor(server_mr, desc.data()));
    rpma_conn_private_data server_pdata{desc.data(), static_cast<uint8_t>(desc_size)};
    // A receive posted before the connection exists would need rpma_conn_req_recv; the server
    // posts it once connected instead.
    CALL("server", rpma_conn_req_connect(&server_req, &server_pdata, &server));

    // The client's event first: as with librdmacm on IB, the server's ESTABLISHED comes only
    // once the client got (and so processed) its own; waiting for the server's first would
    // wait forever, on a real NIC and here.
    rpma_conn_event event = RPMA_CONN_UNDEFINED;
    CALL("client", rpma_conn_next_event(client, &event));
    Note("client", rpma_utils_conn_event_2str(event));
    CALL("server", rpma_conn_next_event(server, &event));
    Note("server", rpma_utils_conn_event_2str(event));

    CALL("client", rpma_conn_get_private_data(client, &got_pdata));
    CALL("client", rpma_mr_remote_from_descriptor(got_pdata.ptr, got_pdata.len, &remote_mr));
    size_t remote_size = 0;
    CALL("client", rpma_mr_remote_get_size(remote_mr, &remote_size));
    Note("client", "remote region: " + std::to_string(remote_size) + " bytes");

    CALL("client", rpma_mr_reg(peer, client_src_buf.data(), kBufferSize,
                               RPMA_MR_USAGE_WRITE_SRC | RPMA_MR_USAGE_SEND, &client_src));
    CALL("client", rpma_mr_reg(peer, client_dst_buf.data(), kBufferSize,
                               RPMA_MR_USAGE_READ_DST, &client_dst));

    // Write, then read back what was written.
    const char text[] = "written by one-sided RDMA";
    std::memcpy(client_src_buf.data(), text, sizeof(text));
    CALL("client", rpma_write(client, remote_mr, 0, client_src, 0, sizeof(text),
                              RPMA_F_COMPLETION_ALWAYS, kWriteCtx));
    if (g_reuse_early) {
      // THE BUG: another post (an unsignaled write elsewhere), then the first write's source
      // is reused before its completion. The NIC may have executed the first write by the
      // second post, or not yet.
      CALL("client", rpma_write(client, remote_mr, 2048, client_src, 2048, 8,
                                RPMA_F_COMPLETION_ON_ERROR, nullptr));
      std::memcpy(client_src_buf.data(), "OVERWRITTEN", 11);
    }
    ibv_wc wc{};
    if (WaitOne("client", client, &wc) != 0) return 1;
    Note("server", std::string("its memory now holds: \"") + server_buf.data() + "\"");

    CALL("client", rpma_read(client, client_dst, 0, remote_mr, 0, sizeof(text),
                             RPMA_F_COMPLETION_ALWAYS, kReadCtx));
    if (WaitOne("client", client, &wc) != 0) return 1;
    Note("client", std::string("read back: \"") + client_dst_buf.data() + "\"");
    if (std::strcmp(client_dst_buf.data(), text) != 0) return Fail("read-back comparison");

    // Two-sided: the server posts a receive, the client sends.
    CALL("server", rpma_recv(server, server_mr, 1024, 64, kRecvCtx));
    const char message[] = "a two-sided message";
    std::memcpy(client_src_buf.data() + 512, message, sizeof(message));
    CALL("client", rpma_send(client, client_src, 512, sizeof(message), RPMA_F_COMPLETION_ALWAYS,
                             kSendCtx));
    if (WaitOne("client", client, &wc) != 0) return 1;
    if (WaitOne("server", server, &wc) != 0) return 1;
    Note("server", std::string("received: \"") + (server_buf.data() + 1024) + "\"");

    CALL("client", rpma_conn_disconnect(client));
    CALL("client", rpma_conn_next_event(client, &event));
    Note("client", rpma_utils_conn_event_2str(event));
    CALL("server", rpma_conn_next_event(server, &event));
    Note("server", rpma_utils_conn_event_2str(event));
    CALL("server", rpma_conn_disconnect(server));
    CALL("client", rpma_conn_delete(&client));
    CALL("server", rpma_conn_delete(&server));
    return 0;
  }
};

int RunOnce() {
  // librpma's own log lines at ERROR and above go to stderr too (by default only to syslog):
  // they say which verbs call failed and with which errno.
  rpma_log_set_threshold(RPMA_LOG_THRESHOLD_AUX, RPMA_LOG_LEVEL_ERROR);
  const char* faults = std::getenv("RPMA_SIM_FAULTS");
  std::printf("--- run: RPMA_SIM_FAULTS=%s\n", faults != nullptr ? faults : "(unset)");
  Run run;
  int result = run.Go();
  const std::vector<std::string> release_failed = run.Release();
  std::string released = "everything created was released";
  if (!release_failed.empty()) {
    released = "releasing what it created FAILED:";
    for (size_t i = 0; i < release_failed.size(); ++i) {
      released += (i == 0 ? " " : ", ") + release_failed[i];
    }
    result = 1;
  }
  if (run.failed_call.empty()) {
    std::printf("--- the run completed: every call returned 0; %s\n", released.c_str());
  } else {
    std::printf("--- the run stopped at: %s; %s\n", run.failed_call.c_str(), released.c_str());
  }
  std::fflush(stdout);
  return result;
}

// Runs this program again with RPMA_SIM_FAULTS=spec; returns its exit status.
int RunChild(const char* self, const char* spec) {
  std::fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) {
    std::perror("fork");
    return -1;
  }
  if (pid == 0) {
    setenv("RPMA_SIM_FAULTS", spec, 1);
    // The clean run prints the whole timeline; a fault run only the call that failed.
    execl(self, self, "--once", *spec == '\0' ? nullptr : "--quiet", static_cast<char*>(nullptr));
    std::perror("execl");
    _exit(127);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) < 0) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  if (argc > 1 && std::strcmp(argv[1], "--once") == 0) {
    for (int i = 2; i < argc; ++i) {
      if (std::strcmp(argv[i], "--quiet") == 0) {
        g_quiet = true;
      } else if (std::strcmp(argv[i], "--reuse-early") == 0) {
        g_reuse_early = true;
      } else {
        std::fprintf(stderr, "usage: %s [--once [--quiet] [--reuse-early]]\n", argv[0]);
        return 2;
      }
    }
    return RunOnce();
  }
  if (argc > 1) {
    std::fprintf(stderr, "usage: %s [--once [--quiet] [--reuse-early]]\n", argv[0]);
    return 2;
  }

  unsetenv("RPMA_SIM_FAULTS");
  int clean = RunChild("/proc/self/exe", "");
  // Each spec makes one librpma call fail the way a real provider can.
  const char* const kFaultSpecs[] = {
      "ibv_get_cq_event:fail=EIO:nth=1",     // rpma_conn_wait -> RPMA_E_NO_COMPLETION
      "ibv_get_cq_event:unknown_cq:nth=2",   // rpma_conn_wait -> RPMA_E_UNKNOWN
      "ibv_req_notify_cq:fail=EIO:after=4",  // rpma_conn_wait -> RPMA_E_PROVIDER
      "rdma_resolve_route:fail=ETIMEDOUT",   // rpma_conn_req_new -> RPMA_E_PROVIDER
      "ibv_alloc_pd:fail=ENOMEM",            // rpma_peer_new -> RPMA_E_NOMEM
  };
  bool faults_reported = true;
  for (const char* spec : kFaultSpecs) {
    std::printf("\n");
    // A fault run is expected to stop early with exit status 1; 0 would mean the fault did not
    // fire, anything else a crash.
    if (RunChild("/proc/self/exe", spec) != 1) faults_reported = false;
  }
  std::printf("\n%s\n", clean == 0 && faults_reported
                            ? "demo: the clean run completed and every fault was reported"
                            : "demo: UNEXPECTED: see above");
  return clean == 0 && faults_reported ? 0 : 1;
}
