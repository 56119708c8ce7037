/*
 * fault_victim: a tiny librpma program with a deliberate bug in one error path, for testing how
 * `rpma-sim sweep` classifies runs. It opens the simulated device and makes a peer; when
 * rpma_peer_new() fails (ibv_alloc_pd:fail=..., or an allocation inside it), it does what MODE
 * says; any other failure is reported properly (exit 1). Without a fault it exits 0.
 *
 *   fault_victim report   print the error, exit 1 (a correct program)
 *   fault_victim crash    dereference NULL (crashed)
 *   fault_victim hang     wait forever (hung)
 *   fault_victim leak     lose a heap block, then exit 1 (leaked, with --leaks)
 *   fault_victim fail     like report, but exit 3 even without a fault (a broken program)
 *
 * Two more make a peer, register two MRs and release all three (rpma_mr_dereg twice, then
 * rpma_peer_delete), for how a sweep tells what the NIC kept from what the program leaked:
 *
 *   fault_victim teardown       a release that fails is reported and the rest is still
 *                               released, exit 1 (a correct program: all it leaves is what the
 *                               NIC refused to destroy, "kept")
 *   fault_victim teardown-leak  a release that fails makes it return at once, forgetting the
 *                               rest (leaked, with --leaks, whatever the NIC kept)
 */
#include <librpma.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Written through a volatile pointer so that the compiler keeps the crash and the leak. */
static void *volatile g_sink;

static void lose_a_block(void) {
  g_sink = malloc(64);
  memset(g_sink, 1, 64);
  g_sink = NULL;
}

/* The teardown modes; `forget` says whether a failed release ends it at once. */
static int teardown(struct rpma_peer *peer, int forget) {
  static char buffers[2][64];
  struct rpma_mr_local *mrs[2] = {NULL, NULL};
  for (int i = 0; i < 2; ++i) {
    int ret = rpma_mr_reg(peer, buffers[i], sizeof(buffers[i]), RPMA_MR_USAGE_READ_SRC, &mrs[i]);
    if (ret != 0) {
      fprintf(stderr, "rpma_mr_reg: %s\n", rpma_err_2str(ret));
      if (i == 1) (void)rpma_mr_dereg(&mrs[0]);
      (void)rpma_peer_delete(&peer);
      return 1;
    }
  }
  int status = 0;
  for (int i = 0; i < 2; ++i) {
    int ret = rpma_mr_dereg(&mrs[i]);
    if (ret != 0) {
      fprintf(stderr, "rpma_mr_dereg: %s\n", rpma_err_2str(ret));
      if (forget) return 1;
      status = 1;
    }
  }
  int ret = rpma_peer_delete(&peer);
  if (ret != 0) {
    fprintf(stderr, "rpma_peer_delete: %s\n", rpma_err_2str(ret));
    return 1;
  }
  if (status == 0) printf("fault_victim: no fault\n");
  return status;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: fault_victim report|crash|hang|leak|fail|teardown|teardown-leak\n");
    return 2;
  }
  const char *mode = argv[1];
  struct ibv_context *dev = NULL;
  int ret = rpma_utils_get_ibv_context("127.0.0.1", RPMA_UTIL_IBV_CONTEXT_LOCAL, &dev);
  if (ret != 0) {
    fprintf(stderr, "rpma_utils_get_ibv_context: %s\n", rpma_err_2str(ret));
    return 1;
  }
  struct rpma_peer *peer = NULL;
  ret = rpma_peer_new(dev, &peer);
  if (ret != 0) {
    if (strcmp(mode, "crash") == 0) {
      volatile int *volatile nowhere = NULL;  /* both volatile: no compiler may drop the store */
      *nowhere = 1;
    } else if (strcmp(mode, "hang") == 0) {
      for (;;) pause();
    } else if (strcmp(mode, "leak") == 0) {
      lose_a_block();
    }
    fprintf(stderr, "rpma_peer_new: %s\n", rpma_err_2str(ret));
    return 1;
  }
  if (strcmp(mode, "teardown") == 0) return teardown(peer, 0);
  if (strcmp(mode, "teardown-leak") == 0) return teardown(peer, 1);
  ret = rpma_peer_delete(&peer);
  if (ret != 0) {
    fprintf(stderr, "rpma_peer_delete: %s\n", rpma_err_2str(ret));
    return 1;
  }
  if (strcmp(mode, "fail") == 0) {
    fprintf(stderr, "fault_victim: failing without a fault, on purpose\n");
    return 3;
  }
  printf("fault_victim: no fault\n");
  return 0;
}
