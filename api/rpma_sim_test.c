/*
 * rpma_sim_test: librpma_sim.h is a C header. A C program sets faults in code, sees librpma
 * fail the way they say (rpma_peer_new: RPMA_E_NOMEM from ibv_alloc_pd:fail=ENOMEM), reads the
 * counters, the points, the seed and the clock; exits non-zero (printing the failed check) when
 * a result is not the documented one.
 */
#include <stdio.h>
#include <string.h>

#include "librpma.h"
#include "librpma_sim.h"

static int checks;

#define CHECK(cond)                                          \
	do {                                                 \
		++checks;                                    \
		if (!(cond)) {                               \
			printf("FAILED: %s\n", #cond);       \
			return 1;                            \
		}                                            \
	} while (0)

int main(void)
{
	char err[256];
	char tiny[8];
	struct ibv_context *ctx = NULL;
	struct rpma_peer *peer = NULL;
	const char *expected =
		"fault spec rule 1, column 14: unknown action \"explode\"; expected one of ";

	/* A malformed spec: -1 and the reason; a short buffer gets a cut, terminated reason. */
	CHECK(rpma_sim_set_faults("ibv_alloc_pd:explode", err, sizeof(err)) == -1);
	CHECK(strncmp(err, expected, strlen(expected)) == 0);
	CHECK(rpma_sim_set_faults("ibv_alloc_pd:explode", tiny, sizeof(tiny)) == -1);
	CHECK(strcmp(tiny, "fault s") == 0);
	CHECK(rpma_sim_set_faults("ibv_alloc_pd:explode", NULL, 0) == -1);
	CHECK(rpma_sim_set_faults(NULL, err, sizeof(err)) == -1);
	CHECK(strcmp(err, "spec is NULL") == 0);

	/* A fault set in code reaches librpma. */
	CHECK(rpma_sim_set_faults("ibv_alloc_pd:fail=ENOMEM:nth=1", err, sizeof(err)) == 0);
	CHECK(rpma_utils_get_ibv_context("127.0.0.1", RPMA_UTIL_IBV_CONTEXT_LOCAL, &ctx) == 0);
	CHECK(rpma_peer_new(ctx, &peer) == RPMA_E_NOMEM);
	CHECK(peer == NULL);
	CHECK(rpma_peer_new(ctx, &peer) == 0);
	CHECK(rpma_sim_fault_hits("ibv_alloc_pd") == 2);
	CHECK(rpma_sim_fault_injections("ibv_alloc_pd") == 1);
	CHECK(rpma_sim_fault_hits("ibv_nope") == -1);
	CHECK(rpma_sim_fault_injections(NULL) == -1);
	CHECK(rpma_peer_delete(&peer) == 0);
	CHECK(rpma_sim_clear_faults() == 0);
	CHECK(rpma_sim_fault_hits("ibv_alloc_pd") == 0);

	/* Scenario files. */
	CHECK(rpma_sim_load_scenario("/nonexistent/s.txt", err, sizeof(err)) == -1);
	CHECK(strcmp(err, "/nonexistent/s.txt: cannot read scenario file: "
			  "No such file or directory") == 0);
	CHECK(rpma_sim_load_scenario(NULL, err, sizeof(err)) == -1);

	/* Points, seed, clock. */
	CHECK(rpma_sim_fault_point_count() == 48);
	CHECK(strcmp(rpma_sim_fault_point_name(0), "ibv_query_device_ex") == 0);
	CHECK(strcmp(rpma_sim_fault_point_name(47), "malloc") == 0);
	CHECK(rpma_sim_fault_point_description(1) != NULL);
	CHECK(strstr(rpma_sim_fault_point_description(1), "rpma_peer_new") != NULL);
	CHECK(rpma_sim_fault_point_name(48) == NULL);
	CHECK(rpma_sim_fault_point_description(-1) == NULL);
	CHECK(rpma_sim_set_seed(0x1234567890abcdefULL) == 0);
	CHECK(rpma_sim_get_seed() == 0x1234567890abcdefULL);
	CHECK(rpma_sim_now_ns() == rpma_sim_now_ns());

	printf("%d checks passed\n", checks);
	return 0;
}
