// fabric_listener_fuzz: every byte a peer process can send to a listening librpma endpoint over
// the host fabric (simverbs/sim/fabric/wire.h, docs/FABRIC.md), fed to a real one.
//
// The process listens once (rpma_ep_listen on its own fabric, "fuzz-<pid>") with a registered
// region and plays the hostile peer itself: per input it dials the listener's abstract Unix
// socket and writes the input, message by message as its headers frame it, then shuts its
// side down. When a CONNECT_REQUEST has gone whole, it waits for the endpoint's request and
// accepts it (or rejects it, when the request's private data starts with an odd byte) and
// posts two receives, so that the rest of the input reaches the data path of an established
// connection. To let data requests hit the region, a header's remote_addr below
// 2 * kRegionSize is an offset into it and its rkey is XORed with the region's (0: the right
// key); a REQ's pid is XORed with this process's (0: the truth, which is all the listener
// believes: any other ends the connection); anything else goes as it is.
//
// Checked per input: the listener ends the connection once the input is over (within
// kPollLimitMs: no hang; an accepted one once the connection is deleted, after its CLOSED
// event), and it still accepts a good connection afterwards (a canned REQ: CONNECT_REQUEST,
// accept, the REP comes back), and the process's peak memory stays under kMaxRssKiB.
// ASan's leak check runs at exit.

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "librpma.h"
#include "simverbs/sim/fabric/hostile_peer.h"
#include "simverbs/sim/fabric/wire.h"
#include "tools/fuzz/check.h"
#include "tools/fuzz/rpma_env.h"

namespace {

namespace wire = softrpma::sim::wire;
using softrpma::sim::testing::MakeConnectBody;
using softrpma::sim::testing::RawConnect;

constexpr char kAddr[] = "127.0.0.1";
constexpr char kPort[] = "7411";
constexpr size_t kRegionSize = 4096;
constexpr int kPollLimitMs = 5000;  // a bound against hangs, not a timing assertion
// The most this process may ever have used (libFuzzer's own corpus included): a peer must not
// make the listener allocate what it only announced.
constexpr long kMaxRssKiB = 1 << 20;

struct Listener : softrpma::fuzz::SimListener {
  rpma_mr_local* mr = nullptr;
  uint64_t region_addr = 0;
  uint32_t rkey = 0;
  std::string socket_name;  // abstract (without the leading NUL)
};

alignas(64) uint8_t g_region[kRegionSize];

void SetNonBlocking(int fd) {
  const int flags = fcntl(fd, F_GETFL);
  FUZZ_CHECK(flags >= 0 && fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0);
}

Listener* GetListener() {
  static Listener* listener = [] {
    auto* l = new Listener;
    static_cast<softrpma::fuzz::SimListener&>(*l) =
        softrpma::fuzz::ListenOnOwnFabric("fuzz", kAddr, kPort);
    SetNonBlocking(l->ep_fd);
    const int usage = RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_RECV |
                      RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY;
    FUZZ_CHECK(rpma_mr_reg(l->peer, g_region, kRegionSize, usage, &l->mr) == 0);
    uint8_t desc[21];
    FUZZ_CHECK(rpma_mr_get_descriptor(l->mr, desc) == 0);
    std::memcpy(&l->region_addr, desc, 8);  // mr.cc's layout, little-endian like this host
    std::memcpy(&l->rkey, desc + 16, 4);
    l->socket_name = "softrpma/" + l->fabric + "/" + kAddr + ":" + kPort;
    return l;
  }();
  return listener;
}

// The hostile peer's socket, connected to the listener.
int Dial(const Listener& l) {
  const int fd = RawConnect(l.socket_name);
  FUZZ_CHECK(fd >= 0);
  SetNonBlocking(fd);
  return fd;
}

// Reads and drops what the listener sent; false once it has closed its end.
bool Drain(int fd) {
  uint8_t buf[4096];
  while (true) {
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n > 0) continue;
    if (n == 0) return false;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
    return false;  // ECONNRESET: closed too
  }
}

// Writes all of [data, data + size) while draining the other way (the listener's sends never
// block, but its socket buffer toward us must not fill up for ever either). False when the
// listener closed the connection meanwhile.
bool WriteAll(int fd, const uint8_t* data, size_t size) {
  while (size > 0) {
    const ssize_t n = send(fd, data, size, MSG_NOSIGNAL);
    if (n > 0) {
      data += n;
      size -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!Drain(fd)) return false;
      pollfd p{fd, POLLOUT | POLLIN, 0};
      FUZZ_CHECK(poll(&p, 1, kPollLimitMs) == 1);
      continue;
    }
    return false;  // EPIPE / ECONNRESET: the listener ended it
  }
  return true;
}

// Waits for the endpoint's next request, or for the listener to close `fd`. Returns the request
// or nullptr (closed).
rpma_conn_req* AwaitRequest(const Listener& l, int fd) {
  for (int waited_ms = 0; waited_ms < kPollLimitMs;) {
    rpma_conn_req* req = nullptr;
    const int ret = rpma_ep_next_conn_req(l.ep, nullptr, &req);
    if (ret == 0) return req;
    FUZZ_CHECK(ret == RPMA_E_NO_EVENT);
    if (!Drain(fd)) return nullptr;
    pollfd p[2] = {{l.ep_fd, POLLIN, 0}, {fd, POLLIN, 0}};
    poll(p, 2, 10);
    waited_ms += 10;
  }
  std::fprintf(stderr, "fabric_listener_fuzz: no request and no close after a whole REQ\n");
  std::abort();
}

// Waits until the listener has closed `fd` (after our shutdown), draining it.
void AwaitClose(int fd) {
  for (int waited_ms = 0; waited_ms < kPollLimitMs; waited_ms += 10) {
    if (!Drain(fd)) return;
    pollfd p{fd, POLLIN, 0};
    poll(&p, 1, 10);
  }
  std::fprintf(stderr, "fabric_listener_fuzz: the listener left the connection open\n");
  std::abort();
}

// Ends `conn` after its peer has shut its side: waits (bounded) for the event that ends it
// (CLOSED, LOST, UNREACHABLE when the peer left before the accept), which follows every
// message the peer sent, takes its completions, disconnects and deletes
// it. The listener's socket is closed with the connection's QP, not before.
void EndConnection(rpma_conn** conn, int peer_fd) {
  int fd = -1;
  FUZZ_CHECK(rpma_conn_get_event_fd(*conn, &fd) == 0);
  SetNonBlocking(fd);
  bool ended = false;
  for (int waited_ms = 0; !ended && waited_ms < kPollLimitMs;) {
    rpma_conn_event event = RPMA_CONN_UNDEFINED;
    const int ret = rpma_conn_next_event(*conn, &event);
    if (ret == 0) {
      ended = event != RPMA_CONN_ESTABLISHED;  // CLOSED, LOST, UNREACHABLE...
      continue;
    }
    FUZZ_CHECK(ret == RPMA_E_NO_EVENT);
    Drain(peer_fd);
    pollfd p{fd, POLLIN, 0};
    poll(&p, 1, 10);
    waited_ms += 10;
  }
  if (!ended) {
    std::fprintf(stderr, "fabric_listener_fuzz: the connection never learnt its peer left\n");
    std::abort();
  }
  rpma_cq* cq = nullptr;
  FUZZ_CHECK(rpma_conn_get_cq(*conn, &cq) == 0);
  ibv_wc wc[8];
  int got = 0;
  while (rpma_cq_get_wc(cq, 8, wc, &got) == 0 && got > 0) {
  }
  rpma_conn_disconnect(*conn);
  FUZZ_CHECK(rpma_conn_delete(conn) == 0);
}

// Handles a request that arrived: rejects it when its private data starts with an odd byte,
// else accepts it and posts two receives into the region. Returns the connection or nullptr.
rpma_conn* Answer(const Listener& l, rpma_conn_req* req) {
  rpma_conn_private_data pdata{};
  FUZZ_CHECK(rpma_conn_req_get_private_data(req, &pdata) == 0);
  if (pdata.len > 0 && (static_cast<const uint8_t*>(pdata.ptr)[0] & 1) != 0) {
    FUZZ_CHECK(rpma_conn_req_delete(&req) == 0);
    return nullptr;
  }
  rpma_conn* conn = nullptr;
  const int ret = rpma_conn_req_connect(&req, nullptr, &conn);
  if (ret != 0) return nullptr;  // the requester may be gone already
  rpma_recv(conn, l.mr, 0, 64, nullptr);
  rpma_recv(conn, l.mr, 64, kRegionSize - 64, nullptr);
  return conn;
}

// The data-path header rewrite of the file comment.
void AimAtRegion(const Listener& l, wire::Header* header) {
  if (header->type < static_cast<uint16_t>(wire::Type::kWrite)) return;
  if (header->remote_addr < 2 * kRegionSize) header->remote_addr += l.region_addr;
  header->rkey ^= l.rkey;
}

// Plays the input against the listener on a connection of its own.
void Play(const Listener& l, const uint8_t* data, size_t size) {
  const int fd = Dial(l);
  rpma_conn* conn = nullptr;
  bool open = true;
  while (open && size > 0) {
    wire::Header header;
    std::memset(&header, 0, sizeof(header));
    const size_t header_bytes = size < sizeof(header) ? size : sizeof(header);
    std::memcpy(&header, data, header_bytes);
    const uint32_t body_len = header.body_len;
    if (header_bytes == sizeof(header)) AimAtRegion(l, &header);
    open = WriteAll(fd, reinterpret_cast<const uint8_t*>(&header), header_bytes);
    data += header_bytes;
    size -= header_bytes;
    const size_t body_bytes = size < body_len ? size : body_len;
    const bool whole_request = header_bytes == sizeof(header) && body_bytes == body_len &&
                               header.magic == wire::kMagic &&
                               header.type == static_cast<uint16_t>(wire::Type::kConnectRequest) &&
                               body_len == sizeof(wire::ConnectBody);
    wire::ConnectBody body;
    if (whole_request) {
      // The pid a REQ claims is XORed with ours (0: the truth; the kernel knows who we are).
      std::memcpy(&body, data, sizeof(body));
      body.pid ^= getpid();
      if (open) open = WriteAll(fd, reinterpret_cast<const uint8_t*>(&body), sizeof(body));
    } else if (open) {
      open = WriteAll(fd, data, body_bytes);
    }
    data += body_bytes;
    size -= body_bytes;
    if (open && whole_request && conn == nullptr && wire::ValidateHeader(header) &&
        body.pid == getpid()) {
      if (wire::ValidateConnectBody(body, body_len)) {
        rpma_conn_req* req = AwaitRequest(l, fd);
        if (req == nullptr) {
          open = false;
        } else {
          conn = Answer(l, req);
        }
      }
    }
  }
  if (open) shutdown(fd, SHUT_WR);
  if (conn != nullptr) EndConnection(&conn, fd);
  AwaitClose(fd);
  close(fd);
  // Whatever request is still queued on the endpoint goes too.
  rpma_conn_req* late = nullptr;
  while (rpma_ep_next_conn_req(l.ep, nullptr, &late) == 0) rpma_conn_req_delete(&late);
}

// The canned good exchange: a valid REQ is answered with CONNECT_REQUEST, and accepting it
// sends the REP.
void CheckStillAccepts(const Listener& l) {
  const wire::ConnectBody body =
      MakeConnectBody(static_cast<uint16_t>(std::atoi(kPort)), 40000, getpid(),
                      /*probe_addr=*/0, /*qp_num=*/4242);
  wire::Header header = wire::MakeHeader(wire::Type::kConnectRequest);
  header.body_len = sizeof(body);

  const int fd = Dial(l);
  FUZZ_CHECK(WriteAll(fd, reinterpret_cast<const uint8_t*>(&header), sizeof(header)));
  FUZZ_CHECK(WriteAll(fd, reinterpret_cast<const uint8_t*>(&body), sizeof(body)));
  rpma_conn_req* req = AwaitRequest(l, fd);
  FUZZ_CHECK(req != nullptr);
  rpma_conn* conn = nullptr;
  FUZZ_CHECK(rpma_conn_req_connect(&req, nullptr, &conn) == 0);
  wire::Header reply;
  size_t got = 0;
  for (int waited_ms = 0; got < sizeof(reply) && waited_ms < kPollLimitMs; waited_ms += 10) {
    const ssize_t n = recv(fd, reinterpret_cast<uint8_t*>(&reply) + got, sizeof(reply) - got, 0);
    if (n > 0) {
      got += static_cast<size_t>(n);
      continue;
    }
    FUZZ_CHECK(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR));
    pollfd p{fd, POLLIN, 0};
    poll(&p, 1, 10);
  }
  FUZZ_CHECK(got == sizeof(reply));
  FUZZ_CHECK(reply.magic == wire::kMagic &&
             reply.type == static_cast<uint16_t>(wire::Type::kAccept));
  shutdown(fd, SHUT_WR);
  EndConnection(&conn, fd);
  AwaitClose(fd);
  close(fd);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Listener* l = GetListener();
  Play(*l, data, size);
  CheckStillAccepts(*l);
  rusage usage;
  FUZZ_CHECK(getrusage(RUSAGE_SELF, &usage) == 0 && usage.ru_maxrss < kMaxRssKiB);
  return 0;
}
