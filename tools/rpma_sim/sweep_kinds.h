// sweep_kinds.h: the kinds of fault a sweep injects (`sweep --kinds=LIST`), and which effects
// each kind has at a fault point. A sweep run injects one effect (a fault spec action) at one
// hit of one point; the kinds group the effects by what a program must handle:
//
//   fail  the call fails with an errno (fail=EIO; fail=ENOMEM for malloc): every point that can
//         fail;
//   wc    the work request posted completes with an error status (wc_status=IBV_WC_*): at the
//         posts the fault grammar lets complete in error (ibv_post_send, ibv_wr_complete,
//         ibv_post_recv), with the statuses the device profile's NIC gives for that operation;
//   conn  the connection ends: at a post, lost and (separately) disconnected mid-flight; at
//         rdma_connect / rdma_accept, rejected and unreachable;
//   kill  the process dies of SIGKILL at that hit (the simulator's `kill` action), so that its
//         peers meet a dead peer: only in a run of several programs (a point with a prog).
//
// The sweep's order of the effects at a point is the kinds' order (fail, wc, conn, kill), then
// each kind's own (EffectsAt).
//
// Thread-safety: every function is thread-safe (none keeps state).

#ifndef SOFTRPMA_TOOLS_RPMA_SIM_SWEEP_KINDS_H_
#define SOFTRPMA_TOOLS_RPMA_SIM_SWEEP_KINDS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace softrpma::rpma_sim {

enum class SweepKind : uint8_t { kFail, kWc, kConn, kKill };
inline constexpr int kNumSweepKinds = static_cast<int>(SweepKind::kKill) + 1;

// "fail", "wc", "conn", "kill".
const char* SweepKindName(SweepKind kind);

// Every kind, in order: the default of --kinds.
std::vector<SweepKind> AllSweepKinds();

// Parses --kinds: names separated by commas (blanks around them ignored), returned in the
// kinds' order whatever the list's. Errors: InvalidArgument for an unknown name (naming it and
// the valid ones), a name given twice, or a list that names none.
absl::StatusOr<std::vector<SweepKind>> ParseSweepKinds(absl::string_view list);

// The kind of a fault spec action as a sweep writes it ("fail=EIO": fail,
// "wc_status=IBV_WC_RETRY_EXC_ERR": wc, "lost" / "disconnect" / "reject" / "unreachable": conn,
// "kill": kill); nullopt for any other action (delay, no_notify, ...).
std::optional<SweepKind> KindOfAction(absl::string_view action);

// One effect a sweep injects: its kind and the action of its fault spec.
struct SweepEffect {
  SweepKind kind;
  std::string action;  // e.g. "fail=EIO", "wc_status=IBV_WC_REM_ACCESS_ERR", "lost", "kill"
  bool operator==(const SweepEffect& other) const {
    return kind == other.kind && action == other.action;
  }
};

// The error statuses a work request posted at `point` may complete with on `device` (a profile
// name; "" or unknown: mlx5's), the order a sweep injects them; empty for a point that posts
// nothing the grammar can complete in error.
//   ibv_post_send (RDMA WRITE / READ / SEND / atomics; which one hit N posts is not known from
//   the hit counts, so every status one of them can get): IBV_WC_REM_ACCESS_ERR (a bad rkey or
//   range), IBV_WC_RETRY_EXC_ERR (no answer from the peer), IBV_WC_LOC_PROT_ERR (a bad lkey),
//   IBV_WC_REM_INV_REQ_ERR (a SEND the responder cannot take), and on InfiniBand / RoCE (mlx5,
//   rxe) IBV_WC_RNR_RETRY_EXC_ERR (a SEND that found no receive; iWARP, siw, has no RNR retry);
//   ibv_wr_complete (rpma_atomic_write's RDMA ATOMIC WRITE): REM_ACCESS, RETRY_EXC, LOC_PROT;
//   ibv_post_recv: IBV_WC_WR_FLUSH_ERR (the receive flushed: its QP went to ERROR) and
//   IBV_WC_LOC_LEN_ERR (the incoming SEND is longer than the buffer).
std::vector<std::string> WcStatusesAt(absl::string_view point, absl::string_view device);

// The effects of `kinds` at `point` (a point that can fail), in the sweep's order (kinds in
// their order, then each kind's). `multi_process`: the point belongs to one program of several
// (its hit counts have a prog), where kill applies.
std::vector<SweepEffect> EffectsAt(absl::string_view point, bool multi_process,
                                   const std::vector<SweepKind>& kinds, absl::string_view device);

// The position of `action` among every effect at `point` (all kinds, multi-process), for
// ordering the runs of a merged report as the sweep orders them; past the end when it is none.
size_t EffectRank(absl::string_view point, absl::string_view action, absl::string_view device);

}  // namespace softrpma::rpma_sim

#endif  // SOFTRPMA_TOOLS_RPMA_SIM_SWEEP_KINDS_H_
