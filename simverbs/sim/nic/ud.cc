// ud.cc: UD queue pairs and address handles (qp.h, "UD QPs"): a send names its destination by
// an address handle, a QP number and a Q_Key; it leaves at once, and its completion says only
// that it left. It lands in the destination QP's oldest receive, behind the 40 bytes of the
// GRH, or nowhere (no such QP, another Q_Key, no receive posted: dropped, as on a fabric).

#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <memory>

#include "simverbs/alloc.h"
#include "simverbs/sim/nic/nic_internal.h"
#include "simverbs/sim/nic/qp.h"
#include "simverbs/sim/trace/trace.h"

namespace softrpma::sim {

using namespace nic_internal;  // NOLINT(build/namespaces): the NIC's files share its internals

namespace {

// The Q_Key of a send: the WR's, or the sending QP's own when the WR's has its high-order bit
// set (the IB spec's rule for a "controlled" Q_Key). REQUIRES: qp->link->mu held.
uint32_t SendQkey(const SimQp* qp, uint32_t wr_qkey) {
  return (wr_qkey & 0x80000000u) != 0 ? qp->verbs_attr.qkey : wr_qkey;
}

// The Internet checksum of the 20-byte IPv4 header at `header` (its checksum field 0).
uint16_t Ipv4HeaderChecksum(const uint8_t* header) {
  uint32_t sum = 0;
  for (int i = 0; i < 20; i += 2) {
    uint16_t word;
    std::memcpy(&word, header + i, sizeof(word));
    sum += word;
  }
  sum = (sum & 0xffff) + (sum >> 16);
  sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

}  // namespace

namespace nic_internal {

void BuildUdGrh(const UdDatagram& datagram, const uint8_t dgid[16], uint8_t grh[kGrhBytes]) {
  std::memset(grh, 0, kGrhBytes);
  // RoCE v2 over IPv4 (every GID of the simulator is IPv4-mapped): the first 20 bytes are left
  // as nothing, the last 20 are the packet's IPv4 header (rdma-core's ibv_init_ah_from_wc reads
  // it there, its checksum included).
  uint8_t* ip = grh + 20;
  ip[0] = 0x45;                   // version 4, 5 words
  ip[1] = datagram.traffic_class; // TOS
  // The IP packet: this header, UDP (8), BTH (12), DETH (8), the immediate data, the payload
  // and the ICRC (4).
  const uint16_t total = htons(static_cast<uint16_t>(20 + 8 + 12 + 8 + (datagram.with_imm ? 4 : 0) +
                                                     datagram.length + 4));
  std::memcpy(ip + 2, &total, sizeof(total));
  const uint16_t dont_fragment = htons(0x4000);
  std::memcpy(ip + 6, &dont_fragment, sizeof(dont_fragment));
  ip[8] = datagram.hop_limit;
  ip[9] = 17;  // UDP
  std::memcpy(ip + 12, datagram.src_gid + 12, 4);
  std::memcpy(ip + 16, dgid + 12, 4);
  const uint16_t checksum = Ipv4HeaderChecksum(ip);
  std::memcpy(ip + 10, &checksum, sizeof(checksum));
}

bool DeliverUdLocked(SimQp* qp, const UdDatagram& datagram, const uint8_t* payload) {
  // A UD QP receives from RTR on; a QP in another state, or expecting another Q_Key, drops it.
  if (qp->qp.qp_type != IBV_QPT_UD ||
      (qp->state != IBV_QPS_RTR && qp->state != IBV_QPS_RTS) ||
      datagram.qkey != qp->verbs_attr.qkey) {
    return false;
  }
  SimSrq* srq = qp->srq;
  Ring<RecvWqe>* rq = srq != nullptr ? &srq->rq : &qp->rq;
  if (srq != nullptr) srq->mu.Lock();
  if (rq->empty()) {  // no receive: dropped (a UD responder has no receiver-not-ready)
    if (srq != nullptr) srq->mu.Unlock();
    return false;
  }
  RecvWqe& recv = rq->front();
  const uint64_t wr_id = recv.wr_id;
  const uint64_t delay_ns = recv.delay_ns;
  uint8_t grh[kGrhBytes];
  uint8_t own_gid[16];
  ProcessGid(own_gid);
  BuildUdGrh(datagram, own_gid, grh);
  Segments src;
  src.Add(grh, kGrhBytes);
  if (datagram.length > 0) src.Add(const_cast<uint8_t*>(payload), datagram.length);
  ibv_wc_status status = IBV_WC_SUCCESS;
  uint64_t capacity = 0;
  for (int i = 0; i < recv.num_sge; ++i) capacity += recv.sges[i].length;
  if (capacity < src.total) {
    status = IBV_WC_LOC_LEN_ERR;
  } else {
    PdReadLocks pd_lock(qp->pd, nullptr);
    Segments dst;
    for (int i = 0; i < recv.num_sge && dst.total < src.total; ++i) {
      const ibv_sge& sge = recv.sges[i];
      if (sge.length == 0) continue;
      if (qp->pd->FindLocal(sge.lkey, sge.addr, sge.length, IBV_ACCESS_LOCAL_WRITE) == nullptr) {
        status = IBV_WC_LOC_PROT_ERR;
        break;
      }
      dst.Add(AsPtr(sge.addr), sge.length);
    }
    if (status == IBV_WC_SUCCESS) Copy(src, dst);
  }
  rq->pop_front();
  if (srq != nullptr) srq->mu.Unlock();
  const Delivery delivery{nullptr,           datagram.src_qp, datagram.solicited,
                          datagram.with_imm, datagram.imm_data, /*grh=*/true};
  CompleteRecv(qp, wr_id, status, IBV_WC_RECV, src.total, &delivery, delay_ns);
  if (status != IBV_WC_SUCCESS) EnterErrorLocked(qp);
  return true;
}

}  // namespace nic_internal

namespace {

// What one UD send WR found at its post: 0 and the datagram to deliver (its payload gathered
// into `payload`), or the errno of the post. REQUIRES: qp->link->mu held.
// The errors ibv_post_send gives for a UD WR before it leaves (0: it may be posted); *total: its
// length.
int CheckUdSend(const SimQp* qp, const ibv_send_wr* wr, uint64_t* total) {
  if (wr->opcode != IBV_WR_SEND && wr->opcode != IBV_WR_SEND_WITH_IMM) return EINVAL;
  if (wr->opcode == IBV_WR_SEND_WITH_IMM && !ActiveProfile().immediate_data) return EINVAL;
  if (wr->wr.ud.ah == nullptr || wr->wr.ud.ah->pd == nullptr) return EINVAL;
  if (wr->num_sge < 0 || (wr->num_sge > 0 && wr->sg_list == nullptr)) return EINVAL;
  if (static_cast<uint32_t>(wr->num_sge) > qp->cap.max_send_sge) {
    return ActiveProfile().post_send_limit_errno;
  }
  *total = 0;
  for (int i = 0; i < wr->num_sge; ++i) *total += wr->sg_list[i].length;
  const bool is_inline = (wr->send_flags & IBV_SEND_INLINE) != 0;
  if (is_inline && *total > qp->cap.max_inline_data) return ActiveProfile().post_send_limit_errno;
  return 0;
}

int TakeUdSendLocked(SimQp* qp, const ibv_send_wr* wr, UdDatagram* datagram, uint8_t* payload,
                     ibv_wc_status* status) {
  uint64_t total = 0;
  if (int err = CheckUdSend(qp, wr, &total); err != 0) return err;
  const bool is_inline = (wr->send_flags & IBV_SEND_INLINE) != 0;
  const SimAh* ah = to_sim(wr->wr.ud.ah);
  std::memset(datagram, 0, sizeof(*datagram));
  datagram->src_qp = qp->qp.qp_num;
  datagram->dst_qp = wr->wr.ud.remote_qpn & 0xffffff;
  datagram->qkey = SendQkey(qp, wr->wr.ud.remote_qkey);
  datagram->with_imm = wr->opcode == IBV_WR_SEND_WITH_IMM;
  datagram->imm_data = wr->imm_data;
  datagram->solicited = (wr->send_flags & IBV_SEND_SOLICITED) != 0;
  datagram->hop_limit = ah->attr.grh.hop_limit;
  datagram->traffic_class = ah->attr.grh.traffic_class;
  ProcessGid(datagram->src_gid);
  std::memcpy(datagram->dst_gid, ah->attr.grh.dgid.raw, sizeof(datagram->dst_gid));
  *status = IBV_WC_SUCCESS;
  // A message above the path MTU is a local length error of the sender (UD has no segmentation).
  if (total > UdMtuBytes()) {
    *status = IBV_WC_LOC_LEN_ERR;
    return 0;
  }
  datagram->length = static_cast<uint32_t>(total);
  uint64_t offset = 0;
  if (is_inline) {
    for (int i = 0; i < wr->num_sge; ++i) {
      std::memcpy(payload + offset, AsPtr(wr->sg_list[i].addr), wr->sg_list[i].length);
      offset += wr->sg_list[i].length;
    }
    return 0;
  }
  PdReadLocks pd_lock(qp->pd, nullptr);
  for (int i = 0; i < wr->num_sge; ++i) {
    const ibv_sge& sge = wr->sg_list[i];
    if (sge.length == 0) continue;
    if (qp->pd->FindLocal(sge.lkey, sge.addr, sge.length, 0) == nullptr) {
      *status = IBV_WC_LOC_PROT_ERR;
      return 0;
    }
    std::memcpy(payload + offset, AsPtr(sge.addr), sge.length);
    offset += sge.length;
  }
  return 0;
}

// Where a datagram of this process goes: the UD QP of that number in this process, if any.
void DeliverInProcess(const UdDatagram& datagram, const uint8_t* payload) {
  std::shared_ptr<SimLink> link = FindUdLink(datagram.dst_qp);
  if (link == nullptr) return;  // no such QP: lost
  softrpma::MutexLock lock(&link->mu);
  SimQp* qp = LocalSideLocked(link.get());
  if (qp == nullptr || qp->qp.qp_num != datagram.dst_qp) return;
  const bool received = DeliverUdLocked(qp, datagram, payload);
  if (TraceOn()) {
    TraceEvent("ud_deliver src_qp=%u dst_qp=%u len=%u received=%d", datagram.src_qp,
               datagram.dst_qp, datagram.length, received ? 1 : 0);
  }
}

}  // namespace

namespace nic_internal {

uint32_t UdMtuBytes() { return 128u << ActiveProfile().port.active_mtu; }

int PostUdSendWrs(SimQp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr, const WrFault& fault,
                  bool extended) {
  SimLink* link = qp->link.get();
  if (extended) {
    softrpma::MutexLock lock(&link->mu);
    CheckOverflowLocked(qp);
    const uint32_t in_use = qp->sq_in_use.load(std::memory_order_acquire);
    uint32_t count = 0;
    for (ibv_send_wr* each = wr; each != nullptr; each = each->next) {
      uint64_t total = 0;
      int err = qp->state != IBV_QPS_RTS && qp->state != IBV_QPS_ERR ? EINVAL : 0;
      if (err == 0) err = CheckUdSend(qp, each, &total);
      if (err == 0 && in_use + ++count > qp->cap.max_send_wr) err = ENOMEM;
      if (err != 0) {
        *bad_wr = each;
        return err;
      }
    }
  }
  std::array<uint8_t, 4096> payload;
  for (bool first = true; wr != nullptr; wr = wr->next, first = false) {
    UdDatagram datagram;
    bool deliver = false;
    {
      softrpma::MutexLock lock(&link->mu);
      CheckOverflowLocked(qp);
      ++link->post_points;
      if (qp->state != IBV_QPS_RTS && qp->state != IBV_QPS_ERR) {
        *bad_wr = wr;
        return EINVAL;
      }
      ibv_wc_status status = IBV_WC_SUCCESS;
      if (int err = TakeUdSendLocked(qp, wr, &datagram, payload.data(), &status); err != 0) {
        *bad_wr = wr;
        return err;
      }
      if (qp->sq_in_use.load(std::memory_order_acquire) >= qp->cap.max_send_wr) {
        *bad_wr = wr;
        return ENOMEM;
      }
      qp->sq_in_use.fetch_add(1, std::memory_order_acq_rel);
      const bool signaled = qp->sq_sig_all || (wr->send_flags & IBV_SEND_SIGNALED) != 0;
      if (TraceOn()) {
        TraceEvent("post_send qp=%u wr_id=0x%llx opcode=%s len=%u signaled=%d ud_dst_qp=%u",
                   qp->qp.qp_num, static_cast<unsigned long long>(wr->wr_id),
                   NameOr(WrOpcodeName(wr->opcode), wr->opcode).c_str(), datagram.length,
                   signaled ? 1 : 0, datagram.dst_qp);
      }
      if (qp->state == IBV_QPS_ERR) {
        CompleteSend(qp, wr->wr_id, wr->opcode, true, IBV_WC_WR_FLUSH_ERR, 0, fault.delay_ns);
        continue;
      }
      if (first && fault.status != IBV_WC_SUCCESS) status = fault.status;
      // It leaves now: a UD send completes when it is on the wire, never waiting for its
      // destination (which may not exist).
      CompleteSend(qp, wr->wr_id, wr->opcode, signaled, status, datagram.length, fault.delay_ns);
      if (status != IBV_WC_SUCCESS) {
        EnterErrorLocked(qp);
        continue;
      }
      // A `lost` fault: it left, and arrives nowhere.
      deliver = !(first && fault.lose_first);
    }
    // The destination's lock is taken with the sender's let go: two QPs sending to each other
    // never wait on each other.
    if (!deliver) continue;
    uint8_t own_gid[16];
    ProcessGid(own_gid);
    if (std::memcmp(datagram.dst_gid, own_gid, sizeof(own_gid)) == 0) {
      DeliverInProcess(datagram, payload.data());
    } else {
      SendUdToProcess(datagram, payload.data());
    }
  }
  return 0;
}

}  // namespace nic_internal

// ---- Address handles ----------------------------------------------------------------------

int CreateAh(SimPd* pd, const ibv_ah_attr* attr, ibv_ah** ah) {
  if (pd == nullptr || attr == nullptr || ah == nullptr) return EINVAL;
  // RoCE: an address handle names its destination by GID (mlx5 and rxe refuse one without a
  // GRH), from the one port, with the GID of the one populated entry of the table.
  if (attr->is_global == 0 || attr->port_num != 1 || attr->grh.sgid_index != 0) return EINVAL;
  auto* made = New<SimAh>();
  if (made == nullptr) return ENOMEM;
  std::memset(&made->ah, 0, sizeof(made->ah));
  made->ah.context = pd->pd.context;
  made->ah.pd = &pd->pd;
  made->attr = *attr;
  static std::atomic<uint32_t> next_handle{1};
  made->ah.handle = next_handle.fetch_add(1, std::memory_order_relaxed);
  pd->users.fetch_add(1, std::memory_order_acq_rel);
  *ah = &made->ah;
  return 0;
}

int DestroyAh(SimAh* ah) {
  if (ah == nullptr) return EINVAL;
  to_sim(ah->ah.pd)->users.fetch_sub(1, std::memory_order_acq_rel);
  Delete(ah);
  return 0;
}

}  // namespace softrpma::sim
