// host.h: the host transport, on which simulated NICs in different processes of one machine
// meet. It carries the messages of wire.h between a connection's two ends; what they mean is
// the connection manager's (cm.cc) and the data path's (nic/) business.
//
// THE MODEL
//   * A fabric is a name (RPMA_SIM_FABRIC; by default one per user, and one per test under
//     Bazel's `bazel test`, see FabricName). Only processes of one fabric, one user and one
//     network namespace see each other.
//   * A listener (rdma_listen of an id bound to addr:port) is a Unix stream socket in the
//     abstract namespace named after the fabric and the address: "softrpma/<fabric>/<addr>".
//     The kernel owns the name: a second listener on it anywhere on the machine gets
//     EADDRINUSE, and the name is gone the moment its process exits, however it exits, so no
//     file is ever left behind to block the next run. A wildcard listener (0.0.0.0, ::) serves
//     connects to any address of its port that no exact listener has.
//   * Dial connects to the listener of an address: ECONNREFUSED when nobody listens (the CM
//     turns that into REJECTED, as a real NIC's CM does for an unknown service id).
//   * A FABRIC IS ITS USER'S, as the kernel says (SO_PEERCRED, never what a message says). A
//     listener closes connections from another user's processes at once; a dialer refuses a
//     listener held by another user (EACCES, and a line on stderr naming its uid and pid),
//     so its requests never reach that user's process. Abstract names can be bound by anyone,
//     so another user can still take a name first: it then blocks that name (Listen fails
//     with EADDRINUSE and says on stderr who holds it) but cannot serve it.
//   * A PEER IS BOUNDED. Before a byte of body is read, the handler sees the header
//     (Handler::OnHeader) and may end the connection: a body the connection's state does not
//     allow (a data request before the connect request) is never buffered. An accepted
//     connection that has not delivered its first whole message within kHandshakeTimeoutMs is
//     closed, so idle connections cannot hold the process's descriptors forever. When accept
//     fails for want of descriptors or memory (EMFILE & co.), the listener is left unwatched
//     for kAcceptBackoffMs (connections wait in its backlog) instead of waking the fabric
//     thread again at once, and stderr says so once. What a peer makes this side send but
//     never reads is counted (Conn::QueuedBytes) and its owner hears when the backlog has
//     drained below kBacklogBytes again (Handler::OnDrained), so that it can stop producing.
//   * THE FABRIC THREAD. The first Listen or Dial of a process starts one thread that sleeps in
//     epoll_wait on every socket of the process's fabric and, as a NIC does, serves the peer's
//     requests without the application's help: it reads each message, checks its header
//     (wire.h) and hands it to the connection's Handler, which executes it against this
//     process's memory and answers. It costs no CPU while nothing arrives.
//   * Sending never blocks: Conn::Send writes what the socket takes and queues the rest, which
//     the fabric thread writes when the socket drains. (Two processes blocked writing to each
//     other could otherwise deadlock.) Messages of one connection arrive in the order sent.
//   * A peer that exits, crashes or is killed closes its sockets (the kernel does it), so the
//     survivor's Handler gets OnClosed at once. A message that fails validation closes the
//     connection too, and only that connection (as does a header that its handler's OnHeader
//     refuses, or an accepted connection's handshake timeout).
//   * THE SHARED-MEMORY RINGS (shm/ring.h). Once both processes of a connection offered one,
//     its messages travel through a ring per direction in shared memory instead of the socket,
//     which stays for the setup, the doorbell and the end (a dead peer still ends its
//     connections at once). The dialer offers its ring first (kShmRing, the memfd passed with
//     SCM_RIGHTS, before any other message); the listener maps it and answers with its own
//     (switched: its later messages are in its ring); the dialer then sends kShmSwitch and
//     moves to its ring too. A listener that cannot or may not (RPMA_SIM_SHM=0, a memfd
//     refused) does not answer, and both directions stay on the socket, as they do with a
//     peer that never offers. Busy pollers read a ring with memory loads; a reader about to
//     sleep arms its ring and the peer then writes one byte (a bell) into the socket, so a
//     ring message costs a system call only when its reader sleeps. A ring is the peer's
//     memory: a counter it cannot have written (shm/ring.h) ends the connection, and stderr
//     says so once.
//   * fork(): the child closes every socket it inherited from the parent's fabric (so the
//     parent's listeners and connections stay the parent's alone) and starts a fabric of its
//     own on first use.
//
// Thread-safety: every function and method is thread-safe. Handlers run on the fabric thread
// (or in a thread in Progress / Settle), one call at a time per connection, and may call Send
// and Close (on any connection).
//
// LOCK ORDER (the process's, of the fabric, the copy pool of cma.h and the NIC above them). A
// thread holding a lock may take only locks further down this list; locks of one line are
// never held together unless the line says how. ThreadSanitizer checks it (`./run test`'s tsan
// pass: tools/ci/tsan_tests.txt), and a fork takes the five marked [fork] in this order
// (fork_locks.h), so the fork can never wait for a lock whose holder waits for one it holds.
//   1. host.cc's g_work_mu [fork]: the fabric thread's (the reactor's) work, held from each
//      wake-up until it sleeps in epoll_wait again (CallSoon's function runs under it, as the
//      handlers of 3 do). Taken with no lock held.
//   2. cma.cc's done lock [fork]: held shared by a copy worker while the copy's `done` runs
//      (which takes the NIC's locks of 4), exclusively by a fork. Taken with no lock held.
//   3. A connection's Conn::read_mu_ (the fabric thread, or a thread in Progress / Settle,
//      which may hold no lock of the handler's), or a listener's Listener::State::mu (its
//      on_accept runs under it). The handlers run under these: cm_peer.h's HostCmPeer,
//      nic/verbs_qp.cc's ServeEnd and DialEnd.
//   4. The NIC's locks, which handlers and the application's verbs calls take, in the
//      simulator's order (cq.h, cm.h, qp.h): SimQp::modify_mu -> verbs_qp.cc's VerbsQps::mu or
//      ConnectionManager::mu_ -> SimCq::batch_mu_ -> LinkSet::mu -> SimLink::mu (two links:
//      in address order) -> SimPd::mu -> SimSrq::mu -> SimCq::mu_ -> SimCompChannel::mu,
//      SimEventChannel::mu -> the tracer's mutex (trace.cc); HostCmPeer::mu_ (cm_peer.h) is a
//      leaf of these, taken under ConnectionManager::mu_ or alone.
//   5. The copy pool: cma.cc's g_pool_mu [fork], then the pool's own Pool::mu [fork]
//      (cma::Start is called under SimLink::mu; the pool's watchdog calls a copy's on_stuck
//      under Pool::mu, which takes no lock: Conn::Shutdown).
//   6. A connection's Conn::mu_ (Send, Close: under any lock above; it guards the send queue),
//      then host.cc's g_mu [fork] (the fabric's sockets; SetWritableInterest under Conn::mu_).
//      g_name_mu, g_warned_mu and g_granted_mu (the connections a push was granted on) are
//      leaves.
// pthread_atfork's own order (reverse registration) is not used: see fork_locks.h.

#ifndef SOFTRPMA_SIMVERBS_SIM_FABRIC_HOST_H_
#define SOFTRPMA_SIMVERBS_SIM_FABRIC_HOST_H_

#include <sys/socket.h>
#include <sys/uio.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "simverbs/mutex.h"
#include "simverbs/sim/fabric/bytes.h"
#include "simverbs/sim/fabric/shm/region_table.h"
#include "simverbs/sim/fabric/shm/ring.h"
#include "simverbs/sim/fabric/transport.h"
#include "simverbs/sim/fabric/wire.h"

namespace softrpma::sim::host {

inline constexpr char kFabricEnvVar[] = "RPMA_SIM_FABRIC";
// FOR TESTS ONLY: the handshake timeout in milliseconds (a positive integer; anything else:
// kHandshakeTimeoutMs), read when the process's fabric thread starts.
inline constexpr char kHandshakeTimeoutEnvVar[] = "RPMA_SIM_FABRIC_HANDSHAKE_MS";
// An accepted connection whose first whole message has not arrived this long after it was
// accepted is closed (its handler gets OnClosed): a peer cannot hold descriptors with idle
// connections.
inline constexpr uint64_t kHandshakeTimeoutMs = 10 * 1000;
// How long a listener is left unwatched after accept(2) failed for want of descriptors or
// memory (EMFILE, ENFILE, ENOBUFS, ENOMEM): the connections wait in its backlog meanwhile.
inline constexpr uint64_t kAcceptBackoffMs = 100;
// "0" turns cross-memory attach off for this process's connections, both ways (every byte
// then goes through the socket); "1" or unset: on where the kernel allows it (CanReach).
inline constexpr char kCmaEnvVar[] = "RPMA_SIM_CMA";
// "0": this process offers no shared-memory ring, so each of its connections carries every
// byte through its socket; "1" or unset: rings where both processes offer one (THE MODEL).
inline constexpr char kShmEnvVar[] = "RPMA_SIM_SHM";
// "0" turns the requester push off for this process (nic/carrier_host.cc): it neither writes
// a peer's memory by itself nor grants its peers that; "1" or unset: on where cross-memory attach
// is (RPMA_SIM_CMA).
inline constexpr char kPushEnvVar[] = "RPMA_SIM_PUSH";
// How long (milliseconds of real time, 0 to 600000; default kPeerAnswerWaitMs) a timer that a
// peer in another process could still beat waits for it: an rdma_disconnect's DREQ timeout is
// taken only when the peer's DREP has not come in this long (or the peer is gone), because the
// peer may be busy outside the simulator and the two processes' simulated clocks are their
// own (docs/FABRIC.md, "Timers a peer process could beat"). 0: the timeout at once, as before.
inline constexpr char kPeerAnswerEnvVar[] = "RPMA_SIM_PEER_ANSWER_MS";
inline constexpr uint64_t kPeerAnswerWaitMs = 2000;
// RPMA_SIM_PEER_ANSWER_MS in nanoseconds (the default until ConfigureFabric read it).
uint64_t PeerAnswerWaitNs();
// Real time: CLOCK_MONOTONIC now, in nanoseconds (the fabric's timers, the CM's holds).
uint64_t NowNs();

// A connection whose news the fabric thread left to its busy poller (Conn::kBusyPollWindowNs)
// is looked at again when the poller's window ends (`poller_until_ns`). A poller still polling
// at a look is looked at again after as long as it has been deferred (`deferred_ns`), at
// least a window and at most kDeferredLookCapNs: a program that polls for seconds has the
// fabric thread look once a millisecond, as it always did, and one that polls for a moment and
// then leaves the simulator (ib_write_lat waits for its write's completion, then spins on its
// memory) has what came meanwhile executed moments after it left. While deferred, the
// connection rings nothing: its watch is disarmed, and its peer rings only an armed ring.
inline constexpr uint64_t kDeferredLookCapNs = 1000 * 1000;
uint64_t NextDeferredLookNs(uint64_t now_ns, uint64_t poller_until_ns, uint64_t deferred_ns);

// Sets the fabric's name from RPMA_SIM_FABRIC (1 to 40 characters of [A-Za-z0-9._-]), or the
// default when it is unset or empty: "uid<uid>", or "uid<uid>-test-<hash of TEST_TMPDIR>"
// inside a Bazel test (Bazel runs tests side by side; each gets a fabric of its own).
// Also reads RPMA_SIM_CMA, RPMA_SIM_SHM, RPMA_SIM_PUSH and RPMA_SIM_PEER_ANSWER_MS. Errors: InvalidArgument
// naming the bad value.
// Call before the first Listen / Dial.
absl::Status ConfigureFabric();
// The fabric's name (the default until ConfigureFabric succeeded).
std::string FabricName();
// The port space of a listener's address: rdma_cm keeps UD ids' (RDMA_PS_UDP) apart from RC
// ids' (RDMA_PS_TCP, RDMA_PS_IB), so one port number may be listened on in both.
enum class PortSpace : uint8_t { kRc, kUdp };

// The abstract socket name of `addr` in `space` on the fabric (without the leading NUL):
// "softrpma/<fabric>/<address>:<port>", or ".../udp/<address>:<port>" for kUdp.
std::string ListenerName(const sockaddr* addr, PortSpace space = PortSpace::kRc);

// The host carrier of the data path (transport.h) and of the CM exchange (cm_peer.h).
class Conn final : public Transport, public std::enable_shared_from_this<Conn> {
 public:
  class Handler {
   public:
    virtual ~Handler() = default;
    // A message whose header passed wire::ValidateHeader; `body` holds header.body_len bytes,
    // valid during the call only.
    virtual void OnMessage(const wire::Header& header, const uint8_t* body) = 0;
    // A header that passed wire::ValidateHeader, before a byte of its body is read (and before
    // the OnMessage of the same message). Returns false to refuse it: the connection then ends
    // as on a malformed message (OnClosed follows, the body is never read). The default takes
    // every header.
    virtual bool OnHeader(const wire::Header& header) {
      (void)header;
      return true;
    }
    // The connection's send backlog (QueuedBytes), having been above kBacklogBytes, has
    // drained below it. Called where OnMessage is, never during a Send.
    virtual void OnDrained() {}
    // The connection ended: the peer closed it or died, or sent a malformed message. Called
    // once, never after Close(), and no OnMessage follows it.
    virtual void OnClosed() = 0;
  };

  // Sends one message: `header` (its body_len must be the bytes of `body`) and the body,
  // gathered from `body`. Never blocks. Returns 0; a connection that is closed or broken drops
  // the message (its peer is gone or going, and OnClosed tells the owner).
  int Send(const wire::Header& header, const iovec* body, int iovcnt) override
      ABSL_LOCKS_EXCLUDED(mu_);
  // The bytes sent on this connection that the socket has not taken yet (queued here). A peer
  // that does not read makes this grow; see kBacklogBytes and Handler::OnDrained.
  size_t QueuedBytes() override ABSL_LOCKS_EXCLUDED(mu_);
  // (kBacklogBytes: transport.h.)
  // Ends the connection from this side: what was sent is still delivered, then the peer sees
  // the end. The handler is released and gets no further call.
  void Close() override ABSL_LOCKS_EXCLUDED(mu_);
  // Ends the connection as if the peer had gone: the socket is shut down both ways now, and
  // the fabric thread then finds its end and calls the handler's OnClosed, as for a peer that
  // died. Takes no lock and never blocks: callable under any lock (a stuck cross-memory copy,
  // a peer over its budget).
  void Shutdown() override;
  // Does the fabric thread's work for this connection now, in the calling thread: writes what
  // is queued and handles the messages that have arrived (their handlers run here). Returns at
  // once when another thread is at it. A program polling a CQ calls this (through the CQ) so
  // that a busy-polling program needs no other thread to be scheduled: with every core busy,
  // waiting for the fabric thread's time slice costs milliseconds. REQUIRES: no lock of the
  // handler's held.
  void Progress() override ABSL_LOCKS_EXCLUDED(mu_, read_mu_);
  // While a program polls (Progress within the last kBusyPollWindowNs), the fabric thread
  // leaves the connection's messages to the poller (two threads reading one socket would make
  // each wait for the other's time slice), and looks again when the window ends: a program
  // that polled once and then spins on its memory (ib_write_lat's target) has what arrived
  // executed then, as a NIC would, not at its next poll, which may never come.
  static constexpr uint64_t kBusyPollWindowNs = 100 * 1000;
  // As Progress, but waits for a thread that is at it to finish first: when it returns, every
  // message that had arrived when it was called has been handled. REQUIRES: no lock of the
  // handler's held.
  void Settle() override ABSL_LOCKS_EXCLUDED(mu_, read_mu_);
  // The socket, while the connection is open and this process's (transport.h): while watched,
  // the fabric thread leaves the connection disarmed when news arrives (it "parks" it). After
  // the last Unwatch the fabric thread arms it again at the backstop (kCallSoonNs), unless a
  // watcher has it by then: a sleeper that serves a message and sleeps again keeps it, so the
  // fabric thread wakes at most once a backstop for it, not with every message. Meanwhile news
  // waits for the program's next poll or wait, or for the backstop.
  int Watch() override ABSL_LOCKS_EXCLUDED(mu_);
  void Unwatch() override ABSL_LOCKS_EXCLUDED(mu_);
  // Progress without the busy-poll stamp: the fabric thread keeps serving the connection.
  void Serve() override ABSL_LOCKS_EXCLUDED(mu_, read_mu_);

  // THE REQUESTER PUSH (transport.h): the peer's region table came with its ring offer, the
  // grant and pushing words are the rings' (shm/ring.h, word(kGrantWord), word(kPushingWord):
  // each side writes its own ring's and reads the peer's). Never in a fork child on its
  // parent's connection.
  static constexpr int kGrantWord = 0;
  static constexpr int kPushingWord = 1;
  bool GetPushWords(PushWords* words) override;
  bool Grant(uint64_t grant) override;
  void FencePushes(uint64_t tag) override;
  // FencePushes until `deadline_ns` (NowNs) at the latest.
  void FencePushesUntil(uint64_t tag, uint64_t deadline_ns);

  // Whether the connection is on its shared-memory rings both ways (THE SHARED-MEMORY RINGS):
  // this side writes its messages into its ring and reads the peer's from the peer's.
  bool OnRings() ABSL_LOCKS_EXCLUDED(mu_);

  // WHO IS AT THE OTHER END, as the kernel says (SO_PEERCRED of the socket: for a connection
  // this process accepted, the process that connected; for one it dialed, the process that
  // listened). Never what a message says: a peer's messages that name a process are checked
  // against this (cm.cc, nic/). 0 / (uid_t)-1 when the kernel would not say (the connection
  // is then refused before it is made).
  pid_t peer_pid() const { return peer_pid_; }
  uid_t peer_uid() const { return peer_uid_; }

  // Internal (the fabric's): use Listen / Dial.
  struct Internal;
  Conn(int fd, uint64_t token, pid_t peer_pid, uid_t peer_uid);
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;
  ~Conn();

 private:
  friend struct Internal;

  const int fd_;
  const uint64_t token_;
  const pid_t peer_pid_;
  const uid_t peer_uid_;
  const uint64_t generation_;  // the fork generation that made it (host.cc)
  softrpma::Mutex mu_;
  std::shared_ptr<Handler> handler_ ABSL_GUARDED_BY(mu_);
  std::vector<uint8_t> out_ ABSL_GUARDED_BY(mu_);  // bytes not yet taken by the socket
  size_t out_offset_ ABSL_GUARDED_BY(mu_) = 0;
  bool want_writable_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;  // Close() was called
  bool broken_ ABSL_GUARDED_BY(mu_) = false;   // a send failed: the peer is gone
  bool over_backlog_ ABSL_GUARDED_BY(mu_) = false;  // QueuedBytes() went above kBacklogBytes
  // Set when the backlog drained below kBacklogBytes; OnDrained is called by the next reader.
  std::atomic<bool> drained_pending_{false};
  // A whole message has arrived (the handshake timeout of an accepted connection is over).
  std::atomic<bool> got_message_{false};

  // The message being read, by the fabric thread or a thread in Progress(): one at a time. A
  // thread that finds read_mu_ taken sets drive_pending_ and leaves; the holder looks again
  // after it lets go (Internal::Drive), so no arrival is missed.
  std::atomic<bool> drive_pending_{false};
  std::atomic<uint64_t> last_poll_ns_{0};
  // Sleepers watching the connection (Watch / Unwatch), and whether the fabric thread left it
  // disarmed for them (parked): the last Unwatch arms it again. The two are a Dekker pair: the
  // fabric thread sets parked_ then reads watchers_, an Unwatch lowers watchers_ then takes
  // parked_, so a park is never missed by both (seq_cst).
  std::atomic<int> watchers_{0};
  std::atomic<bool> parked_{false};
  // THE SHARED-MEMORY RINGS, this side's (it writes) and the peer's (it reads). Messages go
  // to the socket (kSocket) until the switch (the answering kShmRing, or kShmSwitch) is sent or
  // queued, and from then on to out_ring_ (kRing): the peer reads the ring only once it has
  // read the switch. out_ holds the next bytes of the current medium; what the socket had not
  // taken at the switch (the switch itself among them) waits in socket_tail_, which the socket
  // takes before any bell.
  enum class OutMode : uint8_t { kSocket, kRing };
  std::unique_ptr<shm::Ring> out_ring_ ABSL_GUARDED_BY(mu_);  // offered to the peer
  OutMode out_mode_ ABSL_GUARDED_BY(mu_) = OutMode::kSocket;
  std::vector<uint8_t> socket_tail_ ABSL_GUARDED_BY(mu_);
  size_t socket_tail_offset_ ABSL_GUARDED_BY(mu_) = 0;
  bool bell_owed_ ABSL_GUARDED_BY(mu_) = false;  // a bell asked for while socket_tail_ waits
  // out_ holds bytes for out_ring_: a busy poller's Progress writes them (the fabric thread
  // leaves a polled connection to its poller).
  std::atomic<bool> ring_queued_{false};
  // The peer's ring once its messages come through it; set once, lives as long as this.
  std::atomic<shm::Ring*> in_ring_live_{nullptr};
  // out_ring_ once made (set once; lives as long as this): its words are read without mu_.
  std::atomic<shm::Ring*> out_ring_live_{nullptr};
  // in_ring_ once mapped (at the peer's offer, before in_ring_live_ at its switch): the peer
  // may push from then on, so the fence reads its word from then on.
  std::atomic<shm::Ring*> in_ring_mapped_{nullptr};
  // Closed, shut down or ended: no push from this side any more (the peer may be gone, and its
  // pid another process's).
  std::atomic<bool> ended_{false};
  // A fence on this connection waited out its bound once: its grant is withdrawn and later
  // fences do not wait for it again.
  std::atomic<bool> fence_expired_{false};
  // The peer's region table, once its offer brought one (set once, under read_mu_).
  std::unique_ptr<shm::RegionTable> peer_table_ ABSL_GUARDED_BY(read_mu_);
  std::atomic<shm::RegionTable*> peer_table_live_{nullptr};
  // This side granted the peer pushes at some time: a deregistration fences its pushes
  // (FencePushesEverywhere).
  std::atomic<bool> granted_{false};
  // Shutdown() was called: at the end the peer's ring is not read any further.
  std::atomic<bool> cut_{false};
  // A driver that reads the socket (bells, the end) and arms the ring wants the connection
  // read: the holder of read_mu_ reads it so (Internal::Drive).
  std::atomic<bool> drain_pending_{false};

  softrpma::Mutex read_mu_;
  std::unique_ptr<shm::Ring> in_ring_ ABSL_GUARDED_BY(read_mu_);  // mapped at its offer
  int in_fd_ ABSL_GUARDED_BY(read_mu_) = -1;  // a descriptor the peer sent (SCM_RIGHTS)
  int in_table_fd_ ABSL_GUARDED_BY(read_mu_) = -1;  // the second: its region table
  wire::Header in_header_ ABSL_GUARDED_BY(read_mu_);
  size_t in_header_got_ ABSL_GUARDED_BY(read_mu_) = 0;
  Bytes in_body_ ABSL_GUARDED_BY(read_mu_);  // filled as it arrives: not zeroed
  size_t in_body_got_ ABSL_GUARDED_BY(read_mu_) = 0;
};

class Listener final {
 public:
  struct State;
  explicit Listener(std::shared_ptr<State> state) : state_(std::move(state)) {}
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;
  // Stops listening: the name is free again when this returns; `on_accept` is not called
  // after it.
  ~Listener();

 private:
  std::shared_ptr<State> state_;
};

// CROSS-MEMORY ATTACH (wire.h, kFlagCma). ProbeAddress() is the address of a word holding
// wire::kProbeMagic in this process (0 with RPMA_SIM_CMA=0); CanReach(pid, addr) reads that word of process `pid` with
// process_vm_readv and says whether it holds the magic: whether this process may copy to and
// from that one's memory (same user, and ptrace rules such as Yama's allow it); always false
// with RPMA_SIM_CMA=0.
uint64_t ProbeAddress();
// Whether this process pushes and grants pushes (RPMA_SIM_PUSH and RPMA_SIM_CMA).
bool PushesEnabled();
bool CanReach(int32_t pid, uint64_t probe_addr);

// THE REQUESTER PUSH's fence for a region this process withdraws from its table (nic/,
// a deregistration): after Withdraw, waits until no connection whose peer this process ever
// granted pushes names `tag` as the region it pushes into (Conn::FencePushes), at most
// Transport::kPushFenceNs for all of them together. A peer that names it for longer (stopped,
// or hostile) is not waited for: its connection's grant is withdrawn, no fence waits for it
// again, and stderr says so once per peer. (A process the kernel lets write this one's memory
// could write all of it anyway.)
void FencePushesEverywhere(uint64_t tag);
// Whether the calling thread is this process's fabric thread (nic/: it pushes only where
// AnyPeerMayStopUs).
bool OnFabricThread();
// Whether every process of this user may ptrace this one (no Yama, or Yama's ptrace_scope 0),
// so that a peer that could stall a thread of ours through its memory could stop us anyway.
// Read once.
bool AnyPeerMayStopUs();

// THE HOST TRANSPORT INSIDE ONE PROCESS (sched.h, TransportKind::kHost): waits until every
// connection of this process to this same process is idle (no byte unread in its socket, none
// queued to send, no thread reading or handling a message), at most kQuiesceCapNs. What the
// in-process link does inside a call (a request executed, its answer back) is then there
// before the next call, as deterministically. Returns at once when there is no such connection.
constexpr uint64_t kQuiesceCapNs = uint64_t{5} * 1000 * 1000 * 1000;
void Quiesce();

// THE BACKSTOP: has the fabric thread call `fn` about kCallSoonNs from now (once, however
// often it is asked before then; the request made after `fn` started is a new one). `fn` runs
// with no lock of this file held but the fabric thread's work lock, as a connection's handler
// does. For work a program may never give a thread to (a deferred request of a process that
// spins on memory, nic/progress.cc). One `fn` per process: each call names the same one.
constexpr uint64_t kCallSoonNs = 1000 * 1000;
// FOR TESTS ONLY: the backstop's delay in milliseconds instead (a positive integer; anything
// else: kCallSoonNs), read when the process's fabric thread starts. A test of the race detector
// across processes sets it long, so that a loaded machine that stops the program for a
// millisecond between its post and its bug cannot let the backstop send the WR first.
inline constexpr char kBackstopEnvVar[] = "RPMA_SIM_FABRIC_BACKSTOP_MS";
void CallSoon(void (*fn)());

// FOR TESTS ONLY: while one lives, the fabric thread does no work (it holds the lock the
// thread's work takes, as a fork does): what a connection brings is handled by the threads
// that poll or wait for it, or by nobody.
class ScopedFabricThreadHeldForTest final {
 public:
  ScopedFabricThreadHeldForTest();
  ScopedFabricThreadHeldForTest(const ScopedFabricThreadHeldForTest&) = delete;
  ScopedFabricThreadHeldForTest& operator=(const ScopedFabricThreadHeldForTest&) = delete;
  ~ScopedFabricThreadHeldForTest();
};

// Called on the fabric thread for each connection a peer makes; returns the connection's
// handler, or nullptr to refuse it (the peer sees the connection end).
using AcceptFn = std::function<std::shared_ptr<Conn::Handler>(const std::shared_ptr<Conn>&)>;

// Listens at `addr` (an IP address and port; a wildcard serves every address of the port).
// Errors: EADDRINUSE (another listener has that name on this fabric; when it is another
// user's process, stderr names its uid and pid), EMFILE & co. from socket(2), ENOMEM.
int Listen(const sockaddr* addr, AcceptFn on_accept, std::unique_ptr<Listener>* listener,
           PortSpace space = PortSpace::kRc);

// Connects to the listener of `dst` (exact address first, then a wildcard of its port);
// `handler` gets the connection's messages. Errors: ECONNREFUSED (nobody listens there),
// EACCES (another user's process holds the name: not connected, and stderr says so once per
// name), errors of socket(2) / connect(2).
int Dial(const sockaddr* dst, std::shared_ptr<Conn::Handler> handler,
         std::shared_ptr<Conn>* conn, PortSpace space = PortSpace::kRc);

// A port number held on this fabric for as long as the object lives: an abstract Unix socket
// named "softrpma/<fabric>/port/<port>", bound but not listening, so that the kernel makes the
// reservation fabric-wide and drops it when its process exits, however it exits. The CM takes
// one for each block of ports it hands out for port 0 from (rdma_bind_addr, rdma_resolve_addr
// without a source; cm.h, port_blocks_), named by the block's first port, so that two
// processes of one fabric never get the same port, as the kernel's cma_alloc_any_port never
// gives one port twice.
// A fork child does not hold its parent's reservations: the child's copies of their sockets
// are closed at the fork (the parent's own keep the names), so a port block the parent lets go
// is free for the fabric again while the child lives on.
class PortReservation final {
 public:
  // `fd` is registered (ReservePort) for the fork child to close.
  PortReservation(int fd, uint64_t generation) : fd_(fd), generation_(generation) {}
  PortReservation(const PortReservation&) = delete;
  PortReservation& operator=(const PortReservation&) = delete;
  // Frees the port for the fabric's other processes (and this one). In a fork child, the
  // parent's reservation was closed at the fork already: nothing.
  ~PortReservation();

 private:
  int fd_;
  uint64_t generation_;  // the fork generation it was made in
};

// Reserves `port` on this fabric. Errors: EADDRINUSE (a process of this fabric, this one
// included, holds it), errors of socket(2) / bind(2) (EMFILE & co.).
int ReservePort(uint16_t port, std::unique_ptr<PortReservation>* reservation);

// As Listen / Dial, at an endpoint named `endpoint` (1 to 64 characters of [A-Za-z0-9._:-])
// instead of an address: the abstract name "softrpma/<fabric>/ep/<endpoint>", which no
// address's listener has. Dial tries that name only. (The verbs-connected QPs of nic/verbs_qp.cc: a
// process's endpoint is named after its GID.)
int ListenEndpoint(const std::string& endpoint, AcceptFn on_accept,
                   std::unique_ptr<Listener>* listener);
int DialEndpoint(const std::string& endpoint, std::shared_ptr<Conn::Handler> handler,
                 std::shared_ptr<Conn>* conn);

}  // namespace softrpma::sim::host

#endif  // SOFTRPMA_SIMVERBS_SIM_FABRIC_HOST_H_
