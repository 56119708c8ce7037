// mock_backend.h: a GoogleMock Backend for the api/ unit tests, and FakeProvider, which gives
// every mocked call a default that succeeds and hands out fake verbs objects, so a test only
// says what it wants to fail or check.
//
// Typical use:
//   testing::NiceMock<MockBackend> backend;
//   FakeProvider fake(&backend);          // defaults: everything succeeds
//   ibv_context* ctx = fake.Context();    // registered: rpma_peer_new(ctx) reaches `backend`
//   EXPECT_CALL(backend, IbvAllocPd(_, _)).WillOnce(Return(ENOMEM));
//
// Not thread-safe; testonly.

#ifndef SOFTRPMA_API_TESTING_MOCK_BACKEND_H_
#define SOFTRPMA_API_TESTING_MOCK_BACKEND_H_

#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <rdma/rdma_cma.h>

#include <deque>
#include <vector>

#include "gmock/gmock.h"
#include "simverbs/backend.h"
#include "simverbs/backend_registry.h"

namespace softrpma::testing {

// Not final: testing::NiceMock derives from it.
class MockBackend : public Backend {
 public:
  MOCK_METHOD(const char*, Name, (), (const, override));
  MOCK_METHOD(int, IbvQueryDeviceEx, (ibv_context*, ibv_device_attr_ex*), (override));
  MOCK_METHOD(int, IbvAllocPd, (ibv_context*, ibv_pd**), (override));
  MOCK_METHOD(int, IbvDeallocPd, (ibv_pd*), (override));
  MOCK_METHOD(int, IbvRegMr, (ibv_pd*, void*, size_t, int, ibv_mr**), (override));
  MOCK_METHOD(int, IbvDeregMr, (ibv_mr*), (override));
  MOCK_METHOD(int, IbvAdviseMr,
              (ibv_pd*, ibv_advise_mr_advice, uint32_t, ibv_sge*, uint32_t), (override));
  MOCK_METHOD(int, IbvCreateCompChannel, (ibv_context*, ibv_comp_channel**), (override));
  MOCK_METHOD(int, IbvDestroyCompChannel, (ibv_comp_channel*), (override));
  MOCK_METHOD(int, IbvCreateCq, (ibv_context*, int, void*, ibv_comp_channel*, int, ibv_cq**),
              (override));
  MOCK_METHOD(int, IbvCreateCqEx, (ibv_context*, ibv_cq_init_attr_ex*, ibv_cq_ex**),
              (override));
  MOCK_METHOD(int, IbvDestroyCq, (ibv_cq*), (override));
  MOCK_METHOD(int, IbvReqNotifyCq, (ibv_cq*, int), (override));
  MOCK_METHOD(int, IbvGetCqEvent, (ibv_comp_channel*, ibv_cq**, void**), (override));
  MOCK_METHOD(void, IbvAckCqEvents, (ibv_cq*, unsigned int), (override));
  MOCK_METHOD(int, IbvGetAsyncEvent, (ibv_context*, ibv_async_event*), (override));
  MOCK_METHOD(void, IbvAckAsyncEvent, (ibv_async_event*), (override));
  MOCK_METHOD(int, IbvPollCq, (ibv_cq*, int, ibv_wc*, int*), (override));
  MOCK_METHOD(int, IbvCreateSrq, (ibv_pd*, ibv_srq_init_attr*, ibv_srq**), (override));
  MOCK_METHOD(int, IbvDestroySrq, (ibv_srq*), (override));
  MOCK_METHOD(int, IbvPostSrqRecv, (ibv_srq*, ibv_recv_wr*, ibv_recv_wr**), (override));
  MOCK_METHOD(int, IbvCreateQp, (ibv_pd*, ibv_qp_init_attr*, ibv_qp**), (override));
  MOCK_METHOD(int, IbvCreateQpEx, (ibv_context*, ibv_qp_init_attr_ex*, ibv_qp**), (override));
  MOCK_METHOD(int, IbvModifyQp, (ibv_qp*, ibv_qp_attr*, int), (override));
  MOCK_METHOD(int, IbvQueryQp, (ibv_qp*, ibv_qp_attr*, int, ibv_qp_init_attr*), (override));
  MOCK_METHOD(int, IbvDestroyQp, (ibv_qp*), (override));
  MOCK_METHOD(int, IbvCreateAh, (ibv_pd*, ibv_ah_attr*, ibv_ah**), (override));
  MOCK_METHOD(int, IbvDestroyAh, (ibv_ah*), (override));
  MOCK_METHOD(int, IbvPostSend, (ibv_qp*, ibv_send_wr*, ibv_send_wr**), (override));
  MOCK_METHOD(int, IbvPostRecv, (ibv_qp*, ibv_recv_wr*, ibv_recv_wr**), (override));
  MOCK_METHOD(int, IbvQpToQpEx, (ibv_qp*, ibv_qp_ex**), (override));
  MOCK_METHOD(void, IbvWrStart, (ibv_qp_ex*), (override));
  MOCK_METHOD(void, IbvWrAtomicWrite, (ibv_qp_ex*, uint32_t, uint64_t, const void*), (override));
  MOCK_METHOD(int, IbvWrComplete, (ibv_qp_ex*), (override));
  MOCK_METHOD(int, RdmaGetaddrinfo,
              (const char*, const char*, const rdma_addrinfo*, rdma_addrinfo**), (override));
  MOCK_METHOD(void, RdmaFreeaddrinfo, (rdma_addrinfo*), (override));
  MOCK_METHOD(int, RdmaCreateEventChannel, (rdma_event_channel**), (override));
  MOCK_METHOD(void, RdmaDestroyEventChannel, (rdma_event_channel*), (override));
  MOCK_METHOD(int, RdmaCreateId, (rdma_event_channel*, rdma_cm_id**, void*, rdma_port_space),
              (override));
  MOCK_METHOD(int, RdmaDestroyId, (rdma_cm_id*), (override));
  MOCK_METHOD(int, RdmaMigrateId, (rdma_cm_id*, rdma_event_channel*), (override));
  MOCK_METHOD(int, RdmaBindAddr, (rdma_cm_id*, sockaddr*), (override));
  MOCK_METHOD(int, RdmaResolveAddr, (rdma_cm_id*, sockaddr*, sockaddr*, int), (override));
  MOCK_METHOD(int, RdmaResolveRoute, (rdma_cm_id*, int), (override));
  MOCK_METHOD(int, RdmaListen, (rdma_cm_id*, int), (override));
  MOCK_METHOD(int, RdmaCreateQpEx, (rdma_cm_id*, ibv_qp_init_attr_ex*), (override));
  MOCK_METHOD(void, RdmaDestroyQp, (rdma_cm_id*), (override));
  MOCK_METHOD(int, RdmaConnect, (rdma_cm_id*, rdma_conn_param*), (override));
  MOCK_METHOD(int, RdmaAccept, (rdma_cm_id*, rdma_conn_param*), (override));
  MOCK_METHOD(int, RdmaReject, (rdma_cm_id*, const void*, uint8_t), (override));
  MOCK_METHOD(int, RdmaDisconnect, (rdma_cm_id*), (override));
  MOCK_METHOD(int, RdmaGetCmEvent, (rdma_event_channel*, rdma_cm_event**), (override));
  MOCK_METHOD(int, RdmaAckCmEvent, (rdma_cm_event*), (override));
};

// Default actions for every MockBackend method: each create succeeds with a new fake object
// (kept here until the FakeProvider dies), each destroy / post / notify returns 0, polls find
// nothing, and event getters report EAGAIN. Objects are plain verbs structs, zero-filled except
// for the fields the api layer reads (context, fd, lkey/rkey, qp_num, id->verbs, id->qp).
class FakeProvider final {
 public:
  explicit FakeProvider(MockBackend* backend);
  FakeProvider(const FakeProvider&) = delete;
  FakeProvider& operator=(const FakeProvider&) = delete;

  // The device context, registered with softrpma::RegisterContext for the mock backend. Its
  // device's transport is IBV_TRANSPORT_IB unless SetTransport says otherwise.
  ibv_context* Context() { return &context_; }
  void SetTransport(ibv_transport_type transport) { device_.transport_type = transport; }
  // The device_cap_flags_ex IbvQueryDeviceEx reports (default 0: e.g. no native atomic write).
  void SetDeviceCapFlagsEx(uint64_t flags) { device_cap_flags_ex_ = flags; }

  // An rdma_cm event of `type` for `id` carrying `pdata` (copied), to be returned from a mocked
  // RdmaGetCmEvent. Lives until the FakeProvider dies.
  rdma_cm_event* Event(rdma_cm_event_type type, rdma_cm_id* id,
                       const std::vector<uint8_t>& pdata = {});

  // The last objects handed out, for tests that check what the api layer passed on.
  ibv_cq* last_cq() const { return cqs_.empty() ? nullptr : const_cast<ibv_cq*>(&cqs_.back()); }
  rdma_cm_id* last_id() const {
    return ids_.empty() ? nullptr : const_cast<rdma_cm_id*>(&ids_.back());
  }
  ibv_comp_channel* last_comp_channel() const {
    return comp_channels_.empty() ? nullptr
                                  : const_cast<ibv_comp_channel*>(&comp_channels_.back());
  }
  int comp_channels_made() const { return static_cast<int>(comp_channels_.size()); }
  int cqs_made() const { return static_cast<int>(cqs_.size()); }

 private:
  ibv_device device_{};
  ibv_context context_{};
  sockaddr_in src_addr_{};
  sockaddr_in dst_addr_{};
  std::deque<ibv_pd> pds_;
  std::deque<ibv_mr> mrs_;
  std::deque<ibv_comp_channel> comp_channels_;
  std::deque<ibv_cq> cqs_;
  std::deque<ibv_srq> srqs_;
  std::deque<ibv_qp_ex> qps_;  // qp_base is the ibv_qp; IbvQpToQpEx gives the ibv_qp_ex
  std::deque<rdma_addrinfo> addrinfos_;
  std::deque<rdma_event_channel> event_channels_;
  std::deque<rdma_cm_id> ids_;
  std::deque<rdma_cm_event> events_;
  std::deque<std::vector<uint8_t>> event_data_;
  int next_fd_ = 100;
  uint64_t device_cap_flags_ex_ = 0;
};

}  // namespace softrpma::testing

#endif  // SOFTRPMA_API_TESTING_MOCK_BACKEND_H_
