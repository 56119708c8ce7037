// The fault engine: the spec parser (table-driven: good specs and every malformed form with its
// message), the conditions nth / after / every, fail=none, unknown_cq, the malloc point, the
// log line, counters and the list of points.

#include "simverbs/sim/fault.h"

#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "simverbs/alloc.h"
#include "simverbs/backend.h"
#include "simverbs/sim/sim_control.h"
#include "simverbs/sim/test_util.h"

namespace softrpma::sim::testing {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// ---- Parser ---------------------------------------------------------------------------------

struct GoodSpec {
  const char* spec;
  const char* canonical;
};

class GoodSpecTest : public ::testing::TestWithParam<GoodSpec> {};

TEST_P(GoodSpecTest, ParsesToCanonicalForm) {
  absl::Status status = SetFaultPlan(GetParam().spec);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(CurrentFaultPlan(), GetParam().canonical);
  ClearFaultPlan();
}

INSTANTIATE_TEST_SUITE_P(
    FaultSpec, GoodSpecTest,
    ::testing::Values(
        GoodSpec{"ibv_get_cq_event:fail=EIO:nth=1; ibv_req_notify_cq:fail=ENOMEM:nth=2",
                 "ibv_get_cq_event:fail=EIO:nth=1; ibv_req_notify_cq:fail=ENOMEM:nth=2"},
        GoodSpec{"ibv_get_cq_event:unknown_cq:nth=1", "ibv_get_cq_event:unknown_cq:nth=1"},
        GoodSpec{"  ibv_post_send : fail = 5 : every = 3  ", "ibv_post_send:fail=EIO:every=3"},
        GoodSpec{"rdma_connect:fail=none", "rdma_connect:fail=none"},
        GoodSpec{"malloc:fail=ENOMEM:after=2:every=2", "malloc:fail=ENOMEM:after=2:every=2"},
        GoodSpec{"ibv_poll_cq:fail=EWOULDBLOCK;", "ibv_poll_cq:fail=EAGAIN"},
        GoodSpec{"rdma_resolve_route:fail=4000", "rdma_resolve_route:fail=4000"},
        GoodSpec{"  ", ""}));

struct BadSpec {
  const char* spec;
  const char* message;  // the whole message, or its start when it ends in "..."
};

class BadSpecTest : public ::testing::TestWithParam<BadSpec> {};

TEST_P(BadSpecTest, IsInvalidArgumentNamingRuleColumnAndPart) {
  SetFaultPlan("rdma_listen:fail=EIO").IgnoreError();  // must survive a bad spec

  absl::Status status = SetFaultPlan(GetParam().spec);

  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  std::string expected = GetParam().message;
  if (expected.size() > 3 && expected.substr(expected.size() - 3) == "...") {
    EXPECT_THAT(std::string(status.message()), StartsWith(expected.substr(0, expected.size() - 3)));
  } else {
    EXPECT_EQ(status.message(), expected);
  }
  EXPECT_EQ(CurrentFaultPlan(), "rdma_listen:fail=EIO");
  ClearFaultPlan();
}

INSTANTIATE_TEST_SUITE_P(
    FaultSpec, BadSpecTest,
    ::testing::Values(
        BadSpec{"ibv_foo:fail=EIO",
                "fault spec rule 1, column 1: unknown fault point \"ibv_foo\"; known points: "
                "ibv_query_device_ex, ibv_alloc_pd, ..."},
        BadSpec{"ibv_poll_cq:fail=EIO; ibv_post_send:explode",
                "fault spec rule 2, column 37: unknown action \"explode\"; expected "
                "fail=<errno> or unknown_cq"},
        BadSpec{"ibv_post_send:unknown_cq",
                "fault spec rule 1, column 15: action unknown_cq is valid only for "
                "ibv_get_cq_event, not for ibv_post_send"},
        BadSpec{"ibv_ack_cq_events:fail=EIO",
                "fault spec rule 1, column 19: action fail is not valid for ibv_ack_cq_events: "
                "that call returns void and cannot fail"},
        BadSpec{"ibv_post_send:fail=EFOO",
                "fault spec rule 1, column 20: unknown errno name \"EFOO\" in \"fail=EFOO\""},
        BadSpec{"ibv_post_send:fail=0",
                "fault spec rule 1, column 20: bad errno number \"0\" (expected 1..4095)"},
        BadSpec{"ibv_post_send:fail=",
                "fault spec rule 1, column 20: fail needs a value: an errno name (EIO), a "
                "number (5) or none"},
        BadSpec{"ibv_post_send:fail=EIO:nth=x",
                "fault spec rule 1, column 28: bad number \"x\" for nth (expected an integer "
                ">= 1)"},
        BadSpec{"ibv_post_send:fail=EIO:nth=0",
                "fault spec rule 1, column 28: bad number \"0\" for nth (expected an integer "
                ">= 1)"},
        BadSpec{"ibv_post_send:fail=EIO:every=0",
                "fault spec rule 1, column 30: bad number \"0\" for every (expected an integer "
                ">= 1)"},
        BadSpec{"ibv_post_send:fail=EIO:after=-1",
                "fault spec rule 1, column 30: bad number \"-1\" for after (expected an integer "
                ">= 0)"},
        BadSpec{"ibv_post_send:fail=EIO:nth=99999999999999999999999",
                "fault spec rule 1, column 28: bad number \"99999999999999999999999\" for nth "
                "(expected an integer >= 1)"},
        BadSpec{"ibv_post_send:fail=EIO:nth=1:nth=2",
                "fault spec rule 1, column 30: duplicate condition \"nth\""},
        BadSpec{"ibv_post_send:fail=EIO:sometimes=2",
                "fault spec rule 1, column 24: unknown condition \"sometimes\"; expected nth=N, "
                "after=N or every=K"},
        BadSpec{"ibv_post_send:fail=EIO:",
                "fault spec rule 1, column 24: empty condition (\"::\" or a trailing ':')"},
        BadSpec{"ibv_post_send:fail=EIO;;ibv_poll_cq:fail=EIO",
                "fault spec rule 2, column 24: empty rule (two ';' in a row, or a leading ';')"},
        BadSpec{";ibv_post_send:fail=EIO",
                "fault spec rule 1, column 1: empty rule (two ';' in a row, or a leading ';')"},
        BadSpec{"ibv_post_send",
                "fault spec rule 1, column 14: fault point \"ibv_post_send\" has no action; "
                "expected point:action[:condition...]"},
        BadSpec{"ibv_post_send::nth=1", "fault spec rule 1, column 15: empty action"},
        BadSpec{":fail=EIO", "fault spec rule 1, column 1: missing fault point name"}));

TEST(FaultPointsTest, ListedNamedAfterTheCalls) {
  std::vector<std::string> points = ListFaultPoints();

  EXPECT_EQ(points.size(), static_cast<size_t>(kNumFaultPoints));
  EXPECT_THAT(points, Contains("ibv_get_cq_event"));
  EXPECT_THAT(points, Contains("ibv_req_notify_cq"));
  EXPECT_THAT(points, Contains("rdma_resolve_route"));
  EXPECT_THAT(points, Contains("ibv_post_send"));
  EXPECT_THAT(points, Contains("malloc"));
  for (const std::string& name : points) {
    std::optional<FaultPoint> point = FaultPointByName(name);
    ASSERT_TRUE(point.has_value()) << name;
    EXPECT_EQ(FaultPointName(*point), name);
  }
}

TEST(FaultConditionTest, Matches) {
  FaultCondition nth{2, std::nullopt, std::nullopt};
  EXPECT_FALSE(nth.Matches(1));
  EXPECT_TRUE(nth.Matches(2));
  EXPECT_FALSE(nth.Matches(3));
  FaultCondition after_every{std::nullopt, 1, 2};
  EXPECT_FALSE(after_every.Matches(1));
  EXPECT_TRUE(after_every.Matches(2));
  EXPECT_FALSE(after_every.Matches(3));
  EXPECT_TRUE(after_every.Matches(4));
}

// ---- Through the backend --------------------------------------------------------------------

class FaultTest : public ::testing::Test {
 protected:
  void TearDown() override { ClearFaultPlan(); }

  // The results of `n` calls of ibv_query_device_ex.
  std::vector<int> QueryResults(int n) {
    std::vector<int> results;
    ibv_device_attr_ex attr;
    for (int i = 0; i < n; ++i) results.push_back(backend_->IbvQueryDeviceEx(ctx_, &attr));
    return results;
  }

  Backend* backend_ = SimBackend();
  ibv_context* ctx_ = SimContext();
};

TEST_F(FaultTest, Nth_OnlyThatHitFails) {
  ASSERT_TRUE(SetFaultPlan("ibv_query_device_ex:fail=EIO:nth=2").ok());

  EXPECT_EQ(QueryResults(4), (std::vector<int>{0, EIO, 0, 0}));
}

TEST_F(FaultTest, After_EveryHitAfterTheFirstN) {
  ASSERT_TRUE(SetFaultPlan("ibv_query_device_ex:fail=ENOMEM:after=2").ok());

  EXPECT_EQ(QueryResults(4), (std::vector<int>{0, 0, ENOMEM, ENOMEM}));
}

TEST_F(FaultTest, Every_EveryKthHit) {
  ASSERT_TRUE(SetFaultPlan("ibv_query_device_ex:fail=EAGAIN:every=3").ok());

  EXPECT_EQ(QueryResults(6), (std::vector<int>{0, 0, EAGAIN, 0, 0, EAGAIN}));
}

TEST_F(FaultTest, NoCondition_EveryHit_FirstMatchingRuleWins) {
  ASSERT_TRUE(
      SetFaultPlan("ibv_query_device_ex:fail=EIO:nth=1; ibv_query_device_ex:fail=EBUSY").ok());

  EXPECT_EQ(QueryResults(3), (std::vector<int>{EIO, EBUSY, EBUSY}));
}

TEST_F(FaultTest, FailNone_IsKNoErrno) {
  ASSERT_TRUE(SetFaultPlan("ibv_query_device_ex:fail=none").ok());

  EXPECT_EQ(QueryResults(1), (std::vector<int>{kNoErrno}));
}

TEST_F(FaultTest, Injection_LoggedAndCounted) {
  ASSERT_TRUE(SetFaultPlan("ibv_query_device_ex:fail=EIO:nth=2").ok());
  ::testing::internal::CaptureStderr();

  QueryResults(3);

  EXPECT_EQ(::testing::internal::GetCapturedStderr(),
            "softrpma-sim: fault injected: ibv_query_device_ex:fail=EIO (hit 2)\n");
  EXPECT_EQ(*FaultHitCount("ibv_query_device_ex"), 3u);
  EXPECT_EQ(*FaultInjectionCount("ibv_query_device_ex"), 1u);
  EXPECT_EQ(*FaultHitCount("ibv_alloc_pd"), 0u);
  EXPECT_EQ(FaultHitCount("ibv_nope").status().code(), absl::StatusCode::kNotFound);
  ResetFaultCounters();
  EXPECT_EQ(*FaultHitCount("ibv_query_device_ex"), 0u);
}

TEST_F(FaultTest, NoPlan_NothingCounted) {
  ClearFaultPlan();

  QueryResults(2);

  EXPECT_EQ(*FaultHitCount("ibv_query_device_ex"), 0u);
}

TEST_F(FaultTest, PostSendFault_SetsBadWr_PostsNothing) {
  TestConnection conn(backend_);
  ASSERT_TRUE(conn.Connect(ConnectionOptions()).ok());
  ASSERT_TRUE(SetFaultPlan("ibv_post_send:fail=ENOMEM:nth=1").ok());
  ibv_send_wr wr{};
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;

  EXPECT_EQ(backend_->IbvPostSend(conn.active.qp(), &wr, &bad), ENOMEM);

  EXPECT_EQ(bad, &wr);
  EXPECT_TRUE(PollAll(backend_, conn.active.send_cq).empty());
  EXPECT_EQ(backend_->IbvPostSend(conn.active.qp(), &wr, &bad), 0);  // zero-length write
  EXPECT_EQ(PollAll(backend_, conn.active.send_cq).size(), 1u);
}

TEST_F(FaultTest, GetCqEventFail_EventStaysQueued) {
  TestConnection conn(backend_);
  ASSERT_TRUE(conn.Connect(ConnectionOptions()).ok());
  ASSERT_EQ(backend_->IbvReqNotifyCq(conn.active.send_cq, 0), 0);
  ibv_send_wr wr{};
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(backend_->IbvPostSend(conn.active.qp(), &wr, &bad), 0);
  ASSERT_TRUE(SetFaultPlan("ibv_get_cq_event:fail=EIO:nth=1").ok());
  ibv_cq* cq = nullptr;
  void* context = nullptr;

  EXPECT_EQ(backend_->IbvGetCqEvent(conn.active.comp_channel, &cq, &context), EIO);

  EXPECT_EQ(cq, nullptr);
  EXPECT_TRUE(FdReadable(conn.active.comp_channel->fd));
  ASSERT_EQ(backend_->IbvGetCqEvent(conn.active.comp_channel, &cq, &context), 0);
  EXPECT_EQ(cq, conn.active.send_cq);
  backend_->IbvAckCqEvents(cq, 1);
}

TEST_F(FaultTest, UnknownCq_ReturnsACqOfNoChannel_AckAndNotifyAccepted) {
  TestConnection conn(backend_);
  ConnectionOptions options;
  options.separate_recv_cq = true;
  ASSERT_TRUE(conn.Connect(options).ok());
  ASSERT_EQ(backend_->IbvReqNotifyCq(conn.active.send_cq, 0), 0);
  ibv_send_wr wr{};
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(backend_->IbvPostSend(conn.active.qp(), &wr, &bad), 0);
  ASSERT_TRUE(SetFaultPlan("ibv_get_cq_event:unknown_cq:nth=1").ok());
  ibv_cq* cq = nullptr;
  void* context = nullptr;

  ASSERT_EQ(backend_->IbvGetCqEvent(conn.active.comp_channel, &cq, &context), 0);

  ASSERT_NE(cq, nullptr);
  EXPECT_NE(cq, conn.active.send_cq);
  EXPECT_NE(cq, conn.active.recv_cq);
  EXPECT_EQ(cq->channel, nullptr);
  backend_->IbvAckCqEvents(cq, 1);
  EXPECT_EQ(backend_->IbvReqNotifyCq(cq, 0), 0);
  // The real event is still there.
  ASSERT_EQ(backend_->IbvGetCqEvent(conn.active.comp_channel, &cq, &context), 0);
  EXPECT_EQ(cq, conn.active.send_cq);
  backend_->IbvAckCqEvents(cq, 1);
}

TEST_F(FaultTest, Malloc_FailsTheNextNew) {
  ASSERT_TRUE(SetFaultPlan("malloc:fail=ENOMEM:nth=1").ok());
  ibv_pd* pd = nullptr;

  EXPECT_EQ(backend_->IbvAllocPd(ctx_, &pd), ENOMEM);
  EXPECT_EQ(pd, nullptr);
  ASSERT_EQ(backend_->IbvAllocPd(ctx_, &pd), 0);
  EXPECT_EQ(*FaultHitCount("malloc"), 2u);
  EXPECT_EQ(backend_->IbvDeallocPd(pd), 0);

  ASSERT_TRUE(SetFaultPlan("malloc:fail=ENOMEM").ok());
  int* value = New<int>(5);
  EXPECT_EQ(value, nullptr);
  ClearFaultPlan();
  value = New<int>(5);
  ASSERT_NE(value, nullptr);
  Delete(value);
  EXPECT_EQ(SetAllocFailHook(nullptr), nullptr);  // the plan's hook went with the plan
}

TEST_F(FaultTest, Malloc_GetCmEventFailsWithEnomem_EventStaysQueued) {
  rdma_event_channel* channel = nullptr;
  ASSERT_EQ(backend_->RdmaCreateEventChannel(&channel), 0);
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(backend_->RdmaCreateId(channel, &id, nullptr, RDMA_PS_TCP), 0);
  rdma_addrinfo hints{};
  rdma_addrinfo* info = nullptr;
  ASSERT_EQ(backend_->RdmaGetaddrinfo("127.0.0.1", "7204", &hints, &info), 0);
  ASSERT_EQ(backend_->RdmaResolveAddr(id, nullptr, info->ai_dst_addr, 100), 0);
  backend_->RdmaFreeaddrinfo(info);
  ASSERT_TRUE(SetFaultPlan("malloc:fail=ENOMEM:nth=1").ok());
  rdma_cm_event* event = nullptr;

  EXPECT_EQ(backend_->RdmaGetCmEvent(channel, &event), ENOMEM);

  EXPECT_TRUE(FdReadable(channel->fd));
  ASSERT_EQ(backend_->RdmaGetCmEvent(channel, &event), 0);
  EXPECT_EQ(event->event, RDMA_CM_EVENT_ADDR_RESOLVED);
  EXPECT_EQ(backend_->RdmaAckCmEvent(event), 0);
  EXPECT_EQ(backend_->RdmaDestroyId(id), 0);
  backend_->RdmaDestroyEventChannel(channel);
}

TEST_F(FaultTest, VoidCalls_AreCountedPoints) {
  ASSERT_TRUE(SetFaultPlan("").ok());  // no rules: counts only
  rdma_addrinfo hints{};
  rdma_addrinfo* info = nullptr;
  ASSERT_EQ(backend_->RdmaGetaddrinfo("127.0.0.1", "1", &hints, &info), 0);

  backend_->RdmaFreeaddrinfo(info);

  EXPECT_EQ(*FaultHitCount("rdma_getaddrinfo"), 1u);
  EXPECT_EQ(*FaultHitCount("rdma_freeaddrinfo"), 1u);
}

}  // namespace
}  // namespace softrpma::sim::testing
