// HostCmPeer (cm_peer.h): the other end is in another process; each message goes over the
// host::Conn (wire.h), and the peer's arrive here, on the fabric thread.

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <type_traits>
#include <utility>

#include "simverbs/sim/cm/addr.h"
#include "simverbs/sim/cm/cm_peer.h"
#include "simverbs/sim/nic/qp.h"

namespace softrpma::sim {
namespace {

// The parts of a REQ or REP body that rdma_conn_param gives (CmMessageParam's, already cut to
// the IB CM's fields; a REP has no retry count).
template <typename Body>
void FillFromParam(const rdma_conn_param* param, Body* body) {
  body->qp_num = param->qp_num;
  body->srq = param->srq;
  body->responder_resources = param->responder_resources;
  body->initiator_depth = param->initiator_depth;
  body->flow_control = param->flow_control;
  if constexpr (std::is_same_v<Body, wire::ConnectBody>) body->retry_count = param->retry_count;
  body->rnr_retry_count = param->rnr_retry_count;
  // The profile checked the length already (at most 255, what the body holds).
  body->private_data_len = param->private_data_len;
  if (body->private_data_len > 0) {
    std::memcpy(body->private_data, param->private_data, body->private_data_len);
  }
}

// What a REQ or REP body tells of rdma_conn_param (the event reports it).
template <typename Body>
rdma_conn_param ParamOf(const Body& body) {
  rdma_conn_param param;
  std::memset(&param, 0, sizeof(param));
  param.qp_num = body.qp_num;
  param.srq = body.srq;
  param.responder_resources = body.responder_resources;
  param.initiator_depth = body.initiator_depth;
  param.flow_control = body.flow_control;
  if constexpr (std::is_same_v<Body, wire::ConnectBody>) param.retry_count = body.retry_count;
  param.rnr_retry_count = body.rnr_retry_count;
  return param;
}

}  // namespace

int HostCmPeer::Dial(ConnectionManager* cm, const sockaddr* dst, host::PortSpace space,
                     std::shared_ptr<HostCmPeer>* peer) {
  auto end = std::make_shared<HostCmPeer>(cm, 0);
  std::shared_ptr<host::Conn> conn;
  const int err = host::Dial(dst, end, &conn, space);
  if (err != 0) return err;
  end->set_conn(std::move(conn));
  *peer = std::move(end);
  return 0;
}

void HostCmPeer::AttachQp(SimQp* qp) {
  AttachRemote(qp, conn());
  set_link(qp->link);
}

void HostCmPeer::EnterRts(SimQp* qp) {
  EstablishRemote(qp, remote_qp_num, remote_pid, we_reach_peer);
  if (peer_reaches_us) SetPeerReachesUs(qp);
}

void HostCmPeer::OrphanQp(SimQp* qp) { RemotePeerGone(qp); }

int HostCmPeer::SendRequest(SimCmId* id, const rdma_conn_param* param) {
  this->id = id;
  const bool sidr = id->id.qp_type == IBV_QPT_UD;  // a UD QP sends no request on this connection
  if (!sidr) AttachQp(to_sim(id->id.qp));
  wire::ConnectBody body;
  std::memset(&body, 0, sizeof(body));
  body.pid = getpid();
  body.probe_addr = host::ProbeAddress();
  CopyAddress(&id->id.route.addr.src_addr, reinterpret_cast<sockaddr*>(&body.src));
  CopyAddress(&id->id.route.addr.dst_addr, reinterpret_cast<sockaddr*>(&body.dst));
  FillFromParam(param, &body);
  wire::Header header = wire::MakeHeader(wire::Type::kConnectRequest);
  if (sidr) header.flags = wire::kFlagSidr;
  Send(header, &body, wire::CmBodyBytes(body));
  return 0;
}

void HostCmPeer::PeerGid(uint8_t gid[16]) { PidGid(remote_pid, gid); }

void HostCmPeer::SendAccept(SimCmId* id, const rdma_conn_param* param) {
  wire::AcceptBody body;
  std::memset(&body, 0, sizeof(body));
  body.pid = getpid();
  body.probe_addr = host::ProbeAddress();
  body.can_reach_you = we_reach_peer ? 1 : 0;
  FillFromParam(param, &body);
  Send(wire::MakeHeader(wire::Type::kAccept), &body, wire::CmBodyBytes(body));
}

void HostCmPeer::SendReject(int status, const void* private_data, uint8_t private_data_len) {
  SendRejectMessage(status, 0, private_data, private_data_len);
}

void HostCmPeer::AbortAccept(rdma_cm_event_type type, int status) {
  if (type == RDMA_CM_EVENT_CONNECT_ERROR) SendRejectMessage(0, wire::kFlagBroken, nullptr, 0);
}

void HostCmPeer::SendRejectMessage(int status, uint16_t flags, const void* private_data,
                                   uint8_t private_data_len) {
  wire::RejectBody body;
  std::memset(&body, 0, sizeof(body));
  body.private_data_len = private_data_len;  // (a uint8_t: what the body holds)
  if (body.private_data_len > 0) {
    std::memcpy(body.private_data, private_data, body.private_data_len);
  }
  wire::Header header = wire::MakeHeader(wire::Type::kReject);
  header.status = status;
  header.flags = flags;
  Send(header, &body, wire::CmBodyBytes(body));
}

void HostCmPeer::SendReady() {
  wire::Header ready = wire::MakeHeader(wire::Type::kReady);
  if (we_reach_peer) ready.flags = wire::kFlagCma;
  Send(ready, nullptr, 0);
}

void HostCmPeer::SendDisconnectRequest() {
  Send(wire::MakeHeader(wire::Type::kDisconnect), nullptr, 0);
}

void HostCmPeer::Break(rdma_cm_event_type type, int status) {
  wire::Header broken = wire::MakeHeader(wire::Type::kDisconnect);
  broken.flags = wire::kFlagBroken;
  broken.status = type == RDMA_CM_EVENT_CONNECT_ERROR ? 1 : 0;
  Send(broken, nullptr, 0);
}

void HostCmPeer::SendDisconnectReply() {
  Send(wire::MakeHeader(wire::Type::kDisconnectReply), nullptr, 0);
}

void HostCmPeer::Close() {
  id = nullptr;
  if (std::shared_ptr<host::Conn> c = conn(); c != nullptr) c->Close();
}

void HostCmPeer::Settle() {
  if (std::shared_ptr<host::Conn> c = conn(); c != nullptr) c->Settle();
}

void HostCmPeer::Send(const wire::Header& header, const void* body, size_t body_len) {
  std::shared_ptr<host::Conn> c = conn();
  if (c == nullptr) return;
  wire::Header with_len = header;
  with_len.body_len = static_cast<uint32_t>(body_len);
  iovec iov{const_cast<void*>(body), body_len};
  c->Send(with_len, &iov, body_len > 0 ? 1 : 0);
}

bool HostCmPeer::OnHeader(const wire::Header& header) {
  if (exchanged_) {
    std::shared_ptr<SimLink> link = Link();
    return link == nullptr || ResponseFits(link, header);
  }
  return header.type >= static_cast<uint16_t>(wire::Type::kConnectRequest) &&
         header.type <= static_cast<uint16_t>(wire::Type::kDisconnectReply);
}

void HostCmPeer::OnDrained() {
  if (std::shared_ptr<SimLink> link = Link(); link != nullptr) ResumeRemoteLink(link);
}

void HostCmPeer::OnMessage(const wire::Header& header, const uint8_t* body) {
  const auto type = static_cast<wire::Type>(header.type);
  if (listener_serial_ != 0 ? type == wire::Type::kConnectRequest
                            : type == wire::Type::kAccept || type == wire::Type::kReject) {
    if (exchanged_) {
      // One connection carries one CM exchange: a second REQ (or REP) on it is a protocol
      // violation, also once the first one's id is gone (it must not become a new request
      // on a connection whose other end thinks it is something else).
      cm_->OnRemoteBroken(shared_from_this());
      return;
    }
    exchanged_ = true;
  }
  if (header.type >= static_cast<uint16_t>(wire::Type::kWrite)) {
    std::shared_ptr<SimLink> link;
    bool had_link = false;
    std::shared_ptr<host::Conn> conn;
    {
      softrpma::MutexLock lock(&mu_);
      link = link_.lock();
      had_link = had_link_;
      conn = conn_;
    }
    if (link != nullptr) {
      HandleRemoteMessage(link, header, body);
    } else if (had_link) {
      // Its QP was destroyed under a living id (rdma_destroy_qp): nothing responds, and
      // the peer's WR times out (IBV_WC_RETRY_EXC_ERR) as on a NIC; the connection stays.
      if (conn != nullptr) AnswerForNoQp(conn.get(), header);
    } else {
      cm_->OnRemoteBroken(shared_from_this());  // data before the connection exists
    }
    return;
  }
  OnCmMessage(header, body);
}

void HostCmPeer::OnClosed() { cm_->OnRemoteClosed(shared_from_this()); }

void HostCmPeer::OnCmMessage(const wire::Header& header, const uint8_t* body) {
  using State = SimCmId::State;
  std::shared_ptr<HostCmPeer> end = shared_from_this();
  ConnectionManager* cm = cm_;
  softrpma::MutexLock lock(&cm->mu_);
  SimCmId* const id = this->id;  // as it was when the message came
  // Who the peer is comes from the kernel (SO_PEERCRED), never from a message.
  std::shared_ptr<host::Conn> peer_conn = conn();
  const pid_t peer_pid = peer_conn != nullptr ? peer_conn->peer_pid() : 0;
  switch (static_cast<wire::Type>(header.type)) {
    case wire::Type::kConnectRequest: {
      wire::ConnectBody request_body;
      wire::ReadCmBody(body, header.body_len, &request_body);
      // A REQ naming another process is a lie (a peer naming our own pid, or a third
      // process's, would make this NIC copy that process's memory for it): it ends the
      // connection.
      const bool lies = request_body.pid != peer_pid;
      if (lies && id == nullptr) wire::ReportPeerMismatch("pid", request_body.pid, peer_pid);
      if (id != nullptr || lies || !wire::ValidateConnectBody(request_body, header.body_len)) {
        // A second REQ, or a malformed one: this connection ends, and the id of the first
        // (a request, or an accepted connection) learns it.
        if (peer_conn != nullptr) peer_conn->Close();
        cm->RemoteEndedLocked(end);
        return;
      }
      const bool sidr = (header.flags & wire::kFlagSidr) != 0;
      SimCmId* listener = cm->FindIdLocked(listener_serial_);
      SimCmId* request = cm->RequestReceivedLocked(
          listener, sidr, reinterpret_cast<sockaddr*>(&request_body.dst),
          reinterpret_cast<sockaddr*>(&request_body.src), ParamOf(request_body),
          request_body.private_data, request_body.private_data_len, end);
      if (request == nullptr) {
        // The listener went away, or listens for the other kind of request (a SIDR REQ at a
        // listener of RC ids or the reverse: no such service there), or no memory: a REJ.
        const bool listens = listener != nullptr && listener->state == State::kListening &&
                             (listener->id.qp_type == IBV_QPT_UD) == sidr;
        SendReject(listens ? kRejectConsumer : kRejectNoListener, nullptr, 0);
        Close();
        return;
      }
      this->id = request;
      remote_qp_num = request_body.qp_num;
      remote_pid = peer_pid;  // the kernel's, which the body's agreed with
      we_reach_peer = host::CanReach(peer_pid, request_body.probe_addr);
      return;
    }
    case wire::Type::kAccept: {
      wire::AcceptBody accept;
      wire::ReadCmBody(body, header.body_len, &accept);
      if (id == nullptr || id->state != State::kConnecting) return;
      const bool lies = accept.pid != peer_pid;  // the kernel's word (see kConnectRequest)
      if (lies) wire::ReportPeerMismatch("pid", accept.pid, peer_pid);
      // (A UD id may connect without a QP: a SIDR REQ names none.)
      if (lies || !wire::ValidateAcceptBody(accept, header.body_len) ||
          (id->id.qp == nullptr && id->id.qp_type != IBV_QPT_UD)) {
        cm->ExchangeEndedLocked(id, State::kUnreachable, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT);
        return;
      }
      remote_qp_num = accept.qp_num;
      remote_pid = peer_pid;
      peer_reaches_us = accept.can_reach_you != 0;
      we_reach_peer = host::CanReach(peer_pid, accept.probe_addr);
      cm->AcceptReceivedLocked(id, ParamOf(accept), accept.private_data,
                               accept.private_data_len);
      return;
    }
    case wire::Type::kReject: {
      wire::RejectBody reject;
      wire::ReadCmBody(body, header.body_len, &reject);
      if (id == nullptr) return;
      if ((header.flags & wire::kFlagBroken) != 0) {
        cm->AcceptAbortedLocked(id, RDMA_CM_EVENT_CONNECT_ERROR, -ECONNRESET);
        return;
      }
      if (!wire::ValidateRejectBody(reject, header.body_len)) reject.private_data_len = 0;
      cm->RejectReceivedLocked(id, header.status > 0 ? header.status : kRejectConsumer,
                           reject.private_data, reject.private_data_len);
      return;
    }
    case wire::Type::kReady:
      if (id != nullptr) cm->ReadyReceivedLocked(id, (header.flags & wire::kFlagCma) != 0);
      return;
    case wire::Type::kDisconnect:  // the DREQ
      if (id == nullptr) return;
      if ((header.flags & wire::kFlagBroken) != 0) {  // a fault broke the connection there
        const bool lost = header.status != 0;
        cm->BrokenLocked(id, lost ? RDMA_CM_EVENT_CONNECT_ERROR : RDMA_CM_EVENT_DISCONNECTED,
                         lost ? -ECONNRESET : 0);
        return;
      }
      cm->DisconnectRequestReceivedLocked(id);
      return;
    case wire::Type::kDisconnectReply:  // the DREP (its sender closes the connection next)
      if (id != nullptr) cm->DrepReceivedLocked(id);
      return;
    default:
      return;
  }
}

std::shared_ptr<SimLink> HostCmPeer::Link() {
  softrpma::MutexLock lock(&mu_);
  return link_.lock();
}

std::shared_ptr<host::Conn> HostCmPeer::conn() {
  softrpma::MutexLock lock(&mu_);
  return conn_;
}

void HostCmPeer::set_conn(std::shared_ptr<host::Conn> conn) {
  softrpma::MutexLock lock(&mu_);
  conn_ = std::move(conn);
}

void HostCmPeer::set_link(const std::shared_ptr<SimLink>& link) {
  softrpma::MutexLock lock(&mu_);
  link_ = link;
  had_link_ = had_link_ || link != nullptr;
}

}  // namespace softrpma::sim
