// sched.h: the simulator's seed, its simulated clock, and the completion-time model (the seeded
// scheduler) that decides in which order completions of different QPs arrive.
//
// THE MODEL (docs/TRACE.md, "Simulated time")
//   * One 64-bit seed per process (RPMA_SIM_SEED, a scenario's `seed` line, SetSeed()). Every
//     choice the simulator makes is a pure function of a seed derived from it per component
//     (DeriveSeed) and of counters, never of wall time, addresses or unordered containers.
//   * One logical clock in nanoseconds (SimClock). It moves only when the program waits for the
//     NIC: when ibv_poll_cq takes a completion whose ready time is later than now, and when
//     ibv_get_cq_event or rdma_get_cm_event takes an event due later than now (a CM timer,
//     cm.h). Posts and CM calls take no time.
//   * Every completion gets a ready time when its WR executes (CompletionTimer::Next):
//     now + kBaseLatencyNs + bytes / kBytesPerNs + seeded jitter + an injected delay, and never
//     earlier than the previous completion of the same QP (+1 ns): one QP keeps its order, QPs
//     sharing a CQ interleave as the seed says. Ties between QPs are broken by a seeded key.
//   * Asynchronous execution (the default, RPMA_SIM_EXECUTION=async): a work request executes
//     after the call that posted it returns, never inside it. Each send WR gets a seeded
//     deferral from its QP's ExecutionChooser: it executes at the 1st, 2nd or 3rd later post
//     point of its connection (a post of a send or receive WR on either QP), or not before
//     the process's next progress point (whichever comes first). A PROGRESS POINT is every
//     call of the process but a post (ibv_poll_cq, ibv_get_cq_event before it sleeps,
//     rdma_get_cm_event, rdma_disconnect, ibv_reg_mr...: nic/progress.cc): it executes
//     everything posted before it, as a NIC would have by then, on every link of the process.
//     RC order per QP holds: a WR never executes before the ones posted before it.
//     RPMA_SIM_EXECUTION=eager executes inside the post (the simulator before this model).
//   * The buffer-race detector (RPMA_SIM_RACE_DETECTOR=1; on by default under `rpma-sim run`
//     and `sweep`): the source bytes of a WRITE / SEND are copied when posted and compared
//     when the WR executes; a difference is one `softrpma-sim: race:` line on stderr and a
//     `race` trace event. The destination of an RDMA READ and the buffers of a receive are
//     filled with kRacePoison when posted, so a program reading them before the completion
//     reads poison.
//
// Thread-safety: the seed and the clock are atomics (thread-safe). A CompletionTimer belongs to
// one QP and is guarded by that QP's lock (SimLink::mu).

#ifndef SOFTRPMA_SIMVERBS_SIM_SCHED_SCHED_H_
#define SOFTRPMA_SIMVERBS_SIM_SCHED_SCHED_H_

#include <atomic>
#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace softrpma::sim {

inline constexpr char kSeedEnvVar[] = "RPMA_SIM_SEED";
// The seed when none is given: "softrpma" in ASCII.
inline constexpr uint64_t kDefaultSeed = 0x736f667472706d61ULL;

// The completion-time model's constants (simulated nanoseconds).
inline constexpr uint64_t kBaseLatencyNs = 1500;
inline constexpr uint64_t kBytesPerNs = 8;
inline constexpr uint64_t kJitterNs = 1000;
// The largest delay= a fault may add (10^12 ns, 1000 simulated seconds).
inline constexpr uint64_t kMaxDelayNs = 1000000000000ULL;

// Parses a seed: decimal ("1234") or 0x-hex ("0x4d2", "0X4D2"), 0 .. 2^64-1, nothing else (no
// sign, no blanks, no trailing characters).
// Errors: InvalidArgument `bad seed "<text>": expected a decimal or 0x-hex 64-bit number`.
absl::StatusOr<uint64_t> ParseSeed(absl::string_view text);

// The process's seed (kDefaultSeed until set). SetSeed affects choices made afterwards (QPs
// created after it, fault decisions after it) and writes a `seed` trace line.
uint64_t CurrentSeed();
void SetSeed(uint64_t seed);

// The independent streams derived from the seed, one per component.
enum class SeedStream : uint64_t {
  kCompletions = 1,  // completion jitter and tie-breaking (per QP)
  kFaults = 2,       // prob= conditions (per rule)
  kExecution = 3,    // when each send WR executes (per QP)
  kMrKeys = 4,       // the lkeys and rkeys of MRs (device.cc)
};

// A well-mixed 64-bit function of (a, b) (SplitMix64 finalizer over a combination).
uint64_t Mix64(uint64_t a, uint64_t b);
// The seed of one stream of `seed`.
inline uint64_t DeriveSeed(uint64_t seed, SeedStream stream) {
  return Mix64(seed, static_cast<uint64_t>(stream));
}

// The simulated clock. Thread-safe.
class SimClock final {
 public:
  SimClock() = default;
  SimClock(const SimClock&) = delete;
  SimClock& operator=(const SimClock&) = delete;

  uint64_t now_ns() const { return now_ns_.load(std::memory_order_acquire); }
  // Moves the clock to `t` if it is earlier; returns the clock afterwards (>= t).
  uint64_t AdvanceTo(uint64_t t);

 private:
  std::atomic<uint64_t> now_ns_{0};
};

// The clock of this process's simulator.
SimClock& GlobalClock();

// When a QP's completions become ready. One per QP, guarded by the QP's lock.
class CompletionTimer final {
 public:
  // The ready time and the tie-break key of one completion.
  struct Slot {
    uint64_t ready_ns;
    uint64_t order;
  };

  // Seeds the timer for QP `qp_num` from the current seed.
  void Init(uint32_t qp_num);
  // The slot of the QP's next completion of `bytes` bytes, produced now, held back `delay_ns`
  // more (a fault). Strictly after the QP's previous slot.
  Slot Next(uint64_t bytes, uint64_t delay_ns);

 private:
  uint64_t key_ = 0;
  uint64_t count_ = 0;
  uint64_t last_ready_ns_ = 0;
};

// ---- Asynchronous execution and the race detector (THE MODEL above) ---------------------

inline constexpr char kExecutionEnvVar[] = "RPMA_SIM_EXECUTION";
inline constexpr char kRaceDetectorEnvVar[] = "RPMA_SIM_RACE_DETECTOR";
// What a READ destination and a receive buffer hold from the post to the completion (race
// detector on).
inline constexpr uint8_t kRacePoison = 0xA5;
// How much of an RC receive (or an SRQ's) the race detector poisons at its post: its first
// 4 KiB (a UD receive's: its GRH and one MTU, the most a message fills). A NIC writes only the
// bytes of the message that lands there, and programs rely on that: UCX lays its receive
// descriptors out so that the tail of one's SGE is the next one's header (a message never
// reaches it), and poison there crashed UCX at its next put of a descriptor.
inline constexpr uint64_t kPoisonedReceiveBytes = 4096;

enum class ExecutionMode { kAsync, kEager };
// "async", "eager".
const char* ExecutionModeName(ExecutionMode mode);
// Errors: InvalidArgument `bad value "<text>": expected async (...) or eager (...)`.
absl::StatusOr<ExecutionMode> ParseExecutionMode(absl::string_view text);

// THE TRANSPORT of a connection between two ids of THIS process (RPMA_SIM_TRANSPORT):
// `local` (the default) joins their QPs in one link; `host` sends it through the host fabric
// as a connection to another process is (fabric/host.h), and every call of the process then
// starts (and every post ends) with host::Quiesce, so the process sees what the in-process
// link would show by then. It exists so that one suite of QP / CQ / CM tests runs on both
// (on_host_transport.bzl): a difference is a failing test. Connections to another process
// are the host fabric's either way.
inline constexpr char kTransportEnvVar[] = "RPMA_SIM_TRANSPORT";
enum class TransportKind : uint8_t { kLocal, kHost };
const char* TransportName(TransportKind transport);
// Errors: InvalidArgument `bad value "<text>": expected local (...) or host (...)`.
absl::StatusOr<TransportKind> ParseTransport(absl::string_view text);
TransportKind CurrentTransport();
void SetTransport(TransportKind transport);

// Process-wide settings, read when a WR is posted. Thread-safe.
ExecutionMode CurrentExecutionMode();
void SetExecutionMode(ExecutionMode mode);
bool RaceDetectorOn();
void SetRaceDetector(bool on);

// When the send WRs of one QP execute: one seeded draw per WR. One per QP, guarded by the
// QP's lock.
class ExecutionChooser final {
 public:
  // A WR that waits for the next poll point (no post point releases it).
  static constexpr uint64_t kUntilPoll = ~uint64_t{0};

  // Seeds the chooser for QP `qp_num` from the current seed.
  void Init(uint32_t qp_num);
  // How many later post points of its connection the next WR waits for: 1, 2, 3, or
  // kUntilPoll.
  uint64_t NextDeferral();

 private:
  uint64_t key_ = 0;
  uint64_t count_ = 0;
};

}  // namespace softrpma::sim

#endif  // SOFTRPMA_SIMVERBS_SIM_SCHED_SCHED_H_
