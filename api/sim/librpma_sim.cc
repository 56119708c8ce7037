// librpma_sim.cc: the C functions of librpma_sim.h, on simverbs/sim/sim_control.h.

#include "librpma_sim.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "simverbs/sim/sim_control.h"

namespace {

using softrpma::sim::FaultPointDescription;

// Copies the reason of `status` into err (NUL-terminated, cut to err_len - 1) and returns -1.
int Failed(const absl::Status& status, char* err, size_t err_len) {
  if (err != nullptr && err_len > 0) {
    const absl::string_view message = status.message();
    const size_t n = std::min(message.size(), err_len - 1);
    std::memcpy(err, message.data(), n);
    err[n] = '\0';
  }
  return -1;
}

const std::vector<FaultPointDescription>& Points() {
  // Never destroyed: the strings are handed out until exit.
  static const auto* points =
      new std::vector<FaultPointDescription>(softrpma::sim::DescribeFaultPoints());
  return *points;
}

long long CountOrMinusOne(const absl::StatusOr<uint64_t>& count) {
  return count.ok() ? static_cast<long long>(*count) : -1;
}

}  // namespace

extern "C" {

int rpma_sim_set_faults(const char* spec, char* err, size_t err_len) {
  if (spec == nullptr) return Failed(absl::InvalidArgumentError("spec is NULL"), err, err_len);
  const absl::Status status = softrpma::sim::SetFaultPlan(spec);
  return status.ok() ? 0 : Failed(status, err, err_len);
}

int rpma_sim_load_scenario(const char* path, char* err, size_t err_len) {
  if (path == nullptr) return Failed(absl::InvalidArgumentError("path is NULL"), err, err_len);
  const absl::Status status = softrpma::sim::LoadScenario(path);
  return status.ok() ? 0 : Failed(status, err, err_len);
}

int rpma_sim_clear_faults(void) {
  softrpma::sim::ClearFaultPlan();
  return 0;
}

long long rpma_sim_fault_hits(const char* point) {
  if (point == nullptr) return -1;
  return CountOrMinusOne(softrpma::sim::FaultHitCount(point));
}

long long rpma_sim_fault_injections(const char* point) {
  if (point == nullptr) return -1;
  return CountOrMinusOne(softrpma::sim::FaultInjectionCount(point));
}

int rpma_sim_fault_point_count(void) { return static_cast<int>(Points().size()); }

const char* rpma_sim_fault_point_name(int index) {
  if (index < 0 || index >= rpma_sim_fault_point_count()) return nullptr;
  return Points()[index].name.c_str();
}

const char* rpma_sim_fault_point_description(int index) {
  if (index < 0 || index >= rpma_sim_fault_point_count()) return nullptr;
  return Points()[index].description.c_str();
}

int rpma_sim_set_seed(uint64_t seed) {
  softrpma::sim::SetSimSeed(seed);
  return 0;
}

uint64_t rpma_sim_get_seed(void) { return softrpma::sim::SimSeed(); }

uint64_t rpma_sim_now_ns(void) { return softrpma::sim::SimClockNs(); }

}  // extern "C"
