// races.cc: the simulated NIC's hooks of the race detector (sched.h, RaceDetectorOn): a
// WRITE's or SEND's source bytes kept at post and compared when the NIC reads them, a READ's
// destination and a receive's buffers poisoned until the NIC writes them.

#include "simverbs/sim/nic/qp.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "simverbs/sim/nic/nic_internal.h"
#include "simverbs/sim/trace/trace.h"

namespace softrpma::sim {

using namespace nic_internal;  // NOLINT(build/namespaces): the NIC's files share its internals

namespace nic_internal {

// ---- The race detector (sched.h) ----------------------------------------------------------

// At post time: keeps the source bytes of a WRITE / SEND, poisons the destination of a READ.
// REQUIRES: the race detector is on; wqe is not inline.
void WatchAtPost(SimQp* qp, SendWqe& wqe) {
  if (wqe.length == 0) return;
  const bool is_read = !RowOf(wqe.opcode).reads_local;
  PdReadLocks pd_lock(qp->pd, nullptr);
  Segments local;
  // A WR that will fail with a protection error when it executes is left alone.
  if (!GatherSges(qp, wqe, is_read ? IBV_ACCESS_LOCAL_WRITE : 0, &local)) return;
  if (is_read) {
    for (int i = 0; i < local.count; ++i) {
      std::memset(local.pieces[i].ptr, kRacePoison, local.pieces[i].length);
    }
    return;
  }
  wqe.posted_bytes.resize(local.total);
  uint64_t offset = 0;
  for (int i = 0; i < local.count; ++i) {
    std::memcpy(wqe.posted_bytes.data() + offset, local.pieces[i].ptr, local.pieces[i].length);
    offset += local.pieces[i].length;
  }
}

// At execution: reports source bytes that changed since the post (one line per WR).
void CheckRace(const SimQp* qp, const SendWqe& wqe, const Segments& local) {
  uint64_t first = local.total;
  uint64_t end = 0;
  uint64_t first_addr = 0;
  uint64_t offset = 0;
  for (int i = 0; i < local.count; ++i) {
    const Segment& piece = local.pieces[i];
    for (uint64_t b = 0; b < piece.length && offset + b < wqe.posted_bytes.size(); ++b) {
      if (piece.ptr[b] == wqe.posted_bytes[offset + b]) continue;
      if (first == local.total) {
        first = offset + b;
        first_addr = reinterpret_cast<uintptr_t>(piece.ptr + b);
      }
      end = offset + b + 1;
    }
    offset += piece.length;
  }
  if (first == local.total) return;
  const std::string opcode = NameOr(WrOpcodeName(wqe.opcode), wqe.opcode);
  std::fprintf(stderr,
               "softrpma-sim: race: qp %u wr_id 0x%llx %s: source bytes [%llu, %llu) of %llu "
               "(first at 0x%llx) changed after the post, before the NIC read them; reuse a "
               "buffer only after its completion\n",
               qp->qp.qp_num, static_cast<unsigned long long>(wqe.wr_id), opcode.c_str(),
               static_cast<unsigned long long>(first), static_cast<unsigned long long>(end),
               static_cast<unsigned long long>(local.total),
               static_cast<unsigned long long>(first_addr));
  if (TraceOn()) {
    TraceEvent("race qp=%u wr_id=0x%llx opcode=%s first=%llu end=%llu len=%llu", qp->qp.qp_num,
               static_cast<unsigned long long>(wqe.wr_id), opcode.c_str(),
               static_cast<unsigned long long>(first), static_cast<unsigned long long>(end),
               static_cast<unsigned long long>(local.total));
  }
}

// Fills the buffers of a receive with poison (race detector on), when they are registered
// memory the NIC may write (and the WR is well-formed): their first `max_bytes` bytes (a UD
// receive: the GRH and one MTU, the most a message fills; else kPoisonedReceiveBytes).
// REQUIRES: no PD lock held.
void PoisonReceive(SimPd* pd, const ibv_recv_wr* wr, uint32_t max_sge, uint64_t max_bytes) {
  if (wr->num_sge <= 0 || static_cast<uint32_t>(wr->num_sge) > max_sge || wr->sg_list == nullptr) {
    return;
  }
  PdReadLocks pd_lock(pd, nullptr);
  for (int i = 0; i < wr->num_sge; ++i) {
    const ibv_sge& sge = wr->sg_list[i];
    if (sge.length == 0) continue;
    if (pd->FindLocal(sge.lkey, sge.addr, sge.length, IBV_ACCESS_LOCAL_WRITE) == nullptr) return;
  }
  uint64_t left = max_bytes;
  for (int i = 0; i < wr->num_sge && left > 0; ++i) {
    const uint64_t n = std::min<uint64_t>(wr->sg_list[i].length, left);
    std::memset(AsPtr(wr->sg_list[i].addr), kRacePoison, n);
    left -= n;
  }
}

}  // namespace nic_internal

}  // namespace softrpma::sim
