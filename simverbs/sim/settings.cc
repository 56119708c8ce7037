#include "simverbs/sim/settings.h"

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "simverbs/sim/fabric/host.h"
#include "simverbs/sim/faults/fault.h"
#include "simverbs/sim/nic/device.h"
#include "simverbs/sim/profiles/device_profile.h"
#include "simverbs/sim/sched/sched.h"
#include "simverbs/sim/trace/process_end.h"
#include "simverbs/sim/trace/stats.h"
#include "simverbs/sim/trace/trace.h"

namespace softrpma::sim {
namespace {

// Set in a child of fork() whose parent had started the simulated NIC.
std::atomic<bool> g_forked_child{false};

// The value of a variable naming a file; unset and empty are the same: off.
const char* PathEnv(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

absl::Status EnvError(const char* variable, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(variable, ": ", message));
}

// A 0-or-1 variable: *out stays unset when `variable` is; else 1 or 0, or the error that says
// what `expected` values mean.
absl::Status ReadSwitch(const char* variable, const char* expected, std::optional<bool>* out) {
  const char* value = std::getenv(variable);
  if (value == nullptr) return absl::OkStatus();
  if (std::strcmp(value, "0") != 0 && std::strcmp(value, "1") != 0) {
    return EnvError(variable, absl::StrCat("bad value \"", value, "\": expected ", expected));
  }
  *out = std::strcmp(value, "1") == 0;
  return absl::OkStatus();
}

}  // namespace

absl::Status ApplyEnvironment() {
  // Upstream librpma's debug builds fail their Nth internal call when RPMA_FAULT_INJECTION=N.
  // softrpma has no such counter: a program's fault-injection run would silently inject
  // nothing, so it is refused with what does the job here.
  if (const char* upstream = std::getenv(kUpstreamFaultInjectionEnvVar)) {
    return EnvError(kUpstreamFaultInjectionEnvVar,
                    absl::StrCat("\"", upstream,
                                 "\" asks for upstream librpma's debug-build fault injection, "
                                 "which softrpma does not have; unset it and name the fault in ",
                                 kFaultsEnvVar, " instead (docs/FAULTS.md), e.g. ", kFaultsEnvVar,
                                 "='malloc:fail=ENOMEM:nth=", upstream,
                                 "', or sweep every fault point with `rpma-sim sweep`"));
  }
  std::optional<uint64_t> seed;
  if (const char* text = std::getenv(kSeedEnvVar)) {  // set but empty: malformed
    absl::StatusOr<uint64_t> parsed = ParseSeed(text);
    if (!parsed.ok()) return EnvError(kSeedEnvVar, parsed.status().message());
    seed = *parsed;
  }
  if (absl::Status fabric = host::ConfigureFabric(); !fabric.ok()) {
    return absl::InvalidArgumentError(fabric.message());  // it names its variable
  }
  const DeviceProfile* profile = &DeviceProfiles()[0];
  if (const char* name = std::getenv(kDeviceEnvVar)) {  // set but empty: malformed
    absl::StatusOr<const DeviceProfile*> found = FindDeviceProfile(name);
    if (!found.ok()) return EnvError(kDeviceEnvVar, found.status().message());
    profile = *found;
  }
  std::optional<bool> native_atomic_write;
  if (absl::Status status = ReadSwitch(kNativeAtomicWriteEnvVar,
                                       "1 (the device has native atomic write) or 0 (it has not; "
                                       "the default is the device's, see RPMA_SIM_DEVICE)",
                                       &native_atomic_write);
      !status.ok()) {
    return status;
  }
  std::optional<ExecutionMode> execution;
  if (const char* value = std::getenv(kExecutionEnvVar)) {
    absl::StatusOr<ExecutionMode> parsed = ParseExecutionMode(value);
    if (!parsed.ok()) return EnvError(kExecutionEnvVar, parsed.status().message());
    execution = *parsed;
  }
  std::optional<TransportKind> transport;
  if (const char* value = std::getenv(kTransportEnvVar)) {
    absl::StatusOr<TransportKind> parsed = ParseTransport(value);
    if (!parsed.ok()) return EnvError(kTransportEnvVar, parsed.status().message());
    transport = *parsed;
  }
  std::optional<bool> race_detector;
  if (absl::Status status = ReadSwitch(kRaceDetectorEnvVar,
                                       "1 (report buffers changed between a post and its "
                                       "execution, poison READ and receive buffers) or 0 (off, "
                                       "the default outside rpma-sim)",
                                       &race_detector);
      !status.ok()) {
    return status;
  }
  std::vector<FaultRule> rules;
  bool has_plan = false;
  if (const char* spec = std::getenv(kFaultsEnvVar)) {  // set but blank: an empty plan
    absl::StatusOr<std::vector<FaultRule>> parsed = ParseFaultRules(spec);
    if (!parsed.ok()) return EnvError(kFaultsEnvVar, parsed.status().message());
    rules = *std::move(parsed);
    has_plan = true;
  }
  if (const char* path = PathEnv(kScenarioEnvVar)) {
    absl::StatusOr<Scenario> scenario = LoadScenarioFile(path);
    if (!scenario.ok()) return EnvError(kScenarioEnvVar, scenario.status().message());
    for (FaultRule& rule : scenario->rules) rules.push_back(std::move(rule));
    if (!seed.has_value()) seed = scenario->seed;
    has_plan = true;
  }
  std::FILE* stats = nullptr;
  std::string stats_path;
  if (const char* path_env = PathEnv(kStatsEnvVar)) {
    const std::string path = TracePathForProcess(path_env, g_forked_child.load(), ProcessName());
    stats = std::fopen(path.c_str(), "w");
    if (stats == nullptr) {
      const int err = errno;
      return EnvError(kStatsEnvVar,
                      absl::StrCat("cannot open \"", path, "\": ", std::strerror(err)));
    }
    stats_path = path;
  }
  // First of what is applied: a bad directory is an error before anything else changed.
  if (const char* dir = PathEnv(kRunDirEnvVar)) {
    if (absl::Status status = WatchProcessEnd(dir, ProcessName()); !status.ok()) return status;
  }
  if (seed.has_value()) SetSeed(*seed);
  SetActiveProfile(*profile);
  if (native_atomic_write.has_value()) SetAtomicWriteSupported(*native_atomic_write);
  if (execution.has_value()) SetExecutionMode(*execution);
  if (transport.has_value()) SetTransport(*transport);
  if (race_detector.has_value()) SetRaceDetector(*race_detector);
  if (has_plan) GlobalFaultInjector().Install(std::make_unique<FaultPlan>(std::move(rules)));
  if (stats != nullptr) WriteStatsAtExit(stats, stats_path);
  if (const char* path = PathEnv(kTraceEnvVar)) {
    const FaultPlan* plan = GlobalFaultInjector().current();
    absl::Status status =
        StartTrace(TracePathForProcess(path, g_forked_child.load(), ProcessName()), CurrentSeed(),
                   plan != nullptr ? plan->Text(";") : "", ProcessName());
    if (!status.ok()) return EnvError(kTraceEnvVar, status.message());
  }
  return absl::OkStatus();
}

void ForgetSettingsInChild() {
  g_forked_child.store(true);
  AbandonTraceInChild();
  AbandonStatsInChild();
}

}  // namespace softrpma::sim
