// cm.h: the simulated connection manager (rdma_cm): event channels (SimEventChannel), ids
// (SimCmId), events (SimCmEvent) and the ConnectionManager that connects them.
//
// THE MODEL (every exchange completes inside the call; the CM's timers, a DREQ's timeout and
// timewait, run in simulated time, sched.h; the other timeouts are ignored)
//   * Event channels are eventfd-backed (signal_fd.h): rdma_event_channel.fd is pollable and
//     readable exactly while an event is pending; RdmaGetCmEvent blocks, or fails with EAGAIN
//     when the user made the fd O_NONBLOCK. Each event is due at a simulated time (when it was
//     queued, or later for a timer); a channel hands them out in due-time order, and getting
//     one due later than now moves the clock to it: the program waited for it. So a timer's
//     event is pending, and the fd readable, from the moment it is set. The rdma_cm_event is
//     allocated (New<T>) by RdmaGetCmEvent, as librdmacm does, so a "malloc" fault fails that
//     call with ENOMEM and leaves the event queued.
//   * An id created with a NULL channel is synchronous: RdmaResolveAddr / RdmaResolveRoute
//     complete and return their result; no event is queued for it (events that would be are
//     dropped). RdmaListen and RdmaConnect need a channel (EINVAL on a synchronous id; migrate
//     it first, as librpma does). Ids with a channel get ADDR_RESOLVED / ROUTE_RESOLVED events.
//   * RdmaBindAddr binds (address, port) like a TCP socket: port 0 picks the next free port
//     from a counter (49152 up, deterministic in one process) that no other process of the
//     fabric has reserved (host::ReservePort; kept while the id is bound); a bind that overlaps another bound id on the same
//     port (same address, or either one a wildcard) is EADDRINUSE. A wildcard bind leaves
//     id->verbs NULL (as on hardware); a specific address sets it to the device.
//   * RdmaConnect to an address with a listener (exact address first, else a wildcard listener
//     of that port) creates a NEW id and queues RDMA_CM_EVENT_CONNECT_REQUEST on the listener's
//     channel (event->id = the new id, listen_id = the listener, the connect's private data,
//     at most kMaxConnectPrivateData bytes). With no listener the connecting id gets
//     RDMA_CM_EVENT_REJECTED with status kRejectNoListener.
//   * Connection setup in librdmacm's order on IB: RdmaAccept moves the passive QP to RTS and
//     queues the active side's connect response, carrying the accept's private data (at most
//     kMaxAcceptPrivateData bytes). The active side processes it inside its own
//     RdmaGetCmEvent, as librdmacm does: its QP goes to RTS, the RTU goes to the passive side,
//     and the user gets RDMA_CM_EVENT_ESTABLISHED; the RTU queues the passive side's
//     ESTABLISHED (no private data). So a server waiting for its ESTABLISHED before the client
//     got its own waits forever, as on IB / RoCE. Until the active QP is RTS it cannot post
//     (EINVAL), and the passive side's WRs toward it wait (a requester's retries; the
//     simulated retries never run out). If the active side went away (its id or QP destroyed)
//     the passive id gets RDMA_CM_EVENT_UNREACHABLE (status -ETIMEDOUT) instead.
//     On iWARP (the siw profile) the passive side's ESTABLISHED is queued by RdmaAccept itself,
//     as siw's MPA reply completes the exchange there (docs/DEVICES.md); the RTU that follows
//     only tells whether the active side can reach this process's memory.
//   * Private data lengths as the kernel's CM reports them: on IB / RoCE the whole field of the
//     CM message, zero-padded past what was sent (also when nothing was): CONNECT_REQUEST 56
//     bytes (the REQ's 92 less the rdma_cm header), the connect response 196 (REP), REJECTED
//     148 (REJ); on iWARP exactly what was sent.
//   * Connection parameters (param.conn) as the kernel's CM reports them: CONNECT_REQUEST the
//     REQ's, the active side's ESTABLISHED the REP's, each the sender's QP number and SRQ use
//     (from its QP), responder_resources, initiator_depth, flow_control (its 1 bit) and
//     rnr_retry_count, and the REQ's retry_count (a REP has none: 0), the counts cut to the
//     IB CM's 3-bit fields (7 at most); the passive side's ESTABLISHED (the RTU) reports none.
//   * RdmaReject queues RDMA_CM_EVENT_REJECTED (status kRejectConsumer) with the reject's
//     private data (at most kMaxRejectPrivateData bytes) on the active side.
//   * Disconnect as on IB (librdmacm's rdma_disconnect, the kernel's IB CM):
//     RdmaDisconnect of a connected id moves ITS QP to ERROR (flushing it) and sends a DREQ.
//     The peer gets RDMA_CM_EVENT_DISCONNECTED (status 0) at once; its QP is left RTS, its
//     receives posted, and its sends toward the gone responder end IBV_WC_RETRY_EXC_ERR after
//     the retry timeout (qp.h). The initiator's DISCONNECTED comes with the DREP, which the
//     peer sends by its own RdmaDisconnect (which also moves its QP to ERROR) or by destroying
//     its id: status 0, due then; without a DREP it comes when the DREQ times out
//     (kDreqTimeout*Ns later, status -ETIMEDOUT). Each side then gets
//     RDMA_CM_EVENT_TIMEWAIT_EXIT kTimewaitNs after it entered timewait: the initiator after
//     its DISCONNECTED, the peer after sending its DREP. On an id that is connecting, was
//     rejected, is already disconnected (by either side) or is an unanswered request it only
//     moves the id's QP to ERROR and succeeds, as the kernel does; on an id that never took part
//     in a connection it is EINVAL. Destroying a connected id sends the DREQ (its QP is gone:
//     the peer's sends time out). Destroying an id drops its undelivered events.
//   * Disconnect on iWARP (the siw profile; iw_cm and siw, docs/DEVICES.md): no DREQ / DREP, no
//     timers, no TIMEWAIT_EXIT. RdmaDisconnect or destroying a connected id closes the
//     connection: both QPs go to ERROR (flushing their WRs, the peer's posted receives with
//     them) and both ids get DISCONNECTED (status 0) at once (CmPeer::Break, as a fault's
//     kDisconnect does). (A DREQ, which only a peer process of another profile sends to an
//     iWARP id, is handled as on IB.)
//   * Destroying a listener rejects (kRejectConsumer) the requests whose CONNECT_REQUEST it has
//     not delivered yet; requests already delivered belong to the user. Destroying a request id
//     that was neither accepted nor rejected rejects it (kRejectConsumer).
//   * RdmaMigrateId moves the id's future events AND its pending (not yet got) ones to the new
//     channel, as the kernel does (a listener's pending CONNECT_REQUESTs move with it).
//   * Events are counted against the id whose channel they went to (the listener for
//     CONNECT_REQUEST); RdmaDestroyId with unacknowledged events is EBUSY (rdma-core waits for
//     them). An id destroyed with its QP on it leaves the QP as it is, the caller's to destroy
//     with IbvDestroyQp, as rdma-core's rdma_destroy_id does.
//   * Ports and QP numbers come from counters: the same program gets the same numbers.
//   * Faults (fault.h, mapped to ConnFault by the backend): Connect with kReject /
//     kUnreachable / kLost sends no request; the active id gets REJECTED (kRejectConsumer) /
//     UNREACHABLE (-ETIMEDOUT) / CONNECT_ERROR (-ECONNRESET). Accept with kReject /
//     kUnreachable / kLost gives both ids that event instead of ESTABLISHED (kLost also moves
//     both QPs to ERROR); with kDisconnect both get ESTABLISHED (the active side's the REP's
//     connect response, its private data as any REP's), then DISCONNECTED (QPs to ERROR): the
//     REP and then a DREQ, as the IB CM sends them. BreakConnection (a fault on a post) ends an established connection at once, on
//     both sides: kDisconnect with DISCONNECTED (status 0, no DREQ / DREP, no TIMEWAIT_EXIT),
//     kLost with CONNECT_ERROR (-ECONNRESET) on both ids; both QPs go to ERROR first, so
//     outstanding WRs and the WR being posted flush. (A peer in another process sees a DREQ
//     and the connection close, as when the faulting side destroys its id.)
//   * Every event queued, got and acknowledged is traced (trace.h), ids by their serial.
//
// UD IDS (RDMA_PS_UDP; rdma-core's librdmacm and the kernel's CMA and IB CM on RoCE). An id of
// RDMA_PS_UDP has qp_type IBV_QPT_UD, and so have the request ids its listener makes. Its
// rdma_create_qp takes a UD QP only (another type is EINVAL, as rdma-core's INIT would fail)
// and moves it to RTS at once, as ucma_init_ud_qp does: INIT with P_Key index 0, port 1 and
// the Q_Key kUdpQkey (the kernel's RDMA_UDP_QKEY), RTR, RTS with SQ PSN 0. That QP is a QP of
// ibv_create_qp in every other way (the user may modify it; nic/qp.h, SimQp::cm_ud), and only
// rdma_destroy_qp destroys it while its id lives. Connecting is SIDR, one request and one
// reply, no connection: rdma_connect (no QP needed; private data up to
// kMaxSidrRequestPrivateData) sends the SIDR REQ; the listener gets CONNECT_REQUEST with
// param.ud (the private data as a 180-byte field, zero-padded; no address, QPN or Q_Key);
// rdma_accept (with a QP, or conn_param->qp_num; private data up to kMaxSidrReplyPrivateData)
// sends the SIDR REP and queues nothing on its side; the requester gets ESTABLISHED with
// param.ud: the REP's QP number, kUdpQkey, the private data as a 136-byte field, and an
// address handle attribute toward the accepting process (GRH with its GID, hop limit
// kSidrHopLimit, port 1, SGID index 0), which ibv_create_ah takes. rdma_reject (or destroying
// an unanswered request, or its listener) sends a SIDR REP of status kSidrReject; nobody
// listening on that port as UDP gives kSidrUnsupported: the requester gets UNREACHABLE with
// that status and a 136-byte field. A request that is never answered (its listener's process
// died) or whose REP a fault lost gives UNREACHABLE (-ETIMEDOUT). After the REP both ids are
// kConnected with no peer: rdma_disconnect moves the QP to ERROR and queues nothing, as
// the kernel's DREQ fails on a SIDR id; destroying either sends nothing. Faults: rdma_connect's
// `reject` gives UNREACHABLE (kSidrReject), `unreachable` and `lost` UNREACHABLE (-ETIMEDOUT);
// rdma_accept's `reject` sends the SIDR REP as a rejection, its `unreachable`, `lost` and
// `disconnect` lose the REP (the requester's UNREACHABLE, -ETIMEDOUT). Not modelled: the
// iWARP profile (siw has no UD QPs: rdma_create_qp is EOPNOTSUPP there, and so is
// rdma_connect of a UD id), RDMA_PS_IPOIB (its Q_Key comes from an IPoIB broadcast group a
// RoCE port has not: EINVAL), multicast. UD ids have a port space of their own (host.h,
// PortSpace), as the kernel's RDMA_PS_UDP: a UD id and an RC id may bind and listen on one
// address and port.
//
// PEERS IN OTHER PROCESSES (fabric/host.h). rdma_listen also listens on the host fabric, so
// processes of the same fabric can connect (EADDRINUSE when another process listens on that
// address and port already). RdmaConnect finds a listener of this process first; with none,
// it dials the fabric: nobody listening there gives REJECTED (kRejectNoListener) at once.
// Over the fabric the exchange is the IB CM's: the REQ (qp_num, private data) becomes a
// CONNECT_REQUEST on the listener's channel; rdma_accept moves the passive QP to RTS and sends
// the REP; the active side's fabric thread, on the REP, queues its connect response; when the
// active user gets it, its QP goes to RTS and the RTU is sent, on which the passive side's
// ESTABLISHED is queued (the passive side's requests wait in the active process until then).
// rdma_reject (or a listener going away) sends a REJ. rdma_disconnect sends a DREQ, as above;
// the peer's rdma_disconnect or destroy answers it with a DREP and closes the connection. The
// two processes' clocks are their own: the initiator's DISCONNECTED comes with the DREP if the
// DREP has reached its process when it gets its next event (rdma_get_cm_event handles what has
// arrived first), else when its DREQ times out in its own simulated time. After a DREQ, the
// connection closing (the initiator destroyed its id or exited) leaves nothing to answer the
// peer: its WRs in flight and later ones time out (RETRY_EXC_ERR). A peer process that closes
// or dies while connected ends the connection: a connected id gets DISCONNECTED (its
// outstanding WRs flush), a connecting one UNREACHABLE, and so does an accepted one whose REP
// no RTU answered (as when the active id of this process is gone at the accept; its QP goes
// to ERROR); a request whose requester died (or destroyed its id) vanishes if its
// CONNECT_REQUEST was not delivered yet, as in one process, and gives UNREACHABLE when
// accepted if it was. Faults apply in each process to its own side of the exchange.
//
// ONE EXCHANGE, TWO CARRIERS (cm_peer.h). An id in a connection holds a CmPeer, the other end:
// a LocalCmPeer (an id of this process) or a HostCmPeer (another process). The exchange above
// is written once: each message a peer carries arrives as the same handler of this class
// (RequestReceivedLocked, AcceptReceivedLocked, ...), called at once by a LocalCmPeer, or by
// the other process's HostCmPeer when the message arrives there.
//
// Thread-safe. One mutex (ConnectionManager::mu_) serializes connection management, which is
// not on the data path; lock order: ConnectionManager::mu_ -> SimLink::mu -> ... (qp.h) ->
// SimEventChannel::mu. RdmaGetCmEvent and RdmaAckCmEvent take only a channel's mutex.

#ifndef SOFTRPMA_SIMVERBS_SIM_CM_CM_H_
#define SOFTRPMA_SIMVERBS_SIM_CM_CM_H_

#include <rdma/rdma_cma.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "simverbs/mutex.h"
#include "simverbs/sim/nic/device.h"
#include "simverbs/sim/fabric/host.h"
#include "simverbs/sim/signal_fd.h"

namespace softrpma::sim {

// Private data limits of the InfiniBand CM messages (REQ, REP, REJ): the mlx5 and rxe
// profiles' (device_profile.h); the checks use the active profile's.
inline constexpr int kMaxConnectPrivateData = 56;
inline constexpr int kMaxAcceptPrivateData = 196;
inline constexpr int kMaxRejectPrivateData = 148;

// SIDR, the UD exchange (see UD IDS): the private data its messages carry after the rdma_cm
// header (the SIDR REQ's 216 bytes less the CMA's 36; the SIDR REP's 136), the Q_Key the CMA
// gives UD QPs of RDMA_PS_UDP (RDMA_UDP_QKEY), the SIDR REP's status (rdma_cm_event.status of
// RDMA_CM_EVENT_UNREACHABLE), and the hop limit of the address it reports (an IPv4 route's).
inline constexpr int kMaxSidrRequestPrivateData = 180;
inline constexpr int kMaxSidrReplyPrivateData = 136;
inline constexpr uint32_t kUdpQkey = 0x01234567;
inline constexpr int kSidrUnsupported = 1;  // IB_SIDR_UNSUPPORTED: no UDP listener there
inline constexpr int kSidrReject = 2;       // IB_SIDR_REJECT: rdma_reject & co.
inline constexpr uint8_t kSidrHopLimit = 64;

// rdma_cm_event.status of RDMA_CM_EVENT_REJECTED: the IB CM reject reasons.
inline constexpr int kRejectNoListener = 8;  // IB_CM_REJ_INVALID_SERVICE_ID: nobody listens
inline constexpr int kRejectConsumer = 28;   // IB_CM_REJ_CONSUMER_DEFINED: rdma_reject & co.

// How a fault makes a connection end (see the file comment).
enum class ConnFault : uint8_t { kNone, kReject, kUnreachable, kLost, kDisconnect };

// The IB CM's disconnect timers, in simulated time: the kernel's, with the rdma_cm's settings
// on RoCE (drivers/infiniband/core/cm.c, cma.c: packet life time CMA_IBOE_PACKET_LIFETIME 18,
// CMA_CM_RESPONSE_TIMEOUT 20, CMA_MAX_CM_RETRIES 15; cm_convert_to_ms(t) = 2^(t - 8) ms).
// A DREQ is sent 16 times, each time waiting the id's timeout_ms: on the active side
// 2 x 2^10 + 2^12 = 6144 ms (ib_send_cm_req), on the passive side 2^12 = 4096 ms (from the
// REQ's local CM response timeout). Timewait lasts cm_convert_to_ms(packet life time + 1).
inline constexpr uint64_t kMsToNs = 1000 * 1000;
inline constexpr uint64_t kDreqTimeoutActiveNs = 16 * 6144 * kMsToNs;   // 98.3 s
inline constexpr uint64_t kDreqTimeoutPassiveNs = 16 * 4096 * kMsToNs;  // 65.5 s
inline constexpr uint64_t kTimewaitNs = 2048 * kMsToNs;

struct SimCmId;

// An event waiting on a channel (the rdma_cm_event is built when it is got).
struct PendingCmEvent {
  SimCmId* owner;  // the id whose channel it went to (for CONNECT_REQUEST: the listener)
  SimCmId* id;
  SimCmId* listen_id;
  rdma_cm_event_type type;
  int status;
  rdma_conn_param conn;  // private_data unset; see private_data below
  // An event of a UD id (UD IDS): the event reports `ud` (its private_data unset; its
  // private_data_len the length reported) instead of `conn`.
  bool is_ud;
  rdma_ud_param ud;
  uint8_t private_data_len;
  uint8_t private_data[kMaxPrivateDataAnyDevice];
  // The active side's CONNECT_RESPONSE: librdmacm processes it inside rdma_get_cm_event (QP
  // to RTR / RTS, the RTU to the passive side) and reports it as ESTABLISHED.
  bool connect_response;
  // Simulated time at which it happens: the clock when queued, or later for a timer.
  uint64_t due_ns;
  // The DISCONNECTED / TIMEWAIT_EXIT of a DREQ that waits for its DREP (which brings it
  // forward) or its timeout.
  bool until_drep;
  // A DREQ timer whose peer is another process: until this CLOCK_MONOTONIC time (ns), the
  // timeout is not delivered while the DREP may still come (0: no hold). Simulated time is the
  // process's own, so a timer must not fire while a peer busy outside the simulator could
  // still answer (docs/FABRIC.md, "Timers a peer process could beat"); the hold is a real-time
  // bound (RPMA_SIM_PEER_ANSWER_MS) because this process cannot see whether the peer is busy.
  uint64_t hold_until_ns;
};

struct SimEventChannel final {
  rdma_event_channel channel;  // FIRST member

  softrpma::Mutex mu;
  // In due_ns order, events due at the same time in the order queued. The fd is readable while
  // it is not empty, also when the front is due later than now: getting that event moves the
  // simulated clock to it.
  std::deque<PendingCmEvent> events ABSL_GUARDED_BY(mu);
  SignalFd signal;
  // The threads inside rdma_get_cm_event on this channel (GetEvent), counted from its first
  // instruction: those asleep in the fd's read(2) and those on their way to it (waiting for
  // the CM's or the channel's lock). Incremented without the lock (a caller waiting for it is
  // already counted), decremented under it. While any is inside, rdma_destroy_event_channel
  // only marks the channel `destroyed` and the last one out frees it.
  std::atomic<int> callers{0};
  bool destroyed ABSL_GUARDED_BY(mu) = false;

  SimEventChannel() { channel.fd = -1; }
  SimEventChannel(const SimEventChannel&) = delete;
  SimEventChannel& operator=(const SimEventChannel&) = delete;
};

inline SimEventChannel* to_sim(rdma_event_channel* channel) {
  return reinterpret_cast<SimEventChannel*>(channel);
}

// An event handed to the user; freed by RdmaAckCmEvent.
struct SimCmEvent final {
  rdma_cm_event event;  // FIRST member
  SimCmId* owner;
  uint32_t id_serial;  // serial of event.id when it was got (for the trace)
  uint8_t private_data[kMaxPrivateDataAnyDevice];
};

struct SimQp;
class CmPeer;  // cm_peer.h: what carries the CM exchange to the other end
class HostCmPeer;

struct SimCmId final {
  enum class State : uint8_t {
    kIdle,             // created
    kBound,            // rdma_bind_addr
    kAddrResolved,     // rdma_resolve_addr
    kRouteResolved,    // rdma_resolve_route
    kListening,        // rdma_listen
    kConnecting,       // active: rdma_connect sent, no answer yet
    kRequestReceived,  // passive: made by a connect request, not accepted or rejected yet
    kConnected,        // established
    kDisconnected,     // after rdma_disconnect (either side) or the peer went away
    kRejected,         // active: rejected; passive: rejected by us
    kUnreachable,      // the connection could not be completed
  };

  rdma_cm_id id;  // FIRST member

  uint32_t serial = 0;  // creation order (the key of ConnectionManager::ids_)
  // Delivered and not yet acknowledged events counted against this id. Changed under the
  // mutex of the channel the event was on.
  std::atomic<int> unacked_events{0};

  // Guarded by ConnectionManager::mu_.
  SimEventChannel* channel = nullptr;
  State state = State::kIdle;
  bool bound = false;
  // The other end of a pending or established connection (cm_peer.h), nullptr once closed.
  std::shared_ptr<CmPeer> peer;
  SimCmId* listener = nullptr;             // request ids: the listener that got the request
  std::vector<SimCmId*> pending_requests;  // listeners: request ids not accepted/rejected yet
  bool established_pending = false;        // passive: accepted, ESTABLISHED waits for the RTU
  bool active = false;                     // made the connection with rdma_connect
  // Disconnecting (state kDisconnected): we sent a DREQ and wait for its DREP until
  // dreq_deadline_ns; or we got the peer's DREQ and owe it the DREP.
  bool awaiting_drep = false;
  uint64_t dreq_deadline_ns = 0;
  bool owes_drep = false;
  std::unique_ptr<host::Listener> host_listener;  // listeners: on the host fabric too
  // The CQs (and their completion channels) rdma_create_qp made because the caller gave none:
  // destroyed with the QP (rdma_destroy_qp), as rdma-core's ucma_create_cqs / ucma_destroy_cqs.
  ibv_cq* own_send_cq = nullptr;
  ibv_cq* own_recv_cq = nullptr;
  ibv_comp_channel* own_send_channel = nullptr;
  ibv_comp_channel* own_recv_channel = nullptr;
  // Its port was handed out for port 0: its block's count (ConnectionManager::port_blocks_)
  // holds one for it while it is bound.
  bool ephemeral_port = false;

  SimCmId();
  SimCmId(const SimCmId&) = delete;
  SimCmId& operator=(const SimCmId&) = delete;
};

inline SimCmId* to_sim(rdma_cm_id* id) { return reinterpret_cast<SimCmId*>(id); }

// The connection manager of the simulated device. Each method is the rdma_* call of the same
// name; contracts in backend.h, model in the file comment. Thread-safe.
class ConnectionManager final {
 public:
  explicit ConnectionManager(SimDevice* device) : device_(device) {}
  ConnectionManager(const ConnectionManager&) = delete;
  ConnectionManager& operator=(const ConnectionManager&) = delete;

  int CreateEventChannel(rdma_event_channel** channel);
  void DestroyEventChannel(SimEventChannel* channel) ABSL_LOCKS_EXCLUDED(mu_);
  int CreateId(SimEventChannel* channel, rdma_cm_id** id, void* context, rdma_port_space ps)
      ABSL_LOCKS_EXCLUDED(mu_);
  int DestroyId(SimCmId* id) ABSL_LOCKS_EXCLUDED(mu_);
  int MigrateId(SimCmId* id, SimEventChannel* channel) ABSL_LOCKS_EXCLUDED(mu_);
  int BindAddr(SimCmId* id, const sockaddr* addr) ABSL_LOCKS_EXCLUDED(mu_);
  int ResolveAddr(SimCmId* id, const sockaddr* src_addr, const sockaddr* dst_addr)
      ABSL_LOCKS_EXCLUDED(mu_);
  int ResolveRoute(SimCmId* id) ABSL_LOCKS_EXCLUDED(mu_);
  int Listen(SimCmId* id) ABSL_LOCKS_EXCLUDED(mu_);
  int CreateQp(SimCmId* id, ibv_qp_init_attr_ex* attr) ABSL_LOCKS_EXCLUDED(mu_);
  void DestroyQp(SimCmId* id) ABSL_LOCKS_EXCLUDED(mu_);
  // `fault`: kNone, or how the connection ends (kReject, kUnreachable, kLost; Accept also
  // kDisconnect). Applied only when the call is valid (its EINVAL checks come first).
  int Connect(SimCmId* id, const rdma_conn_param* param, ConnFault fault = ConnFault::kNone)
      ABSL_LOCKS_EXCLUDED(mu_);
  int Accept(SimCmId* id, const rdma_conn_param* param, ConnFault fault = ConnFault::kNone)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Ends the established connection of the id owning `qp` (fault kLost or kDisconnect).
  // Returns false, doing nothing, when qp belongs to no connected id.
  bool BreakConnection(const SimQp* qp, ConnFault fault) ABSL_LOCKS_EXCLUDED(mu_);
  int Reject(SimCmId* id, const void* private_data, uint8_t private_data_len)
      ABSL_LOCKS_EXCLUDED(mu_);
  int Disconnect(SimCmId* id) ABSL_LOCKS_EXCLUDED(mu_);
  // Takes mu_ and the channel's mutex (to find a DREQ timer to settle), then the channel's
  // mutex, then (for a connect response) mu_.
  int GetEvent(SimEventChannel* channel, rdma_cm_event** event) ABSL_LOCKS_EXCLUDED(mu_);
  // Takes only the event's channel's mutex.
  static int AckEvent(SimCmEvent* event);

  // The end of a connection over the host fabric (run by the fabric thread, see HostCmPeer
  // in cm_peer.h, which delivers its CM messages to the handlers below).
  void OnRemoteClosed(const std::shared_ptr<HostCmPeer>& end) ABSL_LOCKS_EXCLUDED(mu_);
  // The peer broke the protocol (a message its state does not allow): the connection ends
  // from this side, and its id learns it as if the peer had closed it.
  void OnRemoteBroken(const std::shared_ptr<HostCmPeer>& end) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // The peers deliver the other end's messages to the handlers below (cm_peer.h).
  friend class LocalCmPeer;
  friend class HostCmPeer;

  // ---- What arrives from the other end, whichever CmPeer carried it.
  // The REQ at `listener` (from `peer_addr`, asking for `local_addr`; `conn` and the private
  // data as the event reports them): a new request id holding `peer`, CONNECT_REQUEST
  // queued. nullptr (nothing queued) when `listener` does not listen or out of memory.
  // `sidr`: a SIDR REQ, which only a listener of UD ids takes (and an IB CM REQ only another).
  SimCmId* RequestReceivedLocked(SimCmId* listener, bool sidr, const sockaddr* local_addr,
                                 const sockaddr* peer_addr, const rdma_conn_param& conn,
                                 const void* private_data, uint8_t private_data_len,
                                 std::shared_ptr<CmPeer> peer) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The REP at active `id`: connected, its ESTABLISHED queued (a connect response, processed
  // when the user gets it). For a UD id the SIDR REP: ESTABLISHED with param.ud, the exchange
  // over.
  void AcceptReceivedLocked(SimCmId* id, const rdma_conn_param& conn, const void* private_data,
                            uint8_t private_data_len) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The REJ at `id`: if it is connecting, REJECTED (`status`, the private data); a UD id's
  // UNREACHABLE with the SIDR status (kSidrUnsupported for kRejectNoListener, else kSidrReject).
  void RejectReceivedLocked(SimCmId* id, int status, const void* private_data,
                            uint8_t private_data_len) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The RTU at passive `id`: its ESTABLISHED, if it waits for it.
  void ReadyReceivedLocked(SimCmId* id, bool peer_reaches_us) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The DREQ at `id`: DreqReceivedLocked when connected, else (DREQs crossed) as a DREP.
  void DisconnectRequestReceivedLocked(SimCmId* id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A fault ended the established connection at `id` (CmPeer::Break): QP to ERROR, `type`.
  void BrokenLocked(SimCmId* id, rdma_cm_event_type type, int status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A fault ended the accept of connecting `id`'s request (CmPeer::AbortAccept):
  // CONNECT_ERROR (its QP to ERROR) or UNREACHABLE.
  void AcceptAbortedLocked(SimCmId* id, rdma_cm_event_type type, int status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The requester of `request` withdrew (CmPeer::WithdrawRequest): undelivered, it vanishes;
  // delivered, it stays with the user and accepting it reports UNREACHABLE.
  void RequestWithdrawnLocked(SimCmId* request) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // The id of `serial`, or nullptr.
  SimCmId* FindIdLocked(uint32_t serial) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Closes id's peer (cm_peer.h, Close) and drops it.
  void ClosePeerLocked(SimCmId* id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The exchange of `id` is over: its peer closed, `state`, `type` queued.
  void ExchangeEndedLocked(SimCmId* id, SimCmId::State state, rdma_cm_event_type type, int status,
                           const void* private_data = nullptr, uint8_t private_data_len = 0)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // What the end of `end`'s connection does to its id (none: nothing).
  void RemoteEndedLocked(const std::shared_ptr<HostCmPeer>& end)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A new request id for a connect request to `listener` from `peer_addr` asking for
  // `local_addr`. nullptr when out of memory.
  SimCmId* NewRequestIdLocked(SimCmId* listener, const sockaddr* local_addr,
                              const sockaddr* peer_addr) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Binds id to addr (port 0: the next free port). Errors: EADDRINUSE, EADDRNOTAVAIL.
  int BindLocked(SimCmId* id, const sockaddr* addr) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void UnbindLocked(SimCmId* id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The listening id in port space `space` for a connect to `dst`, or nullptr.
  SimCmId* FindListenerLocked(const sockaddr* dst, host::PortSpace space)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Queues an event on owner's channel (dropped when owner is synchronous), due now. With `ud`,
  // an event of a UD id that reports it (ud->private_data_len bytes of private data: the
  // private_data_len given, zero-padded).
  void QueueLocked(SimCmId* owner, rdma_cm_event_type type, int status, SimCmId* event_id,
                   SimCmId* listen_id, const rdma_conn_param* conn, const void* private_data,
                   uint8_t private_data_len, bool connect_response = false,
                   const rdma_ud_param* ud = nullptr) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // UD ids: the SIDR REP's status `sidr_status` (or -ETIMEDOUT) ended `id`'s request: its
  // UNREACHABLE, with the REP's private data as its 136-byte field (none on a timeout).
  void SidrEndedLocked(SimCmId* id, int sidr_status, const void* private_data,
                       uint8_t private_data_len) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // rdma_create_qp of a UD id: a QP of ibv_create_qp moved to RTS as ucma_init_ud_qp does.
  int CreateUdQpLocked(SimCmId* id, ibv_qp_init_attr_ex* attr, SimQp** qp)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // rdma_accept of a UD id (see UD IDS).
  int AcceptSidrLocked(SimCmId* id, const rdma_conn_param* param, ConnFault fault)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Queues `type` (status `status`, no data) for `id` itself, due `delay_ns` from now (held
  // until `hold_until_ns`, see PendingCmEvent).
  void QueueTimerLocked(SimCmId* id, rdma_cm_event_type type, int status, uint64_t delay_ns,
                        bool until_drep, uint64_t hold_until_ns = 0)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Inserts `event` into `channel` in due-time order, raising its fd.
  static void PushEventLocked(SimEventChannel* channel, PendingCmEvent event)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(channel->mu);
  // When the next event of `channel` is a DREQ timer not due yet: the peer of its id, whose
  // arrived messages (a DREP) must be handled first (CmPeer::Settle).
  std::shared_ptr<CmPeer> DrepToSettle(SimEventChannel* channel) ABSL_LOCKS_EXCLUDED(mu_);
  // Takes the oldest event of `channel` (blocking as rdma_get_cm_event does); *connect_response
  // names its id when it is a connect response to process.
  // What a thread in rdma_get_cm_event on `channel` waits for: its ids and their states, for
  // rpma-sim's hang report (waits.h).
  std::string DescribeChannel(SimEventChannel* channel) ABSL_LOCKS_EXCLUDED(mu_);
  // While it sleeps, the taker handles what the connections of the channel's ids to other
  // processes bring itself (CarriersOf, transport.h's sleeper's watch): a DREQ or a REP wakes it
  // once, not the fabric thread first.
  int TakeEvent(SimEventChannel* channel, rdma_cm_event** event, SimCmId** connect_response)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The connections to other processes of `channel`'s ids, at most `max`, into `out`.
  int CarriersOf(SimEventChannel* channel, std::shared_ptr<Transport>* out, int max)
      ABSL_LOCKS_EXCLUDED(mu_);
  // What librdmacm does with a connect response inside rdma_get_cm_event: the active QP to
  // RTS, the RTU to the passive side (whose ESTABLISHED it queues). A DREQ that came meanwhile
  // leaves the QP to go to RTS; nothing when the connection ended otherwise.
  void ProcessConnectResponse(SimCmId* id) ABSL_LOCKS_EXCLUDED(mu_);
  // Removes owner's undelivered events from its channel; returns them.
  std::vector<PendingCmEvent> TakeEventsLocked(SimCmId* owner) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends a request id that will never be accepted: its requester gets REJECTED (`status`, the
  // private data), it leaves its listener's list; when `free_it` it is also destroyed (the
  // user never saw it).
  void DropRequestLocked(SimCmId* request, int status, const void* private_data,
                         uint8_t private_data_len, bool free_it) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `request` is no longer one of its listener's pending requests (accepted, or ended).
  void LeaveListenerLocked(SimCmId* request) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes the undelivered CONNECT_REQUEST of `request` from its listener's channel. Returns
  // false when it was delivered already (or the listener is gone).
  bool RemoveConnectRequestLocked(SimCmId* request) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Connected `id` gets its peer's DREQ: DISCONNECTED queued, its QP untouched; it owes the
  // DREP (sent by its own rdma_disconnect or destroy).
  void DreqReceivedLocked(SimCmId* id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `id`, waiting for the DREP of its DREQ, gets it: unless the DREQ timed out already, its
  // DISCONNECTED is due now (status 0) and its TIMEWAIT_EXIT a timewait later.
  void DrepReceivedLocked(SimCmId* id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `id`, which got a DREQ, answers it: the DREP to its peer (the connection's exchange is then
  // over), and, unless the id is being destroyed (`timewait` false), its own timewait starts.
  void SendDrepLocked(SimCmId* id, bool timewait = true) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The peer process of connected `id` closed or died: QP to ERROR, DISCONNECTED queued.
  void PeerGoneLocked(SimCmId* id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends the connection of connected `id` and its peer: both QPs to ERROR, `type` (status
  // `status`) queued on both, both disconnected and unlinked.
  void EndConnectionLocked(SimCmId* id, rdma_cm_event_type type, int status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Frees `id`: its peer closed, its address unbound, and no event of its left in its channel
  // (an event that outlived its id would hand rdma_get_cm_event freed memory).
  void FreeIdLocked(SimCmId* id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // The device's PD, for rdma_create_qp without one (allocated on first need; kept for the
  // CM's life, as rdma-core keeps its cma_device's PD while the device is in use).
  int DevicePdLocked(ibv_pd** pd) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Destroys the CQs and channels rdma_create_qp made for `id` (none: nothing).
  void DestroyOwnCqsLocked(SimCmId* id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  SimDevice* const device_;
  softrpma::Mutex mu_;
  ibv_pd* device_pd_ ABSL_GUARDED_BY(mu_) = nullptr;
  uint32_t next_serial_ ABSL_GUARDED_BY(mu_) = 1;
  uint16_t next_ephemeral_port_ ABSL_GUARDED_BY(mu_) = kFirstEphemeralPort;
  std::map<uint32_t, SimCmId*> ids_ ABSL_GUARDED_BY(mu_);  // by serial: ordered iteration
  // Bound ids by port space and port (BindKey; looked up, never iterated across ports). Ports
  // for port 0 come from one counter and one set of blocks for both spaces.
  absl::flat_hash_map<uint32_t, std::vector<SimCmId*>> bound_ ABSL_GUARDED_BY(mu_);
  static uint32_t BindKey(host::PortSpace space, uint16_t port) {
    return (static_cast<uint32_t>(space) << 16) | port;
  }
  // The blocks of ports this process holds on the fabric (host::ReservePort, keyed by their
  // first port) to hand out for port 0, and how many of each block's ports its ids hold; a
  // block is let go when none. Ports are reserved a block at a time so that a process with
  // thousands of ids holds a descriptor per 64 of them, not one each: the kernel's rdma_cm
  // takes none, and a program near its descriptor limit must not fail to bind here.
  struct PortBlock {
    std::unique_ptr<host::PortReservation> reservation;
    int in_use = 0;
  };
  absl::flat_hash_map<uint16_t, PortBlock> port_blocks_ ABSL_GUARDED_BY(mu_);

  static constexpr uint16_t kFirstEphemeralPort = 49152;
  static constexpr int kPortBlockSize = 64;  // 65536 - kFirstEphemeralPort is 256 blocks
  static uint16_t BlockOf(uint16_t port) {
    return static_cast<uint16_t>(kFirstEphemeralPort +
                                 (port - kFirstEphemeralPort) / kPortBlockSize * kPortBlockSize);
  }
};

}  // namespace softrpma::sim

#endif  // SOFTRPMA_SIMVERBS_SIM_CM_CM_H_
