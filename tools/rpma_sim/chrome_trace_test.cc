#include "tools/rpma_sim/chrome_trace.h"

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/rpma_sim/trace.h"

namespace softrpma::rpma_sim {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// testdata/sample.trace: two QPs, a send with an unsignaled write before it, a receive, a read
// and a write in flight at once (the write fails), an injected fault, CM events.
std::string Sample() {
  std::string path = absl::StrCat(std::getenv("TEST_SRCDIR"), "/", std::getenv("TEST_WORKSPACE"),
                                  "/tools/rpma_sim/testdata/sample.trace");
  std::ifstream file(path);
  EXPECT_TRUE(file.good()) << path;
  return std::string((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
}

constexpr char kHeader[] = "softrpma-sim-trace 1\nseed 0x1\nfaults -\n";

TEST(ChromeTraceJson, TracksSlicesAndInstants) {
  absl::StatusOr<Trace> trace = ParseTrace(Sample());
  ASSERT_TRUE(trace.ok()) << trace.status();
  std::string json = ChromeTraceJson(*trace);
  EXPECT_THAT(json, HasSubstr("{\"traceEvents\":["));
  EXPECT_THAT(json, HasSubstr("\"displayTimeUnit\":\"ns\""));
  EXPECT_THAT(json, HasSubstr("\"args\":{\"name\":\"softrpma-sim (seed 0x000000000000002a)\"}"));
  // One track per QP and per CQ, the CM's and the faults' (the fault here is on a QP's).
  for (const char* track : {"QP 17", "QP 18", "CQ 1", "CQ 2", "rdma_cm"}) {
    EXPECT_THAT(json, HasSubstr(absl::StrCat("\"args\":{\"name\":\"", track, "\"}"))) << track;
  }
  EXPECT_THAT(json, Not(HasSubstr("\"args\":{\"name\":\"faults\"}")));
  // The read [2.1, 5] and the failed write [2.2, 5.001] overlap partially: a second lane.
  EXPECT_THAT(json, HasSubstr("\"args\":{\"name\":\"QP 17 (2)\"}"));
  EXPECT_THAT(json, HasSubstr("{\"name\":\"RDMA_READ\",\"ph\":\"X\",\"ts\":2.1,\"dur\":2.9,"));
  EXPECT_THAT(json, HasSubstr("{\"name\":\"RDMA_WRITE IBV_WC_REM_ACCESS_ERR\",\"ph\":\"X\","
                              "\"ts\":2.2,\"dur\":2.801,"));
  EXPECT_THAT(json, HasSubstr("\"cname\":\"terrible\""));
  // The unsignaled write ends with the send after it.
  EXPECT_THAT(json, HasSubstr("{\"name\":\"RDMA_WRITE\",\"ph\":\"X\",\"ts\":0,\"dur\":2.1,"));
  EXPECT_THAT(json, HasSubstr("\"completion\":\"implied by a later completion\""));
  // The receive never completed: to the end of the trace.
  EXPECT_THAT(json, HasSubstr("\"completion\":\"none in the trace\""));
  // On the CQ: from ready to the poll.
  EXPECT_THAT(json,
              HasSubstr("{\"name\":\"RDMA_READ QP 17\",\"ph\":\"X\",\"ts\":5,\"dur\":0.001,"));
  // Instants: the fault (process-wide), CM events.
  EXPECT_THAT(json, HasSubstr("{\"name\":\"fault: ibv_post_send fail=EIO\",\"ph\":\"i\","
                              "\"ts\":2.2,\"s\":\"p\","));
  EXPECT_THAT(json,
              HasSubstr("{\"name\":\"RDMA_CM_EVENT_ESTABLISHED queued (id 1)\",\"ph\":\"i\","));
  EXPECT_THAT(json, HasSubstr("\"fingerprint\":\"0xf233c3aae6aa8a0e\""));
}

TEST(ChromeTraceJson, InOrderWorkNeedsOneLanePerQp) {
  absl::StatusOr<Trace> trace = ParseTrace(absl::StrCat(
      kHeader,
      "1 0 post_send qp=17 wr_id=0x1 opcode=IBV_WR_SEND len=1 signaled=1\n"
      "2 0 post_send qp=17 wr_id=0x2 opcode=IBV_WR_SEND len=1 signaled=1\n"
      "3 0 cqe cq=1 qp=17 wr_id=0x1 status=IBV_WC_SUCCESS opcode=IBV_WC_SEND byte_len=1 "
      "ready=1500\n"
      "4 0 cqe cq=1 qp=17 wr_id=0x2 status=IBV_WC_SUCCESS opcode=IBV_WC_SEND byte_len=1 "
      "ready=1501\n"
      "5 1501 wc cq=1 qp=17 wr_id=0x1 status=IBV_WC_SUCCESS opcode=IBV_WC_SEND byte_len=1\n"
      "6 1501 wc cq=1 qp=17 wr_id=0x2 status=IBV_WC_SUCCESS opcode=IBV_WC_SEND byte_len=1\n"
      "end events=6 fingerprint=0x0\n"));
  ASSERT_TRUE(trace.ok()) << trace.status();
  std::string json = ChromeTraceJson(*trace);
  EXPECT_THAT(json, HasSubstr("\"args\":{\"name\":\"QP 17\"}"));
  EXPECT_THAT(json, Not(HasSubstr("QP 17 (2)")));
  EXPECT_THAT(json, Not(HasSubstr("CQ 1 (2)")));
}

TEST(ChromeTraceJson, LibrpmaCallsAreSlicesOnTheirThreadsTrack) {
  absl::StatusOr<Trace> trace = ParseTrace(
      "softrpma-sim-trace 2\nseed 0x1\nfaults -\nprocess client\n"
      "1 0 api_call thread=1 fn=rpma_conn_wait qp=17 flags=0x0\n"
      "2 0 api_call thread=1 fn=rpma_cq_get_wc cq=1 num_entries=1\n"
      "3 5000 api_return thread=1 fn=rpma_cq_get_wc ret=RPMA_E_NO_COMPLETION\n"
      "4 7000 api_return thread=1 fn=rpma_conn_wait ret=0\n"
      "5 7000 api_call thread=2 fn=rpma_conn_next_event qp=18\n");
  ASSERT_TRUE(trace.ok()) << trace.status();
  const std::string json = ChromeTraceJson(*trace);
  EXPECT_THAT(json, HasSubstr("\"name\":\"librpma (thread 1)\""));
  EXPECT_THAT(json, HasSubstr("\"name\":\"librpma (thread 2)\""));
  // The outer call contains the inner one; the failed one is named with its code and colored.
  EXPECT_THAT(json, HasSubstr("{\"name\":\"rpma_conn_wait\",\"ph\":\"X\",\"ts\":0,\"dur\":7"));
  EXPECT_THAT(json, HasSubstr("{\"name\":\"rpma_cq_get_wc RPMA_E_NO_COMPLETION\",\"ph\":\"X\","
                              "\"ts\":0,\"dur\":5"));
  EXPECT_THAT(json, HasSubstr("\"cname\":\"terrible\""));
  EXPECT_THAT(json, HasSubstr("\"qp\":\"17\""));
  // A call that never returned runs to the end of the trace.
  EXPECT_THAT(json, HasSubstr("\"ret\":\"none in the trace\""));
  EXPECT_THAT(json, HasSubstr("\"events_not_shown\":0"));
}

TEST(ChromeTraceJson, ProcessNamedByItsRole) {
  absl::StatusOr<Trace> trace =
      ParseTrace("softrpma-sim-trace 2\nseed 0x1\nfaults -\nprocess server\n");
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_THAT(ChromeTraceJson(*trace), HasSubstr("\"args\":{\"name\":\"server (seed 0x1)\"}"));
}

TEST(TraceProcessNames, RoleElseFileName_ASharedRoleWithItsFile) {
  auto parse = [](const std::string& text) {
    absl::StatusOr<Trace> trace = ParseTrace(text);
    EXPECT_TRUE(trace.ok()) << trace.status();
    return trace.ok() ? *trace : Trace();
  };
  const std::string v2 = "softrpma-sim-trace 2\nseed 0x1\nfaults -\nprocess ";
  const std::vector<Trace> traces = {parse(v2 + "server\n"), parse(v2 + "client\n"),
                                     parse(v2 + "client\n"), parse(kHeader)};
  EXPECT_EQ(TraceProcessNames(traces, {"d/a.trace", "d/b.trace", "d/c.trace", "d/old.trace"}),
            (std::vector<std::string>{"server", "client (b.trace)", "client (c.trace)",
                                      "old.trace"}));
}

}  // namespace
}  // namespace softrpma::rpma_sim
