// sim_checks.h: what rpma-sim asks the simulator's own parsers before it starts a program, so
// that a malformed fault spec or scenario is an error of rpma-sim (naming the rule and column)
// rather than a run that fails at its first librpma call; and the fault points, as the
// simulator lists them; and the device profiles.
//
// Thread-safety: these functions install and clear a fault plan in THIS process (the parser is
// reached through simverbs/sim/sim_control.h); rpma-sim does not use the simulated NIC itself, so
// this is harmless, but they must not run concurrently with each other.

#ifndef SOFTRPMA_TOOLS_RPMA_SIM_SIM_CHECKS_H_
#define SOFTRPMA_TOOLS_RPMA_SIM_SIM_CHECKS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace softrpma::rpma_sim {

// OK when the simulator accepts `spec` (the RPMA_SIM_FAULTS grammar, docs/FAULTS.md).
// Errors: InvalidArgument with the simulator's message ("fault spec rule 2, column 37: ...").
absl::Status CheckFaultSpec(absl::string_view spec);

// OK when the scenario file at `path` can be read and the simulator accepts it (docs/FAULTS.md).
// Errors: InvalidArgument with the simulator's message ("<path>:<line>:<column>: ...", or
// "<path>: cannot read scenario file: ...").
// (The simulator's LoadScenario also sets this process's seed: harmless, rpma-sim simulates
// nothing itself.)
absl::Status CheckScenarioFile(const std::string& path);

// One fault point, as `rpma-sim points` shows it.
struct PointInfo {
  std::string name;                  // e.g. "ibv_post_send"
  bool can_fail = false;             // false for calls that return void (fail= is rejected)
  std::string description;           // the call, and what failing it does in librpma
  std::vector<std::string> actions;  // the actions it accepts, e.g. "fail=<errno>"
  bool accepts_qp = false;           // the qp= condition is valid for it
};

// Every fault point, in the simulator's order.
std::vector<PointInfo> ListPoints();

// Whether the simulator accepts `fail=<err_name>` at `point` (e.g. "ibv_post_send", "EIO").
bool CanFail(absl::string_view point, absl::string_view err_name);

// The device profiles named by `names` (comma-separated, e.g. "mlx5,siw"), in order, each
// once. Errors: InvalidArgument naming the unknown one and the known ones, or saying that
// `names` names none.
absl::StatusOr<std::vector<std::string>> ParseDeviceList(absl::string_view names);

// The name of the simulator's default device profile (RPMA_SIM_DEVICE unset).
std::string DefaultDevice();

// `rpma-sim devices`: one column per device profile, one row per value that differs between
// real devices (docs/DEVICES.md names the source of each).
std::string FormatDevices();

}  // namespace softrpma::rpma_sim

#endif  // SOFTRPMA_TOOLS_RPMA_SIM_SIM_CHECKS_H_
