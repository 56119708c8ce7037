/*
 * pair_app: a librpma server and client as two processes, for the CMake example's pair and run
 * tests. The server answers the client's connection with private data that the client checks;
 * each side prints "<role>: ok" and exits 0 when all went right, and reports any failure (exit 1).
 *
 *   pair_app server PORT [stubborn]   accept one client on 127.0.0.1:PORT, then wait for it to
 *                                     disconnect; stubborn: ignores SIGTERM (only SIGKILL ends it)
 *   pair_app client PORT [fail|hang]  connect to 127.0.0.1:PORT, check the server's greeting,
 *                                     disconnect; fail: exit 1 before connecting; hang: once
 *                                     connected, wait for the server to disconnect (it never does)
 *   pair_app listen PORT SECONDS      hold a listener on 127.0.0.1:PORT for SECONDS (exit 1 when
 *                                     the address is taken: another listener on the same fabric)
 */
#include <librpma.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *role = "pair_app";
static const char greeting[] = "hello from the server";

#define CHECK(expr)                                                           \
  do {                                                                        \
    int ret_ = (expr);                                                        \
    if (ret_ != 0) {                                                          \
      fprintf(stderr, "%s: %s: %s\n", role, #expr, rpma_err_2str(ret_));     \
      exit(1);                                                                \
    }                                                                         \
  } while (0)

static struct rpma_peer *new_peer(void) {
  struct ibv_context *dev = NULL;
  struct rpma_peer *peer = NULL;
  CHECK(rpma_utils_get_ibv_context("127.0.0.1", RPMA_UTIL_IBV_CONTEXT_LOCAL, &dev));
  CHECK(rpma_peer_new(dev, &peer));
  return peer;
}

static void expect_event(struct rpma_conn *conn, enum rpma_conn_event expected) {
  enum rpma_conn_event event;
  CHECK(rpma_conn_next_event(conn, &event));
  if (event != expected) {
    fprintf(stderr, "%s: event %s, expected %s\n", role, rpma_utils_conn_event_2str(event),
            rpma_utils_conn_event_2str(expected));
    exit(1);
  }
}

static int server(const char *port, int stubborn) {
  role = "server";
  if (stubborn) signal(SIGTERM, SIG_IGN);
  struct rpma_peer *peer = new_peer();
  struct rpma_ep *ep = NULL;
  CHECK(rpma_ep_listen(peer, "127.0.0.1", port, &ep));
  printf("server: listening on 127.0.0.1:%s\n", port);
  fflush(stdout);
  struct rpma_conn_req *req = NULL;
  CHECK(rpma_ep_next_conn_req(ep, NULL, &req));
  struct rpma_conn_private_data pdata = {(void *)greeting, sizeof(greeting)};
  struct rpma_conn *conn = NULL;
  CHECK(rpma_conn_req_connect(&req, &pdata, &conn));
  expect_event(conn, RPMA_CONN_ESTABLISHED);
  expect_event(conn, RPMA_CONN_CLOSED);
  CHECK(rpma_conn_disconnect(conn));
  CHECK(rpma_conn_delete(&conn));
  CHECK(rpma_ep_shutdown(&ep));
  CHECK(rpma_peer_delete(&peer));
  printf("server: ok\n");
  return 0;
}

static int client(const char *port, const char *how) {
  role = "client";
  if (strcmp(how, "fail") == 0) {
    fprintf(stderr, "client: failing on purpose, before connecting\n");
    return 1;
  }
  struct rpma_peer *peer = new_peer();
  struct rpma_conn_req *req = NULL;
  CHECK(rpma_conn_req_new(peer, "127.0.0.1", port, NULL, &req));
  struct rpma_conn *conn = NULL;
  CHECK(rpma_conn_req_connect(&req, NULL, &conn));
  expect_event(conn, RPMA_CONN_ESTABLISHED);
  struct rpma_conn_private_data pdata;
  CHECK(rpma_conn_get_private_data(conn, &pdata));
  /* (The CM may pad private data: the greeting, with its NUL, must lead it.) */
  if (pdata.len < sizeof(greeting) || memcmp(pdata.ptr, greeting, sizeof(greeting)) != 0) {
    fprintf(stderr, "client: the server's private data is not its greeting\n");
    return 1;
  }
  if (strcmp(how, "hang") == 0) {
    printf("client: connected; waiting for the server to disconnect\n");
    fflush(stdout);
    expect_event(conn, RPMA_CONN_CLOSED);
  }
  CHECK(rpma_conn_disconnect(conn));
  expect_event(conn, RPMA_CONN_CLOSED);
  CHECK(rpma_conn_delete(&conn));
  CHECK(rpma_peer_delete(&peer));
  printf("client: ok\n");
  return 0;
}

static int listen_for(const char *port, int seconds) {
  role = "listener";
  struct rpma_peer *peer = new_peer();
  struct rpma_ep *ep = NULL;
  int ret = rpma_ep_listen(peer, "127.0.0.1", port, &ep);
  if (ret != 0) {
    fprintf(stderr, "listener: cannot listen on 127.0.0.1:%s: %s\n", port, rpma_err_2str(ret));
    rpma_peer_delete(&peer);
    return 1;
  }
  printf("listener: listening on 127.0.0.1:%s for %d s\n", port, seconds);
  fflush(stdout);
  sleep((unsigned)seconds);
  CHECK(rpma_ep_shutdown(&ep));
  CHECK(rpma_peer_delete(&peer));
  printf("listener: ok\n");
  return 0;
}

int main(int argc, char *argv[]) {
  const char *mode = argc > 2 ? argv[1] : "";
  if (strcmp(mode, "server") == 0 && argc <= 4)
    return server(argv[2], argc == 4 && strcmp(argv[3], "stubborn") == 0);
  if (strcmp(mode, "client") == 0 && argc <= 4) return client(argv[2], argc == 4 ? argv[3] : "");
  if (strcmp(mode, "listen") == 0 && argc == 4) return listen_for(argv[2], atoi(argv[3]));
  fprintf(stderr,
          "usage: pair_app server PORT [stubborn] | client PORT [fail|hang] | "
          "listen PORT SECONDS\n");
  return 2;
}
