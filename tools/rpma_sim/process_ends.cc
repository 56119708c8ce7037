#include "tools/rpma_sim/process_ends.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <tuple>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace softrpma::rpma_sim {
namespace {

constexpr absl::string_view kMarker = "softrpma-sim-end";
// A record is a few lines; a bigger file is not one.
constexpr size_t kMaxRecordBytes = 16 << 10;
// Several crashed processes' details together stay one readable line.
constexpr size_t kMaxDetail = 300;

// "AddressSanitizer: heap-use-after-free" from "ERROR: AddressSanitizer: heap-use-after-free on
// address 0x... at pc ..." (as classify.cc shortens the report it finds in the output).
std::string SanitizerHeadline(absl::string_view line) {
  if (size_t at = line.find("ERROR: "); at != absl::string_view::npos) line = line.substr(at + 7);
  if (size_t on = line.find(" on "); on != absl::string_view::npos) line = line.substr(0, on);
  if (size_t paren = line.find(" ("); paren != absl::string_view::npos) {
    line = line.substr(0, paren);
  }
  return std::string(absl::StripAsciiWhitespace(line));
}

// What one crashed process's record says: "SIGABRT: free(): ...", "AddressSanitizer: ...".
std::string CrashText(const ProcessEnd& end) {
  // A sanitizer report comes first: its abort (abort_on_error) is a consequence of it.
  if (!end.sanitizer.empty()) return SanitizerHeadline(end.sanitizer);
  if (end.message.empty()) return end.signal;
  return absl::StrCat(end.signal, ": ", end.message);
}

}  // namespace

absl::StatusOr<ProcessEnd> ParseProcessEnd(absl::string_view text) {
  ProcessEnd end;
  bool marker = false;
  bool pid = false;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    ++line_number;
    const size_t eq = line.find('=');
    if (eq == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", line_number, ": \"", line, "\" is not key=value"));
    }
    const absl::string_view key = line.substr(0, eq);
    const absl::string_view value = line.substr(eq + 1);
    auto number = [&](auto* out) -> absl::Status {
      if (!absl::SimpleAtoi(value, out)) {
        return absl::InvalidArgumentError(
            absl::StrCat("line ", line_number, ": ", key, "=", value, " is not a number"));
      }
      return absl::OkStatus();
    };
    if (line_number == 1) {
      if (key != kMarker || value != "1") {
        return absl::InvalidArgumentError(
            absl::StrCat("line 1: \"", line, "\" is not ", kMarker, "=1"));
      }
      marker = true;
    } else if (key == "pid") {
      if (absl::Status s = number(&end.pid); !s.ok()) return s;
      pid = true;
    } else if (key == "prog") {
      end.prog = std::string(value);
    } else if (key == "time_ns") {
      if (absl::Status s = number(&end.time_ns); !s.ok()) return s;
    } else if (key == "exit") {
      int code = 0;
      if (absl::Status s = number(&code); !s.ok()) return s;
      end.exit_code = code;
    } else if (key == "signal") {
      end.signal = std::string(value);
    } else if (key == "message") {
      end.message = std::string(value);
    } else if (key == "sanitizer") {
      end.sanitizer = std::string(value);
    } else if (key == "asan") {
      end.asan = value == "1";
    }
  }
  if (!marker) return absl::InvalidArgumentError(absl::StrCat("empty, no ", kMarker, "=1"));
  if (!pid) return absl::InvalidArgumentError("no pid=");
  if (!end.exit_code.has_value() && !end.Crashed()) {
    return absl::InvalidArgumentError("no end: neither exit=, signal= nor sanitizer=");
  }
  return end;
}

std::vector<ProcessEnd> TakeProcessEnds(const std::string& dir,
                                        std::vector<std::string>* errors) {
  std::vector<ProcessEnd> ends;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    if (!absl::StartsWith(name, "end.") || !absl::EndsWith(name, ".txt")) continue;
    std::ifstream file(entry.path(), std::ios::binary);
    if (!file) {
      errors->push_back(absl::StrCat(entry.path().string(), ": cannot be read"));
      continue;
    }
    const std::string text((std::istreambuf_iterator<char>(file)),
                           std::istreambuf_iterator<char>());
    if (file.bad()) {
      errors->push_back(absl::StrCat(entry.path().string(), ": cannot be read"));
      continue;
    }
    if (text.size() > kMaxRecordBytes) {
      errors->push_back(absl::StrCat(entry.path().string(), ": ", text.size(),
                                     " bytes, too big for a process's end record"));
      continue;
    }
    absl::StatusOr<ProcessEnd> end = ParseProcessEnd(text);
    if (!end.ok()) {
      errors->push_back(absl::StrCat(entry.path().string(), ": ", end.status().message()));
      continue;
    }
    ends.push_back(*std::move(end));
  }
  std::sort(ends.begin(), ends.end(), [](const ProcessEnd& a, const ProcessEnd& b) {
    return std::tie(a.time_ns, a.pid) < std::tie(b.time_ns, b.pid);
  });
  std::filesystem::remove_all(dir, error);
  return ends;
}

RunVerdict WithProcessEnds(const RunVerdict& verdict, const std::vector<ProcessEnd>& ends,
                           int top_pid, absl::string_view output) {
  size_t leak_aborts = 0;
  for (size_t at = output.find(kLeakReport); at != absl::string_view::npos;
       at = output.find(kLeakReport, at + 1)) {
    ++leak_aborts;
  }
  std::vector<std::string> crashes;
  for (const ProcessEnd& end : ends) {
    if (!end.Crashed()) continue;
    if (leak_aborts > 0 && end.signal == "SIGABRT" && end.message.empty() &&
        end.sanitizer.empty()) {
      --leak_aborts;  // LeakSanitizer's abort: the leak is the verdict's
      continue;
    }
    const std::string text = CrashText(end);
    crashes.push_back(end.pid == top_pid ? text : absl::StrCat(end.prog, ": ", text));
  }
  if (crashes.empty()) return verdict;
  std::string detail = absl::StrJoin(crashes, "; ");
  if (detail.size() > kMaxDetail) detail = absl::StrCat(detail.substr(0, kMaxDetail - 3), "...");
  if (verdict.run_class == RunClass::kHung) {
    absl::StrAppend(&detail, "; then the run hung (", verdict.detail, ")");
  }
  return {RunClass::kCrashed, detail};
}

}  // namespace softrpma::rpma_sim
