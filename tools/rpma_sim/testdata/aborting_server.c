/*
 * aborting_server: a librpma server and client for testing that `rpma-sim sweep` watches every
 * process of a run, not only the command it started. The server has a deliberate bug in one
 * error path: when rpma_conn_req_connect() fails (rdma_accept:fail=... in the server), it frees
 * a buffer twice (glibc aborts: "free(): double free detected"), calls abort(), or forgets the
 * buffer (a leak, for `sweep --leaks` of a script), as HOW says.
 * Every other failure is reported properly (exit 1). Started by aborting_pair.sh, so that the
 * crash reaches rpma-sim only as the script's exit status.
 *
 *   aborting_server server PORT double-free|abort|leak
 *   aborting_server client PORT
 */
#include <librpma.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *role = "?";

#define CHECK(expr)                                                                \
	do {                                                                       \
		int ret_ = (expr);                                                 \
		if (ret_ != 0) {                                                   \
			fprintf(stderr, "%s: %s: %s\n", role, #expr, rpma_err_2str(ret_)); \
			exit(1);                                                   \
		}                                                                  \
	} while (0)

/* Written through a volatile pointer so that the compiler keeps the double free. */
static void *volatile g_block;

static struct rpma_peer *new_peer(enum rpma_util_ibv_context_type type)
{
	struct ibv_context *dev = NULL;
	struct rpma_peer *peer = NULL;
	CHECK(rpma_utils_get_ibv_context("127.0.0.1", type, &dev));
	CHECK(rpma_peer_new(dev, &peer));
	return peer;
}

static int server(const char *port, const char *how)
{
	struct rpma_peer *peer = new_peer(RPMA_UTIL_IBV_CONTEXT_LOCAL);
	struct rpma_ep *ep = NULL;
	CHECK(rpma_ep_listen(peer, "127.0.0.1", port, &ep));
	printf("server: listening\n");
	struct rpma_conn_req *req = NULL;
	CHECK(rpma_ep_next_conn_req(ep, NULL, &req));
	g_block = malloc(64);
	struct rpma_conn *conn = NULL;
	int ret = rpma_conn_req_connect(&req, NULL, &conn);
	if (ret != 0) {
		fprintf(stderr, "server: rpma_conn_req_connect: %s\n", rpma_err_2str(ret));
		if (strcmp(how, "leak") == 0) {
			/* The bug: the error path forgets the block (and releases the rest). */
			g_block = NULL;
			(void)rpma_ep_shutdown(&ep);
			(void)rpma_peer_delete(&peer);
			return 1;
		}
		/* The bug: the error path releases what the cleanup below releases again. */
		free(g_block);
		if (strcmp(how, "abort") == 0)
			abort();
		free(g_block);
		return 1;
	}
	enum rpma_conn_event event;
	CHECK(rpma_conn_next_event(conn, &event));
	CHECK(rpma_conn_next_event(conn, &event)); /* the client's disconnect */
	CHECK(rpma_conn_disconnect(conn));
	CHECK(rpma_conn_delete(&conn));
	free(g_block);
	CHECK(rpma_ep_shutdown(&ep));
	CHECK(rpma_peer_delete(&peer));
	printf("server: ok\n");
	return 0;
}

static int client(const char *port)
{
	struct rpma_peer *peer = new_peer(RPMA_UTIL_IBV_CONTEXT_REMOTE);
	struct rpma_conn_req *req = NULL;
	CHECK(rpma_conn_req_new(peer, "127.0.0.1", port, NULL, &req));
	struct rpma_conn *conn = NULL;
	CHECK(rpma_conn_req_connect(&req, NULL, &conn));
	enum rpma_conn_event event;
	CHECK(rpma_conn_next_event(conn, &event));
	if (event != RPMA_CONN_ESTABLISHED) {
		fprintf(stderr, "client: %s\n", rpma_utils_conn_event_2str(event));
		(void)rpma_conn_delete(&conn);
		(void)rpma_peer_delete(&peer);
		return 1;
	}
	CHECK(rpma_conn_disconnect(conn));
	CHECK(rpma_conn_next_event(conn, &event));
	CHECK(rpma_conn_delete(&conn));
	CHECK(rpma_peer_delete(&peer));
	printf("client: ok\n");
	return 0;
}

int main(int argc, char *argv[])
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 4 && strcmp(argv[1], "server") == 0) {
		role = "server";
		return server(argv[2], argv[3]);
	}
	if (argc == 3 && strcmp(argv[1], "client") == 0) {
		role = "client";
		return client(argv[2]);
	}
	fprintf(stderr, "usage: aborting_server server PORT double-free|abort|leak | client PORT\n");
	return 2;
}
