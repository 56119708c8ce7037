/*
 * librpma_sim.h: controls of softrpma's simulated NIC (RPMA_BACKEND=sim, the default) for C
 * programs and tests that want to set faults, the seed or read fault counters in code instead
 * of through the environment (RPMA_SIM_FAULTS, RPMA_SIM_SCENARIO, RPMA_SIM_SEED).
 *
 * Not part of librpma: these functions are not in librpma.so.0. Link the //api:rpma_sim target
 * (Bazel) next to //api:rpma. The fault grammar and the fault points are in docs/FAULTS.md; the
 * seed, the simulated clock and the trace in docs/TRACE.md.
 *
 * The plan and the seed are process-wide. Setting them before the simulator starts (the first
 * rpma_utils_get_ibv_context()) works, but RPMA_SIM_FAULTS / RPMA_SIM_SCENARIO / RPMA_SIM_SEED,
 * when set, replace them at that start.
 *
 * Thread-safety: every function may be called from any thread at any time; a plan replaced
 * while other threads inject faults is retired, not freed.
 */

#ifndef LIBRPMA_SIM_H
#define LIBRPMA_SIM_H 1

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * rpma_sim_set_faults: replaces the fault plan with the one `spec` describes, e.g.
 * "ibv_post_send:wc_status=IBV_WC_REM_ACCESS_ERR:nth=3; rdma_connect:reject". An empty spec
 * installs a plan with no rules: hits are counted, nothing is injected. Counters start at 0.
 *
 * RETURN VALUE: 0 on success. -1 when `spec` is NULL or malformed: the current plan is left as
 * it was and, when `err` is not NULL and `err_len` > 0, `err` receives the reason as a
 * NUL-terminated string (cut to err_len - 1 characters), e.g.
 * "fault spec rule 1, column 15: unknown action ...".
 */
int rpma_sim_set_faults(const char *spec, char *err, size_t err_len);

/*
 * rpma_sim_load_scenario: installs the rules of the scenario file at `path` as the fault plan,
 * and its seed when it has a `seed` line.
 *
 * RETURN VALUE: 0 on success; -1 when `path` is NULL, unreadable or has a bad line (the plan
 * and seed are left as they were; `err` as for rpma_sim_set_faults, e.g. "f.txt:3:14: ...").
 */
int rpma_sim_load_scenario(const char *path, char *err, size_t err_len);

/*
 * rpma_sim_clear_faults: removes the fault plan (no fault fires; hits are not counted unless
 * RPMA_SIM_STATS is set). RETURN VALUE: 0.
 */
int rpma_sim_clear_faults(void);

/*
 * rpma_sim_fault_hits / rpma_sim_fault_injections: how many times `point` (e.g.
 * "ibv_post_send") was called / had a fault injected under the current plan (0 without a plan).
 * RETURN VALUE: the count, or -1 when `point` is NULL or names no fault point.
 */
long long rpma_sim_fault_hits(const char *point);
long long rpma_sim_fault_injections(const char *point);

/*
 * rpma_sim_fault_point_count / _name / _description: the fault points, in the order of
 * `rpma-sim points` and of the RPMA_SIM_STATS file. _name and _description return a string
 * that stays valid until exit, or NULL when `index` is out of range.
 */
int rpma_sim_fault_point_count(void);
const char *rpma_sim_fault_point_name(int index);
const char *rpma_sim_fault_point_description(int index);

/*
 * rpma_sim_set_seed / rpma_sim_get_seed: the simulator's seed. A new seed affects QPs created
 * afterwards (the interleaving of their completions) and later prob= fault decisions.
 * rpma_sim_set_seed RETURN VALUE: 0.
 */
int rpma_sim_set_seed(uint64_t seed);
uint64_t rpma_sim_get_seed(void);

/* rpma_sim_now_ns: the simulated clock, in nanoseconds (docs/TRACE.md). */
uint64_t rpma_sim_now_ns(void);

#ifdef __cplusplus
}
#endif

#endif /* LIBRPMA_SIM_H */
