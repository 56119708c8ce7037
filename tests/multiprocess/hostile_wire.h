// hostile_wire.h: a peer process that speaks the host fabric's wire (simverbs/sim/fabric/wire.h)
// by hand, for tests that play a hostile NIC against a real one: the abstract socket names of
// a listener and of a process's verbs endpoint, dialing them, framing a message (header, then
// body) and reading one back, each bounded by a deadline so that a test never hangs on a peer
// that stopped answering.
//
// Nothing here trusts the other side either: a message read back is checked with
// wire::ValidateHeader, and a body larger than kMaxReadBodyBytes ends the read.
//
// Thread-safety: plain functions on file descriptors; one thread per socket.

#ifndef SOFTRPMA_TESTS_MULTIPROCESS_HOSTILE_WIRE_H_
#define SOFTRPMA_TESTS_MULTIPROCESS_HOSTILE_WIRE_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "simverbs/sim/fabric/hostile_peer.h"
#include "simverbs/sim/fabric/wire.h"

namespace softrpma::hostile {

namespace wire = ::softrpma::sim::wire;

// The largest body ReadMessage accepts (a read response of a test's region fits).
inline constexpr size_t kMaxReadBodyBytes = size_t{64} << 20;

// "\0softrpma/<fabric>/<addr>:<port>": the listener of addr:port (docs/FABRIC.md), leading NUL
// included.
std::string ListenerSocketName(const std::string& fabric, const std::string& addr, uint16_t port);
// "\0softrpma/<fabric>/ep/gid-<32 hex digits>": the verbs endpoint of the process owning `gid`.
std::string EndpointSocketName(const std::string& fabric, const uint8_t gid[16]);
// The GID the simulated NIC gives process `pid`: ::ffff:127.a.b.c, a.b.c its low 24 bits.
void GidOfPid(pid_t pid, uint8_t gid[16]);

// A non-blocking, close-on-exec Unix stream socket connected to the abstract `name` (as
// ListenerSocketName / EndpointSocketName give it, leading NUL included; RawConnect of
// hostile_peer.h, made non-blocking). Returns the fd, or -1 with errno set (EINVAL for a name
// without the leading NUL, ENAMETOOLONG when it does not fit a socket address).
int DialAbstract(const std::string& name);

enum class SendResult {
  kSent,      // header and body went whole into the socket
  kClosed,    // the peer ended the connection (EPIPE, ECONNRESET) before all of it went
  kTimedOut,  // the socket took no more before the deadline
};
// Sends `header` (its body_len set to `body_len`) and then `body`, waiting up to `timeout_ms`
// in all for the socket to take them. Never raises SIGPIPE.
SendResult SendMessage(int fd, wire::Header header, const void* body, size_t body_len,
                       int timeout_ms);

enum class ReadResult {
  kMessage,   // *header and *body hold one message
  kClosed,    // the peer ended the connection (EOF or reset) before a whole message
  kTimedOut,  // no whole message within the deadline
  kGarbage,   // what came fails wire::ValidateHeader, or its body exceeds kMaxReadBodyBytes
};
// Reads the next message, waiting up to `timeout_ms`.
ReadResult ReadMessage(int fd, int timeout_ms, wire::Header* header, std::vector<uint8_t>* body);

// Reads and drops messages until the peer ends the connection (true) or `timeout_ms` passed
// (false). The headers read meanwhile are appended to `seen` when it is not null.
bool AwaitClosed(int fd, int timeout_ms, std::vector<wire::Header>* seen);

// A CONNECT_REQUEST body as an rdma_connect sends it (simverbs/sim/fabric/hostile_peer.h, shared
// with the fabric's tests and fuzzers).
using ::softrpma::sim::testing::MakeConnectBody;

// Milliseconds of CLOCK_MONOTONIC, for deadlines.
int64_t NowMs();

}  // namespace softrpma::hostile

#endif  // SOFTRPMA_TESTS_MULTIPROCESS_HOSTILE_WIRE_H_
