/*
 * wc_victim: a librpma client and server in one process, for testing `rpma-sim sweep --kinds`.
 * The client writes once to the server's memory and waits for the completion. Every call that
 * fails is reported properly (exit 1), so a sweep of `fail` faults passes; but the client trusts
 * that a completion it got is a success: when the write completes with an error status (a
 * `wc_status=` fault, the sweep's `wc` kind), it dereferences NULL. That is the bug a `wc`
 * sweep must find. Without a fault it exits 0.
 */
#include <librpma.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(call)                                                         \
  do {                                                                      \
    int ret_ = (call);                                                      \
    if (ret_ != 0) {                                                        \
      fprintf(stderr, "wc_victim: %s: %s\n", #call, rpma_err_2str(ret_)); \
      exit(1);                                                              \
    }                                                                       \
  } while (0)

static const char kAddress[] = "127.0.0.1";
static const char kPort[] = "7311";

/* What the client keeps of a completion: the bug is that it expects one only on success. */
struct result {
  const char *text;
};

int main(void) {
  static char server_buf[4096];
  static char client_buf[4096] = "written by the wc_victim client";
  struct ibv_context *dev = NULL;
  struct rpma_peer *peer = NULL;
  struct rpma_ep *ep = NULL;
  struct rpma_mr_local *server_mr = NULL, *client_mr = NULL;
  struct rpma_conn_req *client_req = NULL, *server_req = NULL;
  struct rpma_conn *client = NULL, *server = NULL;
  struct rpma_mr_remote *remote_mr = NULL;
  enum rpma_conn_event event = RPMA_CONN_UNDEFINED;

  CHECK(rpma_utils_get_ibv_context(kAddress, RPMA_UTIL_IBV_CONTEXT_LOCAL, &dev));
  CHECK(rpma_peer_new(dev, &peer));
  CHECK(rpma_ep_listen(peer, kAddress, kPort, &ep));
  CHECK(rpma_mr_reg(peer, server_buf, sizeof(server_buf), RPMA_MR_USAGE_WRITE_DST, &server_mr));
  CHECK(rpma_mr_reg(peer, client_buf, sizeof(client_buf), RPMA_MR_USAGE_WRITE_SRC, &client_mr));

  CHECK(rpma_conn_req_new(peer, kAddress, kPort, NULL, &client_req));
  CHECK(rpma_conn_req_connect(&client_req, NULL, &client));
  CHECK(rpma_ep_next_conn_req(ep, NULL, &server_req));
  size_t desc_size = 0;
  CHECK(rpma_mr_get_descriptor_size(server_mr, &desc_size));
  char desc[256];
  if (desc_size > sizeof(desc)) return 1;
  CHECK(rpma_mr_get_descriptor(server_mr, desc));
  struct rpma_conn_private_data pdata = {desc, (uint8_t)desc_size};
  CHECK(rpma_conn_req_connect(&server_req, &pdata, &server));
  CHECK(rpma_conn_next_event(client, &event));
  if (event != RPMA_CONN_ESTABLISHED) {
    fprintf(stderr, "wc_victim: client: %s\n", rpma_utils_conn_event_2str(event));
    return 1;
  }
  CHECK(rpma_conn_next_event(server, &event));
  if (event != RPMA_CONN_ESTABLISHED) {
    fprintf(stderr, "wc_victim: server: %s\n", rpma_utils_conn_event_2str(event));
    return 1;
  }

  struct rpma_conn_private_data got = {NULL, 0};
  CHECK(rpma_conn_get_private_data(client, &got));
  CHECK(rpma_mr_remote_from_descriptor(got.ptr, got.len, &remote_mr));
  static struct result done = {"the write completed"};
  CHECK(rpma_write(client, remote_mr, 0, client_mr, 0, strlen(client_buf) + 1,
                   RPMA_F_COMPLETION_ALWAYS, &done));
  struct rpma_cq *cq = NULL;
  CHECK(rpma_conn_get_cq(client, &cq));
  CHECK(rpma_cq_wait(cq));
  struct ibv_wc wc;
  int count = 0;
  CHECK(rpma_cq_get_wc(cq, 1, &wc, &count));
  /* THE BUG: an error completion may carry no context (a flushed or failed WR's wr_id is kept,
   * but this client pretends it is NULL on error), and the client uses it anyway. */
  struct result *r = wc.status == IBV_WC_SUCCESS ? (struct result *)wc.wr_id : NULL;
  printf("wc_victim: %s (status %d)\n", r->text, (int)wc.status);
  if (strcmp(server_buf, client_buf) != 0) {
    fprintf(stderr, "wc_victim: the server's memory does not hold what was written\n");
    return 1;
  }

  CHECK(rpma_conn_disconnect(client));
  CHECK(rpma_conn_next_event(client, &event));
  CHECK(rpma_conn_next_event(server, &event));
  CHECK(rpma_conn_disconnect(server));
  CHECK(rpma_conn_delete(&client));
  CHECK(rpma_conn_delete(&server));
  CHECK(rpma_mr_remote_delete(&remote_mr));
  CHECK(rpma_mr_dereg(&client_mr));
  CHECK(rpma_mr_dereg(&server_mr));
  CHECK(rpma_ep_shutdown(&ep));
  CHECK(rpma_peer_delete(&peer));
  return 0;
}
