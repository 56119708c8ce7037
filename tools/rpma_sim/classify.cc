#include "tools/rpma_sim/classify.h"

#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace softrpma::rpma_sim {
namespace {

constexpr size_t kMaxDetail = 120;

// The line of `output` that contains `needle` (without its newline), or "" when none does.
absl::string_view LineWith(absl::string_view output, absl::string_view needle) {
  size_t at = output.find(needle);
  if (at == absl::string_view::npos) return "";
  size_t begin = output.rfind('\n', at);
  begin = begin == absl::string_view::npos ? 0 : begin + 1;
  size_t end = output.find('\n', at);
  if (end == absl::string_view::npos) end = output.size();
  return output.substr(begin, end - begin);
}

std::string Shorten(absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  if (text.size() <= kMaxDetail) return std::string(text);
  return absl::StrCat(text.substr(0, kMaxDetail - 3), "...");
}

// "AddressSanitizer: heap-use-after-free" from
// "==12==ERROR: AddressSanitizer: heap-use-after-free on address 0x... at pc ...", and
// "ThreadSanitizer: data race" from "WARNING: ThreadSanitizer: data race (pid=7)".
std::string SanitizerHeadline(absl::string_view line) {
  for (absl::string_view prefix : {"ERROR: ", "WARNING: "}) {
    size_t at = line.find(prefix);
    if (at != absl::string_view::npos) {
      line = line.substr(at + prefix.size());
      break;
    }
  }
  size_t on = line.find(" on ");
  if (on != absl::string_view::npos) line = line.substr(0, on);
  size_t paren = line.find(" (");
  if (paren != absl::string_view::npos) line = line.substr(0, paren);
  return Shorten(line);
}

// The first error valgrind reported: the first "==PID== " line with text after the prefix.
std::string ValgrindHeadline(absl::string_view output) {
  size_t pos = 0;
  while (pos < output.size()) {
    size_t end = output.find('\n', pos);
    if (end == absl::string_view::npos) end = output.size();
    absl::string_view line = output.substr(pos, end - pos);
    pos = end + 1;
    if (!absl::StartsWith(line, "==")) continue;
    size_t close = line.find("== ", 2);
    if (close == absl::string_view::npos) continue;
    absl::string_view text = absl::StripAsciiWhitespace(line.substr(close + 3));
    if (!text.empty()) return absl::StrCat("valgrind: ", Shorten(text));
  }
  return "valgrind reported an error";
}

}  // namespace

const char* RunClassName(RunClass run_class) {
  switch (run_class) {
    case RunClass::kClean: return "clean";
    case RunClass::kNonzero: return "nonzero";
    case RunClass::kCrashed: return "crashed";
    case RunClass::kHung: return "hung";
    case RunClass::kLeaked: return "leaked";
    case RunClass::kKept: return "kept";
    case RunClass::kRacy: return "racy";
    case RunClass::kOrphaned: return "orphaned";
  }
  return "?";
}

bool IsFailure(RunClass run_class) {
  return run_class == RunClass::kCrashed || run_class == RunClass::kHung ||
         run_class == RunClass::kLeaked || run_class == RunClass::kRacy;
}

const char* LeakCheckerName(LeakChecker checker) {
  switch (checker) {
    case LeakChecker::kNone: return "none";
    case LeakChecker::kAsan: return "asan";
    case LeakChecker::kValgrind: return "valgrind";
    case LeakChecker::kAsanProcesses: return "asan-processes";
  }
  return "?";
}

std::vector<std::string> ValgrindPrefix() {
  return {"valgrind",
          "--quiet",
          "--leak-check=full",
          "--show-leak-kinds=definite",
          "--errors-for-leak-kinds=definite",
          absl::StrCat("--error-exitcode=", kValgrindErrorExitCode),
          "--"};
}

absl::StatusOr<LeakChecker> DetectLeakChecker(const std::string& program_path,
                                              absl::string_view valgrind_path) {
  // A program is a regular file (finite: /dev/zero or a FIFO would be read for ever), searched
  // a block at a time, each with the tail of the one before (so that a name across two blocks
  // is found), never held whole (an ASan build is hundreds of MiB).
  struct stat st;
  if (stat(program_path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return absl::NotFoundError(absl::StrCat("cannot read ", program_path, " as a program file"));
  }
  std::ifstream file(program_path, std::ios::binary);
  if (!file) return absl::NotFoundError(absl::StrCat("cannot read ", program_path));
  // A script: valgrind would check its interpreter, not the programs it starts.
  if (char magic[2] = {}; file.read(magic, 2) && magic[0] == '#' && magic[1] == '!') {
    return LeakChecker::kAsanProcesses;
  }
  file.clear();
  file.seekg(0);
  constexpr absl::string_view kAsanMarker = "__asan_init";
  constexpr absl::string_view kTsanMarker = "__tsan_init";
  bool asan = false;
  bool tsan = false;
  std::string window;
  std::vector<char> block(1 << 16);
  while (!asan && (file.read(block.data(), static_cast<std::streamsize>(block.size())) ||
                   file.gcount() > 0)) {
    window.append(block.data(), static_cast<size_t>(file.gcount()));
    asan = absl::StrContains(window, kAsanMarker);
    tsan = tsan || absl::StrContains(window, kTsanMarker);
    window.erase(0, window.size() - std::min<size_t>(window.size(), kAsanMarker.size() - 1));
  }
  if (asan) return LeakChecker::kAsan;
  if (tsan) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--leaks: ", program_path,
        " is built with ThreadSanitizer, which finds no leaks and cannot run under valgrind; "
        "sweep a plain or an AddressSanitizer build for leaks"));
  }
  if (!valgrind_path.empty()) return LeakChecker::kValgrind;
  return absl::FailedPreconditionError(absl::StrCat(
      "--leaks: ", program_path,
      " is not built with AddressSanitizer and valgrind is not installed; build the program "
      "with -fsanitize=address (bazel: --config=asan) or install valgrind"));
}

RunVerdict Classify(const ChildExit& exit, absl::string_view output, LeakChecker checker,
                    absl::Duration timeout, uint64_t kept_objects) {
  if (exit.timed_out) {
    return {RunClass::kHung, absl::StrCat("timed out after ", absl::FormatDuration(timeout))};
  }
  for (absl::string_view report :
       {"ERROR: AddressSanitizer", "ERROR: HWAddressSanitizer", "ERROR: MemorySanitizer",
        "ERROR: ThreadSanitizer", "WARNING: ThreadSanitizer"}) {
    if (absl::string_view line = LineWith(output, report); !line.empty()) {
      return {RunClass::kCrashed, SanitizerHeadline(line)};
    }
  }
  if (absl::string_view line = LineWith(output, ": runtime error: "); !line.empty()) {
    return {RunClass::kCrashed, absl::StrCat("UndefinedBehaviorSanitizer: ",
                                             Shorten(line.substr(line.find("runtime error: "))))};
  }
  if (absl::string_view line = LineWith(output, kLeakReport); !line.empty()) {
    return {RunClass::kLeaked, SanitizerHeadline(line)};
  }
  if (exit.orphaned) {
    // The report's first line says who waited for what.
    absl::string_view first = exit.report;
    first = first.substr(0, first.find('\n'));
    return {RunClass::kOrphaned, first.empty() ? "stopped: its peers had exited" : Shorten(first)};
  }
  if (exit.signal != 0) return {RunClass::kCrashed, SignalName(exit.signal)};
  if (checker == LeakChecker::kValgrind) {
    if (absl::string_view line = LineWith(output, "are definitely lost"); !line.empty()) {
      return {RunClass::kLeaked, "valgrind: memory definitely lost"};
    }
    if (exit.exit_code == kValgrindErrorExitCode) {
      return {RunClass::kCrashed, ValgrindHeadline(output)};
    }
  }
  if (absl::string_view line = LineWith(output, "softrpma-sim: race: "); !line.empty()) {
    return {RunClass::kRacy, Shorten(line.substr(line.find("race: ")))};
  }
  if (kept_objects > 0) {
    return {RunClass::kKept,
            absl::StrCat("exit ", exit.exit_code, "; ", kept_objects,
                         kept_objects == 1 ? " object" : " objects",
                         " kept by the NIC after a failed destroy")};
  }
  if (exit.exit_code != 0) return {RunClass::kNonzero, absl::StrCat("exit ", exit.exit_code)};
  return {RunClass::kClean, "exit 0"};
}

}  // namespace softrpma::rpma_sim
