// cm_peer.h: CmPeer, what one end of a connection needs from whatever carries the CM exchange
// to the other end, and its two implementations: LocalCmPeer (the other end is an id of this
// process) and HostCmPeer (it is in another process, reached over fabric/host.h).
//
// THE MODEL. A connection has two ends, each a SimCmId. An id that takes part in one (the
// active id from rdma_connect, a request id from its REQ) holds a CmPeer: the other end, as
// far as this end can know it. Everything the CM does on a connection (state changes, events
// queued, QPs moved) is written once, in cm.cc; a CmPeer only carries the IB CM's messages,
// REQ, REP, REJ, RTU, DREQ and DREP, to the other end, plus what the data path needs of the
// connection (the link a passive QP joins, the QP's way to RTS). Every message arrives at
// the other end's ConnectionManager as a call of the same handler, whichever peer carried it:
//   REQ  -> RequestReceivedLocked     REP  -> AcceptReceivedLocked
//   REJ  -> RejectReceivedLocked      RTU  -> ReadyReceivedLocked
//   DREQ -> DisconnectRequestReceivedLocked   DREP -> DrepReceivedLocked
// A LocalCmPeer calls the handler at once, on the other id (the same ConnectionManager). A
// HostCmPeer sends the message (wire.h); the other process's HostCmPeer, the handler of that
// host::Conn, calls the handler there when it arrives, after its checks (the peer's pid from
// the kernel, the bodies validated). What only one transport has is said where it is: the
// other end's process closing or dying (host: ConnectionManager::OnRemoteClosed). A fault
// sends what the IB CM would (a REP then a DREQ for rdma_accept's `disconnect`), never a
// shortcut of one transport: the other end sees the same events on both.
//
// Close() ends the exchange from this end: no message goes either way after it. A local pair
// is unlinked on both sides (the other end is not told); a host connection is closed (the
// other process sees it end, OnRemoteClosed). ConnectionManager::ClosePeerLocked closes an
// id's peer and drops it; an id without a peer (never connected, or closed) sends nothing.
//
// LOCKS. Every method is called under ConnectionManager::mu_ (the CM's one lock), and a
// LocalCmPeer calls the other end's handlers under it (both ends are ids of one CM). A
// handler reached through a peer closes only the receiving id's peer, never the sender's, so
// a peer is never destroyed inside one of its own methods. Lock order (cm.h, and
// fabric/host.h for the host's): ConnectionManager::mu_ -> SimLink::mu -> ... (qp.h) ->
// SimEventChannel::mu; HostCmPeer::mu_ is a leaf (taken under mu_ or alone); a
// host::Conn's Send and Close take its own lock, below all of these. The fabric thread calls
// a HostCmPeer (host::Conn::Handler) with no lock of the NIC held, and it takes mu_ to
// deliver. Settle() is the one method called without mu_ (it runs the fabric's handlers).

#ifndef SOFTRPMA_SIMVERBS_SIM_CM_CM_PEER_H_
#define SOFTRPMA_SIMVERBS_SIM_CM_CM_PEER_H_

#include <rdma/rdma_cma.h>
#include <unistd.h>

#include <cstdint>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "simverbs/mutex.h"
#include "simverbs/sim/cm/cm.h"
#include "simverbs/sim/fabric/host.h"
#include "simverbs/sim/fabric/wire.h"

namespace softrpma::sim {

struct SimLink;
struct SimQp;

class CmPeer {
 public:
  virtual ~CmPeer() = default;

  // ---- The data path of the connection.
  // The link a passive QP created on this end joins (local: the active QP's), or nullptr:
  // the QP gets a link of its own.
  virtual std::shared_ptr<SimLink> LinkToJoin() = 0;
  // `qp` was created on this end (host: its link now sends over this connection).
  virtual void AttachQp(SimQp* qp) = 0;
  // Moves this end's `qp` to RTS, as the exchange so far allows (host: with the peer's QP
  // number, process, and what each side proved of cross-memory attach).
  virtual void EnterRts(SimQp* qp) = 0;
  // This end's id goes, leaving `qp` behind (host: what it sends then reaches no one).
  virtual void OrphanQp(SimQp* qp) = 0;

  // ---- The CM messages, sent by `id`, this end's id. A REQ's or REP's `param` is what the
  // message carries (cm.cc's CmMessageParam: the QP number, the counts cut to the IB CM's
  // fields, the private data), never nullptr; the other end's event reports it whole.
  // The REQ. Returns 0, or ENOMEM (local: no request id; nothing was sent).
  virtual int SendRequest(SimCmId* id, const rdma_conn_param* param) = 0;
  // The active end withdraws its REQ (its id goes before an answer): a request its listener
  // has not delivered vanishes (RequestWithdrawnLocked). Host: nothing is sent; the
  // connection's end, Close(), withdraws it there (OnRemoteClosed).
  virtual void WithdrawRequest() = 0;
  // The REP, after this end's QP entered RTS.
  virtual void SendAccept(SimCmId* id, const rdma_conn_param* param) = 0;
  // The REJ, with reason `status` and private data.
  virtual void SendReject(int status, const void* private_data, uint8_t private_data_len) = 0;
  // The accept failed by a fault before its REP (event `type`, status `status` here): the
  // active end gets the same. Host: for CONNECT_ERROR a REJ marked wire::kFlagBroken; for
  // UNREACHABLE nothing (the active end learns from Close() that the peer is gone).
  virtual void AbortAccept(rdma_cm_event_type type, int status) = 0;
  // The RTU (active end, after its connect response).
  virtual void SendReady() = 0;
  // The DREQ, and the DREP.
  virtual void SendDisconnectRequest() = 0;
  virtual void SendDisconnectReply() = 0;
  // A fault ends the established connection at once (`type`, `status` here): the other end
  // gets the same (host: a DREQ marked wire::kFlagBroken, then Close()).
  virtual void Break(rdma_cm_event_type type, int status) = 0;
  // Ends the exchange from this end (see the file comment).
  virtual void Close() = 0;
  // The GID of the other end's process (rdma_cm's UD exchange reports an address handle
  // toward it): local, this process's; host, the process the kernel names as the peer.
  virtual void PeerGid(uint8_t gid[16]) = 0;
  // Whether the other end could take a REP now (local: it waits for one, with its QP on the
  // passive QP's link); host: true (the active process checks its own end when the REP comes).
  virtual bool CanAccept(const SimCmId* id) = 0;

  // Handles what has arrived from the other end (host: the connection's messages read so far;
  // local: nothing). REQUIRES: no lock of the NIC held.
  virtual void Settle() = 0;
  // The connection to another process the exchange travels on, for a thread asleep in
  // rdma_get_cm_event to watch (transport.h, THE SLEEPER'S WATCH); nullptr: none (local, or
  // not connected yet, or ended).
  virtual std::shared_ptr<Transport> Carrier() { return nullptr; }
  // Whether the other end is another process (whose simulated clock is not ours): a DREQ's
  // timeout then waits RPMA_SIM_PEER_ANSWER_MS for its DREP (PendingCmEvent::hold_until_ns).
  // REQUIRES: the CM's mu_ held.
  virtual bool InAnotherProcess() const { return false; }
};

// The other end is `other`, an id of the same ConnectionManager. Made in twins by
// ConnectionManager::Connect; Close() unlinks both.
class LocalCmPeer final : public CmPeer {
 public:
  // A peer of no id yet, toward `listener` (the REQ makes the other end).
  LocalCmPeer(ConnectionManager* cm, SimCmId* listener) : cm_(cm), listener_(listener) {}

  std::shared_ptr<SimLink> LinkToJoin() override;
  void AttachQp(SimQp* qp) override {}
  void EnterRts(SimQp* qp) override;
  void OrphanQp(SimQp* qp) override {}
  int SendRequest(SimCmId* id, const rdma_conn_param* param) override;
  void WithdrawRequest() override;
  void SendAccept(SimCmId* id, const rdma_conn_param* param) override;
  void SendReject(int status, const void* private_data, uint8_t private_data_len) override;
  void AbortAccept(rdma_cm_event_type type, int status) override;
  void SendReady() override;
  void SendDisconnectRequest() override;
  void SendDisconnectReply() override;
  void Break(rdma_cm_event_type type, int status) override;
  void Close() override;
  bool CanAccept(const SimCmId* id) override;
  void PeerGid(uint8_t gid[16]) override;
  void Settle() override {}

 private:
  ConnectionManager* const cm_;
  SimCmId* const listener_;      // the active end's, until its REQ made the other end
  SimCmId* other_ = nullptr;     // nullptr once unlinked
  LocalCmPeer* twin_ = nullptr;  // other_'s peer, toward this end
};

// The other end is in another process, reached through one host::Conn. It is also that
// connection's handler: it routes the peer's CM messages to the ConnectionManager and its
// data-path messages to the QP's link.
class HostCmPeer final : public CmPeer,
                         public host::Conn::Handler,
                         public std::enable_shared_from_this<HostCmPeer> {
 public:
  // `listener_serial`: the listener that accepted the connection (passive), or 0 (dialed).
  HostCmPeer(ConnectionManager* cm, uint32_t listener_serial)
      : cm_(cm), listener_serial_(listener_serial) {}

  // Dials the listener of `dst` in `space` on the host fabric. Errors: ECONNREFUSED (nobody
  // listens there), those of host::Dial.
  static int Dial(ConnectionManager* cm, const sockaddr* dst, host::PortSpace space,
                  std::shared_ptr<HostCmPeer>* peer);

  // CmPeer.
  std::shared_ptr<SimLink> LinkToJoin() override { return nullptr; }
  void AttachQp(SimQp* qp) override;
  void EnterRts(SimQp* qp) override;
  void OrphanQp(SimQp* qp) override;
  int SendRequest(SimCmId* id, const rdma_conn_param* param) override;
  void WithdrawRequest() override {}
  void SendAccept(SimCmId* id, const rdma_conn_param* param) override;
  void SendReject(int status, const void* private_data, uint8_t private_data_len) override;
  void AbortAccept(rdma_cm_event_type type, int status) override;
  void SendReady() override;
  void SendDisconnectRequest() override;
  void SendDisconnectReply() override;
  void Break(rdma_cm_event_type type, int status) override;
  void Close() override;
  bool CanAccept(const SimCmId* id) override { return true; }
  void PeerGid(uint8_t gid[16]) override;
  void Settle() override;
  std::shared_ptr<Transport> Carrier() override { return conn(); }
  bool InAnotherProcess() const override { return remote_pid != 0 && remote_pid != getpid(); }

  // host::Conn::Handler. Until the CM exchange has crossed this connection (the REQ on an
  // accepted one, the REP or REJ on a dialed one), only CM messages may come, each of its
  // fixed size (ValidateHeader): the body of anything else is never read. After it, a read
  // response is read only when it is no longer than a read this side sent.
  bool OnHeader(const wire::Header& header) override;
  // The peer has read its backlog: its reads that waited are served.
  void OnDrained() override;
  void OnMessage(const wire::Header& header, const uint8_t* body) override;
  void OnClosed() override;

  uint32_t listener_serial() const { return listener_serial_; }
  std::shared_ptr<host::Conn> conn() ABSL_LOCKS_EXCLUDED(mu_);
  void set_conn(std::shared_ptr<host::Conn> conn) ABSL_LOCKS_EXCLUDED(mu_);

  // Guarded by the CM's mutex. The id this connection belongs to; nullptr once it is gone.
  SimCmId* id = nullptr;
  uint32_t remote_qp_num = 0;    // the peer's QP, from its REQ / REP
  int32_t remote_pid = 0;        // the peer's process (the kernel's word)
  bool we_reach_peer = false;    // host::CanReach said yes for the peer's probe word
  bool peer_reaches_us = false;  // active: the REP said the peer reaches us

 private:
  // A CM message of the peer, checked (its pid against the kernel's, its body), delivered to
  // the CM's handler for it. Takes the CM's mutex.
  void OnCmMessage(const wire::Header& header, const uint8_t* body);
  std::shared_ptr<SimLink> Link() ABSL_LOCKS_EXCLUDED(mu_);
  void set_link(const std::shared_ptr<SimLink>& link) ABSL_LOCKS_EXCLUDED(mu_);
  // Sends `header` with `body` (none when body_len is 0).
  void Send(const wire::Header& header, const void* body, size_t body_len);
  // A REJ with `flags` (0, or wire::kFlagBroken).
  void SendRejectMessage(int status, uint16_t flags, const void* private_data,
                         uint8_t private_data_len);

  ConnectionManager* const cm_;
  const uint32_t listener_serial_;  // passive ends: the listener that accepted the socket
  // The CM exchange has crossed (OnHeader). The fabric runs a connection's handler one call
  // at a time.
  bool exchanged_ = false;
  softrpma::Mutex mu_;
  std::shared_ptr<host::Conn> conn_ ABSL_GUARDED_BY(mu_);
  std::weak_ptr<SimLink> link_ ABSL_GUARDED_BY(mu_);
  bool had_link_ ABSL_GUARDED_BY(mu_) = false;  // a link was set (it may be gone since)
};

}  // namespace softrpma::sim

#endif  // SOFTRPMA_SIMVERBS_SIM_CM_CM_PEER_H_
