// segments.cc: the memory of one side of a WR (its SGEs, or its inline data), checked against
// the QP's PD, and THE COPY between two sides: the one place the simulated NIC moves an
// application's bytes (nic_internal.h).

#include "simverbs/sim/nic/qp.h"

#include <sys/uio.h>

#include <algorithm>
#include <cstring>

#include "simverbs/sim/nic/nic_internal.h"

namespace softrpma::sim {

using namespace nic_internal;  // NOLINT(build/namespaces): the NIC's files share its internals

namespace nic_internal {

// Copies `src` into `dst` piece by piece. REQUIRES: dst.total >= src.total. memmove: the two
// sides may be the same memory (a loopback connection). Exactly 8 bytes into an 8-byte aligned
// word are one atomic store, as one PCIe write of a NIC is (librpma's emulated atomic write
// relies on it): a concurrent reader sees the old or the new word, never a mix.
void Copy(const Segments& src, const Segments& dst) {
  if (src.total == sizeof(uint64_t) && dst.count > 0 && dst.pieces[0].length >= sizeof(uint64_t) &&
      reinterpret_cast<uintptr_t>(dst.pieces[0].ptr) % sizeof(uint64_t) == 0) {
    uint8_t bytes[sizeof(uint64_t)];
    uint64_t offset = 0;
    for (int s = 0; s < src.count; ++s) {
      std::memcpy(bytes + offset, src.pieces[s].ptr, src.pieces[s].length);
      offset += src.pieces[s].length;
    }
    uint64_t value = 0;
    std::memcpy(&value, bytes, sizeof(value));
    __atomic_store_n(reinterpret_cast<uint64_t*>(dst.pieces[0].ptr), value, __ATOMIC_SEQ_CST);
    return;
  }
  int d = 0;
  uint64_t d_off = 0;
  for (int s = 0; s < src.count; ++s) {
    uint64_t s_off = 0;
    while (s_off < src.pieces[s].length) {
      while (d_off == dst.pieces[d].length) {
        ++d;
        d_off = 0;
      }
      const uint64_t n = std::min(src.pieces[s].length - s_off, dst.pieces[d].length - d_off);
      std::memmove(dst.pieces[d].ptr + d_off, src.pieces[s].ptr + s_off, n);
      s_off += n;
      d_off += n;
    }
  }
}

MessageSource LocalSource(const Segments& segments) {
  MessageSource source;
  source.local = &segments;
  source.total = segments.total;
  return source;
}

// The memory of the SGEs of `wqe`, each checked against qp's PD with `need_access`. Returns
// false on a protection error. REQUIRES: pd->mu held (shared).
bool GatherSges(SimQp* qp, const SendWqe& wqe, int need_access, Segments* out) {
  for (int i = 0; i < wqe.num_sge; ++i) {
    const ibv_sge& sge = wqe.sges[i];
    if (sge.length == 0) continue;
    if (qp->pd->FindLocal(sge.lkey, sge.addr, sge.length, need_access) == nullptr) return false;
    out->Add(AsPtr(sge.addr), sge.length);
  }
  return true;
}

// The local memory of `wqe`: its inline data, or its SGEs (GatherSges).
bool GatherLocal(SimQp* qp, SendWqe& wqe, int need_access, Segments* out) {
  if (wqe.is_inline) {
    out->Add(wqe.inline_data.data(), wqe.length);
    return true;
  }
  return GatherSges(qp, wqe, need_access, out);
}

// The iovecs of `segments` (at most kMaxSge). Returns their count.
int ToIovecs(const Segments& segments, iovec* iov) {
  for (int i = 0; i < segments.count; ++i) {
    iov[i] = iovec{segments.pieces[i].ptr, static_cast<size_t>(segments.pieces[i].length)};
  }
  return segments.count;
}

}  // namespace nic_internal

}  // namespace softrpma::sim
