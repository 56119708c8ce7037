// settings.h: the simulated NIC's settings from the process's environment, read when it starts.
//
// What it is: the one reader of the RPMA_SIM_* variables (docs/TRACE.md, docs/DEVICES.md,
// docs/FABRIC.md): the seed, the device profile and its native atomic write, the execution
// mode, the transport, the race detector, the fabric's settings, the fault plan (RPMA_SIM_FAULTS
// then RPMA_SIM_SCENARIO's rules), the stats file, the trace and the run's directory, where
// the process records how it ends (RPMA_SIM_RUN_DIR, trace/process_end.h). Everything is
// parsed before anything is applied (but the fabric's settings, which host::ConfigureFabric
// applies as it reads them).
// What it is not: the settings themselves, which live with what they set (sched.h, fault.h,
// device_profile.h, host.h, trace.h, each with its variable's name), nor the C++ controls that
// tests use instead (sim_control.h).
//
// Thread-safety: call from one thread at a time (GetSimBackend holds its lock; the fork child's
// handler runs alone).

#ifndef SOFTRPMA_SIMVERBS_SIM_SETTINGS_H_
#define SOFTRPMA_SIMVERBS_SIM_SETTINGS_H_

#include "absl/status/status.h"

namespace softrpma::sim {

// Upstream librpma's fault injection (its debug builds), refused by ApplyEnvironment with a
// pointer to RPMA_SIM_FAULTS.
inline constexpr char kUpstreamFaultInjectionEnvVar[] = "RPMA_FAULT_INJECTION";

// Reads the RPMA_SIM_* variables and applies them: run directory, seed, device profile, plan,
// stats, trace.
// Errors: InvalidArgument when one of them is malformed or its file cannot be opened; the
// message starts with the variable's name ("RPMA_SIM_FAULTS: fault spec rule 1, column 15:
// ...", "RPMA_SIM_SCENARIO: f.txt:3:1: ...", "RPMA_SIM_SEED: bad seed ..."). A trace that cannot
// be started is the last error: the rest is applied by then. RPMA_FAULT_INJECTION set is an
// error too (kUpstreamFaultInjectionEnvVar).
absl::Status ApplyEnvironment();

// In the child of a fork() whose parent had started the NIC: the trace and the stats file are
// the parent's; the child's (at its next ApplyEnvironment) get paths of their own
// (TracePathForProcess).
void ForgetSettingsInChild();

}  // namespace softrpma::sim

#endif  // SOFTRPMA_SIMVERBS_SIM_SETTINGS_H_
