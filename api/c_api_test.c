/*
 * c_api_test: librpma.h is a C header. A C program includes it, links //api:rpma and calls it;
 * exits non-zero (printing the failed check) when a result is not the documented one.
 */
#include <stdio.h>
#include <string.h>

#include "librpma.h"

#define CHECK(cond)                                          \
	do {                                                 \
		if (!(cond)) {                               \
			printf("FAILED: %s\n", #cond);       \
			return 1;                            \
		}                                            \
	} while (0)

int main(void)
{
	struct rpma_conn_cfg *cfg = NULL;
	uint32_t size = 0;
	enum rpma_log_level level = RPMA_LOG_LEVEL_DEBUG;

	CHECK(rpma_conn_cfg_new(&cfg) == 0);
	CHECK(rpma_conn_cfg_get_sq_size(cfg, &size) == 0 && size == 10);
	CHECK(rpma_conn_cfg_delete(&cfg) == 0 && cfg == NULL);
	CHECK(rpma_conn_cfg_new(NULL) == RPMA_E_INVAL);
	CHECK(strcmp(rpma_err_2str(RPMA_E_INVAL), "Invalid argument") == 0);
	CHECK(strcmp(rpma_utils_conn_event_2str(RPMA_CONN_ESTABLISHED),
		     "Connection established") == 0);
	CHECK(rpma_log_get_threshold(RPMA_LOG_THRESHOLD, &level) == 0);
	CHECK(level == RPMA_LOG_LEVEL_WARNING);
	CHECK(rpma_log_set_function(RPMA_LOG_USE_DEFAULT_FUNCTION) == 0);
	printf("1 passed, 0 failed\n");
	return 0;
}
