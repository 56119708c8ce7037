/*
 * hang_pair.c: two processes that hang, for rpma-sim's hang reports (hang_report_test.sh).
 *
 *   hang_pair server ADDR PORT   accept one connection, then wait in rpma_conn_next_event for
 *                                the client to disconnect (it never does)
 *   hang_pair client ADDR PORT   connect, then wait in rpma_conn_next_event for the server to
 *                                disconnect (it never does): the two wait for each other
 *   hang_pair listen ADDR PORT   listen and wait in rpma_ep_next_conn_req for a client
 *   hang_pair quit ADDR PORT     start the simulated NIC, then exit 1 (a client that failed)
 */
#include <librpma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(call)                                                                     \
	do {                                                                            \
		int ret_ = (call);                                                      \
		if (ret_ != 0) {                                                        \
			fprintf(stderr, "%s: %s\n", #call, rpma_err_2str(ret_));        \
			exit(1);                                                        \
		}                                                                       \
	} while (0)

int main(int argc, char *argv[])
{
	if (argc != 4) {
		fprintf(stderr, "usage: %s server|client|listen|quit ADDR PORT\n", argv[0]);
		return 2;
	}
	const char *mode = argv[1], *addr = argv[2], *port = argv[3];
	setvbuf(stdout, NULL, _IOLBF, 0);
	int client = strcmp(mode, "client") == 0 || strcmp(mode, "quit") == 0;
	struct ibv_context *dev = NULL;
	struct rpma_peer *peer = NULL;
	CHECK(rpma_utils_get_ibv_context(addr, client ? RPMA_UTIL_IBV_CONTEXT_REMOTE
						      : RPMA_UTIL_IBV_CONTEXT_LOCAL,
					 &dev));
	CHECK(rpma_peer_new(dev, &peer));
	if (strcmp(mode, "quit") == 0) {
		printf("quit: failing\n");
		/* A failed client that cleans up: under --config=asan, a leak would abort it. */
		CHECK(rpma_peer_delete(&peer));
		return 1;
	}
	struct rpma_conn_req *req = NULL;
	struct rpma_conn *conn = NULL;
	enum rpma_conn_event event;
	if (client) {
		CHECK(rpma_conn_req_new(peer, addr, port, NULL, &req));
		CHECK(rpma_conn_req_connect(&req, NULL, &conn));
		CHECK(rpma_conn_next_event(conn, &event));
		printf("client: connected\n");
	} else {
		struct rpma_ep *ep = NULL;
		CHECK(rpma_ep_listen(peer, addr, port, &ep));
		printf("%s: listening\n", mode);
		CHECK(rpma_ep_next_conn_req(ep, NULL, &req));
		CHECK(rpma_conn_req_connect(&req, NULL, &conn));
		CHECK(rpma_conn_next_event(conn, &event));
		printf("server: connected\n");
	}
	/* Each waits for the other to disconnect. */
	CHECK(rpma_conn_next_event(conn, &event));
	printf("%s: next event %d\n", mode, (int)event);
	return 0;
}
