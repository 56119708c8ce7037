// `rpma-sim devices`: the devices the simulated NIC can stand for and what differs between
// them.

#include <cstdio>

#include "tools/rpma_sim/command_line.h"
#include "tools/rpma_sim/commands/command.h"
#include "tools/rpma_sim/sim_checks.h"

namespace softrpma::rpma_sim {
namespace {

int Devices(const CommandLine& line, const char* argv0) {
  std::fputs(FormatDevices().c_str(), stdout);
  return 0;
}

}  // namespace

const Command& DevicesCommand() {
  static const Command command{
      {"devices", {}, false, 0, 0},
      "rpma-sim devices",
      "Lists the devices the simulated NIC can stand for, one column each (the default\n"
      "first), and the values that differ between them: the transport, immediate data,\n"
      "native atomic write, on-demand paging, what ibv_query_device_ex reports, how CQ and\n"
      "QP sizes are rounded, and the private data rdma_connect, rdma_accept and\n"
      "rdma_reject carry. docs/DEVICES.md names the source of each value.",
      "  rpma-sim devices\n",
      &Devices,
  };
  return command;
}

}  // namespace softrpma::rpma_sim
