// fabric_conversation_fuzz: whole conversations over the host fabric (simverbs/sim/fabric/
// wire.h, docs/FABRIC.md) between a real librpma endpoint and a hostile peer the fuzzer plays,
// in either role. fabric_listener_fuzz feeds a listener raw bytes; here the input is a SCRIPT
// of steps, so that mutations keep the framing and explore orders of messages instead.
//
// THE SCRIPT. Byte 0 picks the role (even: hostile server, odd: hostile client); then steps,
// each an opcode byte and the bytes its fields take (a field past the input's end reads 0), at
// most kMaxSteps of them.
//
//   HOSTILE SERVER. The process listens on an abstract socket of its own fabric
//   ("softrpma/fuzz-conv-<pid>/127.0.0.1:7422", no librpma listener there) and a real librpma
//   client dials it (rpma_conn_req_new + rpma_conn_req_connect, with private data from the
//   script). Every librpma call of the client is non-blocking (its event fd is O_NONBLOCK, its
//   CQ is polled), so one thread plays both ends and the fabric thread does the NIC's work.
//   The steps answer the client's REQ and requests with kAccept / kReject / kReady /
//   kDisconnect / kDisconnectReply / kAck / kReadResponse whose fields the script sets (seq
//   picked among the requests the client sent or raw, status, flags with kFlagCma, body
//   lengths right or wrong, data), send requests of its own toward the client's region (right
//   or wrong rkey, kFlagCma with segments), garbage and announced-but-missing bodies, and make
//   the client post rpma_write / rpma_read / rpma_send / rpma_recv / rpma_flush /
//   rpma_atomic_write, poll its CQ, take its events and disconnect.
//
//   HOSTILE CLIENT. A librpma listener (rpma_ep_listen on 7421) with a registered region; the
//   fuzzer holds up to kMaxConns raw connections to it and interleaves, per connection: dial,
//   send message k of a template (a valid REQ, RTU, DREQ, DREP, QP bind, write, send, read,
//   atomic write, ack or read response) with fields from the script, read what comes back,
//   close; and, on the listener's side, take a request (accept or reject), take events and
//   completions, post requests toward the hostile client, disconnect.
//
// CHECKED PER INPUT: no crash (ASan, UBSan); every librpma call returns 0 or an error its man
// page lists, and every completion has a valid status; an RDMA READ of the client succeeds
// only if its data came (ReadLedger); no hang: each end learns within
// kWaitLimitMs that the other has gone once the script is over (the connection ends with an
// event, the listener closes its sockets); the real side still works afterwards (a canned
// good conversation: a client whose REQ is accepted writes 8 bytes and gets its ack; the
// listener accepts a good REQ and sends its REP); the process's peak memory stays under
// kMaxRssKiB. ASan's leak check runs at exit.
//
// SAFETY. The simulator still believes the pid a peer claims (kAccept, kConnectRequest) when it
// serves a kFlagCma request with process_vm_readv / writev (issue 18). So every pid this
// fuzzer puts in a message is its own, 0, or one no process can have (NoSuchPid), and nothing
// it writes holds the wire's magic except where a message begins (ScrubMagic): a run can never
// reach into another process of the machine.

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <initializer_list>
#include <map>
#include <string>
#include <vector>

#include "librpma.h"
#include "simverbs/sim/fabric/hostile_peer.h"
#include "simverbs/sim/fabric/wire.h"
#include "tools/fuzz/check.h"
#include "tools/fuzz/rpma_env.h"

namespace {

namespace wire = softrpma::sim::wire;
using softrpma::sim::testing::AbstractAddress;
using softrpma::sim::testing::MakeConnectBody;
using softrpma::sim::testing::RawConnect;

constexpr char kAddr[] = "127.0.0.1";
constexpr char kListenPort[] = "7421";  // the librpma listener (hostile client)
constexpr char kServerPort[] = "7422";  // the fuzzer's own socket (hostile server)
constexpr size_t kRegionSize = 4096;
constexpr int kWaitLimitMs = 5000;  // a bound against hangs, not a timing assertion
constexpr int kMaxSteps = 64;
constexpr int kMaxConns = 4;
constexpr int kMaxServerConns = 4;
// The most one message from the real side may be (its largest is a write of the region).
constexpr uint32_t kMaxInboundBody = 1 << 16;
// As fabric_listener_fuzz: the most this process may ever have used.
constexpr long kMaxRssKiB = 1 << 20;

// ---- The script ------------------------------------------------------------------------

// Reads the input front to back; a field past its end is 0.
class Script {
 public:
  Script(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool done() const { return size_ == 0; }
  uint8_t Byte() {
    if (size_ == 0) return 0;
    --size_;
    return *data_++;
  }
  uint16_t U16() { return static_cast<uint16_t>(Byte() | (Byte() << 8)); }
  uint32_t U32() { return static_cast<uint32_t>(U16()) | (static_cast<uint32_t>(U16()) << 16); }
  uint64_t U64() { return static_cast<uint64_t>(U32()) | (static_cast<uint64_t>(U32()) << 32); }
  // Up to `n` bytes (fewer at the end of the input).
  std::vector<uint8_t> Bytes(size_t n) {
    if (n > size_) n = size_;
    std::vector<uint8_t> out(data_, data_ + n);
    data_ += n;
    size_ -= n;
    return out;
  }

 private:
  const uint8_t* data_;
  size_t size_;
};

// ---- What the librpma side may answer ----------------------------------------------------

bool OneOf(int ret, std::initializer_list<int> documented) {
  if (ret == 0) return true;
  for (int e : documented) {
    if (ret == e) return true;
  }
  std::fprintf(stderr, "fabric_conversation_fuzz: undocumented return %d\n", ret);
  return false;
}

// rpma_write(3), rpma_read(3), rpma_send(3), rpma_recv(3), rpma_flush(3),
// rpma_atomic_write(3): ERRORS.
#define CHECK_POST(ret) FUZZ_CHECK(OneOf((ret), {RPMA_E_INVAL, RPMA_E_PROVIDER, RPMA_E_NOSUPP}))

bool ValidWc(const ibv_wc& wc) {
  if (wc.status > IBV_WC_TM_RNDV_INCOMPLETE) return false;
  if (wc.status != IBV_WC_SUCCESS) return true;  // the opcode of a failed WC is undefined
  switch (wc.opcode) {
    case IBV_WC_SEND:
    case IBV_WC_RDMA_WRITE:
    case IBV_WC_RDMA_READ:
    case IBV_WC_RECV:
    case IBV_WC_RECV_RDMA_WITH_IMM:
    case IBV_WC_ATOMIC_WRITE:
      return true;
    default:
      return false;
  }
}

// The client's RDMA READs and how the hostile server answered them, per tag (the read's
// remote offset + 1, its rpma_read op_context, so its completion's wr_id): a READ may complete
// successfully only if its data came, in the response's body or, for a request sent with
// kFlagCma, written in place by the responder.
struct ReadLedger {
  std::map<uint64_t, int> delivered;    // successful responses that carried the data
  std::map<uint64_t, int> undelivered;  // successful responses that did not
};

// Takes what the CQ holds (rpma_cq_get_wc(3): ERRORS), checking each completion (and, with a
// ledger, that no READ succeeded on an answer without its data).
void DrainCq(rpma_cq* cq, ReadLedger* ledger = nullptr) {
  for (int rounds = 0; rounds < 64; ++rounds) {
    ibv_wc wc[8];
    int got = 0;
    const int ret = rpma_cq_get_wc(cq, 8, wc, &got);
    if (ret == RPMA_E_NO_COMPLETION) return;
    FUZZ_CHECK(OneOf(ret, {RPMA_E_INVAL, RPMA_E_PROVIDER, RPMA_E_UNKNOWN}));
    if (ret != 0) return;
    FUZZ_CHECK(got >= 1 && got <= 8);
    for (int i = 0; i < got; ++i) {
      FUZZ_CHECK(ValidWc(wc[i]));
      if (ledger == nullptr || wc[i].status != IBV_WC_SUCCESS || wc[i].opcode != IBV_WC_RDMA_READ ||
          wc[i].wr_id == 0) {
        continue;
      }
      if (ledger->undelivered[wc[i].wr_id] > 0 && ledger->delivered[wc[i].wr_id] == 0) {
        std::fprintf(stderr,
                     "fabric_conversation_fuzz: an RDMA READ (tag %llu) completed IBV_WC_SUCCESS "
                     "though its only answer was a kFlagCma read response to a request sent "
                     "without kFlagCma: no data came\n",
                     static_cast<unsigned long long>(wc[i].wr_id));
        std::abort();
      }
    }
  }
}

void DrainConnCq(rpma_conn* conn, ReadLedger* ledger = nullptr) {
  rpma_cq* cq = nullptr;
  FUZZ_CHECK(rpma_conn_get_cq(conn, &cq) == 0);
  DrainCq(cq, ledger);
}

bool Terminal(rpma_conn_event event) {
  return event == RPMA_CONN_CLOSED || event == RPMA_CONN_LOST || event == RPMA_CONN_REJECTED ||
         event == RPMA_CONN_UNREACHABLE;
}

// One rpma_conn_next_event(3) on a non-blocking connection: the event, or UNDEFINED for none.
rpma_conn_event NextEvent(rpma_conn* conn) {
  rpma_conn_event event = RPMA_CONN_UNDEFINED;
  const int ret = rpma_conn_next_event(conn, &event);
  if (ret == RPMA_E_NO_EVENT) return RPMA_CONN_UNDEFINED;
  FUZZ_CHECK(OneOf(ret, {RPMA_E_INVAL, RPMA_E_PROVIDER, RPMA_E_UNKNOWN, RPMA_E_NOMEM}));
  if (ret != 0) return RPMA_CONN_UNDEFINED;
  FUZZ_CHECK(event == RPMA_CONN_ESTABLISHED || Terminal(event));
  return event;
}

// A pid claimed in a message other than ours and 0: always one no process can have (above
// PID_MAX_LIMIT, 2^22), because the simulator still trusts the pid a peer claims for
// cross-memory attach (process_vm_readv / writev), and this fuzzer must never write into
// another process of the machine.
int32_t NoSuchPid(uint32_t raw) { return static_cast<int32_t>(0x40000000u | (raw & 0x3fffffffu)); }

// ---- Sockets -----------------------------------------------------------------------------

void SetNonBlocking(int fd) {
  const int flags = fcntl(fd, F_GETFL);
  FUZZ_CHECK(flags >= 0 && fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0);
}


// One raw connection of the hostile side, with what came from the real side, parsed.
struct Wire {
  int fd = -1;
  bool closed = false;  // the real side closed it (or we did)
  std::string in;       // bytes not yet a whole message
  struct Message {
    wire::Header header;
    std::vector<uint8_t> body;
  };
  std::deque<Message> messages;  // whole messages, oldest first (at most kMaxKept)
  static constexpr size_t kMaxKept = 64;
};

// Reads what arrived without blocking and splits it into messages. A message the real side
// sends is well formed: FUZZ_CHECKed.
void Pump(Wire* w) {
  if (w->fd < 0 || w->closed) return;
  uint8_t buf[8192];
  while (true) {
    const ssize_t n = recv(w->fd, buf, sizeof(buf), 0);
    if (n > 0) {
      w->in.append(reinterpret_cast<const char*>(buf), static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) w->closed = true;
    break;
  }
  while (w->in.size() >= sizeof(wire::Header)) {
    wire::Header header;
    std::memcpy(&header, w->in.data(), sizeof(header));
    FUZZ_CHECK(wire::ValidateHeader(header));
    FUZZ_CHECK(header.body_len <= kMaxInboundBody);
    if (w->in.size() < sizeof(header) + header.body_len) break;
    Wire::Message m{header, std::vector<uint8_t>(w->in.begin() + sizeof(header),
                                                 w->in.begin() + sizeof(header) + header.body_len)};
    w->in.erase(0, sizeof(header) + header.body_len);
    if (w->messages.size() == Wire::kMaxKept) w->messages.pop_front();
    w->messages.push_back(std::move(m));
  }
}

// Pumps until something new arrives or the wire closes, at most `ms` milliseconds.
void PumpFor(Wire* w, int ms) {
  const size_t before = w->messages.size();
  for (int waited = 0; waited < ms && !w->closed; ++waited) {
    Pump(w);
    if (w->messages.size() != before || w->closed) return;
    pollfd p{w->fd, POLLIN, 0};
    poll(&p, 1, 1);
  }
}

// Writes all of it (the real side reads while we wait); false when it closed the connection.
bool WriteAll(Wire* w, const void* data, size_t size) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (int waited = 0; size > 0;) {
    const ssize_t n = send(w->fd, p, size, MSG_NOSIGNAL);
    if (n > 0) {
      p += n;
      size -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && waited < kWaitLimitMs) {
      Pump(w);
      pollfd pfd{w->fd, POLLOUT, 0};
      poll(&pfd, 1, 10);
      waited += 10;
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      std::fprintf(stderr, "fabric_conversation_fuzz: the real side stopped reading\n");
      std::abort();
    }
    w->closed = true;  // EPIPE / ECONNRESET
    return false;
  }
  return true;
}

// Breaks every occurrence of the wire's magic in [p, p + n) (flipping its first byte's top
// bit, which cannot make a new one). Everything the hostile side writes goes through it but a
// message's own first four bytes, so that a header is only ever read where we began one: a
// stream knocked out of step (garbage, a body longer than its message) then ends at the next
// header check instead of letting script bytes pose as a message whose pid (NoSuchPid) we
// did not choose.
void ScrubMagic(uint8_t* p, size_t n) {
  uint8_t magic[4];
  std::memcpy(magic, &wire::kMagic, 4);
  for (size_t i = 0; i + 4 <= n; ++i) {
    if (std::memcmp(p + i, magic, 4) == 0) p[i] ^= 0x80;
  }
}

bool SendMessage(Wire* w, const wire::Header& header, const void* body, size_t body_bytes) {
  if (w->closed) return false;
  std::vector<uint8_t> bytes(sizeof(header) + body_bytes);
  std::memcpy(bytes.data(), &header, sizeof(header));
  if (body_bytes > 0) std::memcpy(bytes.data() + sizeof(header), body, body_bytes);
  ScrubMagic(bytes.data() + 1, bytes.size() - 1);
  return WriteAll(w, bytes.data(), bytes.size());
}

void CloseWire(Wire* w) {
  if (w->fd >= 0) close(w->fd);
  *w = Wire();
}

// Waits (bounded) until the real side has closed `w`, dropping what it sends; `also` runs
// between polls (taking the listener's requests, say).
template <typename Also>
void AwaitClosedBy(Wire* w, const char* who, Also also) {
  for (int waited = 0; waited < kWaitLimitMs; waited += 10) {
    Pump(w);
    w->messages.clear();
    if (w->closed) return;
    also();
    pollfd p{w->fd, POLLIN, 0};
    poll(&p, 1, 10);
  }
  std::fprintf(stderr, "fabric_conversation_fuzz: %s left a connection open\n", who);
  std::abort();
}

// ---- The process's endpoints --------------------------------------------------------------

struct Env {
  softrpma::fuzz::SimListener listener;  // the librpma listener on kListenPort
  rpma_mr_local* listener_mr = nullptr;  // its region
  uint64_t listener_region_addr = 0;
  uint32_t listener_rkey = 0;
  std::string listener_name;           // its abstract socket name (no leading NUL)
  rpma_mr_local* client_mr = nullptr;  // the client's region
  uint64_t client_region_addr = 0;
  uint32_t client_rkey = 0;
  // What the client's (and the listener's) requests target: a region of this process, whose
  // descriptor stands for the hostile peer's (which answers them itself).
  rpma_mr_local* target_mr = nullptr;
  rpma_mr_remote* remote = nullptr;
  uint64_t target_region_addr = 0;
  int server_fd = -1;  // the hostile server's listening socket
};

alignas(64) uint8_t g_listener_region[kRegionSize];
alignas(64) uint8_t g_client_region[kRegionSize];
alignas(64) uint8_t g_target_region[kRegionSize];
alignas(64) uint8_t g_cma_source[kRegionSize];  // what our kFlagCma requests point at

constexpr int kUsage = RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_READ_DST | RPMA_MR_USAGE_WRITE_SRC |
                       RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_SEND | RPMA_MR_USAGE_RECV |
                       RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY;

void AddrAndKey(rpma_mr_local* mr, uint64_t* addr, uint32_t* rkey) {
  uint8_t desc[21];
  FUZZ_CHECK(rpma_mr_get_descriptor(mr, desc) == 0);
  std::memcpy(addr, desc, 8);  // mr.cc's layout, little-endian like this host
  std::memcpy(rkey, desc + 16, 4);
}

Env* GetEnv() {
  static Env* env = [] {
    auto* e = new Env;
    e->listener = softrpma::fuzz::ListenOnOwnFabric("fuzz-conv", kAddr, kListenPort);
    SetNonBlocking(e->listener.ep_fd);
    rpma_peer* peer = e->listener.peer;
    FUZZ_CHECK(rpma_mr_reg(peer, g_listener_region, kRegionSize, kUsage, &e->listener_mr) == 0);
    AddrAndKey(e->listener_mr, &e->listener_region_addr, &e->listener_rkey);
    FUZZ_CHECK(rpma_mr_reg(peer, g_client_region, kRegionSize, kUsage, &e->client_mr) == 0);
    AddrAndKey(e->client_mr, &e->client_region_addr, &e->client_rkey);
    FUZZ_CHECK(rpma_mr_reg(peer, g_target_region, kRegionSize, kUsage, &e->target_mr) == 0);
    uint8_t desc[21];
    FUZZ_CHECK(rpma_mr_get_descriptor(e->target_mr, desc) == 0);
    uint32_t target_rkey = 0;
    AddrAndKey(e->target_mr, &e->target_region_addr, &target_rkey);
    FUZZ_CHECK(rpma_mr_remote_from_descriptor(desc, sizeof(desc), &e->remote) == 0);
    e->listener_name = "softrpma/" + e->listener.fabric + "/" + kAddr + ":" + kListenPort;
    e->server_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    FUZZ_CHECK(e->server_fd >= 0);
    sockaddr_un addr;
    const std::string name = "softrpma/" + e->listener.fabric + "/" + kAddr + ":" + kServerPort;
    const socklen_t len = AbstractAddress(name, &addr);
    FUZZ_CHECK(bind(e->server_fd, reinterpret_cast<sockaddr*>(&addr), len) == 0);
    FUZZ_CHECK(listen(e->server_fd, 16) == 0);
    return e;
  }();
  return env;
}

// ---- Hostile server ----------------------------------------------------------------------

struct ClientSide {
  rpma_conn* conn = nullptr;
  bool ended = false;  // it had its terminal event
};

// Takes the client's events, waiting up to `wait_ms` for the first (a bound, so that a
// script's answer has reached the client when its next step runs).
void ClientEvents(ClientSide* c, int wait_ms = 0) {
  if (c->conn == nullptr || c->ended) return;
  int fd = -1;
  FUZZ_CHECK(rpma_conn_get_event_fd(c->conn, &fd) == 0);
  bool any = false;
  for (int waited = 0; waited <= wait_ms && !any; ++waited) {
    for (int i = 0; i < 4; ++i) {
      const rpma_conn_event event = NextEvent(c->conn);
      if (event == RPMA_CONN_UNDEFINED) break;
      any = true;
      if (Terminal(event)) {
        c->ended = true;
        return;
      }
    }
    pollfd p{fd, POLLIN, 0};
    if (!any && waited < wait_ms) poll(&p, 1, 1);
  }
}

// Starts a client toward kServerPort and accepts its socket. Returns the client.
ClientSide StartClient(const Env& env, const std::vector<uint8_t>& pdata, Wire* w) {
  rpma_conn_req* req = nullptr;
  FUZZ_CHECK(rpma_conn_req_new(env.listener.peer, kAddr, kServerPort, nullptr, &req) == 0);
  rpma_conn_private_data pd{const_cast<uint8_t*>(pdata.data()), static_cast<uint8_t>(pdata.size())};
  ClientSide c;
  FUZZ_CHECK(rpma_conn_req_connect(&req, pdata.empty() ? nullptr : &pd, &c.conn) == 0);
  int fd = -1;
  FUZZ_CHECK(rpma_conn_get_event_fd(c.conn, &fd) == 0);
  SetNonBlocking(fd);
  for (int waited = 0; w->fd < 0; ++waited) {
    w->fd = accept4(env.server_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (w->fd >= 0) break;
    FUZZ_CHECK(errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR);
    if (waited >= kWaitLimitMs) {
      std::fprintf(stderr, "fabric_conversation_fuzz: the client never dialled\n");
      std::abort();
    }
    pollfd p{env.server_fd, POLLIN, 0};
    poll(&p, 1, 1);
  }
  return c;
}

// The client's requests seen so far (kWrite / kSend / kRead / kAtomicWrite), oldest first,
// and its REQ.
struct Seen {
  std::deque<wire::Header> requests;
  bool have_req = false;
  wire::ConnectBody req;
  ReadLedger reads;
};

void Collect(Wire* w, Seen* seen) {
  Pump(w);
  while (!w->messages.empty()) {
    Wire::Message m = std::move(w->messages.front());
    w->messages.pop_front();
    switch (static_cast<wire::Type>(m.header.type)) {
      case wire::Type::kConnectRequest:
        FUZZ_CHECK(m.body.size() >= wire::CmBodyMinBytes<wire::ConnectBody>() &&
                   m.body.size() <= sizeof(wire::ConnectBody));
        wire::ReadCmBody(m.body.data(), static_cast<uint32_t>(m.body.size()), &seen->req);
        FUZZ_CHECK(wire::ValidateConnectBody(seen->req, static_cast<uint32_t>(m.body.size())));
        seen->have_req = true;
        break;
      case wire::Type::kWrite:
      case wire::Type::kSend:
      case wire::Type::kRead:
      case wire::Type::kAtomicWrite:
        if (seen->requests.size() == Wire::kMaxKept) seen->requests.pop_front();
        seen->requests.push_back(m.header);
        break;
      default:
        break;
    }
  }
}

// The seq a response names: one of the requests seen (then it is taken off), or raw.
uint64_t PickSeq(Script* s, Seen* seen, const wire::Header** request) {
  const uint8_t which = s->Byte();
  *request = nullptr;
  if (which >= 0xF0) return s->U64();
  if (seen->requests.empty()) return which;
  static wire::Header picked;
  const size_t i = which % seen->requests.size();
  picked = seen->requests[i];
  if ((which & 0x80) == 0) seen->requests.erase(seen->requests.begin() + static_cast<long>(i));
  *request = &picked;
  return picked.seq;
}

// A body length: usually right (`right`), sometimes off.
uint32_t PickLength(Script* s, uint32_t right) {
  switch (s->Byte() % 6) {
    case 0:
    case 1:
    case 2:
      return right;
    case 3:
      return 0;
    case 4:
      return right + 1;
    default:
      return s->U16() % 8192;
  }
}

void ServerStep(Script* s, const Env& env, Wire* w, Seen* seen, ClientSide* c, uint64_t* seq) {
  const uint8_t op = s->Byte() % 16;
  switch (op) {
    case 0: {  // kAccept
      wire::AcceptBody body;
      std::memset(&body, 0, sizeof(body));
      body.qp_num = s->U32();
      body.private_data_len = s->Byte();
      body.responder_resources = s->Byte();
      body.initiator_depth = s->Byte();
      body.srq = s->Byte();
      const uint8_t pid = s->Byte() % 3;
      body.pid = pid == 0 ? getpid() : pid == 1 ? 0 : NoSuchPid(s->U32());
      body.can_reach_you = s->Byte() % 3;
      const uint8_t probe = s->Byte() % 3;  // the client's own probe word lives here too
      if (probe == 0) body.probe_addr = seen->have_req ? seen->req.probe_addr : 0;
      if (probe == 2) body.probe_addr = s->U64();
      for (uint8_t& b : body.private_data) b = s->Byte();
      wire::Header header = wire::MakeHeader(wire::Type::kAccept);
      header.flags = s->U16();
      header.status = static_cast<int32_t>(s->U32());
      header.body_len = PickLength(s, sizeof(body));
      std::vector<uint8_t> bytes(header.body_len, 0);
      const auto* raw = reinterpret_cast<const uint8_t*>(&body);
      std::copy_n(raw, std::min<size_t>(sizeof(body), bytes.size()), bytes.begin());
      SendMessage(w, header, bytes.data(), bytes.size());
      break;
    }
    case 1: {  // kReject
      wire::RejectBody body;
      std::memset(&body, 0, sizeof(body));
      body.private_data_len = s->Byte();
      wire::Header header = wire::MakeHeader(wire::Type::kReject);
      header.status = static_cast<int32_t>(s->U32());
      header.body_len = sizeof(body);
      SendMessage(w, header, &body, sizeof(body));
      break;
    }
    case 2:  // kReady, kDisconnect, kDisconnectReply (no body)
    case 3:
    case 4: {
      const wire::Type type = op == 2   ? wire::Type::kReady
                              : op == 3 ? wire::Type::kDisconnect
                                        : wire::Type::kDisconnectReply;
      wire::Header header = wire::MakeHeader(type);
      header.flags = s->U16();
      SendMessage(w, header, nullptr, 0);
      break;
    }
    case 5: {  // kAck
      Collect(w, seen);
      wire::Header header = wire::MakeHeader(wire::Type::kAck);
      const wire::Header* request = nullptr;
      header.seq = PickSeq(s, seen, &request);
      header.status = s->Byte() % 4 == 0 ? static_cast<int32_t>(s->U32()) : 0;
      header.flags = s->U16();
      SendMessage(w, header, nullptr, 0);
      break;
    }
    case 6: {  // kReadResponse
      Collect(w, seen);
      wire::Header header = wire::MakeHeader(wire::Type::kReadResponse);
      const wire::Header* request = nullptr;
      header.seq = PickSeq(s, seen, &request);
      header.status = s->Byte() % 4 == 0 ? static_cast<int32_t>(s->U32()) : 0;
      header.flags = s->Byte() % 3 == 0 ? wire::kFlagCma : 0;
      const uint32_t right = request != nullptr ? static_cast<uint32_t>(request->length) : 8;
      header.body_len = (header.flags & wire::kFlagCma) != 0 ? 0 : PickLength(s, right);
      const uint8_t fill = s->Byte();
      std::vector<uint8_t> data(header.body_len, fill);
      if (SendMessage(w, header, data.data(), data.size()) && request != nullptr &&
          request->type == static_cast<uint16_t>(wire::Type::kRead) && header.status == 0) {
        const uint64_t tag = request->remote_addr - env.target_region_addr + 1;
        const bool cma_request = (request->flags & wire::kFlagCma) != 0;
        if ((header.flags & wire::kFlagCma) != 0) {
          ++(cma_request ? seen->reads.delivered : seen->reads.undelivered)[tag];
        } else if (header.body_len == request->length) {
          ++seen->reads.delivered[tag];
        }
      }
      break;
    }
    case 7: {  // a request of ours toward the client's region
      static constexpr wire::Type kTypes[] = {wire::Type::kWrite, wire::Type::kSend,
                                              wire::Type::kRead, wire::Type::kAtomicWrite};
      wire::Header header = wire::MakeHeader(kTypes[s->Byte() % 4]);
      header.seq = (*seq)++;
      header.rkey = s->Byte() % 4 != 0 ? env.client_rkey : s->U32();
      header.remote_addr = env.client_region_addr + s->U16() % (2 * kRegionSize);
      header.imm_data = s->U32();
      header.flags = static_cast<uint16_t>(s->Byte() % 8);
      std::vector<uint8_t> body;
      if ((header.flags & wire::kFlagCma) != 0 &&
          header.type != uint16_t(wire::Type::kAtomicWrite)) {
        // Segments in our memory (the peer's pid is ours: the client may reach them): inside
        // g_cma_source, or, for a write or send (whose segments the client only reads from),
        // anywhere. A read's segments are WRITTEN by the client with process_vm_writev, which
        // no sanitizer sees: outside g_cma_source it would corrupt this process itself.
        const bool written_by_client = header.type == uint16_t(wire::Type::kRead);
        const int count = 1 + s->Byte() % 3;
        for (int i = 0; i < count; ++i) {
          wire::CmaSegment seg;
          const bool anywhere = s->Byte() % 4 == 0 && !written_by_client;
          const size_t offset = anywhere ? 0 : s->U16() % kRegionSize;
          seg.addr = anywhere ? s->U64() : reinterpret_cast<uintptr_t>(g_cma_source) + offset;
          seg.length = s->U16() % (kRegionSize - offset);
          header.length += seg.length;
          const auto* p = reinterpret_cast<const uint8_t*>(&seg);
          body.insert(body.end(), p, p + sizeof(seg));
        }
      } else if (header.type == uint16_t(wire::Type::kRead)) {
        header.length = s->U16() % 8192;
      } else if (header.type == uint16_t(wire::Type::kAtomicWrite)) {
        body.assign(8, s->Byte());
      } else {
        const size_t length = s->U16() % 8192;
        body.assign(length, s->Byte());
        header.length = body.size();
      }
      header.body_len = static_cast<uint32_t>(body.size());
      SendMessage(w, header, body.data(), body.size());
      break;
    }
    case 8: {  // garbage bytes
      std::vector<uint8_t> bytes = s->Bytes(s->Byte());
      ScrubMagic(bytes.data(), bytes.size());
      if (!w->closed) WriteAll(w, bytes.data(), bytes.size());
      break;
    }
    case 9: {  // a header announcing more body than follows
      wire::Header header =
          wire::MakeHeader(s->Byte() % 2 == 0 ? wire::Type::kReadResponse : wire::Type::kWrite);
      header.body_len = s->U32();
      header.seq = s->Byte();
      header.rkey = env.client_rkey;
      header.remote_addr = env.client_region_addr;
      const std::vector<uint8_t> part(s->U16() % 8192, 0x5a);
      SendMessage(w, header, part.data(), std::min<size_t>(part.size(), header.body_len));
      break;
    }
    case 10: {  // the client posts
      if (c->conn == nullptr) break;
      const uint8_t what = s->Byte() % 6;
      const size_t dst = s->U16() % (kRegionSize + 64);
      const size_t src = s->U16() % (kRegionSize + 64);
      const size_t len = s->U16() % (kRegionSize + 64);
      const int flags = s->Byte() % 2 == 0 ? RPMA_F_COMPLETION_ALWAYS : RPMA_F_COMPLETION_ON_ERROR;
      int ret = 0;
      switch (what) {
        case 0:
          ret = rpma_write(c->conn, env.remote, dst, env.client_mr, src, len, flags, nullptr);
          break;
        case 1:
          ret = rpma_read(c->conn, env.client_mr, dst, env.remote, src, len, flags,
                          reinterpret_cast<void*>(uintptr_t{src + 1}));  // its tag (ReadLedger)
          break;
        case 2:
          ret = rpma_send(c->conn, env.client_mr, src, len, flags, nullptr);
          break;
        case 3:
          ret = rpma_recv(c->conn, env.client_mr, dst, len, nullptr);
          break;
        case 4:
          ret =
              rpma_flush(c->conn, env.remote, dst, len, RPMA_FLUSH_TYPE_VISIBILITY, flags, nullptr);
          break;
        default: {
          char value[8] = {1, 2, 3, 4, 5, 6, 7, 8};
          ret = rpma_atomic_write(c->conn, env.remote, dst & ~size_t{7}, value, flags, nullptr);
          break;
        }
      }
      CHECK_POST(ret);
      break;
    }
    case 11:  // the client polls (giving the fabric thread a little time first)
      if (c->conn != nullptr) {
        usleep(2000);
        DrainConnCq(c->conn, &seen->reads);
      }
      break;
    case 12:  // the client takes its events
      ClientEvents(c, 10);
      break;
    case 13:  // read what the client sent, waiting a little
      PumpFor(w, s->Byte() % 20);
      Collect(w, seen);
      break;
    case 14:  // the server hangs up
      if (w->fd >= 0) shutdown(w->fd, SHUT_RDWR);
      break;
    default:  // the client disconnects
      if (c->conn != nullptr) FUZZ_CHECK(OneOf(rpma_conn_disconnect(c->conn), {RPMA_E_PROVIDER}));
      break;
  }
}

// Ends the client after the server hung up: its connection must end with an event (bounded),
// then it is deleted.
void EndClient(ClientSide* c, ReadLedger* reads = nullptr) {
  if (c->conn == nullptr) return;
  int fd = -1;
  FUZZ_CHECK(rpma_conn_get_event_fd(c->conn, &fd) == 0);
  for (int waited = 0; !c->ended && waited < kWaitLimitMs; waited += 10) {
    ClientEvents(c);
    DrainConnCq(c->conn, reads);
    if (c->ended) break;
    pollfd p{fd, POLLIN, 0};
    poll(&p, 1, 10);
  }
  if (!c->ended) {
    std::fprintf(stderr, "fabric_conversation_fuzz: the client never learnt its server left\n");
    std::abort();
  }
  DrainConnCq(c->conn, reads);
  FUZZ_CHECK(OneOf(rpma_conn_disconnect(c->conn), {RPMA_E_PROVIDER}));
  FUZZ_CHECK(rpma_conn_delete(&c->conn) == 0);
}

void PlayServer(Script* s, const Env& env) {
  Wire w;
  ClientSide c = StartClient(env, s->Bytes(s->Byte() % 57), &w);
  Seen seen;
  uint64_t seq = 1;
  for (int step = 0; step < kMaxSteps && !s->done(); ++step)
    ServerStep(s, env, &w, &seen, &c, &seq);
  shutdown(w.fd, SHUT_RDWR);
  EndClient(&c, &seen.reads);
  CloseWire(&w);
}

// The canned good conversation with a client: accept its REQ, see ESTABLISHED, acknowledge
// its 8-byte write, see the completion succeed.
void CheckClientStillWorks(const Env& env) {
  Wire w;
  ClientSide c = StartClient(env, {}, &w);
  Seen seen;
  for (int waited = 0; !seen.have_req && !w.closed && waited < kWaitLimitMs; ++waited) {
    PumpFor(&w, 1);
    Collect(&w, &seen);
  }
  FUZZ_CHECK(seen.have_req);
  wire::AcceptBody body;
  std::memset(&body, 0, sizeof(body));
  body.qp_num = 0x99;
  body.pid = getpid();
  wire::Header header = wire::MakeHeader(wire::Type::kAccept);
  header.body_len = sizeof(body);
  FUZZ_CHECK(SendMessage(&w, header, &body, sizeof(body)));
  int fd = -1;
  FUZZ_CHECK(rpma_conn_get_event_fd(c.conn, &fd) == 0);
  rpma_conn_event event = RPMA_CONN_UNDEFINED;
  for (int waited = 0; event == RPMA_CONN_UNDEFINED && waited < kWaitLimitMs; ++waited) {
    event = NextEvent(c.conn);
    pollfd p{fd, POLLIN, 0};
    if (event == RPMA_CONN_UNDEFINED) poll(&p, 1, 1);
  }
  FUZZ_CHECK(event == RPMA_CONN_ESTABLISHED);
  FUZZ_CHECK(rpma_write(c.conn, env.remote, 0, env.client_mr, 0, 8, RPMA_F_COMPLETION_ALWAYS,
                        nullptr) == 0);
  for (int waited = 0; seen.requests.empty() && !w.closed && waited < kWaitLimitMs; ++waited) {
    PumpFor(&w, 1);
    Collect(&w, &seen);
  }
  FUZZ_CHECK(!seen.requests.empty());
  const wire::Header write = seen.requests.front();
  FUZZ_CHECK(write.type == static_cast<uint16_t>(wire::Type::kWrite) &&
             (write.body_len == 8 || write.length == 8));
  wire::Header ack = wire::MakeHeader(wire::Type::kAck);
  ack.seq = write.seq;
  FUZZ_CHECK(SendMessage(&w, ack, nullptr, 0));
  rpma_cq* cq = nullptr;
  FUZZ_CHECK(rpma_conn_get_cq(c.conn, &cq) == 0);
  ibv_wc wc;
  int got = 0;
  int ret = RPMA_E_NO_COMPLETION;
  for (int waited = 0; ret == RPMA_E_NO_COMPLETION && waited < kWaitLimitMs; ++waited) {
    ret = rpma_cq_get_wc(cq, 1, &wc, &got);
    if (ret == RPMA_E_NO_COMPLETION) usleep(1000);
  }
  FUZZ_CHECK(ret == 0 && got == 1 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RDMA_WRITE);
  shutdown(w.fd, SHUT_RDWR);
  EndClient(&c);
  CloseWire(&w);
}

// ---- Hostile client ----------------------------------------------------------------------

struct ServerSide {
  rpma_conn* conns[kMaxServerConns] = {};
  bool ended[kMaxServerConns] = {};
};

int Dial(const Env& env) {
  const int fd = RawConnect(env.listener_name);
  FUZZ_CHECK(fd >= 0);
  SetNonBlocking(fd);
  return fd;
}

// The REQ of a real rdma_connect from 127.0.0.1:40000, this process's, no probe.
wire::ConnectBody GoodConnectBody() {
  return MakeConnectBody(static_cast<uint16_t>(std::atoi(kListenPort)), 40000, getpid(),
                         /*probe_addr=*/0, /*qp_num=*/4242);
}

// The latest data request the listener sent on `w`, if any.
const wire::Header* LatestRequest(Wire* w) {
  Pump(w);
  for (auto it = w->messages.rbegin(); it != w->messages.rend(); ++it) {
    if (it->header.type >= static_cast<uint16_t>(wire::Type::kWrite) &&
        it->header.type < static_cast<uint16_t>(wire::Type::kAck)) {
      return &it->header;
    }
  }
  return nullptr;
}

// Message k of the template, its fields from the script.
void SendTemplate(Script* s, const Env& env, Wire* w) {
  const uint8_t k = s->Byte() % 11;
  std::vector<uint8_t> body;
  wire::Header header = wire::MakeHeader(wire::Type::kConnectRequest);
  switch (k) {
    case 0: {  // REQ
      wire::ConnectBody req = GoodConnectBody();
      req.qp_num = s->Byte() % 2 == 0 ? req.qp_num : s->U32();
      req.private_data_len = s->Byte() % 64;
      for (uint8_t& b : req.private_data) b = s->Byte();
      req.srq = s->Byte();
      const uint8_t pid = s->Byte() % 3;
      req.pid = pid == 0 ? getpid() : pid == 1 ? 0 : NoSuchPid(s->U32());
      const uint8_t probe = s->Byte() % 3;
      req.probe_addr = probe == 0   ? 0
                       : probe == 1 ? reinterpret_cast<uintptr_t>(g_cma_source)
                                    : s->U64();
      if (s->Byte() % 4 == 0) req.src.ss_family = s->Byte();
      body.assign(reinterpret_cast<uint8_t*>(&req), reinterpret_cast<uint8_t*>(&req) + sizeof(req));
      break;
    }
    case 1:
      header.type = static_cast<uint16_t>(wire::Type::kReady);
      break;
    case 2:
      header.type = static_cast<uint16_t>(wire::Type::kDisconnect);
      break;
    case 3:
      header.type = static_cast<uint16_t>(wire::Type::kDisconnectReply);
      break;
    case 4: {
      header.type = static_cast<uint16_t>(wire::Type::kQpBind);
      wire::QpBindBody bind;
      std::memset(&bind, 0, sizeof(bind));
      bind.version = wire::kQpBindVersion;
      bind.src_qp_num = s->U32() % (1 << 24);
      bind.dst_qp_num = s->U32() % (1 << 24);
      bind.pid = getpid();
      body.assign(reinterpret_cast<uint8_t*>(&bind),
                  reinterpret_cast<uint8_t*>(&bind) + sizeof(bind));
      break;
    }
    case 5:  // kWrite, kSend: data
    case 6: {
      header.type = static_cast<uint16_t>(k == 5 ? wire::Type::kWrite : wire::Type::kSend);
      const size_t length = s->U16() % (kRegionSize + 64);
      body.assign(length, s->Byte());
      header.length = body.size();
      break;
    }
    case 7:
      header.type = static_cast<uint16_t>(wire::Type::kRead);
      header.length = s->U16() % (kRegionSize + 64);
      break;
    case 8:
      header.type = static_cast<uint16_t>(wire::Type::kAtomicWrite);
      body.assign(8, s->Byte());
      header.length = 8;
      break;
    case 9:     // an ack of the listener's latest request
    default: {  // a read response to it
      header.type = static_cast<uint16_t>(k == 9 ? wire::Type::kAck : wire::Type::kReadResponse);
      const wire::Header* request = LatestRequest(w);
      header.seq = request != nullptr ? request->seq : 0;
      if (k != 9) {
        const uint32_t length = request != nullptr ? static_cast<uint32_t>(request->length) : 8;
        body.assign(PickLength(s, length), 0x42);
      }
      break;
    }
  }
  header.flags = s->Byte() % 4 == 0 ? s->U16() : 0;
  // A kFlagCma read has the listener process_vm_writev into the segments its body names, in
  // this process (the pid is ours): never, or bytes of the script would corrupt the fuzzer.
  if (header.type == static_cast<uint16_t>(wire::Type::kRead)) header.flags &= ~wire::kFlagCma;
  header.status = s->Byte() % 4 == 0 ? static_cast<int32_t>(s->U32()) : 0;
  const uint8_t seq = s->Byte();  // the seq of a request, or of a response to nothing
  if (header.seq == 0) header.seq = seq;
  if (header.type >= static_cast<uint16_t>(wire::Type::kWrite) &&
      header.type < static_cast<uint16_t>(wire::Type::kAck)) {
    header.rkey = s->Byte() % 4 != 0 ? env.listener_rkey : s->U32();
    header.remote_addr = env.listener_region_addr + s->U16() % (2 * kRegionSize);
  }
  header.body_len = static_cast<uint32_t>(body.size());
  if (s->Byte() % 8 == 0) header.body_len = PickLength(s, header.body_len);
  // A body_len above the body's size leaves the body short: what is sent next fills it.
  SendMessage(w, header, body.data(), std::min<size_t>(body.size(), header.body_len));
}

// Takes one request from the listener (accepting it into a free slot, or rejecting it).
void ServeRequest(Script* s, const Env& env, ServerSide* srv) {
  rpma_conn_req* req = nullptr;
  const int ret = rpma_ep_next_conn_req(env.listener.ep, nullptr, &req);
  if (ret == RPMA_E_NO_EVENT) return;
  FUZZ_CHECK(OneOf(ret, {RPMA_E_PROVIDER, RPMA_E_NOMEM, RPMA_E_INVAL}));
  if (ret != 0) return;
  int slot = -1;
  for (int i = 0; i < kMaxServerConns; ++i) {
    if (srv->conns[i] == nullptr) slot = i;
  }
  const bool reject = s->Byte() % 4 == 0;
  if (slot < 0 || reject) {
    FUZZ_CHECK(rpma_conn_req_delete(&req) == 0);
    return;
  }
  rpma_conn* conn = nullptr;
  if (rpma_conn_req_connect(&req, nullptr, &conn) != 0) return;  // the requester may be gone
  int fd = -1;
  FUZZ_CHECK(rpma_conn_get_event_fd(conn, &fd) == 0);
  SetNonBlocking(fd);
  CHECK_POST(rpma_recv(conn, env.listener_mr, 0, 64, nullptr));
  CHECK_POST(rpma_recv(conn, env.listener_mr, 64, kRegionSize - 64, nullptr));
  srv->conns[slot] = conn;
  srv->ended[slot] = false;
}

void ServerEvents(ServerSide* srv) {
  for (int i = 0; i < kMaxServerConns; ++i) {
    if (srv->conns[i] == nullptr) continue;
    DrainConnCq(srv->conns[i]);
    for (int n = 0; n < 4 && !srv->ended[i]; ++n) {
      const rpma_conn_event event = NextEvent(srv->conns[i]);
      if (event == RPMA_CONN_UNDEFINED) break;
      if (Terminal(event)) srv->ended[i] = true;
    }
  }
}

void ClientStep(Script* s, const Env& env, Wire wires[], ServerSide* srv) {
  const uint8_t op = s->Byte() % 8;
  Wire* w = &wires[s->Byte() % kMaxConns];
  switch (op) {
    case 0:  // dial
      if (w->fd < 0) w->fd = Dial(env);
      break;
    case 1:  // send a template message
    case 2:
      if (w->fd >= 0) SendTemplate(s, env, w);
      break;
    case 3:  // read what came back
      if (w->fd >= 0) PumpFor(w, s->Byte() % 20);
      break;
    case 4:  // hang up (the listener must notice)
      if (w->fd >= 0) shutdown(w->fd, s->Byte() % 2 == 0 ? SHUT_WR : SHUT_RDWR);
      break;
    case 5:
      ServeRequest(s, env, srv);
      break;
    case 6:
      ServerEvents(srv);
      break;
    default: {  // the listener's side acts on connection i
      rpma_conn* conn = srv->conns[s->Byte() % kMaxServerConns];
      if (conn == nullptr) break;
      const uint8_t what = s->Byte() % 4;
      const size_t off = s->U16() % (kRegionSize + 64);
      const size_t len = s->U16() % (kRegionSize + 64);
      if (what == 0) {
        CHECK_POST(rpma_write(conn, env.remote, off, env.listener_mr, 0, len,
                              RPMA_F_COMPLETION_ALWAYS, nullptr));
      } else if (what == 1) {
        CHECK_POST(rpma_read(conn, env.listener_mr, 0, env.remote, off, len,
                             RPMA_F_COMPLETION_ALWAYS, nullptr));
      } else if (what == 2) {
        CHECK_POST(rpma_send(conn, env.listener_mr, off, len, RPMA_F_COMPLETION_ALWAYS, nullptr));
      } else {
        FUZZ_CHECK(OneOf(rpma_conn_disconnect(conn), {RPMA_E_PROVIDER}));
      }
      break;
    }
  }
}

// Ends an accepted connection whose peer hung up (as fabric_listener_fuzz's EndConnection).
void EndServerConn(ServerSide* srv, int i, Wire wires[]) {
  rpma_conn** conn = &srv->conns[i];
  int fd = -1;
  FUZZ_CHECK(rpma_conn_get_event_fd(*conn, &fd) == 0);
  for (int waited = 0; !srv->ended[i] && waited < kWaitLimitMs; waited += 10) {
    ServerEvents(srv);
    for (int k = 0; k < kMaxConns; ++k) {
      Pump(&wires[k]);
      wires[k].messages.clear();
    }
    if (srv->ended[i]) break;
    pollfd p{fd, POLLIN, 0};
    poll(&p, 1, 10);
  }
  if (!srv->ended[i]) {
    std::fprintf(stderr, "fabric_conversation_fuzz: an accepted connection never ended\n");
    std::abort();
  }
  DrainConnCq(*conn);
  FUZZ_CHECK(OneOf(rpma_conn_disconnect(*conn), {RPMA_E_PROVIDER}));
  FUZZ_CHECK(rpma_conn_delete(conn) == 0);
}

void DropLateRequests(const Env& env) {
  rpma_conn_req* late = nullptr;
  while (rpma_ep_next_conn_req(env.listener.ep, nullptr, &late) == 0) {
    FUZZ_CHECK(rpma_conn_req_delete(&late) == 0);
  }
}

void PlayClient(Script* s, const Env& env) {
  Wire wires[kMaxConns];
  ServerSide srv;
  for (int step = 0; step < kMaxSteps && !s->done(); ++step) ClientStep(s, env, wires, &srv);
  for (Wire& w : wires) {
    if (w.fd >= 0) shutdown(w.fd, SHUT_WR);
  }
  for (int i = 0; i < kMaxServerConns; ++i) {
    if (srv.conns[i] != nullptr) EndServerConn(&srv, i, wires);
  }
  for (Wire& w : wires) {
    if (w.fd < 0) continue;
    AwaitClosedBy(&w, "the listener", [&env] { DropLateRequests(env); });
    CloseWire(&w);
  }
  DropLateRequests(env);
}

// The private data of the canned REQ.
constexpr uint8_t kCannedMark[] = {'c', 'a', 'n', 'n', 'e', 'd'};

// The canned good exchange with the listener: a valid REQ is answered with CONNECT_REQUEST,
// and accepting it sends the REP.
void CheckListenerStillWorks(const Env& env) {
  Wire w;
  w.fd = Dial(env);
  wire::ConnectBody body = GoodConnectBody();
  body.private_data_len = sizeof(kCannedMark);
  std::memcpy(body.private_data, kCannedMark, sizeof(kCannedMark));
  wire::Header header = wire::MakeHeader(wire::Type::kConnectRequest);
  header.body_len = sizeof(body);
  FUZZ_CHECK(SendMessage(&w, header, &body, sizeof(body)));
  // Ours is the request with the mark: one a script's connection sent before its socket was
  // shut down both ways (so that its close could not be awaited) may come first.
  rpma_conn_req* req = nullptr;
  for (int waited = 0; req == nullptr && waited < kWaitLimitMs; ++waited) {
    const int ret = rpma_ep_next_conn_req(env.listener.ep, nullptr, &req);
    FUZZ_CHECK(ret == 0 || ret == RPMA_E_NO_EVENT);
    if (ret == 0) {
      rpma_conn_private_data pdata{};
      FUZZ_CHECK(rpma_conn_req_get_private_data(req, &pdata) == 0);
      if (pdata.len < sizeof(kCannedMark) ||
          std::memcmp(pdata.ptr, kCannedMark, sizeof(kCannedMark)) != 0) {
        FUZZ_CHECK(rpma_conn_req_delete(&req) == 0);
        req = nullptr;
      }
      continue;
    }
    pollfd p{env.listener.ep_fd, POLLIN, 0};
    poll(&p, 1, 1);
  }
  FUZZ_CHECK(req != nullptr);
  ServerSide srv;
  FUZZ_CHECK(rpma_conn_req_connect(&req, nullptr, &srv.conns[0]) == 0);
  int fd = -1;
  FUZZ_CHECK(rpma_conn_get_event_fd(srv.conns[0], &fd) == 0);
  SetNonBlocking(fd);
  for (int waited = 0; w.messages.empty() && !w.closed && waited < kWaitLimitMs; waited += 10) {
    PumpFor(&w, 10);
  }
  FUZZ_CHECK(!w.messages.empty() &&
             w.messages.front().header.type == static_cast<uint16_t>(wire::Type::kAccept));
  shutdown(w.fd, SHUT_WR);
  Wire wires[kMaxConns];
  wires[0] = std::move(w);
  EndServerConn(&srv, 0, wires);
  AwaitClosedBy(&wires[0], "the listener", [] {});
  CloseWire(&wires[0]);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Env* env = GetEnv();
  Script script(data, size);
  if ((script.Byte() & 1) == 0) {
    PlayServer(&script, *env);
  } else {
    PlayClient(&script, *env);
  }
  CheckClientStillWorks(*env);
  CheckListenerStillWorks(*env);
  rusage usage;
  FUZZ_CHECK(getrusage(RUSAGE_SELF, &usage) == 0 && usage.ru_maxrss < kMaxRssKiB);
  return 0;
}
