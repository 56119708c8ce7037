/*
 * dropin.c: an ordinary librpma program, written against <librpma.h> alone, that dropin_test.sh
 * builds against the DISTRO's header and library and then runs on softrpma's librpma.so.0, and
 * that pkgconfig_test.sh builds with `pkg-config --cflags --libs librpma` against ours.
 *
 *   dropin where           prints "librpma.so.0: <real path>" of the librpma.so.0 the dynamic
 *                          loader gave this process (exactly one must be loaded) and exits 0.
 *   dropin run PORT        prints the same line, then a client and a server in this process
 *                          (on softrpma: the simulated NIC) connect on 127.0.0.1:PORT with
 *                          private data both ways, do an RDMA write, read it back, send/recv
 *                          both ways (one with immediate data), wait for every completion with
 *                          rpma_conn_wait() on a shared channel, check every completion and
 *                          every byte, disconnect and release everything. Exits 0 when all is
 *                          as librpma documents it, 1 when a check failed, 2 when a call did.
 *   dropin write_fault PORT  connects as above and expects rpma_write() to fail with
 *                          RPMA_E_PROVIDER: run it with RPMA_SIM_FAULTS='ibv_post_send:fail=EIO'
 *                          (a softrpma-only behaviour). Exits 0 when it did.
 *
 * Every wait is bounded: the completion / event fd is polled for at most 30 s first, so a lost
 * completion fails the program instead of hanging it.
 */
#define _GNU_SOURCE
#include <librpma.h>

#include <arpa/inet.h>
#include <errno.h>
#include <link.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WAIT_LIMIT_MS 30000

/* A librpma call that must succeed: exits 2 naming it otherwise. */
#define CALL(expr)                                                                   \
	do {                                                                         \
		int ret_ = (expr);                                                   \
		if (ret_ != 0) {                                                     \
			fprintf(stderr, "FAILED: %s returned %d (%s)\n", #expr, ret_, \
				rpma_err_2str(ret_));                                \
			exit(2);                                                     \
		}                                                                    \
	} while (0)

/* A documented result: counts a failure (and says which) otherwise. */
static int failures;
#define EXPECT(cond)                                                     \
	do {                                                             \
		if (!(cond)) {                                           \
			fprintf(stderr, "FAILED: %s (line %d)\n", #cond, \
				__LINE__);                               \
			failures++;                                      \
		}                                                        \
	} while (0)

struct found_lib {
	int count;
	char path[PATH_MAX];
};

static int find_librpma(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	struct found_lib *found = data;
	const char *slash = strrchr(info->dlpi_name, '/');
	const char *base = slash ? slash + 1 : info->dlpi_name;
	if (strcmp(base, "librpma.so.0") != 0)
		return 0;
	found->count++;
	if (realpath(info->dlpi_name, found->path) == NULL)
		snprintf(found->path, sizeof(found->path), "%s", info->dlpi_name);
	return 0;
}

/* Prints the real path of the one librpma.so.0 in this process; exits 2 unless exactly one. */
static void print_librpma(void)
{
	struct found_lib found = {0};
	dl_iterate_phdr(find_librpma, &found);
	if (found.count != 1) {
		fprintf(stderr, "FAILED: %d librpma.so.0 loaded, want 1\n", found.count);
		exit(2);
	}
	printf("librpma.so.0: %s\n", found.path);
	fflush(stdout);
}

/* Polls fd for input for at most WAIT_LIMIT_MS; exits 2 when nothing came. */
static void await_fd(int fd, const char *what)
{
	struct pollfd pfd = {.fd = fd, .events = POLLIN};
	int ret;
	do {
		ret = poll(&pfd, 1, WAIT_LIMIT_MS);
	} while (ret < 0 && errno == EINTR);
	if (ret != 1) {
		fprintf(stderr, "FAILED: nothing on the %s fd within %d ms\n", what, WAIT_LIMIT_MS);
		exit(2);
	}
}

/* Waits for the next completion of conn (shared channel) and returns it in *wc. */
static void wait_one(struct rpma_conn *conn, const char *who, bool expect_rcq, struct ibv_wc *wc)
{
	int fd = -1;
	CALL(rpma_conn_get_compl_fd(conn, &fd));
	await_fd(fd, who);
	struct rpma_cq *cq = NULL;
	bool is_rcq = !expect_rcq;
	CALL(rpma_conn_wait(conn, 0, &cq, &is_rcq));
	EXPECT(is_rcq == expect_rcq);
	struct rpma_cq *want = NULL;
	if (expect_rcq)
		CALL(rpma_conn_get_rcq(conn, &want));
	else
		CALL(rpma_conn_get_cq(conn, &want));
	EXPECT(cq == want);
	int got = 0;
	memset(wc, 0, sizeof(*wc));
	CALL(rpma_cq_get_wc(cq, 1, wc, &got));
	EXPECT(got == 1);
	printf("%s: %s completion: opcode %d, status %s, wr_id %#llx, byte_len %u\n", who,
	       expect_rcq ? "rcq" : "cq", (int)wc->opcode, ibv_wc_status_str(wc->status),
	       (unsigned long long)wc->wr_id, wc->byte_len);
}

/* Waits for the next connection event of conn and returns it. */
static enum rpma_conn_event next_event(struct rpma_conn *conn, const char *who)
{
	int fd = -1;
	CALL(rpma_conn_get_event_fd(conn, &fd));
	await_fd(fd, who);
	enum rpma_conn_event event = RPMA_CONN_UNDEFINED;
	CALL(rpma_conn_next_event(conn, &event));
	printf("%s: %s\n", who, rpma_utils_conn_event_2str(event));
	return event;
}

enum {
	BUF_SIZE = 4096,
	/* client buffer */
	WRITE_SRC = 0,
	READ_DST = 1024,
	CLIENT_RECV = 2048,
	CLIENT_SEND = 3072,
	/* server buffer */
	WRITE_DST = 100,
	SERVER_RECV = 2048,
	SERVER_SEND = 3072,
};

static const char kClientHello[] = "client: hello";
static const char kWritten[] = "written by rpma_write, read back by rpma_read";
static const char kPing[] = "ping from the client";
static const char kPong[] = "pong, with immediate data";
static const uint32_t kImm = 0xC0FFEEu;

struct world {
	struct rpma_peer *peer;
	struct rpma_conn_cfg *cfg;
	struct rpma_ep *ep;
	struct rpma_conn *client, *server;
	struct rpma_mr_local *client_mr, *server_mr;
	struct rpma_mr_remote *server_remote;
	char *client_buf, *server_buf;
};

/* Device, peer, listener, both connections ESTABLISHED, the server's region known remotely. */
static void connect_world(struct world *w, const char *port)
{
	const char *addr = "127.0.0.1";
	struct ibv_context *dev = NULL;
	CALL(rpma_utils_get_ibv_context(addr, RPMA_UTIL_IBV_CONTEXT_LOCAL, &dev));
	CALL(rpma_peer_new(dev, &w->peer));
	CALL(rpma_conn_cfg_new(&w->cfg));
	CALL(rpma_conn_cfg_set_compl_channel(w->cfg, true));
	CALL(rpma_conn_cfg_set_rcq_size(w->cfg, 4));
	CALL(rpma_ep_listen(w->peer, addr, port, &w->ep));

	w->client_buf = calloc(1, BUF_SIZE);
	w->server_buf = calloc(1, BUF_SIZE);
	if (w->client_buf == NULL || w->server_buf == NULL)
		exit(2);
	CALL(rpma_mr_reg(w->peer, w->client_buf, BUF_SIZE,
			 RPMA_MR_USAGE_WRITE_SRC | RPMA_MR_USAGE_READ_DST | RPMA_MR_USAGE_SEND |
				 RPMA_MR_USAGE_RECV,
			 &w->client_mr));
	CALL(rpma_mr_reg(w->peer, w->server_buf, BUF_SIZE,
			 RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_SEND |
				 RPMA_MR_USAGE_RECV,
			 &w->server_mr));

	/* Client: request with private data. */
	struct rpma_conn_req *req = NULL;
	CALL(rpma_conn_req_new(w->peer, addr, port, w->cfg, &req));
	struct rpma_conn_private_data hello = {(void *)kClientHello, sizeof(kClientHello)};
	CALL(rpma_conn_req_connect(&req, &hello, &w->client));
	EXPECT(req == NULL);

	/* Server: the request carries the client's private data; a receive is posted before
	 * accepting; the accept carries the server region's descriptor. */
	int ep_fd = -1;
	CALL(rpma_ep_get_fd(w->ep, &ep_fd));
	await_fd(ep_fd, "listener");
	CALL(rpma_ep_next_conn_req(w->ep, w->cfg, &req));
	struct rpma_conn_private_data got = {0};
	CALL(rpma_conn_req_get_private_data(req, &got));
	EXPECT(got.len >= sizeof(kClientHello));
	EXPECT(got.ptr != NULL && memcmp(got.ptr, kClientHello, sizeof(kClientHello)) == 0);
	CALL(rpma_conn_req_recv(req, w->server_mr, SERVER_RECV, 64, (void *)0x5e1));
	size_t desc_size = 0;
	CALL(rpma_mr_get_descriptor_size(w->server_mr, &desc_size));
	char desc[64];
	if (desc_size > sizeof(desc))
		exit(2);
	CALL(rpma_mr_get_descriptor(w->server_mr, desc));
	struct rpma_conn_private_data accept = {desc, (uint8_t)desc_size};
	CALL(rpma_conn_req_connect(&req, &accept, &w->server));

	/* The client first: as with librdmacm on IB, the server's ESTABLISHED comes only after
	 * the client got (and so processed) its own. */
	EXPECT(next_event(w->client, "client") == RPMA_CONN_ESTABLISHED);
	EXPECT(next_event(w->server, "server") == RPMA_CONN_ESTABLISHED);

	/* Client: the server's region from the accept's private data. */
	CALL(rpma_conn_get_private_data(w->client, &got));
	EXPECT(got.len >= desc_size);
	CALL(rpma_mr_remote_from_descriptor(got.ptr, desc_size, &w->server_remote));
	size_t remote_size = 0;
	CALL(rpma_mr_remote_get_size(w->server_remote, &remote_size));
	EXPECT(remote_size == BUF_SIZE);
}

static void release_world(struct world *w)
{
	CALL(rpma_conn_disconnect(w->client));
	EXPECT(next_event(w->client, "client") == RPMA_CONN_CLOSED);
	EXPECT(next_event(w->server, "server") == RPMA_CONN_CLOSED);
	CALL(rpma_conn_delete(&w->client));
	CALL(rpma_conn_delete(&w->server));
	EXPECT(w->client == NULL && w->server == NULL);
	CALL(rpma_mr_remote_delete(&w->server_remote));
	CALL(rpma_mr_dereg(&w->client_mr));
	CALL(rpma_mr_dereg(&w->server_mr));
	CALL(rpma_ep_shutdown(&w->ep));
	CALL(rpma_conn_cfg_delete(&w->cfg));
	CALL(rpma_peer_delete(&w->peer));
	free(w->client_buf);
	free(w->server_buf);
}

static void run(struct world *w)
{
	struct ibv_wc wc;

	/* RDMA write into the server's region, then read it back elsewhere. */
	memcpy(w->client_buf + WRITE_SRC, kWritten, sizeof(kWritten));
	CALL(rpma_write(w->client, w->server_remote, WRITE_DST, w->client_mr, WRITE_SRC,
			sizeof(kWritten), RPMA_F_COMPLETION_ALWAYS, (void *)0x11));
	wait_one(w->client, "client", false, &wc);
	EXPECT(wc.status == IBV_WC_SUCCESS);
	EXPECT(wc.opcode == IBV_WC_RDMA_WRITE);
	EXPECT(wc.wr_id == 0x11);
	EXPECT(memcmp(w->server_buf + WRITE_DST, kWritten, sizeof(kWritten)) == 0);

	CALL(rpma_read(w->client, w->client_mr, READ_DST, w->server_remote, WRITE_DST,
		       sizeof(kWritten), RPMA_F_COMPLETION_ALWAYS, (void *)0x12));
	wait_one(w->client, "client", false, &wc);
	EXPECT(wc.status == IBV_WC_SUCCESS);
	EXPECT(wc.opcode == IBV_WC_RDMA_READ);
	EXPECT(wc.wr_id == 0x12);
	EXPECT(wc.byte_len == sizeof(kWritten));
	EXPECT(memcmp(w->client_buf + READ_DST, kWritten, sizeof(kWritten)) == 0);

	/* Send: client -> server (the receive posted by rpma_conn_req_recv). */
	memcpy(w->client_buf + CLIENT_SEND, kPing, sizeof(kPing));
	CALL(rpma_send(w->client, w->client_mr, CLIENT_SEND, sizeof(kPing),
		       RPMA_F_COMPLETION_ALWAYS, (void *)0x13));
	wait_one(w->client, "client", false, &wc);
	EXPECT(wc.status == IBV_WC_SUCCESS);
	EXPECT(wc.opcode == IBV_WC_SEND);
	EXPECT(wc.wr_id == 0x13);
	wait_one(w->server, "server", true, &wc);
	EXPECT(wc.status == IBV_WC_SUCCESS);
	EXPECT(wc.opcode == IBV_WC_RECV);
	EXPECT(wc.wr_id == 0x5e1);
	EXPECT(wc.byte_len == sizeof(kPing));
	EXPECT(memcmp(w->server_buf + SERVER_RECV, kPing, sizeof(kPing)) == 0);

	/* Send with immediate data: server -> client. */
	CALL(rpma_recv(w->client, w->client_mr, CLIENT_RECV, 64, (void *)0x14));
	memcpy(w->server_buf + SERVER_SEND, kPong, sizeof(kPong));
	CALL(rpma_send_with_imm(w->server, w->server_mr, SERVER_SEND, sizeof(kPong),
				RPMA_F_COMPLETION_ALWAYS, kImm, (void *)0x15));
	wait_one(w->server, "server", false, &wc);
	EXPECT(wc.status == IBV_WC_SUCCESS);
	EXPECT(wc.opcode == IBV_WC_SEND);
	EXPECT(wc.wr_id == 0x15);
	wait_one(w->client, "client", true, &wc);
	EXPECT(wc.status == IBV_WC_SUCCESS);
	EXPECT(wc.opcode == IBV_WC_RECV);
	EXPECT(wc.wr_id == 0x14);
	EXPECT(wc.byte_len == sizeof(kPong));
	EXPECT((wc.wc_flags & IBV_WC_WITH_IMM) != 0);
	EXPECT(ntohl(wc.imm_data) == kImm);
	EXPECT(memcmp(w->client_buf + CLIENT_RECV, kPong, sizeof(kPong)) == 0);

	/* Nothing else is pending on either connection. */
	struct rpma_cq *cq = NULL;
	int got = -1;
	CALL(rpma_conn_get_cq(w->client, &cq));
	EXPECT(rpma_cq_get_wc(cq, 1, &wc, &got) == RPMA_E_NO_COMPLETION);
	CALL(rpma_conn_get_rcq(w->server, &cq));
	EXPECT(rpma_cq_get_wc(cq, 1, &wc, &got) == RPMA_E_NO_COMPLETION);
}

static void write_fault(struct world *w)
{
	int ret = rpma_write(w->client, w->server_remote, WRITE_DST, w->client_mr, WRITE_SRC, 8,
			     RPMA_F_COMPLETION_ALWAYS, NULL);
	printf("rpma_write() returned %d (%s)\n", ret, rpma_err_2str(ret));
	EXPECT(ret == RPMA_E_PROVIDER);
}

int main(int argc, char *argv[])
{
	if (argc == 2 && strcmp(argv[1], "where") == 0) {
		print_librpma();
		return 0;
	}
	if (argc != 3 || (strcmp(argv[1], "run") != 0 && strcmp(argv[1], "write_fault") != 0)) {
		fprintf(stderr, "usage: %s where | run PORT | write_fault PORT\n", argv[0]);
		return 2;
	}
	print_librpma();
	struct world w = {0};
	connect_world(&w, argv[2]);
	if (strcmp(argv[1], "run") == 0)
		run(&w);
	else
		write_fault(&w);
	release_world(&w);
	printf("%s: %d failed checks\n", argv[1], failures);
	return failures == 0 ? 0 : 1;
}
