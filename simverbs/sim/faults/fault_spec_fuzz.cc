// fault_spec_fuzz: the fault spec parser (RPMA_SIM_FAULTS, ParseFaultSpec) and the scenario
// parser (RPMA_SIM_SCENARIO, ParseScenario) on any text, both on every input. A spec or a
// scenario is read from the environment or a file, so a malformed one must be an
// InvalidArgument that says where, never a crash. What parses has a canonical form that parses
// again to itself: the plan's Text(";") for a spec; its rules' texts, one per line, and its
// seed line for a scenario.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "simverbs/sim/faults/fault.h"
#include "tools/fuzz/check.h"

namespace softrpma::sim {
namespace {

std::vector<std::string> Texts(const std::vector<FaultRule>& rules) {
  std::vector<std::string> texts;
  for (const FaultRule& rule : rules) texts.push_back(rule.text);
  return texts;
}

void CheckError(const absl::Status& status) {
  FUZZ_CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  FUZZ_CHECK(!status.message().empty());
}

void FuzzSpec(absl::string_view text) {
  absl::StatusOr<std::unique_ptr<FaultPlan>> plan = ParseFaultSpec(text);
  if (!plan.ok()) {
    CheckError(plan.status());
    return;
  }
  const std::string canonical = (*plan)->Text(";");
  absl::StatusOr<std::unique_ptr<FaultPlan>> again = ParseFaultSpec(canonical);
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK((*again)->Text(";") == canonical);
  for (const FaultRule& rule : (*plan)->rules()) {
    absl::StatusOr<std::vector<FaultRule>> one = ParseFaultRules(rule.text);
    FUZZ_CHECK(one.ok() && one->size() == 1 && (*one)[0].text == rule.text);
    FUZZ_CHECK((*one)[0].point == rule.point && (*one)[0].action.kind == rule.action.kind);
  }
}

void FuzzScenario(absl::string_view text) {
  absl::StatusOr<Scenario> scenario = ParseScenario(text, "fuzz.txt");
  if (!scenario.ok()) {
    CheckError(scenario.status());
    FUZZ_CHECK(absl::StartsWith(scenario.status().message(), "fuzz.txt:"));
    return;
  }
  std::string canonical;
  if (scenario->seed.has_value()) absl::StrAppend(&canonical, "seed ", *scenario->seed, "\n");
  for (const FaultRule& rule : scenario->rules) absl::StrAppend(&canonical, rule.text, "\n");
  absl::StatusOr<Scenario> again = ParseScenario(canonical, "canonical.txt");
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(again->seed == scenario->seed);
  FUZZ_CHECK(Texts(again->rules) == Texts(scenario->rules));
}

}  // namespace
}  // namespace softrpma::sim

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  softrpma::sim::FuzzSpec(text);
  softrpma::sim::FuzzScenario(text);
  return 0;
}
