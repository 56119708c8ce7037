// verbs_qp.cc: QPs of ibv_create_qp and ibv_modify_qp, with no CM: the state machine of
// ibv_modify_qp(3) and how a QP at RTR finds its peer (qp.h, "QPs of ibv_create_qp"): in this
// process directly, in another through the process's endpoint named after its GID.

#include "simverbs/sim/nic/qp.h"

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "simverbs/sim/fabric/host.h"
#include "simverbs/sim/nic/nic_internal.h"
#include "simverbs/sim/trace/trace.h"

namespace softrpma::sim {

using namespace nic_internal;  // NOLINT(build/namespaces): the NIC's files share its internals

// ---- QPs of ibv_create_qp (qp.h, "QPs of ibv_create_qp") ---------------------------------

namespace {

// The verbs QPs of this process by QP number, and the process's endpoint (named after its GID).
struct VerbsQps {
  softrpma::Mutex mu;
  absl::flat_hash_map<uint32_t, std::weak_ptr<SimLink>> links ABSL_GUARDED_BY(mu);
  std::unique_ptr<host::Listener> listener ABSL_GUARDED_BY(mu);
  pid_t listener_pid ABSL_GUARDED_BY(mu) = 0;
};

VerbsQps& TheVerbsQps() {
  static VerbsQps* qps = new VerbsQps;  // never destroyed: the fabric thread may use it at exit
  return *qps;
}

std::shared_ptr<SimLink> FindVerbsLink(uint32_t qp_num) {
  VerbsQps& qps = TheVerbsQps();
  softrpma::MutexLock lock(&qps.mu);
  auto it = qps.links.find(qp_num);
  return it != qps.links.end() ? it->second.lock() : nullptr;
}

}  // namespace

namespace nic_internal {

std::shared_ptr<SimLink> FindUdLink(uint32_t qp_num) { return FindVerbsLink(qp_num); }

}  // namespace nic_internal

namespace {

// The fabric endpoint of the process owning `gid`: "gid-" and its 32 hex digits.
std::string GidEndpoint(const uint8_t gid[16]) {
  std::string name = "gid-";
  static const char kHex[] = "0123456789abcdef";
  for (int i = 0; i < 16; ++i) {
    name += kHex[gid[i] >> 4];
    name += kHex[gid[i] & 15];
  }
  return name;
}

// Dials the endpoint of the process that owns `gid` and binds the connection with a kQpBind from
// QP `src_qp_num` to `dst_qp_num` (wire::kUdBindQpNum: UD datagrams). nullptr when nobody is
// there, or when the listener is not the process the GID names (the kernel says who listens:
// another process of the fabric may have taken a name that is not its own).
std::shared_ptr<host::Conn> DialAndBind(const uint8_t gid[16],
                                        std::shared_ptr<host::Conn::Handler> handler,
                                        uint32_t src_qp_num, uint32_t dst_qp_num) {
  int32_t pid = 0;
  if (!GidPid(gid, &pid)) return nullptr;
  std::shared_ptr<host::Conn> conn;
  if (host::DialEndpoint(GidEndpoint(gid), std::move(handler), &conn) != 0) return nullptr;
  if ((conn->peer_pid() & 0xffffff) != pid) {
    wire::ReportPeerMismatch("the endpoint of the GID of pid", pid, conn->peer_pid());
    conn->Close();
    return nullptr;
  }
  wire::QpBindBody bind;
  std::memset(&bind, 0, sizeof(bind));
  bind.version = wire::kQpBindVersion;
  bind.src_qp_num = src_qp_num;
  bind.dst_qp_num = dst_qp_num;
  bind.pid = static_cast<int32_t>(getpid());
  ProcessGid(bind.src_gid);
  std::memcpy(bind.dst_gid, gid, sizeof(bind.dst_gid));
  wire::Header header = wire::MakeHeader(wire::Type::kQpBind);
  header.body_len = sizeof(bind);
  iovec iov{&bind, sizeof(bind)};
  conn->Send(header, &iov, 1);
  return conn;
}

// A connection a peer dialed to this process's endpoint: a kQpBind, then the requests of one
// peer QP toward one QP of this process.
class ServeEnd final : public host::Conn::Handler {
 public:
  explicit ServeEnd(std::weak_ptr<host::Conn> conn) : conn_(std::move(conn)) {}

  // The first message must be the kQpBind: no other body is read before it. After a UD bind,
  // only datagrams may come.
  bool OnHeader(const wire::Header& header) override {
    const auto type = static_cast<wire::Type>(header.type);
    if (!bound_) return type == wire::Type::kQpBind;
    return !ud_ || type == wire::Type::kUdSend;
  }
  // The peer read enough of our responses: its reads that waited are served.
  void OnDrained() override {
    if (!bound_) return;
    if (std::shared_ptr<SimLink> link = FindVerbsLink(dst_qp_num_); link != nullptr) {
      ResumeRemoteLink(link);
    }
  }

  void OnMessage(const wire::Header& header, const uint8_t* body) override {
    std::shared_ptr<host::Conn> conn = conn_.lock();
    if (conn == nullptr) return;
    if (!bound_) {
      wire::QpBindBody bind;
      if (static_cast<wire::Type>(header.type) != wire::Type::kQpBind) {
        conn->Close();  // a protocol violation ends this connection only
        return;
      }
      std::memcpy(&bind, body, sizeof(bind));
      uint8_t ours[16];
      ProcessGid(ours);
      // A bind meant for another GID (a stale name, a forked parent's) is not ours to serve.
      if (!wire::ValidateQpBindBody(bind) || std::memcmp(bind.dst_gid, ours, 16) != 0) {
        conn->Close();
        return;
      }
      // Who sends is the kernel's word (SO_PEERCRED): a bind naming another process (its pid,
      // or a GID that is not the sender's own) would let a third process speak for a QP's
      // peer. It ends the connection.
      int32_t gid_pid = 0;
      const pid_t peer_pid = conn->peer_pid();
      if (bind.pid != peer_pid) {
        wire::ReportPeerMismatch("pid", bind.pid, peer_pid);
        conn->Close();
        return;
      }
      if (!GidPid(bind.src_gid, &gid_pid) || gid_pid != (peer_pid & 0xffffff)) {
        wire::ReportPeerMismatch("the GID of pid", gid_pid, peer_pid);
        conn->Close();
        return;
      }
      bound_ = true;
      ud_ = bind.dst_qp_num == wire::kUdBindQpNum;
      dst_qp_num_ = bind.dst_qp_num;
      src_qp_num_ = bind.src_qp_num;
      std::memcpy(src_gid_, bind.src_gid, 16);
      return;
    }
    if (ud_) {
      ServeDatagram(conn, header, body);
      return;
    }
    if (!IsRequest(header.type)) return;  // nothing else travels this way
    if (std::shared_ptr<SimLink> link = FindVerbsLink(dst_qp_num_); link != nullptr) {
      softrpma::MutexLock lock(&link->mu);
      SimQp* qp = LocalSideLocked(link.get());
      // Bound back to the sender (RTR done), named by its GID and QP number both (every
      // process numbers its QPs from the same start): served as any remote link's requests are.
      if (qp != nullptr && link->remote != nullptr && link->remote_qp_num == src_qp_num_ &&
          std::memcmp(qp->verbs_attr.ah_attr.grh.dgid.raw, src_gid_, 16) == 0) {
        if (link->serve != conn) {
          link->serve = conn;
          // A busy-polling program serves the peer's requests itself (host.h, Progress).
          qp->send_cq->AddRemote(conn);
          if (qp->recv_cq != qp->send_cq) qp->recv_cq->AddRemote(conn);
        }
        ServeOrQueueLocked(link.get(), qp, header, body);
        return;
      }
    }
    // No such QP, or not connected to the sender (yet): a real responder drops the packet and
    // the requester's retries run out.
    Respond(conn.get(), header, IBV_WC_RETRY_EXC_ERR, nullptr);
  }
  void OnClosed() override {}

 private:
  // A UD datagram of the bound process (its GID the kernel's word, its QP number its own):
  // into the UD QP it names, as one from this process would land (ud.cc), or dropped.
  void ServeDatagram(const std::shared_ptr<host::Conn>& conn, const wire::Header& header,
                     const uint8_t* body) {
    wire::UdSendPrefix prefix;
    std::memcpy(&prefix, body, sizeof(prefix));
    if (!wire::ValidateUdSendPrefix(prefix)) {
      conn->Close();  // a protocol violation ends this connection only
      return;
    }
    UdDatagram datagram;
    std::memset(&datagram, 0, sizeof(datagram));
    datagram.src_qp = prefix.src_qp_num;
    datagram.dst_qp = prefix.dst_qp_num;
    datagram.qkey = prefix.qkey;
    datagram.imm_data = header.imm_data;
    datagram.length = header.body_len - static_cast<uint32_t>(sizeof(prefix));
    datagram.with_imm = (header.flags & wire::kFlagImm) != 0;
    datagram.solicited = (header.flags & wire::kFlagSolicited) != 0;
    datagram.hop_limit = prefix.hop_limit;
    datagram.traffic_class = prefix.traffic_class;
    std::memcpy(datagram.src_gid, src_gid_, sizeof(datagram.src_gid));
    ProcessGid(datagram.dst_gid);
    // Above this port's MTU: no NIC here would take it.
    if (datagram.length > UdMtuBytes()) return;
    std::shared_ptr<SimLink> link = FindUdLink(datagram.dst_qp);
    if (link == nullptr) return;  // no such QP: lost
    softrpma::MutexLock lock(&link->mu);
    SimQp* qp = LocalSideLocked(link.get());
    if (qp == nullptr || qp->qp.qp_num != datagram.dst_qp || qp->qp.qp_type != IBV_QPT_UD) return;
    if (served_qps_.insert(qp->qp.qp_num).second) {
      // A busy-polling receiver reads the datagrams itself (host.h, Progress).
      qp->recv_cq->AddRemote(conn);
    }
    DeliverUdLocked(qp, datagram, body + sizeof(prefix));
  }

  std::weak_ptr<host::Conn> conn_;
  // The fabric runs a connection's handler one message at a time.
  bool bound_ = false;
  bool ud_ = false;  // bound by a UD sender (wire::kUdBindQpNum)
  absl::flat_hash_set<uint32_t> served_qps_;  // UD QPs whose receive CQ polls this connection
  uint32_t dst_qp_num_ = 0;
  uint32_t src_qp_num_ = 0;
  uint8_t src_gid_[16] = {};
};

// The connection a QP's RTR dialed: the responses to its requests.
class DialEnd final : public host::Conn::Handler {
 public:
  explicit DialEnd(std::weak_ptr<SimLink> link) : link_(std::move(link)) {}
  // Only responses come this way, and no read response larger than a read this link asked
  // for: a peer cannot make this process buffer what it only announces.
  bool OnHeader(const wire::Header& header) override {
    const wire::Type type = static_cast<wire::Type>(header.type);
    if (type != wire::Type::kAck && type != wire::Type::kReadResponse) return false;
    std::shared_ptr<SimLink> link = link_.lock();
    return link == nullptr || ResponseFits(link, header);
  }
  void OnMessage(const wire::Header& header, const uint8_t* body) override {
    const wire::Type type = static_cast<wire::Type>(header.type);
    if (type != wire::Type::kAck && type != wire::Type::kReadResponse) return;
    if (std::shared_ptr<SimLink> link = link_.lock(); link != nullptr) {
      HandleRemoteMessage(link, header, body);
    }
  }
  void OnClosed() override {
    std::shared_ptr<SimLink> link = link_.lock();
    if (link == nullptr) return;
    softrpma::MutexLock lock(&link->mu);
    PeerGoneLocked(link.get());
  }

 private:
  std::weak_ptr<SimLink> link_;
};

// Listens on this process's endpoint, once per process (a child of fork() has a GID of its
// own and listens anew; the parent's listener object is left to the parent).
int EnsureListening() {
  VerbsQps& qps = TheVerbsQps();
  softrpma::MutexLock lock(&qps.mu);
  if (qps.listener != nullptr && qps.listener_pid == getpid()) return 0;
  if (qps.listener != nullptr) {
    static_cast<void>(qps.listener.release());  // the parent's
    qps.links.clear();  // and so are its QPs: a peer naming one must not reach the copies
  }
  uint8_t gid[16];
  ProcessGid(gid);
  const int err = host::ListenEndpoint(
      GidEndpoint(gid),
      [](const std::shared_ptr<host::Conn>& conn) {
        return std::static_pointer_cast<host::Conn::Handler>(std::make_shared<ServeEnd>(conn));
      },
      &qps.listener);
  if (err != 0) return err;
  qps.listener_pid = getpid();
  return 0;
}

// The kernel's ib_modify_qp_is_ok table, UD column (a UD QP has no peer: no AV, PSNs but the
// send queue's, no retries). False: not a valid transition.
bool UdTransitionMasks(ibv_qp_state cur, ibv_qp_state next, int* required, int* optional) {
  switch (cur) {
    case IBV_QPS_RESET:
      if (next != IBV_QPS_INIT) return false;
      *required = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY;
      return true;
    case IBV_QPS_INIT:
      if (next == IBV_QPS_INIT) {
        *optional = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY;
        return true;
      }
      if (next != IBV_QPS_RTR) return false;
      *optional = IBV_QP_PKEY_INDEX | IBV_QP_QKEY;
      return true;
    case IBV_QPS_RTR:
      if (next != IBV_QPS_RTS) return false;
      *required = IBV_QP_SQ_PSN;
      *optional = IBV_QP_CUR_STATE | IBV_QP_QKEY;
      return true;
    case IBV_QPS_RTS:
      if (next != IBV_QPS_RTS) return false;
      *optional = IBV_QP_CUR_STATE | IBV_QP_QKEY;
      return true;
    default:
      return false;  // SQD, SQE: not modelled
  }
}

// The kernel's ib_modify_qp_is_ok table, RC column (`ud`: the UD column): the attributes a
// transition needs and those it may take (besides IBV_QP_STATE). False: not a valid transition.
bool TransitionMasks(ibv_qp_state cur, ibv_qp_state next, int* required, int* optional,
                     bool ud = false) {
  *required = 0;
  *optional = 0;
  if (next == IBV_QPS_RESET) return true;
  if (next == IBV_QPS_ERR) return cur != IBV_QPS_RESET;  // the RESET row has RESET and INIT only
  if (ud) return UdTransitionMasks(cur, next, required, optional);
  switch (cur) {
    case IBV_QPS_RESET:
      if (next != IBV_QPS_INIT) return false;
      *required = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
      return true;
    case IBV_QPS_INIT:
      if (next == IBV_QPS_INIT) {
        *optional = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
        return true;
      }
      if (next != IBV_QPS_RTR) return false;
      *required = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
      *optional = IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX;
      return true;
    case IBV_QPS_RTR:
      if (next != IBV_QPS_RTS) return false;
      *required = IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                  IBV_QP_MAX_QP_RD_ATOMIC;
      *optional = IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS |
                  IBV_QP_MIN_RNR_TIMER | IBV_QP_PATH_MIG_STATE;
      return true;
    case IBV_QPS_RTS:
      if (next != IBV_QPS_RTS) return false;
      *optional = IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_ALT_PATH |
                  IBV_QP_PATH_MIG_STATE | IBV_QP_MIN_RNR_TIMER;
      return true;
    default:
      return false;  // SQD, SQE: not modelled
  }
}

// The qp_access_flags bits ibv_modify_qp takes. IBV_ACCESS_ON_DEMAND is an MR's flag, but no
// profile's driver refuses it in a QP's flags (nor does the kernel's uverbs modify_qp): mlx5,
// rxe and siw read the remote bits and ignore the rest, whatever the device's ODP, so it is
// taken and kept (ibv_query_qp gives it back) on every profile (docs/DEVICES.md).
constexpr int kKnownAccess =
    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
    IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_ON_DEMAND;

// The values of the attributes in `mask`. REQUIRES: the mask passed TransitionMasks.
int CheckValues(const SimQp* qp, const ibv_qp_attr& attr, int mask) {
  const DeviceProfile& profile = ActiveProfile();
  if ((mask & IBV_QP_PORT) != 0 && attr.port_num != 1) return EINVAL;
  if ((mask & IBV_QP_PKEY_INDEX) != 0 && attr.pkey_index != 0) return EINVAL;  // one pkey
  if ((mask & IBV_QP_ACCESS_FLAGS) != 0 && (attr.qp_access_flags & ~kKnownAccess) != 0) {
    return EINVAL;
  }
  if ((mask & IBV_QP_PATH_MTU) != 0 && (attr.path_mtu < IBV_MTU_256 || attr.path_mtu > IBV_MTU_4096)) {
    return EINVAL;
  }
  if ((mask & IBV_QP_AV) != 0) {
    // RoCE: the AV names the peer by its GID (no GRH: mlx5 / rxe refuse, EINVAL).
    if (attr.ah_attr.is_global == 0 || attr.ah_attr.grh.sgid_index != 0) return EINVAL;
    if (attr.ah_attr.port_num != 0 && attr.ah_attr.port_num != 1) return EINVAL;
  }
  if ((mask & IBV_QP_DEST_QPN) != 0 && attr.dest_qp_num >= (1u << 24)) return EINVAL;
  if ((mask & IBV_QP_RQ_PSN) != 0 && attr.rq_psn >= (1u << 24)) return EINVAL;
  if ((mask & IBV_QP_SQ_PSN) != 0 && attr.sq_psn >= (1u << 24)) return EINVAL;
  if ((mask & IBV_QP_MIN_RNR_TIMER) != 0 && attr.min_rnr_timer > 31) return EINVAL;
  if ((mask & IBV_QP_TIMEOUT) != 0 && attr.timeout > 31) return EINVAL;
  if ((mask & IBV_QP_RETRY_CNT) != 0 && attr.retry_cnt > 7) return EINVAL;
  if ((mask & IBV_QP_RNR_RETRY) != 0 && attr.rnr_retry > 7) return EINVAL;
  if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) != 0 &&
      attr.max_dest_rd_atomic > profile.max_qp_rd_atom) {
    return EINVAL;
  }
  if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) != 0 && attr.max_rd_atomic > profile.max_qp_init_rd_atom) {
    return EINVAL;
  }
  static_cast<void>(qp);
  return 0;
}

// Copies the attributes of `mask` into the QP's record. REQUIRES: link->mu held.
void RecordAttrs(SimQp* qp, const ibv_qp_attr& attr, int mask) {
  ibv_qp_attr& to = qp->verbs_attr;
  if (mask & IBV_QP_PKEY_INDEX) to.pkey_index = attr.pkey_index;
  if (mask & IBV_QP_PORT) to.port_num = attr.port_num;
  if (mask & IBV_QP_QKEY) to.qkey = attr.qkey;
  if (mask & IBV_QP_ACCESS_FLAGS) {
    to.qp_access_flags = attr.qp_access_flags;
    qp->remote_access = attr.qp_access_flags;
  }
  if (mask & IBV_QP_AV) to.ah_attr = attr.ah_attr;
  if (mask & IBV_QP_ALT_PATH) {
    to.alt_ah_attr = attr.alt_ah_attr;
    to.alt_pkey_index = attr.alt_pkey_index;
    to.alt_port_num = attr.alt_port_num;
    to.alt_timeout = attr.alt_timeout;
  }
  if (mask & IBV_QP_PATH_MTU) to.path_mtu = attr.path_mtu;
  if (mask & IBV_QP_DEST_QPN) to.dest_qp_num = attr.dest_qp_num;
  if (mask & IBV_QP_RQ_PSN) to.rq_psn = attr.rq_psn;
  if (mask & IBV_QP_SQ_PSN) to.sq_psn = attr.sq_psn;
  if (mask & IBV_QP_MAX_DEST_RD_ATOMIC) to.max_dest_rd_atomic = attr.max_dest_rd_atomic;
  if (mask & IBV_QP_MAX_QP_RD_ATOMIC) to.max_rd_atomic = attr.max_rd_atomic;
  if (mask & IBV_QP_MIN_RNR_TIMER) to.min_rnr_timer = attr.min_rnr_timer;
  if (mask & IBV_QP_TIMEOUT) to.timeout = attr.timeout;
  if (mask & IBV_QP_RETRY_CNT) to.retry_cnt = attr.retry_cnt;
  if (mask & IBV_QP_RNR_RETRY) to.rnr_retry = attr.rnr_retry;
  if (mask & IBV_QP_PATH_MIG_STATE) to.path_mig_state = attr.path_mig_state;
}

// To RESET: the queues empty without completions, the peer is forgotten; on mlx5 its
// completions leave its CQs too (CleanCqs). Returns the connection to close (outside the lock).
// REQUIRES: link->mu held.
std::shared_ptr<Transport> ResetLocked(SimQp* qp) {
  SimLink* link = qp->link.get();
  CleanCqs(qp);  // first: the slots its completions hold are released with them
  uint32_t popped = 0;
  while (!qp->sq.empty()) {
    PopSendLocked(qp);
    ++popped;
  }
  qp->sq_in_use.fetch_sub(std::min(popped + qp->unretired, qp->sq_in_use.load()),
                          std::memory_order_acq_rel);
  qp->unretired = 0;
  qp->sq_sent = 0;
  uint32_t recvs = 0;
  while (!qp->rq.empty()) {
    qp->rq.pop_front();
    ++recvs;
  }
  qp->rq_in_use.fetch_sub(std::min(recvs, qp->rq_in_use.load()), std::memory_order_acq_rel);
  std::shared_ptr<Transport> conn = DetachRemoteLocked(link);
  link->serve = nullptr;
  link->peer_gone = false;
  ClearIncomingLocked(link);
  link->remote_qp_num = 0;
  link->remote_pid = 0;
  link->we_reach_peer = false;
  std::memset(&qp->verbs_attr, 0, sizeof(qp->verbs_attr));
  qp->remote_access = 0;
  SetStateLocked(qp, IBV_QPS_RESET);
  return conn;
}

// A new link with `qp` as its one side, made while qp's old link is locked. No other thread
// can see it yet, so its lock is not taken: taking it under the old link's would order the two
// locks one way here and the other way where two links are locked in address order
// (BindLocal), which ThreadSanitizer reports as a potential deadlock.
std::shared_ptr<SimLink> LinkOfItsOwn(SimQp* qp) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  std::shared_ptr<SimLink> link = std::make_shared<SimLink>();
  link->side[0] = qp;
  qp->side = 0;
  return link;
}

// Moves `qp` (INIT) out of a link it shares with another QP into a new link of its own.
// Returns EINVAL when it left INIT meanwhile.
int LeaveSharedLink(SimQp* qp) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  VerbsQps& qps = TheVerbsQps();
  softrpma::MutexLock registry_lock(&qps.mu);
  std::shared_ptr<SimLink> old_link = qp->link;
  std::shared_ptr<SimLink> fresh;
  {
    softrpma::MutexLock lock(&old_link->mu);
    if (qp->state != IBV_QPS_INIT) return EINVAL;
    if (old_link->side[1 - qp->side] == nullptr) return 0;
    old_link->side[qp->side] = nullptr;
    fresh = LinkOfItsOwn(qp);
    qp->link = fresh;
    qps.links[qp->qp.qp_num] = fresh;
  }
  for (SimCq* cq : {qp->send_cq, qp->recv_cq}) {
    AddLink(&cq->links, fresh);
    if (cq->channel != nullptr) AddLink(&cq->channel->links, fresh);
  }
  return 0;
}

// INIT -> RTR toward QP `attr->dest_qp_num` of this process (qp.h). Returns 0 or EINVAL
// (the QP left INIT meanwhile).
int BindLocal(SimQp* qp, const ibv_qp_attr& attr, int mask) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  VerbsQps& qps = TheVerbsQps();
  softrpma::MutexLock registry_lock(&qps.mu);  // one binding at a time: two RTRs meet
  std::shared_ptr<SimLink> old_link = qp->link;
  std::shared_ptr<SimLink> partner_link;
  if (auto it = qps.links.find(attr.dest_qp_num); it != qps.links.end()) {
    partner_link = it->second.lock();
  }
  if (partner_link == old_link) partner_link = nullptr;
  // Both links, in address order.
  SimLink* locks[2] = {old_link.get(), partner_link.get()};
  if (locks[1] != nullptr && locks[1] < locks[0]) std::swap(locks[0], locks[1]);
  for (SimLink* l : locks) {
    if (l != nullptr) l->mu.Lock();
  }
  int err = 0;
  std::shared_ptr<SimLink> target;
  if (qp->state != IBV_QPS_INIT) {
    err = EINVAL;
  } else {
    uint8_t own_gid[16];
    ProcessGid(own_gid);
    SimQp* partner = nullptr;
    int free_side = -1;
    if (partner_link != nullptr && partner_link->carrier->InProcess()) {
      for (int i = 0; i < 2; ++i) {
        SimQp* side = partner_link->side[i];
        if (side != nullptr && side->qp.qp_num == attr.dest_qp_num) partner = side;
      }
      if (partner != nullptr) {
        free_side = 1 - partner->side;
        if (partner_link->side[free_side] != nullptr || !partner->verbs ||
            (partner->state != IBV_QPS_RTR && partner->state != IBV_QPS_RTS) ||
            partner->verbs_attr.dest_qp_num != qp->qp.qp_num ||
            std::memcmp(partner->verbs_attr.ah_attr.grh.dgid.raw, own_gid, 16) != 0) {
          partner = nullptr;  // not (yet) bound back to us: wait alone
        }
      }
    }
    const bool alone = old_link->side[1 - qp->side] == nullptr;
    if (partner != nullptr) {
      old_link->side[qp->side] = nullptr;
      partner_link->side[free_side] = qp;
      qp->side = free_side;
      target = partner_link;
    } else if (!alone) {
      // Still in the link of an earlier binding (RESET since): a link of its own.
      old_link->side[qp->side] = nullptr;
      target = LinkOfItsOwn(qp);
    } else {
      target = old_link;
    }
    qp->link = target;
    qps.links[qp->qp.qp_num] = target;
    if (TraceOn()) {
      TraceEvent("qp_bind qp=%u dest_qp=%u local=1 linked=%d", qp->qp.qp_num, attr.dest_qp_num,
                 partner != nullptr ? 1 : 0);
    }
  }
  for (SimLink* l : locks) {
    if (l != nullptr) l->mu.Unlock();
  }
  if (err != 0) return err;
  if (target != old_link) {
    // Where the poll points of asynchronous execution find it (no link lock held: AddLink
    // takes the set's lock, which RunPollPoint holds while it takes links' locks).
    for (SimCq* cq : {qp->send_cq, qp->recv_cq}) {
      AddLink(&cq->links, target);
      if (cq->channel != nullptr) AddLink(&cq->channel->links, target);
    }
  }
  softrpma::MutexLock lock(&target->mu);
  RecordAttrs(qp, attr, mask);
  SetStateLocked(qp, IBV_QPS_RTR);
  ProgressLinkLocked(target.get());
  return 0;
}

}  // namespace

namespace {

// The connection a UD sender of this process dialed to the process of another GID: nothing
// comes back on it; its end (the peer gone) makes the next datagram dial again.
class UdDialEnd final : public host::Conn::Handler {
 public:
  explicit UdDialEnd(std::string endpoint) : endpoint_(std::move(endpoint)) {}
  bool OnHeader(const wire::Header& header) override { return false; }
  void OnMessage(const wire::Header& header, const uint8_t* body) override {}
  void OnClosed() override;

 private:
  const std::string endpoint_;
};

// This process's UD connections, by the endpoint of the GID they reach (a child of fork() has
// none of its parent's: its own process, its own connections).
struct UdConns {
  softrpma::Mutex mu;
  absl::flat_hash_map<std::string, std::shared_ptr<host::Conn>> by_endpoint ABSL_GUARDED_BY(mu);
  pid_t owner ABSL_GUARDED_BY(mu) = 0;
};

UdConns& TheUdConns() {
  static UdConns* conns = new UdConns;  // never destroyed: the fabric thread may use it at exit
  return *conns;
}

void UdDialEnd::OnClosed() {
  UdConns& conns = TheUdConns();
  softrpma::MutexLock lock(&conns.mu);
  conns.by_endpoint.erase(endpoint_);
}

// The connection toward the process of `gid` (dialed, and bound for UD with `src_qp_num`, at
// the first datagram), or nullptr when nobody of that GID is there.
std::shared_ptr<host::Conn> UdConnTo(const uint8_t gid[16], uint32_t src_qp_num) {
  int32_t pid = 0;
  if (!GidPid(gid, &pid)) return nullptr;
  const std::string endpoint = GidEndpoint(gid);
  UdConns& conns = TheUdConns();
  softrpma::MutexLock lock(&conns.mu);
  if (conns.owner != getpid()) {
    // The parent's connections, copied by fork(): not this process's to send on, nor to close.
    for (auto& [name, conn] : conns.by_endpoint) {
      // Left to the parent: never freed here (freeing would end what is the parent's).
      static_cast<void>(new std::shared_ptr<host::Conn>(std::move(conn)));
    }
    conns.by_endpoint.clear();
    conns.owner = getpid();
  }
  if (auto it = conns.by_endpoint.find(endpoint); it != conns.by_endpoint.end()) return it->second;
  std::shared_ptr<host::Conn> conn =
      DialAndBind(gid, std::make_shared<UdDialEnd>(endpoint), src_qp_num, wire::kUdBindQpNum);
  if (conn != nullptr) conns.by_endpoint[endpoint] = conn;
  return conn;
}

}  // namespace

namespace nic_internal {

void SendUdToProcess(const UdDatagram& datagram, const uint8_t* payload) {
  std::shared_ptr<host::Conn> conn = UdConnTo(datagram.dst_gid, datagram.src_qp);
  if (conn == nullptr) return;  // nobody at that GID: lost, as on a fabric
  // A peer that reads nothing: what it has not taken is already more than a NIC would hold
  // for it, and a datagram may be dropped (the backlog never grows without bound).
  if (conn->QueuedBytes() > Transport::kBacklogBytes) return;
  wire::UdSendPrefix prefix;
  std::memset(&prefix, 0, sizeof(prefix));
  prefix.src_qp_num = datagram.src_qp;
  prefix.dst_qp_num = datagram.dst_qp;
  prefix.qkey = datagram.qkey;
  prefix.hop_limit = datagram.hop_limit;
  prefix.traffic_class = datagram.traffic_class;
  wire::Header header = wire::MakeHeader(wire::Type::kUdSend);
  header.body_len = static_cast<uint32_t>(sizeof(prefix)) + datagram.length;
  header.imm_data = datagram.imm_data;
  if (datagram.with_imm) header.flags |= wire::kFlagImm;
  if (datagram.solicited) header.flags |= wire::kFlagSolicited;
  iovec iov[2] = {{&prefix, sizeof(prefix)},
                  {const_cast<uint8_t*>(payload), static_cast<size_t>(datagram.length)}};
  conn->Send(header, iov, datagram.length > 0 ? 2 : 1);
}

}  // namespace nic_internal

int CreateVerbsQp(ibv_qp_init_attr_ex* attr, SimQp** qp) {
  if (attr == nullptr || qp == nullptr) return EINVAL;
  switch (attr->qp_type) {
    case IBV_QPT_RC:
    case IBV_QPT_UD:
      break;
    case IBV_QPT_UC:
    case IBV_QPT_RAW_PACKET:
    case IBV_QPT_XRC_SEND:
    case IBV_QPT_XRC_RECV:
    case IBV_QPT_DRIVER:
      return EOPNOTSUPP;  // types mlx5 has and the simulator does not model
    default:
      return EINVAL;
  }
  // iWARP has no UD: siw's provider refuses the type.
  if (attr->qp_type == IBV_QPT_UD && !ActiveProfile().ud_qps) return EOPNOTSUPP;
  if (int err = EnsureListening(); err != 0) return err;
  SimQp* made = nullptr;
  if (int err = CreateQp(attr, nullptr, &made); err != 0) return err;
  made->verbs = true;
  std::memset(&made->verbs_init, 0, sizeof(made->verbs_init));
  CopyCommonInitAttr(*attr, &made->verbs_init);  // with the granted caps
  {
    softrpma::MutexLock lock(&made->link->mu);
    std::memset(&made->verbs_attr, 0, sizeof(made->verbs_attr));
    made->remote_access = 0;
    SetStateLocked(made, IBV_QPS_RESET);
  }
  {
    VerbsQps& qps = TheVerbsQps();
    softrpma::MutexLock lock(&qps.mu);
    qps.links[made->qp.qp_num] = made->link;
  }
  *qp = made;
  return 0;
}

int CreateVerbsQp(SimPd* pd, ibv_qp_init_attr* attr, SimQp** qp) {
  if (pd == nullptr || attr == nullptr) return EINVAL;
  ibv_qp_init_attr_ex ex;
  std::memset(&ex, 0, sizeof(ex));
  CopyCommonInitAttr(*attr, &ex);
  ex.comp_mask = IBV_QP_INIT_ATTR_PD;
  ex.pd = &pd->pd;
  const int err = CreateVerbsQp(&ex, qp);
  if (err == 0) attr->cap = ex.cap;
  return err;
}

int ModifyVerbsQp(SimQp* qp, const ibv_qp_attr* attr, int attr_mask) {
  if (attr == nullptr) return EINVAL;
  softrpma::MutexLock modify(&qp->modify_mu);
  SimLink* link = qp->link.get();
  ibv_qp_state cur;
  {
    softrpma::MutexLock lock(&link->mu);
    CheckOverflowLocked(qp);
    cur = qp->state;
  }
  if ((attr_mask & IBV_QP_CUR_STATE) != 0 && attr->cur_qp_state != cur) return EINVAL;
  const ibv_qp_state next = (attr_mask & IBV_QP_STATE) != 0 ? attr->qp_state : cur;
  if (!qp->verbs) {
    // A QP of rdma_create_qp: its states are the CM's. The user's are the error state, and
    // RTS -> RTS with that row's optional attributes (the kernel's ib_modify_qp_is_ok table;
    // libfabric's verbs provider sets IBV_QP_MIN_RNR_TIMER so). Their values are checked; of
    // them only the remote access changes what the simulated CM QP does (it has no alternate
    // path, RNR NAKs are not timed).
    if (attr_mask == IBV_QP_STATE && next == IBV_QPS_ERR) {
      SetQpError(qp);
      return 0;
    }
    if (cur != IBV_QPS_RTS || next != IBV_QPS_RTS) return EINVAL;
    int required = 0;
    int optional = 0;
    TransitionMasks(cur, next, &required, &optional);
    if ((attr_mask & ~(optional | IBV_QP_STATE)) != 0) return EINVAL;
    if (int err = CheckValues(qp, *attr, attr_mask); err != 0) return err;
    if ((attr_mask & IBV_QP_ACCESS_FLAGS) != 0) {
      softrpma::MutexLock lock(&link->mu);
      qp->remote_access = attr->qp_access_flags;
    }
    return 0;
  }
  if (next > IBV_QPS_ERR || next == IBV_QPS_SQD || next == IBV_QPS_SQE) return EINVAL;
  const bool ud = qp->qp.qp_type == IBV_QPT_UD;
  int required = 0;
  int optional = 0;
  if (!TransitionMasks(cur, next, &required, &optional, ud)) return EINVAL;
  if ((attr_mask & required) != required) return EINVAL;
  if ((attr_mask & ~(required | optional | IBV_QP_STATE)) != 0) return EINVAL;
  if (int err = CheckValues(qp, *attr, attr_mask); err != 0) return err;

  // RTR: bind to the peer (outside the link's lock: dialing may wait for the peer's accept).
  std::shared_ptr<host::Conn> conn;
  if (cur == IBV_QPS_INIT && next == IBV_QPS_RTR && !ud) {
    const uint8_t* dgid = attr->ah_attr.grh.dgid.raw;
    uint8_t own_gid[16];
    ProcessGid(own_gid);
    if (std::memcmp(dgid, own_gid, sizeof(own_gid)) == 0 && attr->dest_qp_num != qp->qp.qp_num) {
      return BindLocal(qp, *attr, attr_mask);
    }
    // Still in the in-process link of an earlier binding (RESET since): a link of its own
    // first, which becomes a remote link below.
    if (int err = LeaveSharedLink(qp); err != 0) return err;
    link = qp->link.get();
    // Nobody at that GID: sends time out (an in-process link, no peer).
    conn = DialAndBind(dgid, std::make_shared<DialEnd>(qp->link), qp->qp.qp_num,
                       attr->dest_qp_num);
    if (TraceOn()) {
      TraceEvent("qp_bind qp=%u dest_qp=%u reached=%d", qp->qp.qp_num, attr->dest_qp_num,
                 conn != nullptr ? 1 : 0);
    }
    if (conn != nullptr) AttachRemote(qp, conn);
  }

  std::shared_ptr<Transport> to_close;
  bool done;
  {
    softrpma::MutexLock lock(&link->mu);
    if (qp->state != cur) {  // moved meanwhile (an overflow: ERR)
      if (conn != nullptr) to_close = DetachRemoteLocked(link);
    } else {
      RecordAttrs(qp, *attr, attr_mask);
      if (next == IBV_QPS_RESET) {
        to_close = ResetLocked(qp);
      } else if (next == IBV_QPS_ERR) {
        EnterErrorLocked(qp);
      } else if (next != cur) {
        if (next == IBV_QPS_RTR && conn != nullptr) link->remote_qp_num = attr->dest_qp_num;
        SetStateLocked(qp, next);
        ProgressLinkLocked(link);  // RTS: sends may go; RTR: waiting requests may be served
      }
    }
    done = qp->state == next || next == IBV_QPS_ERR;
  }
  if (to_close != nullptr) to_close->Close();
  return done ? 0 : EINVAL;
}

int QueryVerbsQp(SimQp* qp, ibv_qp_attr* attr, int attr_mask, ibv_qp_init_attr* init_attr) {
  if (attr == nullptr || init_attr == nullptr) return EINVAL;
  static_cast<void>(attr_mask);  // as mlx5: everything is filled in
  softrpma::MutexLock modify(&qp->modify_mu);
  softrpma::MutexLock lock(&qp->link->mu);
  CheckOverflowLocked(qp);
  if (qp->verbs) {
    *attr = qp->verbs_attr;
    *init_attr = qp->verbs_init;
  } else {
    std::memset(attr, 0, sizeof(*attr));
    std::memset(init_attr, 0, sizeof(*init_attr));
    attr->port_num = 1;
    attr->path_mtu = IBV_MTU_1024;
    init_attr->qp_context = qp->qp.qp_context;
    init_attr->send_cq = qp->qp.send_cq;
    init_attr->recv_cq = qp->qp.recv_cq;
    init_attr->srq = qp->qp.srq;
    init_attr->qp_type = IBV_QPT_RC;
    init_attr->sq_sig_all = qp->sq_sig_all ? 1 : 0;
  }
  attr->qp_state = qp->state;
  attr->cur_qp_state = qp->state;
  attr->cap = qp->cap;
  init_attr->cap = qp->cap;
  return 0;
}

void DestroyVerbsQp(SimQp* qp) {
  {
    VerbsQps& qps = TheVerbsQps();
    softrpma::MutexLock lock(&qps.mu);
    qps.links.erase(qp->qp.qp_num);
  }
  std::shared_ptr<Transport> conn;
  std::shared_ptr<SimLink> link = qp->link;
  {
    softrpma::MutexLock lock(&link->mu);
    conn = link->remote;
  }
  DestroyQp(qp);
  if (conn != nullptr) conn->Close();
}

}  // namespace softrpma::sim
