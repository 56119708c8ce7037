// responder.cc: THE RESPONDER, what the target's NIC does with a request, one code for every
// carrier: readiness, then the QP's remote access, then the target's key, bounds and access,
// then an atomic's alignment, then the receive's capacity and keys; memory is touched only
// after every check that could refuse the request. A compare-and-swap or fetch-and-add is one
// atomic read-modify-write of the target word (ExecuteFetchingAtomic). Requests from another process are untrusted
// bytes; those that must wait for a receive wait here, within THE BUDGET, in order.

#include "simverbs/sim/nic/qp.h"

#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "simverbs/sim/fabric/cma.h"
#include "simverbs/sim/fabric/host.h"
#include "simverbs/sim/nic/nic_internal.h"
#include "simverbs/sim/trace/trace.h"

namespace softrpma::sim {

using namespace nic_internal;  // NOLINT(build/namespaces): the NIC's files share its internals

namespace {

void AddWaiterLocked(SimSrq* srq, const std::shared_ptr<SimLink>& link)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(srq->mu) {
  for (const std::weak_ptr<SimLink>& waiter : srq->waiters) {
    if (waiter.lock() == link) return;
  }
  srq->waiters.push_back(link);
}

}  // namespace

namespace nic_internal {

// SEND / SEND_WITH_IMM / WRITE_WITH_IMM: consumes the responder's oldest receive and completes
// it. `src` is the message; for WRITE_WITH_IMM the data has already been checked and is copied
// here, to `remote`. REQUIRES: the responder's link mu and its PD's reader lock held.
Outcome DeliverToReceive(SimQp* peer, const Delivery& delivery, const MessageSource& src,
                         const Segments* remote) {
  SimSrq* srq = peer->srq;
  Ring<RecvWqe>* rq = srq != nullptr ? &srq->rq : &peer->rq;
  if (srq != nullptr) srq->mu.Lock();
  if (rq->empty()) {
    if (srq != nullptr) {
      AddWaiterLocked(srq, *delivery.waiter);
      srq->mu.Unlock();
    }
    return kWait;
  }
  RecvWqe& recv = rq->front();
  const uint64_t recv_wr_id = recv.wr_id;
  const uint64_t recv_delay_ns = recv.delay_ns;
  ibv_wc_status recv_status = IBV_WC_SUCCESS;
  ibv_wc_status send_status = IBV_WC_SUCCESS;
  ibv_wc_opcode recv_opcode = IBV_WC_RECV;
  if (remote != nullptr) {  // WRITE_WITH_IMM: the data goes to the remote range, not the receive
    recv_opcode = IBV_WC_RECV_RDMA_WITH_IMM;
    if (!src.CopyTo(*remote)) {  // the requester's memory went away under cross-memory attach
      recv_status = IBV_WC_GENERAL_ERR;
      send_status = IBV_WC_LOC_PROT_ERR;
    }
  } else {
    uint64_t capacity = 0;
    for (int i = 0; i < recv.num_sge; ++i) capacity += recv.sges[i].length;
    if (capacity < src.total) {
      recv_status = IBV_WC_LOC_LEN_ERR;
      send_status = IBV_WC_REM_INV_REQ_ERR;
    } else {
      Segments dst;
      for (int i = 0; i < recv.num_sge && dst.total < src.total; ++i) {
        const ibv_sge& sge = recv.sges[i];
        if (sge.length == 0) continue;
        if (peer->pd->FindLocal(sge.lkey, sge.addr, sge.length, IBV_ACCESS_LOCAL_WRITE) ==
            nullptr) {
          recv_status = IBV_WC_LOC_PROT_ERR;
          send_status = IBV_WC_REM_OP_ERR;
          break;
        }
        dst.Add(AsPtr(sge.addr), sge.length);
      }
      if (recv_status == IBV_WC_SUCCESS && !src.CopyTo(dst)) {
        recv_status = IBV_WC_GENERAL_ERR;
        send_status = IBV_WC_LOC_PROT_ERR;
      }
    }
  }
  rq->pop_front();
  if (srq != nullptr) srq->mu.Unlock();
  CompleteRecv(peer, recv_wr_id, recv_status, recv_opcode, src.total, &delivery, recv_delay_ns);
  if (recv_status != IBV_WC_SUCCESS) EnterErrorLocked(peer);
  return Done(send_status, src.total);
}

// ---- THE RESPONDER: what the target's NIC does with a request ------------------------------
// A request reaches it from the requester in this process (the LOCAL carrier:
// carrier_local.cc, ExecuteLocked) or from another process (ServeRequestLocked); either way
// its checks run in ONE ORDER: the responder's readiness (ReadinessOf), the QP's remote access
// (its qp_access_flags), the target range's key, bounds and access, then an atomic's alignment
// (CheckTargetLocked), then the receive's capacity and keys (DeliverToReceive).
// Memory is touched only after every check that could refuse the request.

// A responder not ready yet is a passive side whose connect has not completed (INIT), or a QP
// of ibv_modify_qp back in INIT after a RESET; a QP of ibv_modify_qp receives from RTR on.
Readiness ReadinessOf(const SimQp* responder) {
  if (responder != nullptr && responder->state == IBV_QPS_INIT && !responder->verbs) {
    return Readiness::kNotYet;
  }
  if (responder == nullptr ||
      (responder->state != IBV_QPS_RTS && responder->state != IBV_QPS_RTR)) {
    return Readiness::kGone;
  }
  return Readiness::kReady;
}

// The target range of a request of `op` on `responder`, `length` bytes at `addr` (a SEND has
// none; a zero-length operation checks no key): adds it to *remote, or returns the error the
// requester completes with. An error moves the responder to ERROR as well (IB class C for a
// protection error; an invalid request NAK for a misaligned atomic). REQUIRES: the responder's
// link mu and its PD's reader lock held.
ibv_wc_status CheckTargetLocked(SimQp* responder, const Opcode& op, uint32_t rkey, uint64_t addr,
                                uint64_t length, Segments* remote) {
  // The QP's own remote access (ibv_modify_qp's qp_access_flags) is checked first, for every
  // request that names a target, as rxe's check_op_valid does before it looks at the rkey.
  if ((responder->remote_access & op.target_access) != op.target_access) {
    EnterErrorLocked(responder);
    return IBV_WC_REM_ACCESS_ERR;
  }
  if (op.target_access == 0 || length == 0) return IBV_WC_SUCCESS;
  if (responder->pd->FindRemote(rkey, addr, length, op.target_access) == nullptr) {
    EnterErrorLocked(responder);
    return IBV_WC_REM_ACCESS_ERR;
  }
  if (op.atomic && addr % sizeof(uint64_t) != 0) {
    EnterErrorLocked(responder);
    return IBV_WC_REM_INV_REQ_ERR;
  }
  remote->Add(AsPtr(addr), length);
  return IBV_WC_SUCCESS;
}

// Executes a checked compare-and-swap or fetch-and-add on its target word (`remote`: the 8
// aligned bytes CheckTargetLocked returned) as one atomic read-modify-write of the CPU, so that
// it is atomic toward every other atomic on that word: those of other QPs and links (each
// under its own lock), of other processes' requests (all executed here, in the process that
// owns the memory), and the target's own CPU atomics. Returns the word's former value.
uint64_t ExecuteFetchingAtomic(const Opcode& op, const Segments& remote, uint64_t compare_add,
                               uint64_t swap) {
  return ApplyFetchingAtomic(op, reinterpret_cast<uint64_t*>(remote.pieces[0].ptr), compare_add,
                             swap);
}

// Applies a checked request that brings data (every op but a READ): the message to the oldest
// receive, or the data to the target range (an ATOMIC WRITE's 8 aligned bytes are one store,
// see Copy). REQUIRES: as CheckTargetLocked; `remote` is what it returned.
Outcome ApplyLocked(SimQp* responder, const Opcode& op, const Delivery& delivery,
                    const MessageSource& src, const Segments& remote) {
  if (op.consumes_receive) {
    return DeliverToReceive(responder, delivery, src, op.target_access != 0 ? &remote : nullptr);
  }
  src.CopyTo(remote);
  return Done(IBV_WC_SUCCESS, src.total);
}

bool IsRequest(uint16_t type) {
  switch (static_cast<wire::Type>(type)) {
    case wire::Type::kWrite:
    case wire::Type::kSend:
    case wire::Type::kRead:
    case wire::Type::kAtomicWrite:
    case wire::Type::kCompareSwap:
    case wire::Type::kFetchAdd:
      return true;
    default:
      return false;
  }
}

// Answers `request` on `out`: an ack, or (a READ, a compare-and-swap, a fetch-and-add) a read
// response carrying `data` when the request succeeded (none when a read's data went by
// cross-memory attach).
void Respond(Transport* out, const wire::Header& request, ibv_wc_status status,
             const Segments* data) {
  const Opcode* op = FromWire(static_cast<wire::Type>(request.type), false);
  const bool is_read = op != nullptr && !op->reads_local;
  wire::Header response =
      wire::MakeHeader(is_read ? wire::Type::kReadResponse : wire::Type::kAck);
  response.seq = request.seq;
  response.status = status;
  iovec iov[kMaxSge];
  int iovcnt = 0;
  if (is_read && (request.flags & wire::kFlagCma) != 0) {
    response.flags = wire::kFlagCma;  // the data is in the requester's memory already
  } else if (is_read && status == IBV_WC_SUCCESS && data != nullptr) {
    response.body_len = static_cast<uint32_t>(data->total);
    iovcnt = ToIovecs(*data, iov);
  }
  out->Send(response, iov, iovcnt);
}

// The connection `request` came on (and is answered on).
std::shared_ptr<Transport> ServingConnLocked(SimLink* link) ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu) {
  return link->serve != nullptr ? link->serve : link->remote;
}

// Answers a request of link's peer (Respond).
void RespondLocked(SimLink* link, const wire::Header& request, ibv_wc_status status,
                   const Segments* data) ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu) {
  if (std::shared_ptr<Transport> out = ServingConnLocked(link); out != nullptr) {
    Respond(out.get(), request, status, data);
  }
}

}  // namespace nic_internal

namespace {

// What became of a request of the peer (ServeRequestLocked).
enum class Served {
  kAnswered,  // executed (or refused) and answered
  kWaits,     // needs a receive and none is posted: it waits, unanswered, with what follows it
  kCopying,   // its cross-memory-attach copy runs (cma.h): it waits, in flight, until it ends
};

// THE BUDGET of requests a peer may leave waiting here (a SEND without a receive, and what
// arrived behind it): per connection, and for the whole process. A peer over it is a peer this
// NIC cannot keep up with: the connection ends (the peer sees it closed, as after a NIC's RNR
// retries ran out), instead of this process buffering without bound.
constexpr uint64_t kMaxWaitingBytesPerLink = uint64_t{256} << 20;
constexpr size_t kMaxWaitingPerLink = 65536;
constexpr uint64_t kMaxWaitingBytes = uint64_t{1} << 30;
// The largest SEND whose data is fetched by cross-memory attach before a receive takes it.
constexpr uint64_t kMaxFetchedSendBytes = kMaxWaitingBytesPerLink;
std::atomic<uint64_t> g_waiting_bytes{0};

// The peer's segments of a kFlagCma request (a validated header: 1 to kMaxCmaSegments of them)
// as iovecs of ITS address space; false when their lengths do not add up to header.length.
bool CmaSegments(const wire::Header& request, const uint8_t* body, std::vector<iovec>* out) {
  const size_t count = request.body_len / sizeof(wire::CmaSegment);
  out->resize(count);
  uint64_t sum = 0;
  for (size_t i = 0; i < count; ++i) {
    wire::CmaSegment segment;
    std::memcpy(&segment, body + i * sizeof(segment), sizeof(segment));
    if (segment.length > wire::kMaxMessageBytes) return false;
    sum += segment.length;
    (*out)[i] = iovec{reinterpret_cast<void*>(static_cast<uintptr_t>(segment.addr)),
                      static_cast<size_t>(segment.length)};
  }
  return sum == request.length;
}

// The in-flight request at the head of link's incoming requests, if it is `seq`'s (it may have
// gone meanwhile: the peer went away, the QP was destroyed or reset).
IncomingRequest* InFlightLocked(SimLink* link, uint64_t seq) ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu) {
  if (link->incoming.empty()) return nullptr;
  IncomingRequest& head = link->incoming.front();
  return head.in_flight && head.header.seq == seq ? &head : nullptr;
}

// Starts the cross-memory-attach copy of `request` (the head of link's requests from now on),
// between `local` and the peer's `segments`: for a WRITE or SEND, the data is fetched and the
// request is then served as if it had carried it; for a READ (to_peer), `local` holds the data
// and the response follows the copy. Toward the connection's own peer only: link->remote_pid
// is the kernel's word for it. Returns kCopying, or kAnswered when the copy may not start.
Served StartCopyLocked(SimLink* link, SimQp* qp, const wire::Header& request,
                       std::vector<iovec> segments, Bytes local, bool to_peer)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu) {
  std::weak_ptr<SimLink> weak = qp->link;
  std::weak_ptr<Transport> conn = ServingConnLocked(link);
  cma::Copy copy;
  copy.pid = link->remote_pid;
  copy.to_peer = to_peer;
  copy.remote = std::move(segments);
  copy.local = std::move(local);
  const uint64_t seq = request.seq;
  auto done = [weak, seq, to_peer](bool ok, Bytes data) {
    std::shared_ptr<SimLink> link = weak.lock();
    if (link == nullptr) return;
    softrpma::MutexLock lock(&link->mu);
    IncomingRequest* head = InFlightLocked(link.get(), seq);
    if (head == nullptr) return;
    if (to_peer || !ok) {
      // A read's data is in place (or could not be put there); a fetch that failed: the
      // requester's memory went away.
      RespondLocked(link.get(), head->header,
                    ok ? IBV_WC_SUCCESS : IBV_WC_LOC_PROT_ERR, nullptr);
      link->incoming.pop_front();
    } else {
      // The data is here now: the request is served as one that carried it.
      head->header.flags &= static_cast<uint16_t>(~wire::kFlagCma);
      head->header.length = 0;
      head->header.body_len = static_cast<uint32_t>(data.size());
      link->incoming_bytes += data.size();
      g_waiting_bytes.fetch_add(data.size(), std::memory_order_relaxed);
      head->body = std::move(data);
      head->in_flight = false;
    }
    DrainIncomingLocked(link.get());
  };
  auto on_stuck = [conn] {
    if (std::shared_ptr<Transport> c = conn.lock(); c != nullptr) c->Shutdown();
  };
  if (!cma::Start(std::move(copy), std::move(done), std::move(on_stuck))) {
    RespondLocked(link, request, IBV_WC_REM_OP_ERR, nullptr);
    return Served::kAnswered;
  }
  if (TraceOn()) {
    TraceEvent("fabric_cma_copy qp=%u seq=%llu bytes=%llu", qp->qp.qp_num,
               static_cast<unsigned long long>(seq),
               static_cast<unsigned long long>(request.length));
  }
  return Served::kCopying;
}

// Executes one request of the peer against `qp` (nullptr: destroyed) and answers it, or says
// why it waits. ONE RULE for every request type (wire::TargetBytes): the bytes the operation
// touches here are what is checked against the key, whatever the flags say.
Served ServeRequestLocked(SimLink* link, SimQp* qp, const wire::Header& request,
                          const uint8_t* body) ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu) {
  const wire::Type type = static_cast<wire::Type>(request.type);
  if (qp != nullptr) CheckOverflowLocked(qp);
  switch (ReadinessOf(qp)) {
    case Readiness::kNotYet:
      return Served::kWaits;  // as the peer's retries would
    case Readiness::kGone:
      RespondLocked(link, request, IBV_WC_RETRY_EXC_ERR, nullptr);  // a real requester times out
      return Served::kAnswered;
    case Readiness::kReady:
      break;
  }
  const Opcode* op = FromWire(type, (request.flags & wire::kFlagImm) != 0);
  if (op == nullptr) {  // (a validated request always has a row)
    RespondLocked(link, request, IBV_WC_REM_INV_REQ_ERR, nullptr);
    return Served::kAnswered;
  }
  PdReadLocks pd_lock(qp->pd, nullptr);
  const bool cma = (request.flags & wire::kFlagCma) != 0;
  std::vector<iovec> segments;
  if (cma) {
    // The bytes are in the requester's process, at addresses of ITS memory. Copied only toward
    // the connection's own peer as the kernel names it, and only when this side proved at
    // connect time that it may reach it (host::CanReach); never toward this process itself.
    if (!link->we_reach_peer || link->remote_pid <= 0 || link->remote_pid == getpid() ||
        !CmaSegments(request, body, &segments)) {
      RespondLocked(link, request, IBV_WC_REM_INV_REQ_ERR, nullptr);  // malformed: refused
      return Served::kAnswered;
    }
  }
  Segments remote;
  const uint64_t length = wire::TargetBytes(request);
  const ibv_wc_status status =
      CheckTargetLocked(qp, *op, request.rkey, request.remote_addr, length, &remote);
  if (status != IBV_WC_SUCCESS) {
    RespondLocked(link, request, status, nullptr);
    return Served::kAnswered;
  }
  if (FetchesAtomically(*op)) {  // (never by cross-memory attach: ValidateHeader)
    wire::AtomicOperands operands{0, 0};
    std::memcpy(&operands, body, request.body_len);  // a fetch-and-add's addend only
    uint64_t former = ExecuteFetchingAtomic(*op, remote, operands.compare, operands.swap);
    Segments data;
    data.Add(reinterpret_cast<uint8_t*>(&former), sizeof(former));
    RespondLocked(link, request, IBV_WC_SUCCESS, &data);
    return Served::kAnswered;
  }
  if (cma) {
    if (!op->reads_local) {
      // The data leaves the region now, under its PD's lock; the copy into the requester's
      // memory runs without it.
      Bytes data(length);
      Segments bounce;
      if (length > 0) bounce.Add(data.data(), length);
      Copy(remote, bounce);
      return StartCopyLocked(link, qp, request, std::move(segments), std::move(data), true);
    }
    if (type == wire::Type::kSend && length > kMaxFetchedSendBytes) {
      RespondLocked(link, request, IBV_WC_REM_INV_REQ_ERR, nullptr);
      return Served::kAnswered;
    }
    return StartCopyLocked(link, qp, request, std::move(segments), Bytes(length), false);
  }
  if (!op->reads_local) {
    // A READ. Back-pressure, as a NIC's credits: while the peer leaves this many response bytes
    // unread, its next reads wait (with what follows them) until the backlog drains
    // (ResumeRemoteLink, from the connection's OnDrained), instead of this process holding
    // every response a peer that never reads asks for.
    std::shared_ptr<Transport> out = ServingConnLocked(link);
    if (out != nullptr && out->QueuedBytes() >= Transport::kBacklogBytes) return Served::kWaits;
    RespondLocked(link, request, IBV_WC_SUCCESS, &remote);
    return Served::kAnswered;
  }
  Segments message;
  if (request.body_len > 0) message.Add(const_cast<uint8_t*>(body), request.body_len);
  const Delivery delivery{&qp->link, link->remote_qp_num,
                          (request.flags & wire::kFlagSolicited) != 0, op->with_imm,
                          request.imm_data, /*grh=*/false};
  const Outcome outcome = ApplyLocked(qp, *op, delivery, LocalSource(message), remote);
  if (outcome.wait) return Served::kWaits;
  RespondLocked(link, request, outcome.status, nullptr);
  return Served::kAnswered;
}

}  // namespace

namespace nic_internal {

// Forgets link's waiting requests (their bytes leave the process's budget).
void ClearIncomingLocked(SimLink* link) ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu) {
  g_waiting_bytes.fetch_sub(link->incoming_bytes, std::memory_order_relaxed);
  link->incoming_bytes = 0;
  link->incoming.clear();
}

// The peer's process is gone (its connection closed): nobody is left to answer, so the head
// of the send queue times out and the rest flushes (ProgressQpLocked), and its requests
// that waited here are forgotten.
void PeerGoneLocked(SimLink* link) ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu) {
  if (link->remote == nullptr || link->peer_gone) return;
  link->peer_gone = true;
  ClearIncomingLocked(link);
  if (SimQp* qp = LocalSideLocked(link); qp != nullptr) ProgressQpLocked(link, qp);
}

}  // namespace nic_internal

namespace {

void PopIncomingLocked(SimLink* link) ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu) {
  const uint64_t bytes = link->incoming.front().body.size();
  link->incoming_bytes -= bytes;
  g_waiting_bytes.fetch_sub(bytes, std::memory_order_relaxed);
  link->incoming.pop_front();
}

}  // namespace

namespace nic_internal {

// Serves the peer's requests that waited, oldest first, until one waits again (or is in
// flight).
void DrainIncomingLocked(SimLink* link) ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu) {
  SimQp* qp = LocalSideLocked(link);
  while (!link->incoming.empty()) {
    IncomingRequest& request = link->incoming.front();
    if (request.in_flight) return;
    const Served served = ServeRequestLocked(link, qp, request.header, request.body.data());
    if (served == Served::kWaits) return;
    if (served == Served::kCopying) {
      // Its body (segments) is spent; the copy owns what comes next.
      g_waiting_bytes.fetch_sub(request.body.size(), std::memory_order_relaxed);
      link->incoming_bytes -= request.body.size();
      request.body.clear();
      request.in_flight = true;
      return;
    }
    PopIncomingLocked(link);
  }
}

// A request of the peer that arrived on link's connection: served now, in order behind the ones
// that wait, or kept (within THE BUDGET) until it can be.
void ServeOrQueueLocked(SimLink* link, SimQp* qp, const wire::Header& header,
                        const uint8_t* body) ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->mu) {
  Served served = Served::kWaits;
  if (link->incoming.empty()) {
    served = ServeRequestLocked(link, qp, header, body);
    if (served == Served::kAnswered) return;
  }
  const uint64_t bytes = served == Served::kCopying ? 0 : header.body_len;
  if (link->incoming.size() >= kMaxWaitingPerLink ||
      link->incoming_bytes + bytes > kMaxWaitingBytesPerLink ||
      g_waiting_bytes.load(std::memory_order_relaxed) + bytes > kMaxWaitingBytes) {
    static std::atomic<bool> reported{false};
    if (!reported.exchange(true)) {
      std::fprintf(stderr,
                   "softrpma: fabric: a peer left more requests waiting for receives than this "
                   "NIC keeps (%zu, %llu bytes on its connection); its connection is ended "
                   "(later ones are not reported)\n",
                   link->incoming.size(), static_cast<unsigned long long>(link->incoming_bytes));
    }
    if (std::shared_ptr<Transport> conn = ServingConnLocked(link); conn != nullptr) {
      conn->Shutdown();
    }
    return;
  }
  IncomingRequest request{header, {}, served == Served::kCopying};
  if (bytes > 0) request.body.assign(body, body + bytes);
  link->incoming_bytes += bytes;
  g_waiting_bytes.fetch_add(bytes, std::memory_order_relaxed);
  link->incoming.push_back(std::move(request));
}

}  // namespace nic_internal

void AnswerForNoQp(Transport* conn, const wire::Header& message) {
  if (IsRequest(message.type)) Respond(conn, message, IBV_WC_RETRY_EXC_ERR, nullptr);
}

}  // namespace softrpma::sim
