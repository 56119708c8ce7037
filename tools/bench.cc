// bench: what the simulated NIC costs, as ratios measured in one run.
//
//   bazel run -c opt //tools:bench            (--quick: a twentieth of the two-process iterations)
//
// Pairs, each measured in the same process on the same machine moments apart:
//   * rpma_write of N bytes + its completion collected (rpma_cq_get_wc), on the simulated NIC,
//     against memcpy of the same N bytes (64 B and 1 MiB);
//   * 64-byte rpma_write + completion taking 1000 connections in turn against one connection
//     (what many connections cost: each op then touches cold per-connection state);
//   * a wake-up through rpma_conn_wait across two threads (a send/recv ping-pong: each round
//     trip is two wake-ups) against a bare eventfd ping-pong between two threads.
// Then TWO PROCESSES on the simulated NIC (the host fabric): the bench forks a server that
// listens (the child uses librpma after fork, with a NIC of its own) and connects to it:
//   * an 8-byte send/recv ping-pong, both sides busy-polling (latency: half a round trip);
//   * a 1 MiB send/recv ping-pong (bandwidth as fi_pingpong counts it: 2 x bytes / time);
//   * an 8-byte send/recv ping-pong, both sides asleep in rpma_conn_wait (a round trip),
//     against a pipe ping-pong between two processes, both asleep in read(2);
//   * an 8-byte RDMA write ping-pong, each side spinning on its own memory (polling its CQ
//     meanwhile): half a round trip, as ib_write_lat counts it;
//   * the same as ib_write_lat runs it: each side waits for its write's completion, then spins
//     on its memory with no call into the NIC (the incoming write must land without one),
//     against the busy send/recv ping-pong above (ib_send_lat's pattern);
//   * 1 MiB RDMA writes, 16 in flight (bandwidth), 64 KiB ones (bandwidth: messages between
//     the rings and cross-memory attach, nic/carrier_host.cc's kCmaMinBytes), and 64-byte ones
//     (writes per second);
//   * an 8-byte RDMA write and its completion, one at a time, while the server's program
//     sleeps in rpma_conn_next_event (against shm's FI_DELIVERY_COMPLETE write);
//   * the CPU the server uses in one second with a connection open and no traffic.
// beside libfabric's shm provider: the same RMA figures measured by this binary
// (tools/shm_baseline.h, libfabric-dev), and the two send/recv ping-pongs by fi_pingpong
// (Debian's libfabric-bin) when installed. tools/ci/install_deps.sh installs both.
// The machines this runs on are shared and noisy: read the ratios, not the absolute times, and
// nothing here asserts a time.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "librpma.h"
#include "tools/shm_baseline.h"

namespace {

constexpr char kAddress[] = "127.0.0.1";

void Check(int ret, const char* what) {
  if (ret != 0) {
    std::fprintf(stderr, "bench: %s failed: %s\n", what, rpma_err_2str(ret));
    std::exit(1);
  }
}

// A connected client/server pair in this process, with `size` bytes registered on each side.
class Pair {
 public:
  Pair(const char* port, size_t size, bool shared_channel)
      : client_buf_(size), server_buf_(size) {
    ibv_context* dev = nullptr;
    Check(rpma_utils_get_ibv_context(kAddress, RPMA_UTIL_IBV_CONTEXT_LOCAL, &dev), "get ctx");
    Check(rpma_peer_new(dev, &peer_), "peer_new");
    Check(rpma_conn_cfg_new(&cfg_), "cfg_new");
    Check(rpma_conn_cfg_set_compl_channel(cfg_, shared_channel), "set_compl_channel");
    if (shared_channel) Check(rpma_conn_cfg_set_rcq_size(cfg_, 16), "set_rcq_size");
    Check(rpma_ep_listen(peer_, kAddress, port, &ep_), "ep_listen");
    const int usage = RPMA_MR_USAGE_WRITE_SRC | RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_SEND |
                      RPMA_MR_USAGE_RECV | RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_READ_DST;
    Check(rpma_mr_reg(peer_, client_buf_.data(), size, usage, &client_mr_), "mr_reg");
    Check(rpma_mr_reg(peer_, server_buf_.data(), size, usage, &server_mr_), "mr_reg");

    rpma_conn_req* req = nullptr;
    Check(rpma_conn_req_new(peer_, kAddress, port, cfg_, &req), "conn_req_new");
    Check(rpma_conn_req_connect(&req, nullptr, &client_), "client connect");
    Check(rpma_ep_next_conn_req(ep_, cfg_, &req), "next_conn_req");
    size_t desc_size = 0;
    Check(rpma_mr_get_descriptor_size(server_mr_, &desc_size), "desc size");
    std::vector<char> desc(desc_size);
    Check(rpma_mr_get_descriptor(server_mr_, desc.data()), "get desc");
    rpma_conn_private_data pdata{desc.data(), static_cast<uint8_t>(desc_size)};
    Check(rpma_conn_req_connect(&req, &pdata, &server_), "server connect");
    rpma_conn_event event;
    Check(rpma_conn_next_event(client_, &event), "client established");
    Check(rpma_conn_next_event(server_, &event), "server established");
    Check(rpma_conn_get_private_data(client_, &pdata), "private data");
    Check(rpma_mr_remote_from_descriptor(pdata.ptr, pdata.len, &remote_mr_), "remote mr");
  }

  ~Pair() {
    rpma_mr_remote_delete(&remote_mr_);
    rpma_conn_disconnect(client_);
    rpma_conn_event event;
    rpma_conn_next_event(client_, &event);
    rpma_conn_next_event(server_, &event);
    rpma_conn_delete(&client_);
    rpma_conn_delete(&server_);
    rpma_mr_dereg(&client_mr_);
    rpma_mr_dereg(&server_mr_);
    rpma_ep_shutdown(&ep_);
    rpma_conn_cfg_delete(&cfg_);
    rpma_peer_delete(&peer_);
  }

  rpma_conn* client() { return client_; }
  rpma_conn* server() { return server_; }
  rpma_mr_local* client_mr() { return client_mr_; }
  rpma_mr_local* server_mr() { return server_mr_; }
  rpma_mr_remote* remote_mr() { return remote_mr_; }

 private:
  std::vector<char> client_buf_;
  std::vector<char> server_buf_;
  rpma_peer* peer_ = nullptr;
  rpma_conn_cfg* cfg_ = nullptr;
  rpma_ep* ep_ = nullptr;
  rpma_conn* client_ = nullptr;
  rpma_conn* server_ = nullptr;
  rpma_mr_local* client_mr_ = nullptr;
  rpma_mr_local* server_mr_ = nullptr;
  rpma_mr_remote* remote_mr_ = nullptr;
};

void BM_RpmaWrite(benchmark::State& state) {
  const size_t size = static_cast<size_t>(state.range(0));
  Pair pair("7301", size, /*shared_channel=*/false);
  rpma_cq* cq = nullptr;
  Check(rpma_conn_get_cq(pair.client(), &cq), "get_cq");
  ibv_wc wc;
  for (auto _ : state) {
    Check(rpma_write(pair.client(), pair.remote_mr(), 0, pair.client_mr(), 0, size,
                     RPMA_F_COMPLETION_ALWAYS, nullptr),
          "write");
    int ret;
    while ((ret = rpma_cq_get_wc(cq, 1, &wc, nullptr)) == RPMA_E_NO_COMPLETION) {
    }
    Check(ret, "get_wc");
    if (wc.status != IBV_WC_SUCCESS) Check(RPMA_E_UNKNOWN, "write completion");
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * size));
}
BENCHMARK(BM_RpmaWrite)->Arg(64)->Arg(1 << 20);

// Connections to use in BM_RpmaWriteRoundRobin (--quick: 50, so that it fits a low fd limit).
int g_many_connections = 1000;

// N connections on one peer and one endpoint, all writing into one server region.
class Connections {
 public:
  Connections(const char* port, int n) : client_buf_(64), server_buf_(64) {
    ibv_context* dev = nullptr;
    Check(rpma_utils_get_ibv_context(kAddress, RPMA_UTIL_IBV_CONTEXT_LOCAL, &dev), "get ctx");
    Check(rpma_peer_new(dev, &peer_), "peer_new");
    Check(rpma_ep_listen(peer_, kAddress, port, &ep_), "ep_listen");
    Check(rpma_mr_reg(peer_, client_buf_.data(), 64, RPMA_MR_USAGE_WRITE_SRC, &client_mr_),
          "mr_reg");
    Check(rpma_mr_reg(peer_, server_buf_.data(), 64, RPMA_MR_USAGE_WRITE_DST, &server_mr_),
          "mr_reg");
    size_t desc_size = 0;
    Check(rpma_mr_get_descriptor_size(server_mr_, &desc_size), "desc size");
    std::vector<char> desc(desc_size);
    Check(rpma_mr_get_descriptor(server_mr_, desc.data()), "get desc");
    Check(rpma_mr_remote_from_descriptor(desc.data(), desc_size, &remote_mr_), "remote mr");
    for (int i = 0; i < n; ++i) {
      rpma_conn_req* req = nullptr;
      rpma_conn* client = nullptr;
      rpma_conn* server = nullptr;
      Check(rpma_conn_req_new(peer_, kAddress, port, nullptr, &req), "conn_req_new");
      Check(rpma_conn_req_connect(&req, nullptr, &client), "client connect");
      Check(rpma_ep_next_conn_req(ep_, nullptr, &req), "next_conn_req");
      Check(rpma_conn_req_connect(&req, nullptr, &server), "server connect");
      rpma_conn_event event;
      Check(rpma_conn_next_event(client, &event), "client established");
      Check(rpma_conn_next_event(server, &event), "server established");
      rpma_cq* cq = nullptr;
      Check(rpma_conn_get_cq(client, &cq), "get_cq");
      clients_.push_back(client);
      servers_.push_back(server);
      cqs_.push_back(cq);
    }
  }

  ~Connections() {
    for (size_t i = 0; i < clients_.size(); ++i) {
      rpma_conn_disconnect(clients_[i]);
      rpma_conn_event event;
      rpma_conn_next_event(clients_[i], &event);
      rpma_conn_next_event(servers_[i], &event);
      rpma_conn_delete(&clients_[i]);
      rpma_conn_delete(&servers_[i]);
    }
    rpma_mr_remote_delete(&remote_mr_);
    rpma_mr_dereg(&client_mr_);
    rpma_mr_dereg(&server_mr_);
    rpma_ep_shutdown(&ep_);
    rpma_peer_delete(&peer_);
  }

  size_t size() const { return clients_.size(); }
  rpma_conn* client(size_t i) { return clients_[i]; }
  rpma_cq* cq(size_t i) { return cqs_[i]; }
  rpma_mr_local* client_mr() { return client_mr_; }
  rpma_mr_remote* remote_mr() { return remote_mr_; }

 private:
  std::vector<char> client_buf_;
  std::vector<char> server_buf_;
  rpma_peer* peer_ = nullptr;
  rpma_ep* ep_ = nullptr;
  rpma_mr_local* client_mr_ = nullptr;
  rpma_mr_local* server_mr_ = nullptr;
  rpma_mr_remote* remote_mr_ = nullptr;
  std::vector<rpma_conn*> clients_;
  std::vector<rpma_conn*> servers_;
  std::vector<rpma_cq*> cqs_;
};

// 64 B rpma_write + its completion, taking the connections in turn: Arg(1) against
// Arg(0) = g_many_connections, to see what many connections cost on the data path.
void BM_RpmaWriteRoundRobin(benchmark::State& state) {
  const int n = state.range(0) == 0 ? g_many_connections : static_cast<int>(state.range(0));
  Connections connections("7303", n);
  ibv_wc wc;
  size_t next = 0;
  for (auto _ : state) {
    Check(rpma_write(connections.client(next), connections.remote_mr(), 0,
                     connections.client_mr(), 0, 64, RPMA_F_COMPLETION_ALWAYS, nullptr),
          "write");
    int ret;
    while ((ret = rpma_cq_get_wc(connections.cq(next), 1, &wc, nullptr)) ==
           RPMA_E_NO_COMPLETION) {
    }
    Check(ret, "get_wc");
    if (++next == connections.size()) next = 0;
  }
}
BENCHMARK(BM_RpmaWriteRoundRobin)->Arg(1)->Arg(0);

void BM_Memcpy(benchmark::State& state) {
  const size_t size = static_cast<size_t>(state.range(0));
  std::vector<char> src(size, 'x');
  std::vector<char> dst(size);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), size);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * size));
}
BENCHMARK(BM_Memcpy)->Arg(64)->Arg(1 << 20);

// Waits on conn's shared channel until a receive completion arrives, collecting every completion
// (send completions too) on the way.
void AwaitReceive(rpma_conn* conn) {
  for (;;) {
    rpma_cq* cq = nullptr;
    bool is_rcq = false;
    Check(rpma_conn_wait(conn, 0, &cq, &is_rcq), "conn_wait");
    ibv_wc wc[4];
    int got = 0;
    int ret = rpma_cq_get_wc(cq, 4, wc, &got);
    if (ret == RPMA_E_NO_COMPLETION) continue;
    Check(ret, "get_wc");
    for (int i = 0; i < got; ++i) {
      if (wc[i].opcode == IBV_WC_RECV) return;
    }
  }
}

// One iteration = one round trip = two rpma_conn_wait wake-ups (server, then client). Sends are
// signaled: as on hardware, an unsignaled send keeps its send-queue slot until a later signaled
// completion is collected, so only-unsignaled sends would fill the queue.
void BM_ConnWaitPingPong(benchmark::State& state) {
  Pair pair("7302", 64, /*shared_channel=*/true);
  const int64_t rounds = state.max_iterations;
  std::thread server([&] {
    for (int64_t i = 0; i < rounds; ++i) {
      AwaitReceive(pair.server());
      Check(rpma_recv(pair.server(), pair.server_mr(), 0, 8, nullptr), "server recv");
      Check(rpma_send(pair.server(), pair.server_mr(), 8, 8, RPMA_F_COMPLETION_ALWAYS, nullptr),
            "server send");
    }
  });
  Check(rpma_recv(pair.server(), pair.server_mr(), 0, 8, nullptr), "first server recv");
  for (auto _ : state) {
    Check(rpma_recv(pair.client(), pair.client_mr(), 0, 8, nullptr), "client recv");
    Check(rpma_send(pair.client(), pair.client_mr(), 8, 8, RPMA_F_COMPLETION_ALWAYS, nullptr),
          "client send");
    AwaitReceive(pair.client());
  }
  server.join();
}
BENCHMARK(BM_ConnWaitPingPong)->Iterations(20000)->UseRealTime();

// The floor: two threads waking each other through eventfds, nothing else.
void BM_EventfdPingPong(benchmark::State& state) {
  int to_server = eventfd(0, EFD_CLOEXEC);
  int to_client = eventfd(0, EFD_CLOEXEC);
  const int64_t rounds = state.max_iterations;
  std::thread server([&] {
    uint64_t value;
    for (int64_t i = 0; i < rounds; ++i) {
      if (read(to_server, &value, sizeof(value)) != sizeof(value)) std::abort();
      value = 1;
      if (write(to_client, &value, sizeof(value)) != sizeof(value)) std::abort();
    }
  });
  uint64_t value = 1;
  for (auto _ : state) {
    value = 1;
    if (write(to_server, &value, sizeof(value)) != sizeof(value)) std::abort();
    if (read(to_client, &value, sizeof(value)) != sizeof(value)) std::abort();
  }
  server.join();
  close(to_server);
  close(to_client);
}
BENCHMARK(BM_EventfdPingPong)->Iterations(20000)->UseRealTime();

// Remembers each benchmark's time per iteration, so that main() can print the ratios.
class RatioReporter final : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) {
      if (run.iterations > 0) {
        ns_per_iteration_[run.benchmark_name()] =
            run.GetAdjustedRealTime() * (run.time_unit == benchmark::kMicrosecond ? 1e3 : 1.0);
      }
    }
    ConsoleReporter::ReportRuns(runs);
  }

  void PrintRatio(const std::string& what, const std::string& sim, const std::string& base) {
    auto a = ns_per_iteration_.find(sim);
    auto b = ns_per_iteration_.find(base);
    if (a == ns_per_iteration_.end() || b == ns_per_iteration_.end() || b->second <= 0) return;
    std::printf("  %-44s %8.1fx  (%s / %s)\n", what.c_str(), a->second / b->second, sim.c_str(),
                base.c_str());
  }

 private:
  std::map<std::string, double> ns_per_iteration_;
};

// ---- Two processes ---------------------------------------------------------------------

constexpr char kTwoProcessPort[] = "7310";
constexpr size_t kBigWrite = 1 << 20;
constexpr int kWindow = 16;
// Iteration counts; divided by 20 with --quick (the smoke test: the figures only have to
// appear).
int kPingPongRounds = 20000;
int kBigWrites = 2000;
constexpr size_t kMediumWrite = 64 * 1024;
int kMediumWrites = 20000;
int kBigPingPongs = 500;
int kSleepingRounds = 2000;
int kSmallWrites = 200000;
int kQuietRounds = 2000;
int kAsleepWrites = 2000;
// The write ping-pong's words: where each side's peer writes (in the server's 1 MiB buffer and
// in the client's 2 MiB one), and the 8 bytes each side writes from.
constexpr size_t kServerSlot = kBigWrite - 64;
constexpr size_t kClientSlot = 2 * kBigWrite - 64;

// Polls cq until one completion arrives; returns it.
ibv_wc PollOne(rpma_cq* cq) {
  ibv_wc wc;
  int ret;
  while ((ret = rpma_cq_get_wc(cq, 1, &wc, nullptr)) == RPMA_E_NO_COMPLETION) {
  }
  Check(ret, "get_wc");
  if (wc.status != IBV_WC_SUCCESS) Check(RPMA_E_UNKNOWN, ibv_wc_status_str(wc.status));
  return wc;
}

// The op_context of the quiet write ping-pong's writes.
constexpr char kQuietWrite[] = "quiet write";

// Polls cq until the completion of the WR posted with op_context `context` arrives.
void PollFor(rpma_cq* cq, const void* context) {
  while (PollOne(cq).wr_id != reinterpret_cast<uintptr_t>(context)) {
  }
}

// The server process: one connection; answers kPingPongRounds pings, then waits for the client
// to disconnect (the writes and the idle second need nothing of it).
[[noreturn]] void RunTwoProcessServer(int ready_fd) {
  ibv_context* dev = nullptr;
  Check(rpma_utils_get_ibv_context(kAddress, RPMA_UTIL_IBV_CONTEXT_LOCAL, &dev), "get ctx");
  rpma_peer* peer = nullptr;
  Check(rpma_peer_new(dev, &peer), "peer_new");
  rpma_ep* ep = nullptr;
  Check(rpma_ep_listen(peer, kAddress, kTwoProcessPort, &ep), "ep_listen");
  std::vector<char> buf(kBigWrite);
  rpma_mr_local* mr = nullptr;
  Check(rpma_mr_reg(peer, buf.data(), buf.size(),
                    RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_SEND | RPMA_MR_USAGE_RECV, &mr),
        "mr_reg");
  std::vector<char> out(kBigWrite, 'o');
  rpma_mr_local* out_mr = nullptr;
  Check(rpma_mr_reg(peer, out.data(), out.size(), RPMA_MR_USAGE_SEND | RPMA_MR_USAGE_WRITE_SRC,
                    &out_mr),
        "mr_reg");
  size_t desc_size = 0;
  Check(rpma_mr_get_descriptor_size(mr, &desc_size), "desc size");
  std::vector<char> desc(desc_size);
  Check(rpma_mr_get_descriptor(mr, desc.data()), "desc");
  rpma_conn_cfg* cfg = nullptr;
  Check(rpma_conn_cfg_new(&cfg), "cfg");
  Check(rpma_conn_cfg_set_compl_channel(cfg, true), "set_compl_channel");  // rpma_conn_wait
  if (write(ready_fd, "r", 1) != 1) std::_Exit(1);
  rpma_conn_req* req = nullptr;
  Check(rpma_ep_next_conn_req(ep, cfg, &req), "next_conn_req");
  Check(rpma_conn_req_recv(req, mr, 0, kBigWrite, nullptr), "first recv");
  rpma_conn_private_data pdata{desc.data(), static_cast<uint8_t>(desc_size)};
  rpma_conn* conn = nullptr;
  Check(rpma_conn_req_connect(&req, &pdata, &conn), "connect");
  rpma_conn_event event;
  Check(rpma_conn_next_event(conn, &event), "established");
  rpma_cq* cq = nullptr;
  Check(rpma_conn_get_cq(conn, &cq), "get_cq");
  // Echoes every message with one of the same length.
  for (int i = 0; i < kPingPongRounds + kBigPingPongs; ++i) {
    ibv_wc wc;
    while ((wc = PollOne(cq)).opcode != IBV_WC_RECV) {
    }
    Check(rpma_recv(conn, mr, 0, kBigWrite, nullptr), "recv");
    Check(rpma_send(conn, out_mr, 0, wc.byte_len, RPMA_F_COMPLETION_ALWAYS, nullptr), "send");
  }
  for (int i = 0; i < kSleepingRounds; ++i) {  // the same, asleep between messages
    AwaitReceive(conn);
    Check(rpma_recv(conn, mr, 0, kBigWrite, nullptr), "recv");
    Check(rpma_send(conn, out_mr, 0, 8, RPMA_F_COMPLETION_ALWAYS, nullptr), "send");
  }
  // The write ping-pong: the client's memory descriptor comes in a send, then each side writes
  // a counter into the other's memory and spins on its own (polling its CQ meanwhile, as the
  // shm baseline's side drives progress) until the answer lands.
  ibv_wc got;
  while ((got = PollOne(cq)).opcode != IBV_WC_RECV) {
  }
  rpma_mr_remote* client_mr = nullptr;
  Check(rpma_mr_remote_from_descriptor(buf.data(), got.byte_len, &client_mr), "client mr");
  volatile uint64_t* slot = reinterpret_cast<volatile uint64_t*>(buf.data() + kServerSlot);
  for (int i = 1; i <= kPingPongRounds; ++i) {
    ibv_wc wc;
    while (*slot != static_cast<uint64_t>(i)) rpma_cq_get_wc(cq, 1, &wc, nullptr);
    std::memcpy(out.data(), &i, sizeof(i));
    std::memset(out.data() + sizeof(i), 0, 8 - sizeof(i));
    Check(rpma_write(conn, client_mr, kClientSlot, out_mr, 0, 8, RPMA_F_COMPLETION_ALWAYS,
                     nullptr),
          "write");
  }
  // The quiet write ping-pong (ib_write_lat's pattern): no call while it spins; its write's
  // completion collected (by its op_context) before it spins again.
  for (int i = kPingPongRounds + 1; i <= kPingPongRounds + kQuietRounds; ++i) {
    while (*slot != static_cast<uint64_t>(i)) {
    }
    std::memcpy(out.data(), &i, sizeof(i));
    std::memset(out.data() + sizeof(i), 0, 8 - sizeof(i));
    Check(rpma_write(conn, client_mr, kClientSlot, out_mr, 0, 8, RPMA_F_COMPLETION_ALWAYS,
                     kQuietWrite),
          "write");
    PollFor(cq, kQuietWrite);
  }
  Check(rpma_conn_next_event(conn, &event), "closed");  // sleeps until the client disconnects
  rpma_mr_remote_delete(&client_mr);
  rpma_conn_disconnect(conn);
  rpma_conn_delete(&conn);
  std::_Exit(0);
}

double CpuSecondsOf(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", static_cast<int>(pid));
  std::FILE* f = std::fopen(path, "r");
  if (f == nullptr) return 0;
  char line[1024] = "";
  const bool read = std::fgets(line, sizeof(line), f) != nullptr;
  std::fclose(f);
  if (!read) return 0;
  const char* p = std::strrchr(line, ')');  // the fields after the command name
  unsigned long utime = 0, stime = 0;
  if (p == nullptr || std::sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
                                  &utime, &stime) != 2) {
    return 0;
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

struct TwoProcessFigures {
  double latency_us = 0;      // half a round trip
  double write_pingpong_us = 0;  // 8-byte writes, each side spinning on its memory: half
  double quiet_write_pingpong_us = 0;  // the same with no call while spinning (ib_write_lat)
  double asleep_write_us = 0;  // an 8 B write and its completion, the target asleep
  double small_writes_mops = 0;  // 64 B writes, 16 in flight: millions per second
  double pingpong_gbs = 0;    // 1 MiB ping-pong, 2 x bytes / time
  double sleeping_us = 0;     // a round trip, both sides asleep in rpma_conn_wait
  double bandwidth_gbs = 0;   // 1 MiB writes
  double medium_bandwidth_gbs = 0;  // 64 KiB writes, 16 in flight
  double idle_cpu_pct = 0;    // the server, one idle second
};

TwoProcessFigures MeasureTwoProcesses() {
  int ready[2];
  if (pipe(ready) != 0) std::exit(1);
  std::fflush(stdout);
  const pid_t server = fork();
  if (server < 0) std::exit(1);
  if (server == 0) {
    close(ready[0]);
    RunTwoProcessServer(ready[1]);
  }
  close(ready[1]);
  char byte;
  if (read(ready[0], &byte, 1) != 1) Check(RPMA_E_UNKNOWN, "server start");
  close(ready[0]);

  TwoProcessFigures figures;
  ibv_context* dev = nullptr;
  Check(rpma_utils_get_ibv_context(kAddress, RPMA_UTIL_IBV_CONTEXT_REMOTE, &dev), "get ctx");
  rpma_peer* peer = nullptr;
  Check(rpma_peer_new(dev, &peer), "peer_new");
  std::vector<char> buf(2 * kBigWrite, 'w');  // [0, 1 MiB): sent; [1 MiB, 2 MiB): received
  rpma_mr_local* mr = nullptr;
  Check(rpma_mr_reg(peer, buf.data(), buf.size(),
                    RPMA_MR_USAGE_WRITE_SRC | RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_SEND |
                        RPMA_MR_USAGE_RECV,
                    &mr),
        "mr_reg");
  rpma_conn_cfg* cfg = nullptr;
  Check(rpma_conn_cfg_new(&cfg), "cfg");
  Check(rpma_conn_cfg_set_sq_size(cfg, 64), "sq size");
  Check(rpma_conn_cfg_set_cq_size(cfg, 64), "cq size");
  Check(rpma_conn_cfg_set_compl_channel(cfg, true), "set_compl_channel");  // rpma_conn_wait
  rpma_conn_req* req = nullptr;
  Check(rpma_conn_req_new(peer, kAddress, kTwoProcessPort, cfg, &req), "conn_req_new");
  rpma_conn* conn = nullptr;
  Check(rpma_conn_req_connect(&req, nullptr, &conn), "connect");
  rpma_conn_event event;
  Check(rpma_conn_next_event(conn, &event), "established");
  rpma_conn_private_data pdata;
  Check(rpma_conn_get_private_data(conn, &pdata), "private data");
  rpma_mr_remote* remote = nullptr;
  Check(rpma_mr_remote_from_descriptor(pdata.ptr, pdata.len, &remote), "remote mr");
  rpma_cq* cq = nullptr;
  Check(rpma_conn_get_cq(conn, &cq), "get_cq");

  using Clock = std::chrono::steady_clock;
  // One round trip of `size` bytes each way.
  auto round_trip = [&](size_t size) {
    Check(rpma_recv(conn, mr, kBigWrite, kBigWrite, nullptr), "recv");
    Check(rpma_send(conn, mr, 0, size, RPMA_F_COMPLETION_ALWAYS, nullptr), "send");
    int got_recv = 0, got_send = 0;
    while (!got_recv || !got_send) {
      (PollOne(cq).opcode == IBV_WC_RECV ? got_recv : got_send) = 1;
    }
  };
  auto start = Clock::now();
  for (int i = 0; i < kPingPongRounds; ++i) round_trip(8);
  figures.latency_us =
      std::chrono::duration<double, std::micro>(Clock::now() - start).count() / kPingPongRounds / 2;
  start = Clock::now();
  for (int i = 0; i < kBigPingPongs; ++i) round_trip(kBigWrite);
  figures.pingpong_gbs = 2.0 * kBigPingPongs * kBigWrite /
                         std::chrono::duration<double>(Clock::now() - start).count() / 1e9;
  start = Clock::now();
  for (int i = 0; i < kSleepingRounds; ++i) {
    Check(rpma_recv(conn, mr, kBigWrite, kBigWrite, nullptr), "recv");
    Check(rpma_send(conn, mr, 0, 8, RPMA_F_COMPLETION_ALWAYS, nullptr), "send");
    AwaitReceive(conn);
  }
  figures.sleeping_us =
      std::chrono::duration<double, std::micro>(Clock::now() - start).count() / kSleepingRounds;

  // The write ping-pong (the server's side is in RunTwoProcessServer): this side's descriptor
  // first.
  size_t my_desc_size = 0;
  Check(rpma_mr_get_descriptor_size(mr, &my_desc_size), "desc size");
  Check(rpma_mr_get_descriptor(mr, buf.data()), "desc");
  Check(rpma_send(conn, mr, 0, my_desc_size, RPMA_F_COMPLETION_ALWAYS, nullptr), "send desc");
  PollOne(cq);
  volatile uint64_t* my_slot = reinterpret_cast<volatile uint64_t*>(buf.data() + kClientSlot);
  start = Clock::now();
  for (int i = 1; i <= kPingPongRounds; ++i) {
    const uint64_t value = static_cast<uint64_t>(i);
    std::memcpy(buf.data(), &value, sizeof(value));
    Check(rpma_write(conn, remote, kServerSlot, mr, 0, 8, RPMA_F_COMPLETION_ALWAYS, nullptr),
          "write");
    ibv_wc wc;
    while (*my_slot != value) rpma_cq_get_wc(cq, 1, &wc, nullptr);
  }
  figures.write_pingpong_us =
      std::chrono::duration<double, std::micro>(Clock::now() - start).count() / kPingPongRounds / 2;
  start = Clock::now();
  for (int i = kPingPongRounds + 1; i <= kPingPongRounds + kQuietRounds; ++i) {
    const uint64_t value = static_cast<uint64_t>(i);
    std::memcpy(buf.data(), &value, sizeof(value));
    Check(rpma_write(conn, remote, kServerSlot, mr, 0, 8, RPMA_F_COMPLETION_ALWAYS,
                     kQuietWrite),
          "write");
    PollFor(cq, kQuietWrite);
    while (*my_slot != value) {
    }
  }
  figures.quiet_write_pingpong_us =
      std::chrono::duration<double, std::micro>(Clock::now() - start).count() / kQuietRounds / 2;
  // Completions of the last writes may still come: collected before the streams count theirs.
  for (ibv_wc wc; rpma_cq_get_wc(cq, 1, &wc, nullptr) == 0;) {
  }

  // `count` writes of `size` bytes, kWindow in flight: the seconds they took.
  const auto stream = [&](size_t size, int count) {
    const auto begin = Clock::now();
    int in_flight = 0;
    for (int posted = 0; posted < count || in_flight > 0;) {
      if (posted < count && in_flight < kWindow) {
        Check(rpma_write(conn, remote, 0, mr, 0, size, RPMA_F_COMPLETION_ALWAYS, nullptr),
              "write");
        ++posted;
        ++in_flight;
      } else {
        PollOne(cq);
        --in_flight;
      }
    }
    return std::chrono::duration<double>(Clock::now() - begin).count();
  };
  figures.bandwidth_gbs =
      static_cast<double>(kBigWrites) * kBigWrite / stream(kBigWrite, kBigWrites) / 1e9;
  figures.medium_bandwidth_gbs = static_cast<double>(kMediumWrites) * kMediumWrite /
                                 stream(kMediumWrite, kMediumWrites) / 1e9;
  figures.small_writes_mops = kSmallWrites / stream(64, kSmallWrites) / 1e6;
  // One write at a time, each waited for, while the server sleeps in rpma_conn_next_event.
  start = Clock::now();
  for (int i = 0; i < kAsleepWrites; ++i) {
    Check(rpma_write(conn, remote, 0, mr, 0, 8, RPMA_F_COMPLETION_ALWAYS, nullptr), "write");
    PollOne(cq);
  }
  figures.asleep_write_us =
      std::chrono::duration<double, std::micro>(Clock::now() - start).count() / kAsleepWrites;

  const double cpu_before = CpuSecondsOf(server);
  struct timespec second = {1, 0};
  nanosleep(&second, nullptr);
  figures.idle_cpu_pct = (CpuSecondsOf(server) - cpu_before) * 100.0;

  Check(rpma_conn_disconnect(conn), "disconnect");
  Check(rpma_conn_next_event(conn, &event), "closed");
  rpma_conn_delete(&conn);
  rpma_mr_remote_delete(&remote);
  rpma_mr_dereg(&mr);
  rpma_conn_cfg_delete(&cfg);
  rpma_peer_delete(&peer);
  int status = 0;
  waitpid(server, &status, 0);
  return figures;
}

// The floor of a sleeping round trip between two processes: a byte each way through two pipes,
// each side asleep in read(2). Microseconds per round trip.
double PipePingPongUs(int rounds) {
  int to_child[2], to_parent[2];
  if (pipe(to_child) != 0 || pipe(to_parent) != 0) std::exit(1);
  std::fflush(stdout);
  const pid_t child = fork();
  if (child < 0) std::exit(1);
  char byte = 'p';
  if (child == 0) {
    for (int i = 0; i < rounds; ++i) {
      if (read(to_child[0], &byte, 1) != 1 || write(to_parent[1], &byte, 1) != 1) std::_Exit(1);
    }
    std::_Exit(0);
  }
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < rounds; ++i) {
    if (write(to_child[1], &byte, 1) != 1 || read(to_parent[0], &byte, 1) != 1) std::exit(1);
  }
  const double us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  for (int fd : {to_child[0], to_child[1], to_parent[0], to_parent[1]}) close(fd);
  waitpid(child, nullptr, 0);
  return us / rounds;
}

// Runs `command` (a shell line) and returns the value of column `column` (1-based) of the
// last line of its output that starts with a digit, or 0 when it did not run.
double LastRowColumn(const std::string& command, int column) {
  std::FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return 0;
  char line[512];
  double value = 0;
  while (std::fgets(line, sizeof(line), pipe) != nullptr) {
    if (line[0] < '0' || line[0] > '9') continue;
    char* p = line;
    for (int i = 1; i < column; ++i) {
      while (*p != '\0' && *p != ' ' && *p != '\t') ++p;
      while (*p == ' ' || *p == '\t') ++p;
    }
    value = std::strtod(p, nullptr);
  }
  pclose(pipe);
  return value;
}

// libfabric's shm provider between two processes, fi_pingpong (a server and a client on a
// control port of this machine): usec/xfer at 8 bytes, MB/sec at 1 MiB. 0 where the tool is
// not installed or did not run.
struct ShmFigures {
  double latency_us = 0;
  double pingpong_gbs = 0;
};

double FiPingpong(const char* size, int iterations, int port, int column) {
  // Columns: bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec.
  const std::string args = absl::StrCat("-p shm -e rdm -S ", size, " -I ", iterations);
  return LastRowColumn(
      absl::StrCat("(timeout 60 fi_pingpong ", args, " -B ", port, " >/dev/null 2>&1 &); ",
                   "sleep 0.5; timeout 60 fi_pingpong ", args, " -P ", port,
                   " localhost 2>/dev/null"),
      column);
}

// A TCP port of this machine that nobody listens on now (the kernel's pick for port 0), for
// fi_pingpong's control connection: a fixed port would meet another bench's fi_pingpong (a
// concurrent run, or the server a killed run left behind for its 60 s), whose client or server
// then waits for the wrong peer. 0 when no socket could be had.
int FreeTcpPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

ShmFigures MeasureLibfabricShm() {
  ShmFigures figures;
  if (std::system("command -v fi_pingpong >/dev/null 2>&1") != 0) return figures;
  const int latency_port = FreeTcpPort();
  const int bandwidth_port = FreeTcpPort();
  if (latency_port == 0 || bandwidth_port == 0) return figures;
  figures.latency_us = FiPingpong("8", kPingPongRounds, latency_port, 7);
  figures.pingpong_gbs = FiPingpong("1048576", kBigPingPongs, bandwidth_port, 6) / 1000.0;
  return figures;
}

void ReportTwoProcesses() {
  const TwoProcessFigures ours = MeasureTwoProcesses();
  const double pipe_us = PipePingPongUs(kSleepingRounds);
  const ShmFigures shm = MeasureLibfabricShm();
  const softrpma::bench::ShmRmaFigures rma =
      softrpma::bench::MeasureShmRma(kPingPongRounds, kSmallWrites, kBigWrites, kAsleepWrites);
  std::printf("\nTwo processes on the simulated NIC (host fabric), measured in this run:\n");
  std::printf("  %-44s %8.2f us\n", "8-byte send/recv ping-pong, half round trip", ours.latency_us);
  std::printf("  %-44s %8.2f GB/s\n", "1 MiB send/recv ping-pong (2 x bytes / time)",
              ours.pingpong_gbs);
  std::printf("  %-44s %8.2f us   %.1fx a pipe ping-pong (%.2f us)\n",
              "8-byte round trip, both asleep (conn_wait)", ours.sleeping_us,
              ours.sleeping_us / pipe_us, pipe_us);
  if (rma.error.empty()) {
    std::printf("  %-44s %8.2f us   %.2fx shm fi_write (%.2f us)\n",
                "8-byte write ping-pong, spinning, half", ours.write_pingpong_us,
                ours.write_pingpong_us / rma.write_pingpong_us, rma.write_pingpong_us);
    std::printf("  %-44s %8.2f us   %.2fx the send/recv ping-pong\n",
                "8-byte write ping-pong, no call spinning, half", ours.quiet_write_pingpong_us,
                ours.quiet_write_pingpong_us / ours.latency_us);
    if (rma.delivered_write_us > 0) {
      std::printf("  %-44s %8.2f us   %.2fx shm delivery-complete fi_write (%.2f us)\n",
                  "8-byte write + completion, target asleep", ours.asleep_write_us,
                  ours.asleep_write_us / rma.delivered_write_us, rma.delivered_write_us);
    } else {
      std::printf("  %-44s %8.2f us   (shm's delivery-complete write: not measured, %s)\n",
                  "8-byte write + completion, target asleep", ours.asleep_write_us,
                  rma.delivered_error.c_str());
    }
    std::printf("  %-44s %8.2f M/s  %.2fx shm fi_write (%.2f M/s)\n",
                "64 B RDMA writes (16 in flight)", ours.small_writes_mops,
                ours.small_writes_mops / rma.small_writes_mops, rma.small_writes_mops);
    std::printf("  %-44s %8.2f GB/s %.2fx shm fi_write (%.2f GB/s)\n",
                "1 MiB RDMA write bandwidth (16 in flight)", ours.bandwidth_gbs,
                ours.bandwidth_gbs / rma.big_write_gbs, rma.big_write_gbs);
    std::printf("  %-44s %8.2f GB/s\n", "64 KiB RDMA write bandwidth (16 in flight)",
                ours.medium_bandwidth_gbs);
  } else {
    std::printf("  %-44s %8.2f us\n", "8-byte write ping-pong, spinning, half",
                ours.write_pingpong_us);
    std::printf("  %-44s %8.2f us   %.2fx the send/recv ping-pong\n",
                "8-byte write ping-pong, no call spinning, half", ours.quiet_write_pingpong_us,
                ours.quiet_write_pingpong_us / ours.latency_us);
    std::printf("  %-44s %8.2f us\n", "8-byte write + completion, target asleep",
                ours.asleep_write_us);
    std::printf("  %-44s %8.2f M/s\n", "64 B RDMA writes (16 in flight)", ours.small_writes_mops);
    std::printf("  %-44s %8.2f GB/s\n", "1 MiB RDMA write bandwidth (16 in flight)",
                ours.bandwidth_gbs);
    std::printf("  %-44s %8.2f GB/s\n", "64 KiB RDMA write bandwidth (16 in flight)",
                ours.medium_bandwidth_gbs);
    std::printf("  libfabric shm RMA: not measured (%s)\n", rma.error.c_str());
  }
  std::printf("  %-44s %8.1f %%\n", "idle server's CPU (1 s, connection open)", ours.idle_cpu_pct);
  if (shm.latency_us <= 0 || shm.pingpong_gbs <= 0) {
    std::printf("  libfabric shm: not measured (fi_pingpong not installed, or it failed: "
                "apt-get install libfabric-bin)\n");
    return;
  }
  std::printf("  %-44s %8.2f us   ours %.2fx its latency\n",
              "libfabric shm fi_pingpong 8 B (usec/xfer)", shm.latency_us,
              ours.latency_us / shm.latency_us);
  std::printf("  %-44s %8.2f GB/s ours %.2fx its bandwidth\n",
              "libfabric shm fi_pingpong 1 MiB (MB/sec)", shm.pingpong_gbs,
              ours.pingpong_gbs / shm.pingpong_gbs);
}

}  // namespace

int main(int argc, char** argv) {
  // The benchmark's own log lines would drown the table.
  rpma_log_set_threshold(RPMA_LOG_THRESHOLD, RPMA_LOG_LEVEL_ERROR);
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      g_many_connections = 50;
      kPingPongRounds /= 20;
      kBigWrites /= 20;
      kMediumWrites /= 20;
      kBigPingPongs /= 20;
      kSleepingRounds /= 20;
      kSmallWrites /= 20;
      kQuietRounds /= 20;
      kAsleepWrites /= 20;
      for (int j = i; j + 1 < argc; ++j) argv[j] = argv[j + 1];
      --argc;
      break;
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  std::printf("\nRatios, measured in this run (how many times slower than the baseline):\n");
  reporter.PrintRatio("rpma_write 64 B + completion vs memcpy", "BM_RpmaWrite/64",
                      "BM_Memcpy/64");
  reporter.PrintRatio("rpma_write 1 MiB + completion vs memcpy", "BM_RpmaWrite/1048576",
                      "BM_Memcpy/1048576");
  reporter.PrintRatio("64 B write, many connections in turn vs one", "BM_RpmaWriteRoundRobin/0",
                      "BM_RpmaWriteRoundRobin/1");
  reporter.PrintRatio("rpma_conn_wait ping-pong vs eventfd ping-pong",
                      "BM_ConnWaitPingPong/iterations:20000/real_time",
                      "BM_EventfdPingPong/iterations:20000/real_time");
  benchmark::Shutdown();
  ReportTwoProcesses();
  return 0;
}
