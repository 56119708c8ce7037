// The fault engine: the spec and scenario parsers (table-driven: good specs and every malformed
// form with its message), the conditions nth / after / every / prob / qp, every action (fail,
// fail=none, unknown_cq, spurious, no_notify, wc_status, delay, reject, unreachable, lost,
// disconnect), the malloc point, the log line, counters and the list of points.

#include "simverbs/sim/faults/fault.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "simverbs/alloc.h"
#include "simverbs/backend.h"
#include "simverbs/sim/cm/cm.h"
#include "simverbs/sim/nic/cq.h"
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
        GoodSpec{"  ", ""},
        GoodSpec{"ibv_get_cq_event:spurious:nth=2", "ibv_get_cq_event:spurious:nth=2"},
        GoodSpec{"ibv_post_send : fail=EIO : nth=3 : prog=my-server.1",
                 "ibv_post_send:fail=EIO:nth=3:prog=my-server.1"},
        GoodSpec{"ibv_req_notify_cq:no_notify", "ibv_req_notify_cq:no_notify"},
        GoodSpec{"ibv_post_send:wc_status=IBV_WC_REM_ACCESS_ERR:nth=3",
                 "ibv_post_send:wc_status=IBV_WC_REM_ACCESS_ERR:nth=3"},
        GoodSpec{" ibv_post_recv : wc_status = IBV_WC_LOC_LEN_ERR ",
                 "ibv_post_recv:wc_status=IBV_WC_LOC_LEN_ERR"},
        GoodSpec{"ibv_post_send:delay=5000:qp=17:every=2",
                 "ibv_post_send:delay=5000:qp=17:every=2"},
        GoodSpec{"ibv_post_recv:delay=1000000000000", "ibv_post_recv:delay=1000000000000"},
        GoodSpec{"rdma_connect:reject; rdma_connect:unreachable:nth=1; rdma_connect:lost",
                 "rdma_connect:reject; rdma_connect:unreachable:nth=1; rdma_connect:lost"},
        GoodSpec{"rdma_accept:reject;rdma_accept:unreachable;rdma_accept:lost;"
                 "rdma_accept:disconnect:after=1",
                 "rdma_accept:reject; rdma_accept:unreachable; rdma_accept:lost; "
                 "rdma_accept:disconnect:after=1"},
        GoodSpec{"ibv_post_recv:lost:qp=18; ibv_post_send:disconnect:nth=4",
                 "ibv_post_recv:lost:qp=18; ibv_post_send:disconnect:nth=4"},
        GoodSpec{"ibv_poll_cq:fail=EIO:prob=0.25; ibv_poll_cq:fail=EIO:prob=1; "
                 "ibv_poll_cq:fail=EIO:prob=0:nth=2",
                 "ibv_poll_cq:fail=EIO:prob=0.25; ibv_poll_cq:fail=EIO:prob=1; "
                 "ibv_poll_cq:fail=EIO:prob=0:nth=2"},
        GoodSpec{"rdma_disconnect:fail=EIO:qp=4294967295; rdma_accept:fail=EIO:qp=1",
                 "rdma_disconnect:fail=EIO:qp=4294967295; rdma_accept:fail=EIO:qp=1"}));

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
                "fault spec rule 2, column 37: unknown action \"explode\"; expected one of "
                "fail=<errno>, unknown_cq, spurious, no_notify, wc_status=<IBV_WC_*>, "
                "delay=<ns>, reject, unreachable, lost, disconnect, kill"},
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
                "after=N, every=K, prob=P, qp=QP_NUM or prog=NAME"},
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
        // Actions on points that do not take them.
        BadSpec{"ibv_post_send:spurious",
                "fault spec rule 1, column 15: action spurious is valid only for "
                "ibv_get_cq_event, not for ibv_post_send"},
        BadSpec{"ibv_get_cq_event:no_notify",
                "fault spec rule 1, column 18: action no_notify is valid only for "
                "ibv_req_notify_cq, not for ibv_get_cq_event"},
        BadSpec{"ibv_poll_cq:wc_status=IBV_WC_LOC_LEN_ERR",
                "fault spec rule 1, column 13: action wc_status is valid only for "
                "ibv_post_send, ibv_post_recv, ibv_wr_complete, not for ibv_poll_cq"},
        BadSpec{"ibv_post_srq_recv:delay=5",
                "fault spec rule 1, column 19: action delay is valid only for ibv_post_send, "
                "ibv_post_recv, ibv_wr_complete, not for ibv_post_srq_recv"},
        BadSpec{"ibv_post_send:reject",
                "fault spec rule 1, column 15: action reject is valid only for rdma_connect, "
                "rdma_accept, not for ibv_post_send"},
        BadSpec{"rdma_listen:unreachable",
                "fault spec rule 1, column 13: action unreachable is valid only for "
                "rdma_connect, rdma_accept, not for rdma_listen"},
        BadSpec{"rdma_connect:disconnect",
                "fault spec rule 1, column 14: action disconnect is valid only for "
                "ibv_post_send, ibv_post_recv, ibv_wr_complete, rdma_accept, not for "
                "rdma_connect"},
        BadSpec{"ibv_poll_cq:lost",
                "fault spec rule 1, column 13: action lost is valid only for ibv_post_send, "
                "ibv_post_recv, ibv_wr_complete, rdma_connect, rdma_accept, not for "
                "ibv_poll_cq"},
        // Values of actions.
        BadSpec{"rdma_connect:reject=1",
                "fault spec rule 1, column 14: action reject takes no value; write just reject"},
        BadSpec{"ibv_poll_cq:fail",
                "fault spec rule 1, column 17: action fail needs a value: fail=<errno>"},
        BadSpec{"ibv_post_send:wc_status",
                "fault spec rule 1, column 24: action wc_status needs a value: "
                "wc_status=<IBV_WC_*>"},
        BadSpec{"ibv_post_send:wc_status=",
                "fault spec rule 1, column 25: wc_status needs a value: an error status name "
                "such as IBV_WC_REM_ACCESS_ERR"},
        BadSpec{"ibv_post_send:wc_status=IBV_WC_BOGUS",
                "fault spec rule 1, column 25: unknown work completion status \"IBV_WC_BOGUS\" "
                "in \"wc_status=IBV_WC_BOGUS\"; expected an IBV_WC_* error status name"},
        BadSpec{"ibv_post_send:wc_status=REM_ACCESS_ERR",
                "fault spec rule 1, column 25: unknown work completion status "
                "\"REM_ACCESS_ERR\" in \"wc_status=REM_ACCESS_ERR\"; expected an IBV_WC_* "
                "error status name"},
        BadSpec{"ibv_post_send:wc_status=IBV_WC_SUCCESS",
                "fault spec rule 1, column 25: wc_status=IBV_WC_SUCCESS is not a fault; "
                "expected an error status"},
        BadSpec{"ibv_post_send:delay=0",
                "fault spec rule 1, column 21: bad delay \"0\" (expected simulated "
                "nanoseconds, an integer from 1 to 1000000000000)"},
        BadSpec{"ibv_post_send:delay=1000000000001",
                "fault spec rule 1, column 21: bad delay \"1000000000001\" (expected simulated "
                "nanoseconds, an integer from 1 to 1000000000000)"},
        BadSpec{"ibv_post_recv:delay=-5",
                "fault spec rule 1, column 21: bad delay \"-5\" (expected simulated "
                "nanoseconds, an integer from 1 to 1000000000000)"},
        BadSpec{"ibv_post_recv:delay=",
                "fault spec rule 1, column 21: bad delay \"\" (expected simulated "
                "nanoseconds, an integer from 1 to 1000000000000)"},
        // prob= and qp=.
        BadSpec{"ibv_poll_cq:fail=EIO:prob=1.5",
                "fault spec rule 1, column 27: bad probability \"1.5\" for prob (expected a "
                "number from 0 to 1, e.g. 0.25)"},
        BadSpec{"ibv_poll_cq:fail=EIO:prob=1e-3",
                "fault spec rule 1, column 27: bad probability \"1e-3\" for prob (expected a "
                "number from 0 to 1, e.g. 0.25)"},
        BadSpec{"ibv_poll_cq:fail=EIO:prob=0.5.1",
                "fault spec rule 1, column 27: bad probability \"0.5.1\" for prob (expected a "
                "number from 0 to 1, e.g. 0.25)"},
        BadSpec{"ibv_poll_cq:fail=EIO:prob=.",
                "fault spec rule 1, column 27: bad probability \".\" for prob (expected a "
                "number from 0 to 1, e.g. 0.25)"},
        BadSpec{"ibv_poll_cq:fail=EIO:prob=",
                "fault spec rule 1, column 27: bad probability \"\" for prob (expected a "
                "number from 0 to 1, e.g. 0.25)"},
        BadSpec{"ibv_poll_cq:fail=EIO:prob=0.5:prob=0.5",
                "fault spec rule 1, column 31: duplicate condition \"prob\""},
        BadSpec{"ibv_poll_cq:fail=EIO:qp=17",
                "fault spec rule 1, column 22: condition qp is valid only for ibv_post_send, "
                "ibv_post_recv, ibv_wr_complete, rdma_connect, rdma_accept, rdma_disconnect, "
                "not for ibv_poll_cq"},
        BadSpec{"ibv_post_send:fail=EIO:qp=0",
                "fault spec rule 1, column 27: bad number \"0\" for qp (expected a QP number "
                "from 1 to 4294967295)"},
        BadSpec{"ibv_post_send:fail=EIO:qp=4294967296",
                "fault spec rule 1, column 27: bad number \"4294967296\" for qp (expected a QP "
                "number from 1 to 4294967295)"},
        BadSpec{"ibv_post_send:fail=EIO:qp=0x11",
                "fault spec rule 1, column 27: bad number \"0x11\" for qp (expected a QP "
                "number from 1 to 4294967295)"},
        BadSpec{"ibv_post_send:fail=EIO:qp=17:qp=18",
                "fault spec rule 1, column 30: duplicate condition \"qp\""},
        BadSpec{"ibv_post_send:fail=EIO:prog=a/b",
                "fault spec rule 1, column 29: bad program name \"a/b\" for prog (expected 1 to "
                "64 of A-Z a-z 0-9 . _ -)"},
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
  FaultCondition nth;
  nth.nth = 2;
  EXPECT_FALSE(nth.Matches(1));
  EXPECT_TRUE(nth.Matches(2));
  EXPECT_FALSE(nth.Matches(3));
  FaultCondition after_every;
  after_every.after = 1;
  after_every.every = 2;
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

TEST_F(FaultTest, Prog_RuleFiresOnlyInTheProcessOfThatName) {
  // RPMA_SIM_ROLE names this process; a rule for another program is inert here.
  ASSERT_EQ(setenv(kRoleEnvVar, "server", 1), 0);
  ASSERT_TRUE(
      SetFaultPlan("ibv_query_device_ex:fail=EIO:nth=1:prog=client; "
                   "ibv_query_device_ex:fail=ENOMEM:nth=2:prog=server")
          .ok());
  EXPECT_EQ(QueryResults(3), (std::vector<int>{0, ENOMEM, 0}));
  ASSERT_EQ(unsetenv(kRoleEnvVar), 0);
}

TEST_F(FaultTest, Prog_DefaultsToTheExecutablesName) {
  ASSERT_EQ(unsetenv(kRoleEnvVar), 0);
  EXPECT_EQ(ProcessName(), "fault_test");
  ASSERT_TRUE(SetFaultPlan("ibv_query_device_ex:fail=EIO:prog=fault_test").ok());
  EXPECT_EQ(QueryResults(1), (std::vector<int>{EIO}));
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

TEST_F(FaultTest, DestroyFailed_ObjectKept_UntilADestroyFreesIt) {
  ibv_pd* pd = nullptr;
  ASSERT_EQ(backend_->IbvAllocPd(ctx_, &pd), 0);
  const uint64_t before = *KeptObjectCount("ibv_dealloc_pd");
  ASSERT_TRUE(SetFaultPlan("ibv_dealloc_pd:fail=EIO:nth=1").ok());

  EXPECT_EQ(backend_->IbvDeallocPd(pd), EIO);
  EXPECT_EQ(*KeptObjectCount("ibv_dealloc_pd"), before + 1);
  EXPECT_EQ(backend_->IbvDeallocPd(pd), 0);  // the PD was kept: it is still there to free
  EXPECT_EQ(*KeptObjectCount("ibv_dealloc_pd"), before);
  EXPECT_EQ(KeptObjectCount("nope").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(FaultTest, DestroyFailedByItsOwnChecks_NothingKept) {
  ibv_pd* pd = nullptr;
  ASSERT_EQ(backend_->IbvAllocPd(ctx_, &pd), 0);
  ibv_mr* mr = nullptr;
  char buffer[64];
  ASSERT_EQ(backend_->IbvRegMr(pd, buffer, sizeof(buffer), IBV_ACCESS_LOCAL_WRITE, &mr), 0);
  const uint64_t before = *KeptObjectCount("ibv_dealloc_pd");
  ASSERT_TRUE(SetFaultPlan("").ok());

  EXPECT_EQ(backend_->IbvDeallocPd(pd), EBUSY);  // an MR is registered: not an injected fault
  EXPECT_EQ(*KeptObjectCount("ibv_dealloc_pd"), before);
  EXPECT_EQ(backend_->IbvDeregMr(mr), 0);
  EXPECT_EQ(backend_->IbvDeallocPd(pd), 0);
}

TEST(FaultInjectorTest, WriteStats_KeptObjectsPerPoint) {
  FaultInjector injector;
  int a = 0;
  int b = 0;
  int c = 0;
  injector.KeepObject(FaultPoint::kIbvDeregMr, &a);
  injector.KeepObject(FaultPoint::kIbvDeregMr, &b);
  injector.KeepObject(FaultPoint::kRdmaAckCmEvent, &c);
  injector.ForgetKept(&b);
  char* text = nullptr;
  size_t size = 0;
  std::FILE* file = open_memstream(&text, &size);
  ASSERT_NE(file, nullptr);

  injector.WriteStats(file);
  ASSERT_EQ(std::fclose(file), 0);
  const std::string stats(text, size);
  std::free(text);

  EXPECT_THAT(stats, StartsWith("# process "));
  EXPECT_THAT(stats, HasSubstr("\nibv_dereg_mr 0\n"));
  EXPECT_THAT(stats, ::testing::EndsWith("\nmalloc 0\n# kept ibv_dereg_mr 1\n"
                                         "# kept rdma_ack_cm_event 1\n"));
  EXPECT_EQ(injector.kept_objects(FaultPoint::kIbvDeregMr), 1u);
  EXPECT_EQ(injector.kept_objects(FaultPoint::kIbvDestroyCq), 0u);
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

// ---- Scenario files -------------------------------------------------------------------------

TEST(ScenarioTest, CommentsBlankLinesSeedAndOneRulePerLine) {
  absl::StatusOr<Scenario> scenario = ParseScenario(
      "# a scenario\n"
      "\n"
      "seed 0x2a   # the answer\n"
      "  ibv_post_send : fail=EIO : nth=2   # the second post\n"
      "\t\r\n"
      "rdma_accept:disconnect\r\n"
      "# the end",
      "s.txt");

  ASSERT_TRUE(scenario.ok()) << scenario.status();
  EXPECT_EQ(scenario->seed, 42u);
  ASSERT_EQ(scenario->rules.size(), 2u);
  EXPECT_EQ(scenario->rules[0].text, "ibv_post_send:fail=EIO:nth=2");
  EXPECT_EQ(scenario->rules[1].text, "rdma_accept:disconnect");
}

TEST(ScenarioTest, EmptyFile_NoRulesNoSeed) {
  absl::StatusOr<Scenario> scenario = ParseScenario("", "empty.txt");

  ASSERT_TRUE(scenario.ok()) << scenario.status();
  EXPECT_TRUE(scenario->rules.empty());
  EXPECT_FALSE(scenario->seed.has_value());
}

struct BadScenario {
  const char* text;
  const char* message;  // the whole message, or its start when it ends in "..."
};

class BadScenarioTest : public ::testing::TestWithParam<BadScenario> {};

TEST_P(BadScenarioTest, IsInvalidArgumentNamingFileLineColumn) {
  absl::StatusOr<Scenario> scenario = ParseScenario(GetParam().text, "f.txt");

  ASSERT_FALSE(scenario.ok());
  EXPECT_EQ(scenario.status().code(), absl::StatusCode::kInvalidArgument);
  std::string expected = GetParam().message;
  if (expected.size() > 3 && expected.substr(expected.size() - 3) == "...") {
    EXPECT_THAT(std::string(scenario.status().message()),
                StartsWith(expected.substr(0, expected.size() - 3)));
  } else {
    EXPECT_EQ(scenario.status().message(), expected);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Scenario, BadScenarioTest,
    ::testing::Values(
        BadScenario{"ibv_post_send:fail=EIO; rdma_connect:reject",
                    "f.txt:1:23: one rule per line: ';' is not allowed in a scenario file"},
        BadScenario{"seed 12x",
                    "f.txt:1:6: bad seed \"12x\": expected a decimal or 0x-hex 64-bit "
                    "number"},
        BadScenario{"seed -1",
                    "f.txt:1:6: bad seed \"-1\": expected a decimal or 0x-hex 64-bit "
                    "number"},
        BadScenario{"seed 18446744073709551616",
                    "f.txt:1:6: bad seed \"18446744073709551616\": expected a decimal or 0x-hex "
                    "64-bit number"},
        BadScenario{"  seed  # no value",
                    "f.txt:1:7: seed needs a value: a decimal or 0x-hex 64-bit number"},
        BadScenario{"seed 1\n# two\nseed 2",
                    "f.txt:3:1: duplicate seed line (the first is line 1)"},
        BadScenario{"\n   ibv_foo:fail=EIO", "f.txt:2:4: unknown fault point \"ibv_foo\"; ..."},
        BadScenario{"# one\nibv_post_send:fail=EIO:nth=0 # zero",
                    "f.txt:2:28: bad number \"0\" for nth (expected an integer >= 1)"},
        BadScenario{"rdma_connect:explode", "f.txt:1:14: unknown action \"explode\"; ..."},
        BadScenario{"ibv_post_send",
                    "f.txt:1:14: fault point \"ibv_post_send\" has no action; "
                    "expected point:action[:condition...]"},
        BadScenario{"ibv_poll_cq:fail=EIO:qp=3",
                    "f.txt:1:22: condition qp is valid only for ..."}));

TEST(ScenarioTest, SetScenario_InstallsRulesAndSeed_BadOneChangesNothing) {
  const uint64_t seed = SimSeed();
  ASSERT_TRUE(SetFaultPlan("rdma_listen:fail=EIO").ok());

  absl::Status bad = SetScenario("seed 7\nibv_poll_cq:explode\n", "bad.txt");

  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.message()), StartsWith("bad.txt:2:13: unknown action"));
  EXPECT_EQ(CurrentFaultPlan(), "rdma_listen:fail=EIO");
  EXPECT_EQ(SimSeed(), seed);

  ASSERT_TRUE(SetScenario("seed 7\nibv_poll_cq:fail=EIO:nth=1\n").ok());
  EXPECT_EQ(CurrentFaultPlan(), "ibv_poll_cq:fail=EIO:nth=1");
  EXPECT_EQ(SimSeed(), 7u);
  SetSimSeed(seed);
  ClearFaultPlan();
}

TEST(ScenarioTest, LoadScenario_MissingFile) {
  absl::Status status = LoadScenario("/nonexistent/scenario.txt");

  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "/nonexistent/scenario.txt: cannot read scenario file: No such file or directory");
}

TEST(ScenarioTest, LoadScenario_Directory_IsAnError) {
  // (Read as a stream, a directory gave an empty scenario: no faults, silently.)
  absl::Status status = LoadScenario("/");

  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "/: cannot read scenario file: it is a directory");
  EXPECT_EQ(LoadScenarioFile("/").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ScenarioTest, LoadScenario_EndlessFile_IsAnErrorAtTheLimit) {
  // (/dev/zero was read for ever: RPMA_SIM_SCENARIO=/dev/zero never started the program.)
  absl::Status status = LoadScenario("/dev/zero");

  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "/dev/zero: cannot read scenario file: it is larger than 16 MiB, the most softrpma "
            "reads as one");
}

// ---- Point descriptions and totals ----------------------------------------------------------

TEST(FaultPointsTest, Described_OneLineEach_ActionsPerPoint) {
  std::vector<FaultPointDescription> points = DescribeFaultPoints();

  ASSERT_EQ(points.size(), static_cast<size_t>(kNumFaultPoints));
  std::vector<std::string> names = ListFaultPoints();
  for (size_t i = 0; i < points.size(); ++i) {
    EXPECT_EQ(points[i].name, names[i]);
    EXPECT_FALSE(points[i].description.empty()) << points[i].name;
    EXPECT_EQ(points[i].description.find('\n'), std::string::npos) << points[i].name;
  }
  const FaultPointDescription& post_send = points[static_cast<int>(FaultPoint::kIbvPostSend)];
  EXPECT_EQ(post_send.actions, (std::vector<std::string>{"fail=<errno>", "wc_status=<IBV_WC_*>",
                                                         "delay=<ns>", "lost", "disconnect"}));
  EXPECT_TRUE(post_send.accepts_qp);
  const FaultPointDescription& get_event = points[static_cast<int>(FaultPoint::kIbvGetCqEvent)];
  EXPECT_EQ(get_event.actions,
            (std::vector<std::string>{"fail=<errno>", "unknown_cq", "spurious"}));
  EXPECT_FALSE(get_event.accepts_qp);
  EXPECT_TRUE(points[static_cast<int>(FaultPoint::kIbvAckCqEvents)].actions.empty());
  EXPECT_THAT(points[static_cast<int>(FaultPoint::kIbvAllocPd)].description,
              HasSubstr("rpma_peer_new"));
}

TEST(FaultSpecTest, Kill_ValidAtEveryPoint_VoidOnesIncluded_TakesNoValue) {
  for (const std::string& name : ListFaultPoints()) {
    absl::StatusOr<std::vector<FaultRule>> rules = ParseFaultRules(name + ":kill:nth=2");
    ASSERT_TRUE(rules.ok()) << name << ": " << rules.status();
    EXPECT_EQ((*rules)[0].action.kind, FaultKind::kKill);
    EXPECT_EQ((*rules)[0].text, name + ":kill:nth=2");
  }
  EXPECT_EQ(ParseFaultRules("ibv_post_send:kill=9").status().message(),
            "fault spec rule 1, column 15: action kill takes no value; write just kill");
}

// The process dies of SIGKILL at the hit the rule names, after the injection's log line; the
// hits before it go on as usual.
TEST(FaultPlanDeathTest, Kill_TheProcessDiesOfSigkillAtThatHit) {
  EXPECT_EXIT(
      {
        absl::StatusOr<std::unique_ptr<FaultPlan>> plan =
            ParseFaultSpec("ibv_ack_cq_events:kill:nth=2");
        if (!plan.ok()) std::_Exit(3);
        if ((*plan)->OnHit(FaultPoint::kIbvAckCqEvents, 0).fired()) std::_Exit(4);
        (*plan)->OnHit(FaultPoint::kIbvAckCqEvents, 0);
        std::_Exit(5);  // not reached
      },
      ::testing::KilledBySignal(SIGKILL),
      "softrpma-sim: fault injected: ibv_ack_cq_events:kill \\(hit 2\\)");
}

// ---- New actions and conditions, through the backend ----------------------------------------

// Signaled zero-length RDMA writes: they need no memory registration.
int PostZeroWrite(Backend* backend, ibv_qp* qp, uint64_t wr_id) {
  return PostWrite(backend, qp, wr_id, nullptr, 0, 0, 0);
}

std::vector<uint64_t> WrIds(const std::vector<ibv_wc>& wcs) {
  std::vector<uint64_t> ids;
  for (const ibv_wc& wc : wcs) ids.push_back(wc.wr_id);
  return ids;
}

std::vector<int> Statuses(const std::vector<ibv_wc>& wcs) {
  std::vector<int> statuses;
  for (const ibv_wc& wc : wcs) statuses.push_back(wc.status);
  return statuses;
}

TEST_F(FaultTest, TotalHits_CountedAcrossPlans) {
  const uint64_t before = *FaultTotalHitCount("ibv_query_device_ex");
  ASSERT_TRUE(SetFaultPlan("").ok());
  QueryResults(2);
  ASSERT_TRUE(SetFaultPlan("ibv_alloc_pd:fail=EIO").ok());
  QueryResults(3);

  EXPECT_EQ(*FaultTotalHitCount("ibv_query_device_ex"), before + 5);
  EXPECT_EQ(*FaultHitCount("ibv_query_device_ex"), 3u);  // this plan's
  EXPECT_EQ(FaultTotalHitCount("nope").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(FaultTest, Prob_SeededDraw_SameSeedSameHits) {
  const uint64_t seed = SimSeed();
  SetSimSeed(1);
  ASSERT_TRUE(SetFaultPlan("ibv_query_device_ex:fail=EIO:prob=0.25").ok());
  const std::vector<int> first = QueryResults(400);
  ASSERT_TRUE(SetFaultPlan("ibv_query_device_ex:fail=EIO:prob=0.25").ok());
  const std::vector<int> again = QueryResults(400);
  SetSimSeed(2);
  ASSERT_TRUE(SetFaultPlan("ibv_query_device_ex:fail=EIO:prob=0.25").ok());
  const std::vector<int> other = QueryResults(400);
  SetSimSeed(seed);

  EXPECT_EQ(first, again);
  EXPECT_NE(first, other);
  const auto failures = std::count(first.begin(), first.end(), EIO);
  EXPECT_GT(failures, 60);  // 100 expected; the draw is fixed by the seed, so no flakiness
  EXPECT_LT(failures, 140);
  EXPECT_EQ(*FaultInjectionCount("ibv_query_device_ex"),
            static_cast<uint64_t>(std::count(other.begin(), other.end(), EIO)));
}

TEST_F(FaultTest, Prob_ZeroNever_OneAlways_AndedWithOtherConditions) {
  ASSERT_TRUE(SetFaultPlan("ibv_query_device_ex:fail=EIO:prob=0").ok());
  EXPECT_EQ(QueryResults(3), (std::vector<int>{0, 0, 0}));
  ASSERT_TRUE(SetFaultPlan("ibv_query_device_ex:fail=EIO:prob=1:every=2").ok());
  EXPECT_EQ(QueryResults(4), (std::vector<int>{0, EIO, 0, EIO}));
}

TEST_F(FaultTest, Qp_OnlyThatQp_ItsHitsNumberedOnTheirOwn) {
  TestConnection a(backend_);
  TestConnection b(backend_);
  ASSERT_TRUE(a.Connect(ConnectionOptions()).ok());
  ASSERT_TRUE(b.Connect(ConnectionOptions()).ok());
  const uint32_t qp_b = b.active.qp()->qp_num;
  ASSERT_TRUE(SetFaultPlan(absl::StrCat("ibv_post_send:fail=EIO:qp=", qp_b, ":nth=2")).ok());

  std::vector<int> results;
  results.push_back(PostZeroWrite(backend_, a.active.qp(), 1));
  results.push_back(PostZeroWrite(backend_, b.active.qp(), 2));  // b's hit 1
  results.push_back(PostZeroWrite(backend_, a.active.qp(), 3));
  results.push_back(PostZeroWrite(backend_, b.active.qp(), 4));  // b's hit 2
  results.push_back(PostZeroWrite(backend_, b.active.qp(), 5));

  EXPECT_EQ(results, (std::vector<int>{0, 0, 0, EIO, 0}));
  EXPECT_EQ(*FaultHitCount("ibv_post_send"), 5u);
  EXPECT_EQ(*FaultInjectionCount("ibv_post_send"), 1u);
}

TEST_F(FaultTest, Spurious_EventOfTheChannelsCqWithNothingNew) {
  TestConnection conn(backend_);
  ASSERT_TRUE(conn.Connect(ConnectionOptions()).ok());
  ASSERT_TRUE(SetFaultPlan("ibv_get_cq_event:spurious:nth=1").ok());
  ibv_cq* cq = nullptr;
  void* context = nullptr;

  ASSERT_EQ(backend_->IbvGetCqEvent(conn.active.comp_channel, &cq, &context), 0);

  EXPECT_EQ(cq, conn.active.send_cq);
  EXPECT_EQ(context, conn.active.send_cq->cq_context);
  EXPECT_TRUE(PollAll(backend_, cq).empty());
  EXPECT_EQ(backend_->IbvDestroyCq(cq), EBUSY);  // delivered, not acknowledged yet
  backend_->IbvAckCqEvents(cq, 1);
  // The next event is a real one again.
  ASSERT_EQ(backend_->IbvReqNotifyCq(conn.active.send_cq, 0), 0);
  ASSERT_EQ(PostZeroWrite(backend_, conn.active.qp(), 7), 0);
  ASSERT_EQ(backend_->IbvGetCqEvent(conn.active.comp_channel, &cq, &context), 0);
  EXPECT_EQ(cq, conn.active.send_cq);
  EXPECT_EQ(WrIds(PollAll(backend_, cq)), (std::vector<uint64_t>{7}));
  backend_->IbvAckCqEvents(cq, 1);
}

TEST_F(FaultTest, NoNotify_ArmTakenButNoEvent_NextArmWorks) {
  TestConnection conn(backend_);
  ASSERT_TRUE(conn.Connect(ConnectionOptions()).ok());
  ASSERT_TRUE(SetFaultPlan("ibv_req_notify_cq:no_notify:nth=1").ok());

  ASSERT_EQ(backend_->IbvReqNotifyCq(conn.active.send_cq, 0), 0);
  ASSERT_EQ(PostZeroWrite(backend_, conn.active.qp(), 1), 0);

  EXPECT_FALSE(FdReadable(conn.active.comp_channel->fd));
  EXPECT_EQ(WrIds(PollAll(backend_, conn.active.send_cq)), (std::vector<uint64_t>{1}));
  EXPECT_EQ(*FaultInjectionCount("ibv_req_notify_cq"), 1u);
  // The muted arm was used up by that completion: a later one sends nothing either.
  ASSERT_EQ(PostZeroWrite(backend_, conn.active.qp(), 2), 0);
  EXPECT_FALSE(FdReadable(conn.active.comp_channel->fd));
  PollAll(backend_, conn.active.send_cq);
  ASSERT_EQ(backend_->IbvReqNotifyCq(conn.active.send_cq, 0), 0);
  ASSERT_EQ(PostZeroWrite(backend_, conn.active.qp(), 3), 0);
  EXPECT_TRUE(FdReadable(conn.active.comp_channel->fd));
  ibv_cq* cq = nullptr;
  void* context = nullptr;
  ASSERT_EQ(backend_->IbvGetCqEvent(conn.active.comp_channel, &cq, &context), 0);
  backend_->IbvAckCqEvents(cq, 1);
}

TEST_F(FaultTest, WcStatusOnSend_ThatWrFails_QpToError_LaterWrsFlush) {
  TestConnection conn(backend_);
  ASSERT_TRUE(conn.Connect(ConnectionOptions()).ok());
  ASSERT_TRUE(SetFaultPlan("ibv_post_send:wc_status=IBV_WC_REM_ACCESS_ERR:nth=2").ok());

  ASSERT_EQ(PostZeroWrite(backend_, conn.active.qp(), 1), 0);
  ASSERT_EQ(PostZeroWrite(backend_, conn.active.qp(), 2), 0);
  ASSERT_EQ(PostZeroWrite(backend_, conn.active.qp(), 3), 0);

  const std::vector<ibv_wc> wcs = PollAll(backend_, conn.active.send_cq);
  EXPECT_EQ(WrIds(wcs), (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_EQ(Statuses(wcs),
            (std::vector<int>{IBV_WC_SUCCESS, IBV_WC_REM_ACCESS_ERR, IBV_WC_WR_FLUSH_ERR}));
  ASSERT_EQ(wcs.size(), 3u);
  // An error completion's opcode is undefined in verbs: poison (cq.h).
  EXPECT_EQ(wcs[1].opcode, kWcPoisonOpcode);
  EXPECT_EQ(conn.active.qp()->state, IBV_QPS_ERR);
  EXPECT_EQ(conn.passive.qp()->state, IBV_QPS_RTS);  // the peer does not notice
}

TEST_F(FaultTest, WcStatusOnRecv_FailsAtOnce_EarlierReceivesFlush) {
  TestConnection conn(backend_);
  ASSERT_TRUE(conn.Connect(ConnectionOptions()).ok());
  ASSERT_TRUE(SetFaultPlan("ibv_post_recv:wc_status=IBV_WC_LOC_LEN_ERR:nth=2").ok());

  ASSERT_EQ(PostRecvBuf(backend_, conn.passive.qp(), 1, nullptr, 0), 0);
  ASSERT_EQ(PostRecvBuf(backend_, conn.passive.qp(), 2, nullptr, 0), 0);
  ASSERT_EQ(PostRecvBuf(backend_, conn.passive.qp(), 3, nullptr, 0), 0);

  const std::vector<ibv_wc> wcs = PollAll(backend_, conn.passive.recv_cq);
  EXPECT_EQ(WrIds(wcs), (std::vector<uint64_t>{2, 1, 3}));
  EXPECT_EQ(Statuses(wcs),
            (std::vector<int>{IBV_WC_LOC_LEN_ERR, IBV_WC_WR_FLUSH_ERR, IBV_WC_WR_FLUSH_ERR}));
  ASSERT_EQ(wcs.size(), 3u);
  EXPECT_EQ(wcs[0].opcode, kWcPoisonOpcode);  // undefined on an error
  EXPECT_EQ(wcs[0].qp_num, conn.passive.qp()->qp_num);         // defined
  EXPECT_EQ(conn.passive.qp()->state, IBV_QPS_ERR);
}

TEST_F(FaultTest, Delay_ReordersAcrossQpsSharingACq_NeverWithinOne) {
  ibv_cq* shared = nullptr;
  ASSERT_EQ(backend_->IbvCreateCq(ctx_, 16, nullptr, nullptr, 0, &shared), 0);
  {
    TestConnection a(backend_);
    TestConnection b(backend_);
    ConnectionOptions options;
    options.active_cq = shared;
    ASSERT_TRUE(a.Connect(options).ok());
    ASSERT_TRUE(b.Connect(options).ok());
    ASSERT_TRUE(SetFaultPlan(absl::StrCat("ibv_post_send:delay=1000000:qp=", a.active.qp()->qp_num,
                                          ":nth=1"))
                    .ok());
    const uint64_t start_ns = SimClockNs();

    ASSERT_EQ(PostZeroWrite(backend_, a.active.qp(), 11), 0);  // held back 1 ms
    ASSERT_EQ(PostZeroWrite(backend_, a.active.qp(), 12), 0);  // behind it: same QP
    ASSERT_EQ(PostZeroWrite(backend_, b.active.qp(), 21), 0);
    ASSERT_EQ(PostZeroWrite(backend_, b.active.qp(), 22), 0);

    EXPECT_EQ(WrIds(PollAll(backend_, shared)), (std::vector<uint64_t>{21, 22, 11, 12}));
    EXPECT_GE(SimClockNs(), start_ns + 1000000);  // the poll waited for them
    ASSERT_TRUE(a.Disconnect().ok());
    ASSERT_TRUE(b.Disconnect().ok());
    PollAll(backend_, shared);
  }
  EXPECT_EQ(backend_->IbvDestroyCq(shared), 0);
}

TEST_F(FaultTest, DelayOnRecv_HoldsThatReceivesCompletion) {
  TestConnection conn(backend_);
  ASSERT_TRUE(conn.Connect(ConnectionOptions()).ok());
  ASSERT_TRUE(SetFaultPlan("ibv_post_recv:delay=500000:nth=1").ok());
  ASSERT_EQ(PostRecvBuf(backend_, conn.passive.qp(), 1, nullptr, 0), 0);
  const uint64_t start_ns = SimClockNs();

  ASSERT_EQ(PostSendMsg(backend_, conn.active.qp(), 9, nullptr, 0), 0);

  EXPECT_EQ(WrIds(PollAll(backend_, conn.passive.recv_cq)), (std::vector<uint64_t>{1}));
  EXPECT_GE(SimClockNs(), start_ns + 500000);
  EXPECT_EQ(WrIds(PollAll(backend_, conn.active.send_cq)), (std::vector<uint64_t>{9}));
}

// rdma_connect faults: the call succeeds, no request reaches the listener, the active id gets
// the event.
struct ConnectFaultCase {
  const char* action;
  rdma_cm_event_type event;
  int status;
};

class ConnectFaultTest : public FaultTest,
                         public ::testing::WithParamInterface<ConnectFaultCase> {};

TEST_P(ConnectFaultTest, ConnectSucceeds_ActiveGetsTheEvent_NoRequest) {
  TestConnection conn(backend_);
  ASSERT_TRUE(conn.Listen("127.0.0.1", NextTestPort()).ok());
  ASSERT_TRUE(SetFaultPlan(absl::StrCat("rdma_connect:", GetParam().action, ":nth=1")).ok());

  ASSERT_TRUE(conn.StartActive(ConnectionOptions(), conn.port).ok());

  int status = 0;
  EXPECT_TRUE(ExpectCmEvent(backend_, conn.active.channel, GetParam().event, &status).ok());
  EXPECT_EQ(status, GetParam().status);
  EXPECT_FALSE(FdReadable(conn.listen_channel->fd));
  EXPECT_EQ(*FaultInjectionCount("rdma_connect"), 1u);
}

INSTANTIATE_TEST_SUITE_P(
    Faults, ConnectFaultTest,
    ::testing::Values(ConnectFaultCase{"reject", RDMA_CM_EVENT_REJECTED, kRejectConsumer},
                      ConnectFaultCase{"unreachable", RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT},
                      ConnectFaultCase{"lost", RDMA_CM_EVENT_CONNECT_ERROR, -ECONNRESET}));

// rdma_accept faults: both sides get the event instead of ESTABLISHED.
class AcceptFaultTest : public FaultTest, public ::testing::WithParamInterface<ConnectFaultCase> {};

TEST_P(AcceptFaultTest, BothSidesGetTheEventInsteadOfEstablished) {
  TestConnection conn(backend_);
  ASSERT_TRUE(SetFaultPlan(absl::StrCat("rdma_accept:", GetParam().action, ":nth=1")).ok());

  absl::Status connected = conn.Connect(ConnectionOptions());

  EXPECT_THAT(
      std::string(connected.message()),
      HasSubstr(absl::StrCat("expected ESTABLISHED, got ", rdma_event_str(GetParam().event))));
  int status = 0;
  EXPECT_TRUE(ExpectCmEvent(backend_, conn.passive.channel, GetParam().event, &status).ok());
  EXPECT_EQ(status, GetParam().status);
  EXPECT_FALSE(FdReadable(conn.active.channel->fd));
  const ibv_qp_state expected_state =
      GetParam().event == RDMA_CM_EVENT_CONNECT_ERROR ? IBV_QPS_ERR : IBV_QPS_INIT;
  EXPECT_EQ(conn.active.qp()->state, expected_state);
  EXPECT_EQ(conn.passive.qp()->state, expected_state);
}

INSTANTIATE_TEST_SUITE_P(
    Faults, AcceptFaultTest,
    ::testing::Values(ConnectFaultCase{"reject", RDMA_CM_EVENT_REJECTED, kRejectConsumer},
                      ConnectFaultCase{"unreachable", RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT},
                      ConnectFaultCase{"lost", RDMA_CM_EVENT_CONNECT_ERROR, -ECONNRESET}));

TEST_F(FaultTest, AcceptDisconnect_EstablishedThenDisconnectedOnBothSides) {
  TestConnection conn(backend_);
  ASSERT_TRUE(SetFaultPlan("rdma_accept:disconnect:nth=1").ok());

  ASSERT_TRUE(conn.Connect(ConnectionOptions()).ok());

  EXPECT_TRUE(ExpectCmEvent(backend_, conn.active.channel, RDMA_CM_EVENT_DISCONNECTED).ok());
  EXPECT_TRUE(ExpectCmEvent(backend_, conn.passive.channel, RDMA_CM_EVENT_DISCONNECTED).ok());
  EXPECT_EQ(conn.active.qp()->state, IBV_QPS_ERR);
  EXPECT_EQ(conn.passive.qp()->state, IBV_QPS_ERR);
  EXPECT_EQ(backend_->RdmaDisconnect(conn.active.id), 0);  // already disconnected: no event
  EXPECT_FALSE(FdReadable(conn.active.channel->fd));
}

// rdma_accept:disconnect as on IB: the REP goes out, then the DREQ. The active side's
// ESTABLISHED is that REP's connect response on both transports: its private data reported as
// the REP's whole field (zero-padded), its parameters the REP's; then DISCONNECTED.
TEST_F(FaultTest, AcceptDisconnect_ActiveEstablishedIsTheConnectResponseOfTheRep) {
  TestConnection conn(backend_);
  ConnectionOptions options;
  options.accept_private_data = {'o', 'k'};
  options.accept_param.rnr_retry_count = 5;
  ASSERT_TRUE(conn.Listen(options.address, NextTestPort()).ok());
  ASSERT_TRUE(conn.StartActive(options, conn.port).ok());
  ASSERT_TRUE(SetFaultPlan("rdma_accept:disconnect:nth=1").ok());

  ASSERT_TRUE(conn.AcceptPassive(options).ok());

  absl::StatusOr<rdma_cm_event*> established = GetCmEventNow(backend_, conn.active.channel);
  ASSERT_TRUE(established.ok()) << established.status();
  const rdma_cm_event event = **established;
  std::vector<uint8_t> private_data(
      static_cast<const uint8_t*>(event.param.conn.private_data),
      static_cast<const uint8_t*>(event.param.conn.private_data) + event.param.conn.private_data_len);
  EXPECT_EQ(backend_->RdmaAckCmEvent(*established), 0);
  EXPECT_EQ(event.event, RDMA_CM_EVENT_ESTABLISHED);
  std::vector<uint8_t> rep_field(kMaxAcceptPrivateData, 0);
  rep_field[0] = 'o';
  rep_field[1] = 'k';
  EXPECT_EQ(private_data, rep_field);
  EXPECT_EQ(event.param.conn.qp_num, conn.passive.qp()->qp_num);
  EXPECT_EQ(event.param.conn.rnr_retry_count, 5);
  EXPECT_TRUE(ExpectCmEvent(backend_, conn.active.channel, RDMA_CM_EVENT_DISCONNECTED).ok());
  EXPECT_TRUE(ExpectCmEvent(backend_, conn.passive.channel, RDMA_CM_EVENT_ESTABLISHED).ok());
  EXPECT_TRUE(ExpectCmEvent(backend_, conn.passive.channel, RDMA_CM_EVENT_DISCONNECTED).ok());
  EXPECT_EQ(conn.active.qp()->state, IBV_QPS_ERR);
  EXPECT_EQ(conn.passive.qp()->state, IBV_QPS_ERR);
}

// A fault of a post breaks the connection before the WR executes.
struct BreakCase {
  const char* action;
  rdma_cm_event_type event;
  int status;
};

class PostBreaksConnectionTest : public FaultTest,
                                 public ::testing::WithParamInterface<BreakCase> {};

TEST_P(PostBreaksConnectionTest, PostSucceeds_OutstandingWrsFlush_BothSidesGetTheEvent) {
  TestConnection conn(backend_);
  ASSERT_TRUE(conn.Connect(ConnectionOptions()).ok());
  ASSERT_EQ(PostRecvBuf(backend_, conn.passive.qp(), 5, nullptr, 0), 0);  // outstanding
  ASSERT_TRUE(SetFaultPlan(absl::StrCat("ibv_post_send:", GetParam().action, ":nth=1")).ok());

  EXPECT_EQ(PostZeroWrite(backend_, conn.active.qp(), 1), 0);

  const std::vector<ibv_wc> sent = PollAll(backend_, conn.active.send_cq);
  EXPECT_EQ(WrIds(sent), (std::vector<uint64_t>{1}));
  EXPECT_EQ(Statuses(sent), (std::vector<int>{IBV_WC_WR_FLUSH_ERR}));
  const std::vector<ibv_wc> received = PollAll(backend_, conn.passive.recv_cq);
  EXPECT_EQ(WrIds(received), (std::vector<uint64_t>{5}));
  EXPECT_EQ(Statuses(received), (std::vector<int>{IBV_WC_WR_FLUSH_ERR}));
  int status = 1;
  EXPECT_TRUE(ExpectCmEvent(backend_, conn.active.channel, GetParam().event, &status).ok());
  EXPECT_EQ(status, GetParam().status);
  EXPECT_TRUE(ExpectCmEvent(backend_, conn.passive.channel, GetParam().event, &status).ok());
  EXPECT_EQ(status, GetParam().status);
  EXPECT_EQ(conn.active.qp()->state, IBV_QPS_ERR);
  EXPECT_EQ(conn.passive.qp()->state, IBV_QPS_ERR);
}

TEST_P(PostBreaksConnectionTest, OnPostRecv_TheSameFromTheOtherSide) {
  TestConnection conn(backend_);
  ASSERT_TRUE(conn.Connect(ConnectionOptions()).ok());
  ASSERT_TRUE(SetFaultPlan(absl::StrCat("ibv_post_recv:", GetParam().action, ":nth=1")).ok());

  EXPECT_EQ(PostRecvBuf(backend_, conn.passive.qp(), 5, nullptr, 0), 0);

  EXPECT_EQ(Statuses(PollAll(backend_, conn.passive.recv_cq)),
            (std::vector<int>{IBV_WC_WR_FLUSH_ERR}));
  EXPECT_TRUE(ExpectCmEvent(backend_, conn.active.channel, GetParam().event).ok());
  EXPECT_TRUE(ExpectCmEvent(backend_, conn.passive.channel, GetParam().event).ok());
}

INSTANTIATE_TEST_SUITE_P(Faults, PostBreaksConnectionTest,
                         ::testing::Values(BreakCase{"disconnect", RDMA_CM_EVENT_DISCONNECTED, 0},
                                           BreakCase{"lost", RDMA_CM_EVENT_CONNECT_ERROR,
                                                     -ECONNRESET}));

TEST_F(FaultTest, PostBreak_QpNotConnected_NothingHappens) {
  TestConnection conn(backend_);
  ASSERT_TRUE(conn.Listen("127.0.0.1", NextTestPort()).ok());
  ASSERT_TRUE(conn.StartActive(ConnectionOptions(), conn.port).ok());  // connecting, not yet
  ASSERT_TRUE(SetFaultPlan("ibv_post_recv:disconnect:nth=1").ok());

  EXPECT_EQ(PostRecvBuf(backend_, conn.active.qp(), 5, nullptr, 0), 0);

  EXPECT_EQ(conn.active.qp()->state, IBV_QPS_INIT);
  EXPECT_FALSE(FdReadable(conn.active.channel->fd));
  EXPECT_EQ(*FaultInjectionCount("ibv_post_recv"), 1u);  // fired (and logged) all the same
}

}  // namespace
}  // namespace softrpma::sim::testing
