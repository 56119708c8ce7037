#include "tools/rpma_sim/trace.h"

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace softrpma::rpma_sim {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;

// testdata/sample.trace: two QPs, a send with an unsignaled write before it, a receive, a read
// and a write in flight at once (the write fails), an injected fault, CM events.
std::string Sample() {
  std::string path = absl::StrCat(std::getenv("TEST_SRCDIR"), "/", std::getenv("TEST_WORKSPACE"),
                                  "/tools/rpma_sim/testdata/sample.trace");
  std::ifstream file(path);
  EXPECT_TRUE(file.good()) << path;
  return std::string((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
}

std::string ParseError(const std::string& text) {
  absl::StatusOr<Trace> trace = ParseTrace(text);
  EXPECT_FALSE(trace.ok());
  if (trace.ok()) return "";
  EXPECT_EQ(trace.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(trace.status().message());
}

constexpr char kHeader[] = "softrpma-sim-trace 1\nseed 0x1\nfaults -\n";

TEST(ParseTrace, Sample) {
  absl::StatusOr<Trace> trace = ParseTrace(Sample());
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_EQ(trace->version, 1);
  EXPECT_EQ(trace->seed, "0x000000000000002a");
  EXPECT_EQ(trace->faults, "ibv_post_send:fail=EIO:nth=4");
  ASSERT_EQ(trace->events.size(), 34u);
  EXPECT_TRUE(trace->has_end);
  EXPECT_EQ(trace->end_events, 34u);
  EXPECT_EQ(trace->end_fingerprint, "0xf233c3aae6aa8a0e");
  EXPECT_EQ(trace->fingerprint, trace->end_fingerprint);
  EXPECT_TRUE(trace->warnings.empty());

  const TraceEvent& cqe = trace->events[14];
  EXPECT_EQ(cqe.seq, 15u);
  EXPECT_EQ(cqe.time_ns, 0u);
  EXPECT_EQ(cqe.type, "cqe");
  EXPECT_EQ(cqe.line, 18);
  EXPECT_EQ(cqe.Get("status"), "IBV_WC_SUCCESS");
  EXPECT_EQ(cqe.GetNumber("ready"), 2100u);
  EXPECT_EQ(cqe.GetNumber("wr_id"), 2u);
  EXPECT_EQ(cqe.Get("nothing"), std::nullopt);
  EXPECT_EQ(cqe.GetNumber("status"), std::nullopt);
  // A value with '=' in it keeps it: action=fail=EIO.
  EXPECT_EQ(trace->events[24].Get("action"), "fail=EIO");
}

TEST(ParseTrace, UnknownTypesAndFieldsAreKept) {
  absl::StatusOr<Trace> trace =
      ParseTrace(absl::StrCat(kHeader, "1 5 future_event a=1\n2 6 wc cq=1 newfield=x\n"));
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_EQ(trace->events[0].type, "future_event");
  EXPECT_EQ(trace->events[1].Get("newfield"), "x");
}

TEST(ParseTrace, NoEndLine_Warning) {
  absl::StatusOr<Trace> trace = ParseTrace(absl::StrCat(kHeader, "1 0 create_cq cq=1\n"));
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_FALSE(trace->has_end);
  ASSERT_EQ(trace->warnings.size(), 1u);
  EXPECT_THAT(trace->warnings[0], HasSubstr("no end line"));
}

TEST(ParseTrace, CutLastLine_DroppedWithAWarning) {
  absl::StatusOr<Trace> trace =
      ParseTrace(absl::StrCat(kHeader, "1 0 create_cq cq=1\n2 0 create_c"));
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_EQ(trace->events.size(), 1u);
  EXPECT_THAT(trace->warnings[0], HasSubstr("line 5 is cut"));
}

TEST(ParseTrace, SeqGapAndTimeGoingBack_Warnings) {
  absl::StatusOr<Trace> trace =
      ParseTrace(absl::StrCat(kHeader, "1 10 a\n3 5 b\nend events=2 fingerprint=0x0\n"));
  ASSERT_TRUE(trace.ok()) << trace.status();
  ASSERT_EQ(trace->warnings.size(), 2u);
  EXPECT_THAT(trace->warnings[0], HasSubstr("line 5: seq 3, expected 2"));
  EXPECT_THAT(trace->warnings[1], HasSubstr("line 5: time goes back from 10 to 5 ns"));
}

TEST(ParseTrace, Version2_NamesItsProcess_EventsAfterIt) {
  absl::StatusOr<Trace> trace = ParseTrace(
      "softrpma-sim-trace 2\nseed 0x1\nfaults -\nprocess server\n1 0 create_cq cq=1\n");
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_EQ(trace->version, 2);
  EXPECT_EQ(trace->process, "server");
  ASSERT_EQ(trace->events.size(), 1u);
  EXPECT_EQ(trace->events[0].line, 5);
  EXPECT_THAT(FormatTrace(*trace), HasSubstr("trace format 2, process server, seed 0x1"));
}

// A version-2 trace of process `name` with `events` (lines without their seq and time: each
// gets seq i+1, and time `time` for the first, 0 after).
Trace TraceOf(const std::string& name, const std::vector<std::string>& events,
              uint64_t first_seq = 1, const std::string& time = "0") {
  std::string text = absl::StrCat("softrpma-sim-trace 2\nseed 0x1\nfaults -\nprocess ", name, "\n");
  for (size_t i = 0; i < events.size(); ++i) {
    absl::StrAppend(&text, first_seq + i, " ", i == 0 ? time : "0", " ", events[i], "\n");
  }
  absl::StatusOr<Trace> trace = ParseTrace(text);
  EXPECT_TRUE(trace.ok()) << trace.status();
  return trace.ok() ? *std::move(trace) : Trace();
}

const std::vector<std::string> kServer = {
    "api_call thread=1 fn=rpma_ep_listen addr=127.0.0.1 port=7301",
    "post_send qp=1 wr_id=0x5555aaaa opcode=IBV_WR_SEND signaled=1",
    "cqe cq=1 wr_id=0x5555aaaa status=IBV_WC_SUCCESS",
    "post_send qp=1 wr_id=0x5555bbbb opcode=IBV_WR_SEND signaled=1"};
const std::vector<std::string> kClient = {
    "api_call thread=1 fn=rpma_conn_req_new addr=127.0.0.1 port=7301",
    "post_recv qp=1 wr_id=0x0 op_context=0x7777"};

TEST(RunFingerprint, SameRunElsewhere_PortsPointersSeqsAndFileOrderNormalized) {
  const std::string run = RunFingerprint({TraceOf("server", kServer), TraceOf("client", kClient)});
  EXPECT_THAT(run, ContainsRegex("^0x[0-9a-f]{16}$"));
  std::vector<std::string> server = kServer;
  for (std::string& line : server) {
    line = absl::StrReplaceAll(line, {{"7301", "9000"}, {"0x5555aaaa", "0x1234"},
                                      {"0x5555bbbb", "0x99"}});
  }
  std::vector<std::string> client = kClient;
  client[0] = absl::StrReplaceAll(client[0], {{"7301", "9000"}});
  client[1] = absl::StrReplaceAll(client[1], {{"0x7777", "0xabc"}});
  EXPECT_EQ(RunFingerprint({TraceOf("client", client, 40), TraceOf("server", server, 7)}), run);
}

TEST(RunFingerprint, WhatTheRunDidCounts) {
  const std::string run = RunFingerprint({TraceOf("server", kServer), TraceOf("client", kClient)});
  // Another time, status, QP, event, process name: another run.
  EXPECT_NE(RunFingerprint({TraceOf("server", kServer, 1, "5"), TraceOf("client", kClient)}), run);
  std::vector<std::string> failed = kServer;
  failed[2] = absl::StrReplaceAll(failed[2], {{"IBV_WC_SUCCESS", "IBV_WC_RETRY_EXC_ERR"}});
  EXPECT_NE(RunFingerprint({TraceOf("server", failed), TraceOf("client", kClient)}), run);
  std::vector<std::string> other_qp = kServer;
  other_qp[1] = absl::StrReplaceAll(other_qp[1], {{"qp=1", "qp=2"}});
  EXPECT_NE(RunFingerprint({TraceOf("server", other_qp), TraceOf("client", kClient)}), run);
  EXPECT_NE(RunFingerprint({TraceOf("server", kServer)}), run);
  EXPECT_NE(RunFingerprint({TraceOf("server", kServer), TraceOf("peer", kClient)}), run);
  // A pointer's identity counts: the second send reusing the first's wr_id is another run.
  std::vector<std::string> reused = kServer;
  reused[3] = absl::StrReplaceAll(reused[3], {{"0x5555bbbb", "0x5555aaaa"}});
  EXPECT_NE(RunFingerprint({TraceOf("server", reused), TraceOf("client", kClient)}), run);
}

TEST(FormatTrace, LibrpmaCalls) {
  absl::StatusOr<Trace> trace = ParseTrace(
      "softrpma-sim-trace 2\nseed 0x1\nfaults -\nprocess client\n"
      "1 0 api_call thread=1 fn=rpma_write qp=17 len=26 flags=0x3\n"
      "2 0 api_return thread=1 fn=rpma_write ret=RPMA_E_PROVIDER\n");
  ASSERT_TRUE(trace.ok()) << trace.status();
  const std::string text = FormatTrace(*trace);
  EXPECT_THAT(text, ContainsRegex("thread 1 +rpma_write\\(qp=17 len=26 flags=0x3\\)"));
  EXPECT_THAT(text, ContainsRegex("thread 1 +rpma_write returned RPMA_E_PROVIDER"));
}

TEST(ParseTrace, Errors) {
  EXPECT_THAT(ParseError(""), HasSubstr("line 1: missing header"));
  EXPECT_THAT(ParseError("hello 1\nseed 0x1\nfaults -\n"),
              HasSubstr("line 1: not a softrpma-sim trace"));
  EXPECT_THAT(ParseError("softrpma-sim-trace 3\nseed 0x1\nfaults -\nprocess a\n"),
              HasSubstr("line 1: trace format version 3; rpma-sim reads versions 1 to 2"));
  EXPECT_THAT(ParseError("softrpma-sim-trace 0\nseed 0x1\nfaults -\n"),
              HasSubstr("line 1: trace format version 0; rpma-sim reads versions 1 to 2"));
  EXPECT_THAT(ParseError("softrpma-sim-trace 2\nseed 0x1\nfaults -\n1 0 x\n"),
              HasSubstr("line 4: expected `process <name>`, got \"1 0 x\""));
  EXPECT_THAT(ParseError("softrpma-sim-trace 2\nseed 0x1\nfaults -\n"),
              HasSubstr("line 4: expected `process <name>`"));
  EXPECT_THAT(ParseError("softrpma-sim-trace 1\nfaults -\nseed 0x1\n"),
              HasSubstr("line 2: expected `seed <seed>`"));
  EXPECT_THAT(ParseError("softrpma-sim-trace 1\nseed 0x1\nfault -\n"),
              HasSubstr("line 3: expected `faults <plan>`"));
  EXPECT_THAT(ParseError(absl::StrCat(kHeader, "x 0 wc\n")),
              HasSubstr("line 4: expected `<seq> <time_ns> <type> key=value...`"));
  EXPECT_THAT(ParseError(absl::StrCat(kHeader, "1 0\n")), HasSubstr("line 4: expected"));
  EXPECT_THAT(ParseError(absl::StrCat(kHeader, "1 0 wc cq\n")),
              HasSubstr("line 4: field \"cq\" is not key=value"));
  EXPECT_THAT(ParseError(absl::StrCat(kHeader, "end events=0 fingerprint=0x0\n1 0 wc\n")),
              HasSubstr("line 5: a line after the end line"));
}

TEST(ReadTraceFile, ReadsAWholeFile) {
  std::string path = absl::StrCat(std::getenv("TEST_TMPDIR"), "/small.trace");
  std::ofstream(path) << kHeader;
  absl::StatusOr<std::string> text = ReadTraceFile(path);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, kHeader);
}

TEST(ReadTraceFile, Directory_IsInvalidArgument) {
  absl::StatusOr<std::string> text = ReadTraceFile("/");
  EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(text.status().message(), "/: cannot read trace file: it is a directory");
}

TEST(ReadTraceFile, RegularFileOverTheLimit_IsInvalidArgument) {
  std::string path = absl::StrCat(std::getenv("TEST_TMPDIR"), "/big.trace");
  std::ofstream(path) << std::string((2 << 20) + 1, 'x');
  EXPECT_TRUE(ReadTraceFile(path, 3 << 20).ok());
  absl::StatusOr<std::string> text = ReadTraceFile(path, 2 << 20);
  EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(text.status().message(), HasSubstr(": cannot read trace file: it is larger than 2 MiB, the most softrpma reads"));
}

TEST(ReadTraceFile, EndlessDevice_StopsAtTheLimit) {
  absl::StatusOr<std::string> text = ReadTraceFile("/dev/zero", 1 << 20);
  EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(text.status().message(), HasSubstr("/dev/zero: cannot read trace file: it is larger than 1 MiB"));
}

TEST(ReadTraceFile, Missing_IsNotFound) {
  absl::StatusOr<std::string> text = ReadTraceFile("/nonexistent/x.trace");
  EXPECT_EQ(text.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(text.status().message(),
              HasSubstr("/nonexistent/x.trace: cannot read trace file: No such file or directory"));
}

TEST(FormatTrace, SampleReadsAsSentences) {
  absl::StatusOr<Trace> trace = ParseTrace(Sample());
  ASSERT_TRUE(trace.ok()) << trace.status();
  std::string text = FormatTrace(*trace);
  EXPECT_THAT(text, HasSubstr("seed 0x000000000000002a, faults at start: "
                              "ibv_post_send:fail=EIO:nth=4"));
  EXPECT_THAT(text, HasSubstr("ended normally: 34 events, fingerprint 0xf233c3aae6aa8a0e "
                              "(matches the events)"));
  EXPECT_THAT(text, HasSubstr("0.000     13  QP 17    post_send RDMA_WRITE wr_id=0x1, 4096 "
                              "bytes, unsignaled"));
  EXPECT_THAT(text, HasSubstr("0.000     15  CQ 1     completion of QP 17 wr_id=0x2: SEND "
                              "IBV_WC_SUCCESS, 20 bytes, ready at 2.100 us"));
  EXPECT_THAT(text, HasSubstr("2.200     25  QP 17    FAULT injected: ibv_post_send fail=EIO "
                              "(hit 4)"));
  EXPECT_THAT(text, HasSubstr("5.001     30  CQ 1     polled: QP 17 wr_id=0x6 RDMA_WRITE "
                              "IBV_WC_REM_ACCESS_ERR, 0 bytes"));
  EXPECT_THAT(text, HasSubstr("id 1     CM event RDMA_CM_EVENT_DISCONNECTED queued (status 0)"));
  EXPECT_THAT(text, HasSubstr("summary: 6 work requests posted, 4 completions (1 with an error), "
                              "4 polled, 3 CM events, 1 faults injected"));
}

TEST(FormatTrace, FingerprintMismatchIsSaid) {
  std::string edited =
      absl::StrReplaceAll(Sample(), {{"cqe=64 channel=1\n2", "cqe=32 channel=1\n2"}});
  absl::StatusOr<Trace> trace = ParseTrace(edited);
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_THAT(FormatTrace(*trace), HasSubstr("(MISMATCH: the file has 34 events, fingerprint 0x"));
}

TEST(FormatTrace, NoEndLineIsSaid) {
  absl::StatusOr<Trace> trace = ParseTrace(absl::StrCat(kHeader,
                                                        "1 0 create_cq cq=1 cqe=1 "
                                                        "channel=0\n"));
  ASSERT_TRUE(trace.ok()) << trace.status();
  std::string text = FormatTrace(*trace);
  EXPECT_THAT(text, HasSubstr("NO END LINE"));
  EXPECT_THAT(text, HasSubstr("CQ 1     created: 1 entries, no channel"));
}

TEST(FormatTrace, CmTimerAndDrepAreSaid) {
  absl::StatusOr<Trace> trace = ParseTrace(absl::StrCat(
      kHeader,
      "1 0 cm_event id=2 type=RDMA_CM_EVENT_DISCONNECTED status=-110 at=98304000000\n"
      "2 5 cm_drep id=2\n"));
  ASSERT_TRUE(trace.ok()) << trace.status();
  std::string text = FormatTrace(*trace);
  EXPECT_THAT(text, HasSubstr("CM event RDMA_CM_EVENT_DISCONNECTED queued (status -110), due at "
                              "98304000000 ns"));
  EXPECT_THAT(text, HasSubstr("id 2     DREP received: DISCONNECTED due now"));
}

}  // namespace
}  // namespace softrpma::rpma_sim
