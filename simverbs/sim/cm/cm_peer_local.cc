// LocalCmPeer (cm_peer.h): the other end is an id of this process; each message is the call of
// its handler on that id.

#include <cerrno>

#include "simverbs/sim/cm/cm_peer.h"
#include "simverbs/sim/nic/qp.h"

namespace softrpma::sim {

std::shared_ptr<SimLink> LocalCmPeer::LinkToJoin() {
  if (other_ == nullptr || other_->id.qp == nullptr) return nullptr;
  return to_sim(other_->id.qp)->link;
}

void LocalCmPeer::EnterRts(SimQp* qp) { sim::EnterRts(qp); }

int LocalCmPeer::SendRequest(SimCmId* id, const rdma_conn_param* param) {
  auto back = std::make_shared<LocalCmPeer>(cm_, nullptr);
  back->other_ = id;
  back->twin_ = this;
  // The request's local address is the one the requester asked for; its peer the requester.
  SimCmId* request = cm_->RequestReceivedLocked(
      listener_, /*sidr=*/id->id.qp_type == IBV_QPT_UD, &id->id.route.addr.dst_addr, &id->id.route.addr.src_addr, *param,
      param->private_data, param->private_data_len, back);
  if (request == nullptr) return ENOMEM;
  other_ = request;
  twin_ = back.get();
  return 0;
}

void LocalCmPeer::WithdrawRequest() {
  if (SimCmId* request = other_; request != nullptr) cm_->RequestWithdrawnLocked(request);
}

void LocalCmPeer::SendAccept(SimCmId* id, const rdma_conn_param* param) {
  if (other_ != nullptr) {
    cm_->AcceptReceivedLocked(other_, *param, param->private_data, param->private_data_len);
  }
}

void LocalCmPeer::SendReject(int status, const void* private_data, uint8_t private_data_len) {
  if (other_ != nullptr) cm_->RejectReceivedLocked(other_, status, private_data, private_data_len);
}

void LocalCmPeer::AbortAccept(rdma_cm_event_type type, int status) {
  if (other_ != nullptr) cm_->AcceptAbortedLocked(other_, type, status);
}

void LocalCmPeer::SendReady() {
  if (other_ != nullptr) cm_->ReadyReceivedLocked(other_, /*peer_reaches_us=*/false);
}

void LocalCmPeer::SendDisconnectRequest() {
  if (other_ != nullptr) cm_->DisconnectRequestReceivedLocked(other_);
}

void LocalCmPeer::SendDisconnectReply() {
  if (other_ != nullptr) cm_->DrepReceivedLocked(other_);
}

void LocalCmPeer::Break(rdma_cm_event_type type, int status) {
  if (other_ != nullptr) cm_->BrokenLocked(other_, type, status);
}

void LocalCmPeer::Close() {
  if (twin_ != nullptr) {
    twin_->other_ = nullptr;
    twin_->twin_ = nullptr;
  }
  other_ = nullptr;
  twin_ = nullptr;
}

bool LocalCmPeer::CanAccept(const SimCmId* id) {
  if (other_ == nullptr || other_->state != SimCmId::State::kConnecting) return false;
  if (id->id.qp_type == IBV_QPT_UD) return true;  // a SIDR REP: no QP joins another's link
  return other_->id.qp != nullptr && to_sim(other_->id.qp)->link == to_sim(id->id.qp)->link;
}

void LocalCmPeer::PeerGid(uint8_t gid[16]) { ProcessGid(gid); }

}  // namespace softrpma::sim
