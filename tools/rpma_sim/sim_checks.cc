#include "tools/rpma_sim/sim_checks.h"

#include <algorithm>
#include <cerrno>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "simverbs/sim/profiles/device_profile.h"
#include "simverbs/sim/sim_control.h"

namespace softrpma::rpma_sim {

absl::Status CheckFaultSpec(absl::string_view spec) {
  absl::Status status = sim::SetFaultPlan(spec);
  sim::ClearFaultPlan();
  return status;
}

absl::Status CheckScenarioFile(const std::string& path) {
  absl::Status status = sim::LoadScenario(path);
  sim::ClearFaultPlan();
  return status;
}

bool CanFail(absl::string_view point, absl::string_view err_name) {
  return CheckFaultSpec(absl::StrCat(point, ":fail=", err_name, ":nth=1")).ok();
}

std::vector<PointInfo> ListPoints() {
  std::vector<PointInfo> points;
  for (sim::FaultPointDescription& d : sim::DescribeFaultPoints()) {
    PointInfo info;
    info.can_fail = CanFail(d.name, "EIO");
    info.name = std::move(d.name);
    info.description = std::move(d.description);
    info.actions = std::move(d.actions);
    info.accepts_qp = d.accepts_qp;
    points.push_back(std::move(info));
  }
  return points;
}

absl::StatusOr<std::vector<std::string>> ParseDeviceList(absl::string_view names) {
  std::vector<std::string> devices;
  for (absl::string_view name : absl::StrSplit(names, ',', absl::SkipWhitespace())) {
    name = absl::StripAsciiWhitespace(name);
    absl::StatusOr<const sim::DeviceProfile*> profile = sim::FindDeviceProfile(name);
    if (!profile.ok()) return profile.status();
    if (std::find(devices.begin(), devices.end(), name) == devices.end()) {
      devices.emplace_back(name);
    }
  }
  if (devices.empty()) {
    return absl::InvalidArgumentError("names no device (`rpma-sim devices` lists them)");
  }
  return devices;
}

std::string DefaultDevice() { return sim::DeviceProfiles()[0].name; }

namespace {

const char* YesNo(bool value) { return value ? "yes" : "no"; }

const char* RoundingName(sim::QueueRounding rounding) {
  switch (rounding) {
    case sim::QueueRounding::kAsAsked:
      return "as asked";
    case sim::QueueRounding::kPowerOfTwo:
      return "2^k >= n";
    case sim::QueueRounding::kPowerOfTwoMinusOne:
      return "2^k - 1 >= n";
  }
  return "?";
}

// The errnos a profile answers with (device_profile.h), by name.
std::string ErrnoName(int err) {
  switch (err) {
    case EINVAL:
      return "EINVAL";
    case ENOMEM:
      return "ENOMEM";
    case ENOSPC:
      return "ENOSPC";
  }
  return absl::StrCat(err);
}

const char* AtomicCapName(ibv_atomic_cap cap) {
  switch (cap) {
    case IBV_ATOMIC_NONE:
      return "none";
    case IBV_ATOMIC_HCA:
      return "HCA";
    case IBV_ATOMIC_GLOB:
      return "global";
  }
  return "?";
}

}  // namespace

std::string FormatDevices() {
  using Row = std::pair<std::string, std::string (*)(const sim::DeviceProfile&)>;
  const Row rows[] = {
      {"transport", [](const sim::DeviceProfile& p) -> std::string {
         return sim::TransportName(p.transport);
       }},
      {"immediate data",
       [](const sim::DeviceProfile& p) -> std::string { return YesNo(p.immediate_data); }},
      {"native atomic write",
       [](const sim::DeviceProfile& p) -> std::string { return YesNo(p.native_atomic_write); }},
      {"on-demand paging",
       [](const sim::DeviceProfile& p) -> std::string { return YesNo(p.odp); }},
      {"atomic_cap",
       [](const sim::DeviceProfile& p) -> std::string { return AtomicCapName(p.atomic_cap); }},
      {"max_qp_wr",
       [](const sim::DeviceProfile& p) { return absl::StrCat(p.max_qp_wr); }},
      {"max_sge", [](const sim::DeviceProfile& p) { return absl::StrCat(p.max_sge); }},
      {"max_sge_rd", [](const sim::DeviceProfile& p) { return absl::StrCat(p.max_sge_rd); }},
      {"max_cqe", [](const sim::DeviceProfile& p) { return absl::StrCat(p.max_cqe); }},
      {"max_inline_data",
       [](const sim::DeviceProfile& p) { return absl::StrCat(p.max_inline_data); }},
      {"max_srq_wr", [](const sim::DeviceProfile& p) { return absl::StrCat(p.max_srq_wr); }},
      {"max_srq_sge", [](const sim::DeviceProfile& p) { return absl::StrCat(p.max_srq_sge); }},
      {"max_qp_rd_atom",
       [](const sim::DeviceProfile& p) { return absl::StrCat(p.max_qp_rd_atom); }},
      {"max_qp_init_rd_atom",
       [](const sim::DeviceProfile& p) { return absl::StrCat(p.max_qp_init_rd_atom); }},
      {"SGEs / inline over the QP's: ibv_post_send",
       [](const sim::DeviceProfile& p) { return ErrnoName(p.post_send_limit_errno); }},
      {"SGEs / inline over the QP's: ibv_wr_*",
       [](const sim::DeviceProfile& p) { return ErrnoName(p.wr_setter_limit_errno); }},
      {"cq->cqe of n",
       [](const sim::DeviceProfile& p) -> std::string { return RoundingName(p.cq_rounding); }},
      {"max_send_wr of n", [](const sim::DeviceProfile& p) -> std::string {
         return RoundingName(p.send_queue_rounding);
       }},
      {"max_recv_wr of n", [](const sim::DeviceProfile& p) -> std::string {
         return RoundingName(p.recv_queue_rounding);
       }},
      {"UD QPs", [](const sim::DeviceProfile& p) -> std::string { return YesNo(p.ud_qps); }},
      {"UD receive: wc.sl", [](const sim::DeviceProfile& p) -> std::string {
         return p.ud_qps ? absl::StrCat("0x", absl::Hex(p.ud_recv_sl)) : "-";
       }},
      // What the CM does follows from the transport (docs/DEVICES.md, "iWARP's connection
      // manager"): the passive side's ESTABLISHED, the disconnect, TIMEWAIT_EXIT.
      {"connection manager", [](const sim::DeviceProfile& p) -> std::string {
         return p.transport == IBV_TRANSPORT_IWARP ? "iWARP" : "IB CM";
       }},
      {"private data: connect",
       [](const sim::DeviceProfile& p) { return absl::StrCat(p.max_connect_private_data); }},
      {"private data: accept",
       [](const sim::DeviceProfile& p) { return absl::StrCat(p.max_accept_private_data); }},
      {"private data: reject",
       [](const sim::DeviceProfile& p) { return absl::StrCat(p.max_reject_private_data); }},
  };
  const absl::Span<const sim::DeviceProfile> profiles = sim::DeviceProfiles();
  std::vector<std::vector<std::string>> table;
  std::vector<std::string> header = {""};
  for (size_t i = 0; i < profiles.size(); ++i) {
    header.push_back(absl::StrCat(profiles[i].name, i == 0 ? " (default)" : ""));
  }
  table.push_back(std::move(header));
  for (const Row& row : rows) {
    std::vector<std::string> line = {row.first};
    for (const sim::DeviceProfile& profile : profiles) line.push_back(row.second(profile));
    table.push_back(std::move(line));
  }
  std::vector<size_t> width(table[0].size(), 0);
  for (const auto& line : table) {
    for (size_t c = 0; c < line.size(); ++c) width[c] = std::max(width[c], line[c].size());
  }
  std::string out;
  for (const auto& line : table) {
    std::string text;
    for (size_t c = 0; c < line.size(); ++c) {
      absl::StrAppend(&text, line[c], std::string(width[c] - line[c].size() + 2, ' '));
    }
    absl::StrAppend(&out, absl::StripTrailingAsciiWhitespace(text), "\n");
  }
  for (const sim::DeviceProfile& profile : profiles) {
    absl::StrAppend(&out, "\n", profile.name, ": ", profile.description);
  }
  absl::StrAppend(&out,
                  "\n\nRPMA_SIM_DEVICE=NAME (rpma-sim run|sweep --device=NAME) picks one; "
                  "where each value comes from: docs/DEVICES.md\n");
  return out;
}

}  // namespace softrpma::rpma_sim
