// carrier.h: THE LINK'S CARRIER, the NIC's half of the transport seam (fabric/transport.h is
// the wire's half). How the WRs of a link's QPs reach the peer QP's NIC, and how that NIC's
// answers come back.
//
// THE MODEL
//   * Every link (qp.h, SimLink) holds one carrier, and the NIC asks it, never the link's
//     fields, which way its WRs go. There are two:
//       LOCAL (carrier_local.cc): the peer QP is in this process, the link's other side. The
//         requester hands the WR at the head of a send queue to the responder under the link's
//         lock (ExecuteLocked): the short-circuit of the whole path, as rxe's loopback is.
//       HOST (carrier_host.cc): the peer QP is in another process (or in this one, reached
//         through the fabric: the host transport of the tests). The link holds the Transport
//         (SimLink::remote, fabric/transport.h) its WRs go over as wire.h requests; the peer's
//         responder executes them (the same code: responder.cc) and each is answered by one
//         response, which the completer turns into the WR's completion (completer.cc).
//     A link starts LOCAL; AttachRemote makes it HOST, and DetachRemoteLocked (a QP of
//     ibv_create_qp moved to RESET, or made to fail while it was bound) makes it LOCAL again.
//     So the link's carrier is HOST exactly when it holds a Transport.
//   * A carrier moves WRs; it never decides what one does. The opcode table (opcodes.h), the
//     responder's checks and their order, the completer, the race detector and the seeded
//     scheduler (sched.h: a WR goes when its time has come, at a post, poll or progress point,
//     progress.cc) are one code for both carriers. What differs is physical: a WR of the LOCAL
//     carrier executes when its time comes; one of the HOST carrier is sent then ("sending is
//     executing": its source bytes are read as a NIC reads them onto the wire), and its
//     completion waits for the peer's answer.
//   * The next carriers between processes (TCP between machines with an iWARP-shaped wire,
//     DESIGN.md) are Transports behind the HOST carrier: a carrier with a wire is the HOST one.
//
// LOCKS: every method is called with the link's lock held (link->mu) and takes only what the
// responder and completer take under it (qp.h's order: SRQ, PD, CQ) and the Transport's own
// locks (transport.h: Send never blocks).

#ifndef SOFTRPMA_SIMVERBS_SIM_NIC_CARRIER_H_
#define SOFTRPMA_SIMVERBS_SIM_NIC_CARRIER_H_

#include <memory>

namespace softrpma::sim {

class Transport;
struct SendWqe;
struct SimLink;
struct SimQp;

class LinkCarrier {
 public:
  // For traces and messages: "local" or "host".
  virtual const char* name() const = 0;
  // Is the peer QP's NIC this process's, on the link's other side?
  virtual bool InProcess() const = 0;
  // Carries the WR at qp's send-queue position qp->sq_sent, whose time has come (sched.h), to
  // the peer: LOCAL executes it against the peer QP and retires it (its completion is made
  // now); HOST sends it as a request (its completion comes with the response) and counts it
  // sent, or marks it failed here (forced_status: a local protection error) without sending
  // it. False when the WR must wait (no receive posted at the peer, or a responder not ready
  // yet): it stays where it is, and so does every WR behind it. The requester
  // (requester.cc) calls it in queue order, and never for a WR with a forced status.
  virtual bool CarryLocked(SimLink* link, SimQp* qp, SendWqe& wqe) const = 0;
  // Nobody is left to answer what was sent (HOST: the peer's process closed its connection
  // after its DREQ, SimLink::peer_gone). LOCAL: never (a peer QP that is gone is the
  // responder's answer to each WR, ReadinessOf).
  virtual bool PeerGoneLocked(const SimLink* link) const = 0;
  // Serves the peer's requests that wait in this process (for a receive, or for their copy):
  // the HOST carrier's, called when a receive or room may have come. LOCAL: nothing waits here
  // (a WR that waits stays at the head of its sender's queue).
  virtual void DrainLocked(SimLink* link) const = 0;
  // After a post on qp: whether its link has WRs left to go, and whether the fabric thread's
  // backstop must send them if the program calls nothing more (progress.cc).
  struct Unsent {
    bool any = false;
    bool backstop = false;
  };
  virtual Unsent UnsentLocked(SimLink* link, SimQp* qp) const = 0;
  // KICKS: makes readable the completion channels that qp's WRs not executed yet would complete
  // on if they executed now (cq.h, SimCq::Kick).
  virtual void KickLocked(SimLink* link, SimQp* qp) const = 0;
  // What a thread about to sleep on this link's completions watches (transport.h, THE
  // SLEEPER'S WATCH): its Transport while the peer is there, else nullptr.
  virtual std::shared_ptr<Transport> WatchedLocked(SimLink* link) const = 0;

 protected:
  ~LinkCarrier() = default;  // the two carriers are static and never destroyed
};

// The two carriers (stateless: what a HOST link knows of its peer is the link's).
const LinkCarrier& LocalCarrier();
const LinkCarrier& HostCarrier();

}  // namespace softrpma::sim

#endif  // SOFTRPMA_SIMVERBS_SIM_NIC_CARRIER_H_
