/*
 * peer_app: a tiny librpma program for the CMake example: opens the device of 127.0.0.1, makes
 * a peer, registers a memory region and releases both. Any failure is reported (exit 1).
 * `peer_app crash` has a bug in one error path, for a sweep to find: when rpma_mr_reg fails,
 * it aborts.
 */
#include <librpma.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char *argv[]) {
  const int crash = argc > 1 && strcmp(argv[1], "crash") == 0;
  struct ibv_context *dev = NULL;
  int ret = rpma_utils_get_ibv_context("127.0.0.1", RPMA_UTIL_IBV_CONTEXT_LOCAL, &dev);
  if (ret) {
    fprintf(stderr, "peer_app: rpma_utils_get_ibv_context: %s\n", rpma_err_2str(ret));
    return 1;
  }
  struct rpma_peer *peer = NULL;
  if ((ret = rpma_peer_new(dev, &peer))) {
    fprintf(stderr, "peer_app: rpma_peer_new: %s\n", rpma_err_2str(ret));
    return 1;
  }
  static char buffer[4096];
  struct rpma_mr_local *mr = NULL;
  int status = 0;
  if ((ret = rpma_mr_reg(peer, buffer, sizeof(buffer), RPMA_MR_USAGE_READ_SRC, &mr))) {
    fprintf(stderr, "peer_app: rpma_mr_reg: %s\n", rpma_err_2str(ret));
    if (crash) abort();
    status = 1;
  } else if ((ret = rpma_mr_dereg(&mr))) {
    fprintf(stderr, "peer_app: rpma_mr_dereg: %s\n", rpma_err_2str(ret));
    status = 1;
  }
  if ((ret = rpma_peer_delete(&peer))) {
    fprintf(stderr, "peer_app: rpma_peer_delete: %s\n", rpma_err_2str(ret));
    status = 1;
  }
  if (status == 0) printf("peer_app: ok\n");
  return status;
}
