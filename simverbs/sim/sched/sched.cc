#include "simverbs/sim/sched/sched.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "simverbs/sim/trace/trace.h"

namespace softrpma::sim {
namespace {

std::atomic<uint64_t> g_seed{kDefaultSeed};
std::atomic<ExecutionMode> g_execution{ExecutionMode::kAsync};
std::atomic<bool> g_race_detector{false};

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

absl::Status BadSeed(absl::string_view text) {
  return absl::InvalidArgumentError(
      absl::StrCat("bad seed \"", text, "\": expected a decimal or 0x-hex 64-bit number"));
}

}  // namespace

absl::StatusOr<uint64_t> ParseSeed(absl::string_view text) {
  const bool hex = text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X');
  absl::string_view digits = hex ? text.substr(2) : text;
  if (digits.empty()) return BadSeed(text);
  const uint64_t base = hex ? 16 : 10;
  uint64_t value = 0;
  for (char c : digits) {
    uint64_t digit = 0;
    if (absl::ascii_isdigit(static_cast<unsigned char>(c))) {
      digit = static_cast<uint64_t>(c - '0');
    } else if (hex && absl::ascii_isxdigit(static_cast<unsigned char>(c))) {
      digit = static_cast<uint64_t>(absl::ascii_tolower(static_cast<unsigned char>(c)) - 'a' + 10);
    } else {
      return BadSeed(text);
    }
    if (value > (~uint64_t{0} - digit) / base) return BadSeed(text);  // would overflow
    value = value * base + digit;
  }
  return value;
}

uint64_t CurrentSeed() { return g_seed.load(std::memory_order_acquire); }

void SetSeed(uint64_t seed) {
  g_seed.store(seed, std::memory_order_release);
  if (TraceOn()) TraceEvent("seed value=0x%016llx", static_cast<unsigned long long>(seed));
}

uint64_t Mix64(uint64_t a, uint64_t b) { return SplitMix64(SplitMix64(a) ^ b); }

uint64_t SimClock::AdvanceTo(uint64_t t) {
  uint64_t now = now_ns_.load(std::memory_order_acquire);
  while (now < t && !now_ns_.compare_exchange_weak(now, t, std::memory_order_acq_rel)) {
  }
  return std::max(now, t);
}

SimClock& GlobalClock() {
  static SimClock* clock = new SimClock();  // Never destroyed: used until exit.
  return *clock;
}

void CompletionTimer::Init(uint32_t qp_num) {
  key_ = Mix64(DeriveSeed(CurrentSeed(), SeedStream::kCompletions), qp_num);
  count_ = 0;
  last_ready_ns_ = 0;
}

CompletionTimer::Slot CompletionTimer::Next(uint64_t bytes, uint64_t delay_ns) {
  const uint64_t draw = Mix64(key_, ++count_);
  const uint64_t jitter = draw % kJitterNs;
  uint64_t ready = GlobalClock().now_ns() + kBaseLatencyNs + bytes / kBytesPerNs + jitter +
                   std::min(delay_ns, kMaxDelayNs);
  ready = std::max(ready, last_ready_ns_ + 1);
  last_ready_ns_ = ready;
  // The tie-break key: another draw, so that it is independent of the jitter.
  return Slot{ready, Mix64(draw, 0x7469656272656b31ULL)};
}

const char* ExecutionModeName(ExecutionMode mode) {
  return mode == ExecutionMode::kEager ? "eager" : "async";
}

absl::StatusOr<ExecutionMode> ParseExecutionMode(absl::string_view text) {
  if (text == "async") return ExecutionMode::kAsync;
  if (text == "eager") return ExecutionMode::kEager;
  return absl::InvalidArgumentError(absl::StrCat(
      "bad value \"", text,
      "\": expected async (a work request executes after its post returns, as on a NIC; the "
      "default) or eager (inside the post)"));
}

ExecutionMode CurrentExecutionMode() { return g_execution.load(std::memory_order_acquire); }

void SetExecutionMode(ExecutionMode mode) {
  g_execution.store(mode, std::memory_order_release);
  if (TraceOn()) TraceEvent("execution mode=%s", ExecutionModeName(mode));
}

namespace {
std::atomic<TransportKind> g_transport{TransportKind::kLocal};
}  // namespace

const char* TransportName(TransportKind transport) {
  return transport == TransportKind::kHost ? "host" : "local";
}

absl::StatusOr<TransportKind> ParseTransport(absl::string_view text) {
  if (text == "local") return TransportKind::kLocal;
  if (text == "host") return TransportKind::kHost;
  return absl::InvalidArgumentError(absl::StrCat(
      "bad value \"", text,
      "\": expected local (a connection inside the process is one link; the default) or host "
      "(it goes through the host fabric, as one to another process)"));
}

TransportKind CurrentTransport() { return g_transport.load(std::memory_order_acquire); }

void SetTransport(TransportKind transport) {
  g_transport.store(transport, std::memory_order_release);
}

bool RaceDetectorOn() { return g_race_detector.load(std::memory_order_acquire); }

void SetRaceDetector(bool on) { g_race_detector.store(on, std::memory_order_release); }

void ExecutionChooser::Init(uint32_t qp_num) {
  key_ = Mix64(DeriveSeed(CurrentSeed(), SeedStream::kExecution), qp_num);
  count_ = 0;
}

uint64_t ExecutionChooser::NextDeferral() {
  const uint64_t draw = Mix64(key_, ++count_) % 4;
  return draw == 3 ? kUntilPoll : draw + 1;
}

}  // namespace softrpma::sim
