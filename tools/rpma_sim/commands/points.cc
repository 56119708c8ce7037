// `rpma-sim points`: every fault point of the simulated NIC, the call it stands for and the
// actions it takes.

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tools/rpma_sim/command_line.h"
#include "tools/rpma_sim/commands/command.h"
#include "tools/rpma_sim/commands/common.h"
#include "tools/rpma_sim/sim_checks.h"

namespace softrpma::rpma_sim {
namespace {

int Points(const CommandLine& line, const char* argv0) {
  std::vector<PointInfo> points = ListPoints();
  size_t width = 0;
  for (const PointInfo& p : points) width = std::max(width, p.name.size());
  for (const PointInfo& p : points) {
    std::string actions = p.actions.empty() ? "none" : absl::StrJoin(p.actions, " ");
    if (p.accepts_qp) absl::StrAppend(&actions, "; condition qp=<n> too");
    if (!p.can_fail) absl::StrAppend(&actions, " (returns void: counted, cannot fail)");
    std::printf("%-*s  %s", static_cast<int>(width), p.name.c_str(),
                Wrap(p.description, width + 2, width + 2).c_str());
    std::printf("%*s%s", static_cast<int>(width + 2), "",
                Wrap(absl::StrCat("actions: ", actions), width + 2, width + 2).c_str());
  }
  return 0;
}

}  // namespace

const Command& PointsCommand() {
  static const Command command{
      {"points", {}, false, 0, 0},
      "rpma-sim points",
      "Lists every fault point of the simulated NIC, in the simulator's order: the verbs or\n"
      "rdma_cm call it stands for, or malloc (every allocation softrpma makes). A point\n"
      "marked \"void\" is a call that cannot fail: it is counted, never failed.",
      "  rpma-sim points\n",
      &Points,
  };
  return command;
}

}  // namespace softrpma::rpma_sim
