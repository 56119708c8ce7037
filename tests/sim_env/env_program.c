/*
 * env_program: an ordinary librpma program that leaves librpma's log thresholds as they are
 * (errors to syslog only), for env_errors_test.sh. It opens the device, makes a peer, registers
 * a buffer and tears it all down. Exit status: 0 when every call succeeded, 3 when
 * rpma_utils_get_ibv_context() failed with RPMA_E_INVAL, 1 for any other failure.
 */
#include <librpma.h>

#include <stdio.h>

int main(void) {
  struct ibv_context *dev = NULL;
  int ret = rpma_utils_get_ibv_context("127.0.0.1", RPMA_UTIL_IBV_CONTEXT_LOCAL, &dev);
  if (ret != 0) {
    printf("rpma_utils_get_ibv_context: %s\n", rpma_err_2str(ret));
    return ret == RPMA_E_INVAL ? 3 : 1;
  }
  struct rpma_peer *peer = NULL;
  ret = rpma_peer_new(dev, &peer);
  if (ret != 0) {
    printf("rpma_peer_new: %s\n", rpma_err_2str(ret));
    return 1;
  }
  static char buffer[4096];
  struct rpma_mr_local *mr = NULL;
  ret = rpma_mr_reg(peer, buffer, sizeof(buffer), RPMA_MR_USAGE_READ_SRC, &mr);
  if (ret == 0) ret = rpma_mr_dereg(&mr);
  if (ret != 0) {
    printf("rpma_mr_reg / rpma_mr_dereg: %s\n", rpma_err_2str(ret));
    rpma_peer_delete(&peer);
    return 1;
  }
  ret = rpma_peer_delete(&peer);
  if (ret != 0) {
    printf("rpma_peer_delete: %s\n", rpma_err_2str(ret));
    return 1;
  }
  printf("env_program: ok\n");
  return 0;
}
