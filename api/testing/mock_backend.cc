#include "api/testing/mock_backend.h"

#include <arpa/inet.h>

namespace softrpma::testing {

using ::testing::_;
using ::testing::Invoke;
using ::testing::Return;

FakeProvider::FakeProvider(MockBackend* backend) {
  device_.transport_type = IBV_TRANSPORT_IB;
  context_.device = &device_;
  RegisterContext(&context_, backend);
  src_addr_.sin_family = AF_INET;
  dst_addr_.sin_family = AF_INET;
  ON_CALL(*backend, Name()).WillByDefault(Return("mock"));
  ON_CALL(*backend, IbvQueryDeviceEx(_, _))
      .WillByDefault(Invoke([this](ibv_context*, ibv_device_attr_ex* attr) {
        attr->device_cap_flags_ex = device_cap_flags_ex_;
        return 0;
      }));
  ON_CALL(*backend, IbvAllocPd(_, _)).WillByDefault(Invoke([this](ibv_context* ctx, ibv_pd** pd) {
    pds_.emplace_back();
    pds_.back().context = ctx;
    *pd = &pds_.back();
    return 0;
  }));
  ON_CALL(*backend, IbvDeallocPd(_)).WillByDefault(Return(0));
  ON_CALL(*backend, IbvRegMr(_, _, _, _, _))
      .WillByDefault(Invoke([this](ibv_pd* pd, void* addr, size_t length, int, ibv_mr** mr) {
        mrs_.emplace_back();
        ibv_mr& made = mrs_.back();
        made.pd = pd;
        made.addr = addr;
        made.length = length;
        made.lkey = 0x1000 + static_cast<uint32_t>(mrs_.size());
        made.rkey = 0x2000 + static_cast<uint32_t>(mrs_.size());
        *mr = &made;
        return 0;
      }));
  ON_CALL(*backend, IbvDeregMr(_)).WillByDefault(Return(0));
  ON_CALL(*backend, IbvAdviseMr(_, _, _, _, _)).WillByDefault(Return(0));
  ON_CALL(*backend, IbvCreateCompChannel(_, _))
      .WillByDefault(Invoke([this](ibv_context* ctx, ibv_comp_channel** channel) {
        comp_channels_.emplace_back();
        comp_channels_.back().context = ctx;
        comp_channels_.back().fd = next_fd_++;
        *channel = &comp_channels_.back();
        return 0;
      }));
  ON_CALL(*backend, IbvDestroyCompChannel(_)).WillByDefault(Return(0));
  ON_CALL(*backend, IbvCreateCq(_, _, _, _, _, _))
      .WillByDefault(Invoke([this](ibv_context* ctx, int cqe, void* cq_context,
                                   ibv_comp_channel* channel, int, ibv_cq** cq) {
        cqs_.emplace_back();
        ibv_cq& made = cqs_.back();
        made.context = ctx;
        made.channel = channel;
        made.cq_context = cq_context;
        made.cqe = cqe;
        *cq = &made;
        return 0;
      }));
  ON_CALL(*backend, IbvDestroyCq(_)).WillByDefault(Return(0));
  ON_CALL(*backend, IbvReqNotifyCq(_, _)).WillByDefault(Return(0));
  ON_CALL(*backend, IbvGetCqEvent(_, _, _)).WillByDefault(Return(EAGAIN));
  ON_CALL(*backend, IbvPollCq(_, _, _, _))
      .WillByDefault(Invoke([](ibv_cq*, int, ibv_wc*, int* num_polled) {
        *num_polled = 0;
        return 0;
      }));
  ON_CALL(*backend, IbvCreateSrq(_, _, _))
      .WillByDefault(Invoke([this](ibv_pd* pd, ibv_srq_init_attr*, ibv_srq** srq) {
        srqs_.emplace_back();
        srqs_.back().pd = pd;
        *srq = &srqs_.back();
        return 0;
      }));
  ON_CALL(*backend, IbvDestroySrq(_)).WillByDefault(Return(0));
  ON_CALL(*backend, IbvPostSrqRecv(_, _, _)).WillByDefault(Return(0));
  ON_CALL(*backend, IbvPostSend(_, _, _)).WillByDefault(Return(0));
  ON_CALL(*backend, IbvPostRecv(_, _, _)).WillByDefault(Return(0));
  ON_CALL(*backend, IbvQpToQpEx(_, _)).WillByDefault(Invoke([](ibv_qp* qp, ibv_qp_ex** qpx) {
    *qpx = reinterpret_cast<ibv_qp_ex*>(qp);  // qp is the qp_base of one of qps_
    return 0;
  }));
  ON_CALL(*backend, IbvWrComplete(_)).WillByDefault(Return(0));
  ON_CALL(*backend, RdmaGetaddrinfo(_, _, _, _))
      .WillByDefault(Invoke([this](const char*, const char*, const rdma_addrinfo* hints,
                                   rdma_addrinfo** res) {
        addrinfos_.emplace_back();
        rdma_addrinfo& made = addrinfos_.back();
        made.ai_flags = hints != nullptr ? hints->ai_flags : 0;
        made.ai_src_addr = reinterpret_cast<sockaddr*>(&src_addr_);
        made.ai_dst_addr = reinterpret_cast<sockaddr*>(&dst_addr_);
        *res = &made;
        return 0;
      }));
  ON_CALL(*backend, RdmaCreateEventChannel(_))
      .WillByDefault(Invoke([this](rdma_event_channel** channel) {
        event_channels_.emplace_back();
        event_channels_.back().fd = next_fd_++;
        *channel = &event_channels_.back();
        return 0;
      }));
  ON_CALL(*backend, RdmaCreateId(_, _, _, _))
      .WillByDefault(Invoke(
          [this](rdma_event_channel* channel, rdma_cm_id** id, void* context, rdma_port_space ps) {
            ids_.emplace_back();
            rdma_cm_id& made = ids_.back();
            made.channel = channel;
            made.context = context;
            made.ps = ps;
            *id = &made;
            return 0;
          }));
  ON_CALL(*backend, RdmaDestroyId(_)).WillByDefault(Return(0));
  ON_CALL(*backend, RdmaMigrateId(_, _))
      .WillByDefault(Invoke([](rdma_cm_id* id, rdma_event_channel* channel) {
        id->channel = channel;
        return 0;
      }));
  ON_CALL(*backend, RdmaBindAddr(_, _)).WillByDefault(Invoke([this](rdma_cm_id* id, sockaddr*) {
    id->verbs = &context_;
    return 0;
  }));
  ON_CALL(*backend, RdmaResolveAddr(_, _, _, _))
      .WillByDefault(Invoke([this](rdma_cm_id* id, sockaddr*, sockaddr*, int) {
        id->verbs = &context_;
        return 0;
      }));
  ON_CALL(*backend, RdmaResolveRoute(_, _)).WillByDefault(Return(0));
  ON_CALL(*backend, RdmaListen(_, _)).WillByDefault(Return(0));
  ON_CALL(*backend, RdmaCreateQpEx(_, _))
      .WillByDefault(Invoke([this](rdma_cm_id* id, ibv_qp_init_attr_ex* attr) {
        qps_.emplace_back();
        ibv_qp& made = qps_.back().qp_base;
        made.context = id->verbs;
        made.pd = attr->pd;
        made.send_cq = attr->send_cq;
        made.recv_cq = attr->recv_cq;
        made.srq = attr->srq;
        made.qp_num = 0x40 + static_cast<uint32_t>(qps_.size());
        made.qp_type = attr->qp_type;
        id->qp = &made;
        return 0;
      }));
  ON_CALL(*backend, RdmaDestroyQp(_)).WillByDefault(Invoke([](rdma_cm_id* id) {
    id->qp = nullptr;
  }));
  ON_CALL(*backend, RdmaConnect(_, _)).WillByDefault(Return(0));
  ON_CALL(*backend, RdmaAccept(_, _)).WillByDefault(Return(0));
  ON_CALL(*backend, RdmaReject(_, _, _)).WillByDefault(Return(0));
  ON_CALL(*backend, RdmaDisconnect(_)).WillByDefault(Return(0));
  ON_CALL(*backend, RdmaGetCmEvent(_, _)).WillByDefault(Return(EAGAIN));
  ON_CALL(*backend, RdmaAckCmEvent(_)).WillByDefault(Return(0));
}

rdma_cm_event* FakeProvider::Event(rdma_cm_event_type type, rdma_cm_id* id,
                                   const std::vector<uint8_t>& pdata) {
  events_.emplace_back();
  rdma_cm_event& made = events_.back();
  made.event = type;
  made.id = id;
  if (!pdata.empty()) {
    event_data_.push_back(pdata);
    made.param.conn.private_data = event_data_.back().data();
    made.param.conn.private_data_len = static_cast<uint8_t>(pdata.size());
  }
  return &made;
}

}  // namespace softrpma::testing
