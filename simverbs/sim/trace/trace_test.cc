// The trace writer (docs/TRACE.md): header, one well-formed line per event with increasing seq
// and non-decreasing time, the end line with the count and the FNV-1a fingerprint of the event
// lines, and the lines of each kind of event. Its own binary: a trace is process-wide.

#include "simverbs/sim/trace/trace.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "simverbs/backend.h"
#include "simverbs/sim/sim_control.h"
#include "simverbs/sim/test_util.h"

namespace softrpma::sim::testing {
namespace {

using ::testing::Contains;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;

bool AllOf(absl::string_view text, const char* chars) {
  return !text.empty() && text.find_first_not_of(chars) == absl::string_view::npos;
}

// True when `line` is "<seq> <time> <type> <key>=<value>..." (docs/TRACE.md); sets seq, time
// and the length of "<seq> <time> ".
bool ParseEventLine(const std::string& line, uint64_t* seq, uint64_t* time, size_t* prefix) {
  std::vector<absl::string_view> fields = absl::StrSplit(line, ' ');
  if (fields.size() < 3 || !AllOf(fields[0], "0123456789") || !AllOf(fields[1], "0123456789") ||
      !AllOf(fields[2], "abcdefghijklmnopqrstuvwxyz_")) {
    return false;
  }
  for (size_t i = 3; i < fields.size(); ++i) {
    const size_t eq = fields[i].find('=');
    if (eq == absl::string_view::npos || eq + 1 == fields[i].size() ||
        !AllOf(fields[i].substr(0, eq), "abcdefghijklmnopqrstuvwxyz_")) {
      return false;
    }
  }
  *seq = std::stoull(std::string(fields[0]));
  *time = std::stoull(std::string(fields[1]));
  *prefix = fields[0].size() + fields[1].size() + 2;
  return true;
}

std::vector<std::string> ReadLines(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::vector<std::string> lines = absl::StrSplit(text.str(), '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  return lines;
}

TEST(NamesTest, AsInTheHeaders) {
  EXPECT_STREQ(WcStatusName(IBV_WC_REM_ACCESS_ERR), "IBV_WC_REM_ACCESS_ERR");
  EXPECT_STREQ(WcOpcodeName(IBV_WC_RECV_RDMA_WITH_IMM), "IBV_WC_RECV_RDMA_WITH_IMM");
  EXPECT_STREQ(WrOpcodeName(IBV_WR_ATOMIC_WRITE), "IBV_WR_ATOMIC_WRITE");
  EXPECT_STREQ(QpStateName(IBV_QPS_ERR), "IBV_QPS_ERR");
  EXPECT_STREQ(CmEventName(RDMA_CM_EVENT_CONNECT_ERROR), "RDMA_CM_EVENT_CONNECT_ERROR");
  EXPECT_EQ(WcStatusName(999), nullptr);
  EXPECT_EQ(NameOr(WcStatusName(999), 999), "999");
  EXPECT_EQ(WcStatusByName("IBV_WC_WR_FLUSH_ERR"), IBV_WC_WR_FLUSH_ERR);
  EXPECT_FALSE(WcStatusByName("WR_FLUSH_ERR").has_value());
}

TEST(FnvTest, KnownValues) {
  EXPECT_EQ(Fnv1a64(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(Fnv1a64("a"), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(Fnv1a64("bar", Fnv1a64("foo")), Fnv1a64("foobar"));
}

TEST(TraceTest, HeaderEventsEndLine_FingerprintOfTheEventLines) {
  Backend* backend = SimBackend();
  const std::string path = absl::StrCat(std::getenv("TEST_TMPDIR"), "/trace.txt");
  SetSimSeed(0x1234);
  ASSERT_TRUE(
      SetFaultPlan("ibv_post_send:wc_status=IBV_WC_REM_OP_ERR:nth=2; rdma_listen:fail=EIO:nth=9")
          .ok());
  ASSERT_TRUE(StartSimTrace(path).ok());
  EXPECT_EQ(StartSimTrace(path).code(), absl::StatusCode::kFailedPrecondition);
  {
    TestConnection conn(backend);
    ASSERT_TRUE(conn.Connect(ConnectionOptions()).ok());
    ASSERT_EQ(backend->IbvReqNotifyCq(conn.active.send_cq, 0), 0);
    ASSERT_EQ(PostWrite(backend, conn.active.qp(), 0xabc, nullptr, 0, 0, 0), 0);
    ASSERT_EQ(PostWrite(backend, conn.active.qp(), 0xabd, nullptr, 0, 0, 0), 0);
    ibv_cq* cq = nullptr;
    void* context = nullptr;
    ASSERT_EQ(backend->IbvGetCqEvent(conn.active.comp_channel, &cq, &context), 0);
    backend->IbvAckCqEvents(cq, 1);
    EXPECT_EQ(PollAll(backend, conn.active.send_cq).size(), 2u);
    ASSERT_EQ(PostRecvBuf(backend, conn.passive.qp(), 7, nullptr, 0), 0);
    SetSimSeed(0x99);
    ClearFaultPlan();
    ASSERT_TRUE(conn.Disconnect().ok());
  }
  const uint64_t events = TraceEventCount();
  const uint64_t fingerprint = TraceFingerprint();
  FinishSimTrace();
  FinishSimTrace();  // a no-op now

  const std::vector<std::string> lines = ReadLines(path);
  ASSERT_GE(lines.size(), 5u);
  EXPECT_EQ(lines[0], "softrpma-sim-trace 2");
  EXPECT_EQ(lines[1], "seed 0x0000000000001234");
  EXPECT_EQ(lines[2],
            "faults ibv_post_send:wc_status=IBV_WC_REM_OP_ERR:nth=2;rdma_listen:fail=EIO:nth=9");
  uint64_t hash = kFnvOffsetBasis;
  uint64_t previous_time = 0;
  std::vector<std::string> bodies;  // lines without seq and time
  // RPMA_SIM_ROLE unset: the executable's name.
  EXPECT_EQ(lines[3], "process trace_test");
  for (size_t i = 4; i + 1 < lines.size(); ++i) {
    uint64_t seq = 0;
    uint64_t time = 0;
    size_t prefix = 0;
    ASSERT_TRUE(ParseEventLine(lines[i], &seq, &time, &prefix)) << lines[i];
    EXPECT_EQ(seq, i - 3) << lines[i];
    EXPECT_GE(time, previous_time) << lines[i];
    previous_time = time;
    hash = Fnv1a64(lines[i] + "\n", hash);
    bodies.push_back(lines[i].substr(prefix));
  }
  EXPECT_EQ(lines.size() - 5, events);
  EXPECT_EQ(hash, fingerprint);
  char end[80];
  std::snprintf(end, sizeof(end), "end events=%llu fingerprint=0x%016llx",
                static_cast<unsigned long long>(events), static_cast<unsigned long long>(hash));
  EXPECT_EQ(lines.back(), end);

  const std::string all = absl::StrJoin(bodies, "\n");
  EXPECT_THAT(all, ContainsRegex("create_cq cq=[0-9]+ cqe=127 channel=[1-9][0-9]*"));
  EXPECT_THAT(all,
              ContainsRegex("create_qp qp=[0-9]+ id=[0-9]+ send_cq=[0-9]+ recv_cq=[0-9]+ srq=0"));
  EXPECT_THAT(all, ContainsRegex("cm_event id=[0-9]+ type=RDMA_CM_EVENT_CONNECT_REQUEST status=0"));
  EXPECT_THAT(all, ContainsRegex("cm_event_got id=[0-9]+ type=RDMA_CM_EVENT_ESTABLISHED"));
  EXPECT_THAT(all, ContainsRegex("cm_event_ack id=[0-9]+ type=RDMA_CM_EVENT_DISCONNECTED"));
  EXPECT_THAT(all, ContainsRegex("qp_state qp=[0-9]+ state=IBV_QPS_RTS"));
  EXPECT_THAT(all, ContainsRegex("cq_arm cq=[0-9]+ solicited_only=0"));
  EXPECT_THAT(
      all,
      ContainsRegex("post_send qp=[0-9]+ wr_id=0xabc opcode=IBV_WR_RDMA_WRITE len=0 signaled=1"));
  EXPECT_THAT(all, ContainsRegex("cqe cq=[0-9]+ qp=[0-9]+ wr_id=0xabc status=IBV_WC_SUCCESS "
                                 "opcode=IBV_WC_RDMA_WRITE byte_len=0 ready=[0-9]+"));
  EXPECT_THAT(all, ContainsRegex("cq_event cq=[0-9]+ channel=[0-9]+ at=[0-9]+"));
  EXPECT_THAT(all, ContainsRegex("cq_event_got cq=[0-9]+ channel=[0-9]+"));
  EXPECT_THAT(all, ContainsRegex("cq_event_ack cq=[0-9]+ n=1"));
  EXPECT_THAT(all, ContainsRegex("fault point=ibv_post_send action=wc_status=IBV_WC_REM_OP_ERR "
                                 "hit=2 qp=[0-9]+"));
  EXPECT_THAT(all, ContainsRegex("wc cq=[0-9]+ qp=[0-9]+ wr_id=0xabd status=IBV_WC_REM_OP_ERR "
                                 "opcode=IBV_WC_RDMA_WRITE byte_len=0"));
  EXPECT_THAT(all, ContainsRegex("qp_state qp=[0-9]+ state=IBV_QPS_ERR"));
  EXPECT_THAT(all, ContainsRegex("post_recv qp=[0-9]+ wr_id=0x7 len=0"));
  EXPECT_THAT(all, HasSubstr("seed value=0x0000000000000099"));
  EXPECT_THAT(all, HasSubstr("plan faults=-"));
  EXPECT_THAT(all, ContainsRegex("destroy_qp qp=[0-9]+"));
  EXPECT_THAT(all, ContainsRegex("destroy_cq cq=[0-9]+"));
}

TEST(TracePathTest, PidAndRole) {
  const std::string pid = std::to_string(static_cast<long>(getpid()));
  EXPECT_EQ(TracePathForProcess("run.%r.%p.trace", false, "server"),
            "run.server." + pid + ".trace");
  EXPECT_EQ(TracePathForProcess("run.%r.trace", false, "server"), "run.server.trace");
  EXPECT_EQ(TracePathForProcess("run.trace", false, "server"), "run.trace");
  // A role is one file-name word: a slash or a blank cannot reach another directory.
  EXPECT_EQ(TracePathForProcess("t/%r", false, "../x y"), "t/.._x_y");
  EXPECT_EQ(TracePathForProcess("t/%r", false, ""), "t/_");
  // %% and a lone % stay as they are.
  EXPECT_EQ(TracePathForProcess("a%%b%", false, "r"), "a%%b%");
  // A forked child has its parent's role: without %p its file gets its pid.
  EXPECT_EQ(TracePathForProcess("run.%r.trace", true, "server"),
            "run.server.trace." + pid);
  EXPECT_EQ(TracePathForProcess("run.%r.%p", true, "server"), "run.server." + pid);
}

}  // namespace
}  // namespace softrpma::sim::testing
