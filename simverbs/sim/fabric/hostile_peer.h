// hostile_peer.h: what the tests of the host fabric (host.h) and its fuzzers use to play a peer
// that does not follow the rules: raw connections to a listener's abstract socket, the
// CONNECT_REQUEST body a real rdma_connect sends (to start from and break), another user's
// process that takes a listener's name first, and the resource use of a process under attack.
// What it is not: a framing of messages with deadlines (tests/multiprocess/hostile_wire.h does
// that on top of this) or a second copy of the wire's layout (wire.h is the one).
// Test-only. Every child process it starts is bounded (alarm) and is the caller's to Stop.

#ifndef SOFTRPMA_SIMVERBS_SIM_FABRIC_HOSTILE_PEER_H_
#define SOFTRPMA_SIMVERBS_SIM_FABRIC_HOSTILE_PEER_H_

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>

#include <cstddef>
#include <cstdint>

#include <string>

#include "simverbs/sim/fabric/wire.h"

namespace softrpma::sim::testing {

// The uid (and gid) of `nobody`, the other user the tests take.
inline constexpr uid_t kNobody = 65534;

// The socket address of the abstract name `name` (without the leading NUL; cut to fit), and its
// length for bind / connect.
socklen_t AbstractAddress(const std::string& name, sockaddr_un* out);

// A connected stream socket to the abstract name `name` (without the leading NUL), blocking;
// -1 (errno set) on failure.
int RawConnect(const std::string& name);

// 127.0.0.1:port, as a listener's or a dialer's address.
sockaddr_in Loopback(uint16_t port);

// A CONNECT_REQUEST body as an rdma_connect toward 127.0.0.1:`port` sends it, from
// 127.0.0.1:`src_port`, claiming process `pid` and offering the word at `probe_addr` (0: none)
// as the proof that the passive side may reach the requester's memory. Every other field is
// the connect's default (no private data, no SRQ); a test or fuzzer breaks what it means to.
wire::ConnectBody MakeConnectBody(uint16_t port, uint16_t src_port, int32_t pid,
                                  uint64_t probe_addr, uint32_t qp_num);

// A stream socket of this process listening at the abstract name `name` (a raw peer playing a
// listener: the fabric's dialers reach it); -1 (errno set) on failure.
int RawListen(const std::string& name);

// Sends `length` bytes on `sock` with the descriptor `fd` passed along (SCM_RIGHTS): all of
// them in one sendmsg, or false.
bool SendWithFd(int sock, const void* data, size_t length, int fd);

// Writes all of `data` to `fd`; false when the socket failed (e.g. the peer closed it).
bool WriteAll(int fd, const void* data, size_t length);

// Waits at most `limit_ms` (a bound against hangs) for the peer to end the connection: true
// when a read gives end-of-file or a reset, false on a timeout. Data that arrives is skipped.
bool WaitClosed(int fd, int limit_ms);

// A child process, killed (SIGKILL) and reaped by Stop() or the destructor.
class Child {
 public:
  Child() = default;
  explicit Child(pid_t pid) : pid_(pid) {}
  Child(Child&& other) noexcept : pid_(other.pid_) { other.pid_ = -1; }
  Child& operator=(Child&& other) noexcept;
  ~Child() { Stop(); }
  pid_t pid() const { return pid_; }
  void Stop();

 private:
  pid_t pid_ = -1;
};

// Forks a child that drops to user nobody (setresgid / setresuid, no groups), binds and listens
// at the abstract name `name`, and waits (60 s at most) to be stopped; returns once it
// listens. A child that fails says why on stderr; `*child` is then not running (pid -1).
// REQUIRES: running as root.
void SquatAsNobody(const std::string& name, Child* child);

// Forks a child that runs `serve`, which sets up what is to be attacked (its fabric thread
// serves it afterwards), writes one byte to `ready_fd` and returns; the child then sleeps
// until stopped (60 s at most). Returns once the byte came; `*child` has pid -1 when the
// child exited first.
void StartServer(void (*serve)(int ready_fd), Child* child);

// Process `pid`'s CPU time (user + system) in clock ticks, from /proc; -1 when unknown.
long CpuTicks(pid_t pid);
// Process `pid`'s resident set in KiB (VmRSS of /proc/<pid>/status); -1 when unknown.
long RssKiB(pid_t pid);

}  // namespace softrpma::sim::testing

#endif  // SOFTRPMA_SIMVERBS_SIM_FABRIC_HOSTILE_PEER_H_
