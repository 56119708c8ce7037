// waits_test.cc: the board a hang report is made of (waits.h), and SIGUSR2 writing it.

#include "simverbs/sim/waits.h"

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "gtest/gtest.h"

namespace softrpma::sim::waits {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(Waits, Off_RecordsNothing) {
  ASSERT_FALSE(On());
  ScopedWait wait("ibv_get_cq_event", "completion channel 1 (CQ 1)");
  EXPECT_NE(Report().find("no thread waits in the simulator"), std::string::npos);
}

TEST(Waits, Started_Sigusr2WritesTheReport) {
  char dir_template[] = "/tmp/waits_test.XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  setenv(kRunDirEnvVar, dir.c_str(), 1);
  Start("tester");
  ASSERT_TRUE(On());
  const std::string marker = ReadAll(dir + "/sim." + std::to_string(getpid()));
  EXPECT_NE(marker.find("name tester\n"), std::string::npos) << marker;
  EXPECT_NE(marker.find("sigusr2 1\n"), std::string::npos) << marker;

  std::atomic<uint32_t> sq{2}, rq{1};
  ibv_qp qp{};
  qp.qp_num = 17;
  qp.state = IBV_QPS_RTS;
  AddQp({&qp, &sq, &rq, 64, 32, 1, 2});
  const std::string path = dir + "/waits." + std::to_string(getpid()) + ".txt";
  {
    ScopedWait wait("rdma_get_cm_event", "a CM event on the channel of id 1 listening");
    raise(SIGUSR2);  // the handler only writes a byte: the reporter thread writes the file
    for (int i = 0; i < 200 && access(path.c_str(), F_OK) != 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  const std::string report = ReadAll(path);
  EXPECT_NE(report.find(" waits in rdma_get_cm_event for a CM event on the channel of id 1"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("QP 17: RTS, 2 of 64 send WRs outstanding, 1 of 32 receives posted"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("simulator threads: "), std::string::npos) << report;
  RemoveQp(&qp);
  EXPECT_EQ(Report().find("QP 17"), std::string::npos);
  EXPECT_NE(Report().find("no thread waits in the simulator"), std::string::npos);  // the wait ended with its scope
}

}  // namespace
}  // namespace softrpma::sim::waits
