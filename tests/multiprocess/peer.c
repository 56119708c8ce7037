/*
 * peer.c: one side of a librpma connection between two PROCESSES, written against librpma.h
 * only, as a user's server and client are. Every operation the simulated NIC's host fabric
 * carries is used and checked; each side prints "<role>: ok" and exits 0 when all was right.
 *
 *   peer server ADDR PORT [CLIENTS]   accept CLIENTS (default 1) connections, one after another
 *   peer client ADDR PORT [ID [MISUSE]]
 *                                     connect, then write, read, atomic write, flush, send/recv,
 *                                     write with immediate data, disconnect; MISUSE adds one
 *                                     bug of the kind the race detector is for: reuse-early
 *                                     overwrites a write's source before its completion (then
 *                                     prints what the server got: "read back: ..."), read-early
 *                                     looks at a read's destination before its completion
 *                                     (prints the first byte it saw)
 *   peer fork ADDR PORT               listen, then fork(): the child is a client (librpma used
 *                                     after fork), the parent serves it (a forking harness)
 *   peer fork-misuse ADDR PORT        listen, then fork(): the child calls rpma_ep_next_conn_req
 *                                     on the PARENT's endpoint, which must fail, not hang
 *   peer connect-only ADDR PORT       connect and print the event (no server expected)
 *   peer hold ADDR PORT               connect, then write in a loop until the connection ends:
 *                                     prints how it ended (for killing the server mid-transfer)
 *   peer listen ADDR PORT             listen, print the result of rpma_ep_listen, then wait for
 *                                     stdin to close
 *   peer srq-server ADDR PORT N       accept N connections that share one SRQ, each with a
 *                                     shared completion channel and an RCQ; collect 3 messages
 *                                     of each client with rpma_conn_wait, answer each "bye"
 *   peer sender ADDR PORT ID          connect, send 3 messages, wait for "bye", disconnect
 *   peer sender-threads ADDR PORT N   N senders in threads of this process, on one peer
 *   peer dreq-client ADDR PORT        connect, disconnect (the DREQ), then wait for a line on
 *                                     stdin before getting its own CLOSED
 *   peer closing-client ADDR PORT     connect, disconnect, and print the CLOCK_MONOTONIC time
 *                                     at which its CLOSED came ("client: closed at NS")
 *   peer busy-server ADDR PORT MS     accept one client; on its DREQ (CLOSED) stay busy MS ms
 *                                     outside the simulator, print "server: answering at NS",
 *                                     then disconnect (the DREP) and delete the connection
 *   peer dreq-server ADDR PORT answer|silent
 *                                     accept one client with a receive posted; on its DREQ
 *                                     check that the receive is still posted and that a send
 *                                     ends in IBV_WC_RETRY_EXC_ERR (silent: after a line on
 *                                     stdin, the client gone), then disconnect
 *
 * The server sleeps in rpma_cq_wait while the client's one-sided operations run: the target's
 * NIC must make progress without the target's help.
 */
#include <librpma.h>

#include <arpa/inet.h> /* ntohl: the distro's librpma.h does not bring it (differential_test) */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BUF_SIZE (512 * 1024)
/* A transfer this large goes by cross-memory attach where the kernel allows it. */
#define BIG_OFFSET (64 * 1024)
#define BIG_LEN (128 * 1024)
#define IMM 0xfeed5eedu

static const char *role = "peer";

#define CHECK(expr)                                                                   \
	do {                                                                          \
		int ret_ = (expr);                                                    \
		if (ret_ != 0) {                                                      \
			fprintf(stderr, "%s: %s: %s\n", role, #expr, rpma_err_2str(ret_)); \
			exit(2);                                                      \
		}                                                                     \
	} while (0)

#define EXPECT(cond)                                                          \
	do {                                                                  \
		if (!(cond)) {                                                \
			fprintf(stderr, "%s: expected %s\n", role, #cond);    \
			exit(3);                                              \
		}                                                             \
	} while (0)

static int ctx_tag; /* an op_context that is not NULL */

/* The next completion of cq (sleeping in rpma_cq_wait while there is none). */
static void next_wc(struct rpma_cq *cq, struct ibv_wc *wc)
{
	int got = 0;
	int ret;
	while ((ret = rpma_cq_get_wc(cq, 1, wc, &got)) == RPMA_E_NO_COMPLETION)
		CHECK(rpma_cq_wait(cq));
	CHECK(ret);
}

/* Waits for one completion on cq and checks it. */
/* The next completion, which must succeed with `opcode` (or `alt`, when not -1). An error
 * completion's opcode is undefined in verbs, so only its status is printed. */
static void wait_wc_of(struct rpma_cq *cq, enum ibv_wc_opcode opcode, int alt, struct ibv_wc *out)
{
	struct ibv_wc wc;
	next_wc(cq, &wc);
	if (wc.status != IBV_WC_SUCCESS) {
		fprintf(stderr, "%s: completion status %s, expected opcode %d\n", role,
			ibv_wc_status_str(wc.status), opcode);
		exit(3);
	}
	if (wc.opcode != opcode && (alt < 0 || (int)wc.opcode != alt)) {
		fprintf(stderr, "%s: completion opcode %d, expected opcode %d\n", role, wc.opcode,
			opcode);
		exit(3);
	}
	if (out)
		*out = wc;
}

static void wait_wc(struct rpma_cq *cq, enum ibv_wc_opcode opcode, struct ibv_wc *out)
{
	wait_wc_of(cq, opcode, -1, out);
}

static void expect_event(struct rpma_conn *conn, enum rpma_conn_event expected)
{
	enum rpma_conn_event event;
	CHECK(rpma_conn_next_event(conn, &event));
	if (event != expected) {
		fprintf(stderr, "%s: event %s, expected %s\n", role,
			rpma_utils_conn_event_2str(event), rpma_utils_conn_event_2str(expected));
		exit(3);
	}
}

static struct rpma_peer *new_peer(const char *addr, enum rpma_util_ibv_context_type type)
{
	struct ibv_context *dev = NULL;
	struct rpma_peer *peer = NULL;
	CHECK(rpma_utils_get_ibv_context(addr, type, &dev));
	CHECK(rpma_peer_new(dev, &peer));
	return peer;
}

/* Serves one client on ep. */
static void serve_one(struct rpma_peer *peer, struct rpma_ep *ep)
{
	static char buf[BUF_SIZE];
	memset(buf, 0, sizeof(buf));
	struct rpma_mr_local *mr = NULL;
	CHECK(rpma_mr_reg(peer, buf, sizeof(buf),
			  RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_SEND |
				  RPMA_MR_USAGE_RECV | RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY,
			  &mr));
	size_t desc_size = 0;
	CHECK(rpma_mr_get_descriptor_size(mr, &desc_size));
	char desc[64];
	CHECK(rpma_mr_get_descriptor(mr, desc));

	struct rpma_conn_req *req = NULL;
	CHECK(rpma_ep_next_conn_req(ep, NULL, &req));
	struct rpma_conn_private_data client_pdata;
	CHECK(rpma_conn_req_get_private_data(req, &client_pdata));
	EXPECT(client_pdata.len >= 10 && memcmp(client_pdata.ptr, "client-pd:", 10) == 0);
	CHECK(rpma_conn_req_recv(req, mr, 1024, 64, &ctx_tag)); /* for "ping" */

	struct rpma_conn_private_data pdata = {desc, (uint8_t)desc_size};
	struct rpma_conn *conn = NULL;
	CHECK(rpma_conn_req_connect(&req, &pdata, &conn));
	expect_event(conn, RPMA_CONN_ESTABLISHED);

	struct rpma_cq *cq = NULL;
	CHECK(rpma_conn_get_cq(conn, &cq));
	/* Sleeps here while the client writes, reads, atomically writes and flushes. */
	struct ibv_wc wc;
	wait_wc(cq, IBV_WC_RECV, &wc);
	EXPECT(wc.byte_len == 5 && memcmp(buf + 1024, "ping", 5) == 0);
	/* The client's big write landed too (a pattern: byte i is i * 7 + 3). */
	for (int i = 0; i < BIG_LEN; ++i)
		EXPECT((unsigned char)buf[BIG_OFFSET + i] == (unsigned char)(i * 7 + 3));
	/* The client's write and atomic write landed before its send (RC order). */
	EXPECT(memcmp(buf, "hello from the client", 22) == 0);
	EXPECT(memcmp(buf + 64, "ATOMIC!!", 8) == 0);

	CHECK(rpma_recv(conn, mr, 2048, 0, &ctx_tag)); /* for the write with immediate data */
	memcpy(buf + 3072, "pong", 5);
	CHECK(rpma_send(conn, mr, 3072, 5, RPMA_F_COMPLETION_ALWAYS, &ctx_tag));
	int got_send = 0, got_imm = 0;
	while (!got_send || !got_imm) {
		next_wc(cq, &wc);
		EXPECT(wc.status == IBV_WC_SUCCESS);
		if (wc.opcode == IBV_WC_SEND) {
			got_send = 1;
		} else {
			EXPECT(wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM);
			EXPECT((wc.wc_flags & IBV_WC_WITH_IMM) != 0 && ntohl(wc.imm_data) == IMM);
			got_imm = 1;
		}
	}
	EXPECT(memcmp(buf + 4000, "imm!", 4) == 0);

	expect_event(conn, RPMA_CONN_CLOSED);
	CHECK(rpma_conn_disconnect(conn));
	CHECK(rpma_conn_delete(&conn));
	CHECK(rpma_mr_dereg(&mr));
}

static int run_server(const char *addr, const char *port, int clients, struct rpma_peer *peer,
		      struct rpma_ep *ep)
{
	for (int i = 0; i < clients; ++i)
		serve_one(peer, ep);
	CHECK(rpma_ep_shutdown(&ep));
	CHECK(rpma_peer_delete(&peer));
	printf("%s: ok (%d client%s)\n", role, clients, clients == 1 ? "" : "s");
	return 0;
}

/* The client's misuse of its buffers (peer client ... MISUSE), at offsets nobody else uses. */
#define MISUSE_OFFSET 8192

static void misuse_reuse_early(struct rpma_conn *conn, struct rpma_mr_remote *remote,
			       struct rpma_mr_local *mr, char *buf, struct rpma_cq *cq)
{
	char *src = buf + MISUSE_OFFSET, *back = buf + MISUSE_OFFSET + 64;
	memcpy(src, "hello, server!", 15);
	CHECK(rpma_write(conn, remote, MISUSE_OFFSET, mr, MISUSE_OFFSET, 15,
			 RPMA_F_COMPLETION_ALWAYS, &ctx_tag));
	memcpy(src, "OVERWRITTEN!!!", 15); /* THE BUG: the write has not completed */
	wait_wc(cq, IBV_WC_RDMA_WRITE, NULL);
	CHECK(rpma_read(conn, mr, MISUSE_OFFSET + 64, remote, MISUSE_OFFSET, 15,
			RPMA_F_COMPLETION_ALWAYS, &ctx_tag));
	wait_wc(cq, IBV_WC_RDMA_READ, NULL);
	printf("%s: read back: \"%.14s\"\n", role, back);
}

static void misuse_read_early(struct rpma_conn *conn, struct rpma_mr_remote *remote,
			      struct rpma_mr_local *mr, char *buf, struct rpma_cq *cq)
{
	char *dst = buf + MISUSE_OFFSET + 128;
	CHECK(rpma_read(conn, mr, MISUSE_OFFSET + 128, remote, 0, 22, RPMA_F_COMPLETION_ALWAYS,
			&ctx_tag));
	unsigned char early = (unsigned char)dst[0]; /* THE BUG: the read has not completed */
	printf("%s: before the completion the destination held 0x%02x\n", role, early);
	wait_wc(cq, IBV_WC_RDMA_READ, NULL);
	EXPECT(memcmp(dst, "hello from the client", 22) == 0);
}

static int run_client(const char *addr, const char *port, const char *id, const char *misuse)
{
	if (misuse != NULL && strcmp(misuse, "reuse-early") != 0 &&
	    strcmp(misuse, "read-early") != 0) {
		fprintf(stderr, "%s: unknown misuse \"%s\" (reuse-early or read-early)\n", role,
			misuse);
		return 2;
	}
	struct rpma_peer *peer = new_peer(addr, RPMA_UTIL_IBV_CONTEXT_REMOTE);
	static char buf[BUF_SIZE];
	memset(buf, 0, sizeof(buf));
	struct rpma_mr_local *mr = NULL;
	CHECK(rpma_mr_reg(peer, buf, sizeof(buf),
			  RPMA_MR_USAGE_WRITE_SRC | RPMA_MR_USAGE_READ_DST | RPMA_MR_USAGE_SEND |
				  RPMA_MR_USAGE_RECV,
			  &mr));
	struct rpma_conn_req *req = NULL;
	CHECK(rpma_conn_req_new(peer, addr, port, NULL, &req));
	char hello[32];
	snprintf(hello, sizeof(hello), "client-pd:%s", id);
	struct rpma_conn_private_data pdata = {hello, (uint8_t)(strlen(hello) + 1)};
	struct rpma_conn *conn = NULL;
	CHECK(rpma_conn_req_connect(&req, &pdata, &conn));
	expect_event(conn, RPMA_CONN_ESTABLISHED);
	printf("%s: connected (pid %d)\n", role, (int)getpid());

	struct rpma_conn_private_data server_pdata;
	CHECK(rpma_conn_get_private_data(conn, &server_pdata));
	struct rpma_mr_remote *remote = NULL;
	CHECK(rpma_mr_remote_from_descriptor(server_pdata.ptr, server_pdata.len, &remote));
	struct rpma_cq *cq = NULL;
	CHECK(rpma_conn_get_cq(conn, &cq));

	memcpy(buf, "hello from the client", 22);
	CHECK(rpma_write(conn, remote, 0, mr, 0, 22, RPMA_F_COMPLETION_ALWAYS, &ctx_tag));
	wait_wc(cq, IBV_WC_RDMA_WRITE, NULL);
	CHECK(rpma_read(conn, mr, 256, remote, 0, 22, RPMA_F_COMPLETION_ALWAYS, &ctx_tag));
	struct ibv_wc wc;
	wait_wc(cq, IBV_WC_RDMA_READ, &wc);
	EXPECT(memcmp(buf + 256, "hello from the client", 22) == 0);
	if (misuse != NULL && strcmp(misuse, "reuse-early") == 0)
		misuse_reuse_early(conn, remote, mr, buf, cq);
	if (misuse != NULL && strcmp(misuse, "read-early") == 0)
		misuse_read_early(conn, remote, mr, buf, cq);

	/* A big write (cross-memory attach where allowed), then read it back elsewhere. */
	for (int i = 0; i < BIG_LEN; ++i)
		buf[BIG_OFFSET + i] = (char)(i * 7 + 3);
	CHECK(rpma_write(conn, remote, BIG_OFFSET, mr, BIG_OFFSET, BIG_LEN,
			 RPMA_F_COMPLETION_ALWAYS, &ctx_tag));
	wait_wc(cq, IBV_WC_RDMA_WRITE, NULL);
	CHECK(rpma_read(conn, mr, BIG_OFFSET + BIG_LEN, remote, BIG_OFFSET, BIG_LEN,
			RPMA_F_COMPLETION_ALWAYS, &ctx_tag));
	wait_wc(cq, IBV_WC_RDMA_READ, &wc);
	EXPECT(wc.byte_len == BIG_LEN);
	EXPECT(memcmp(buf + BIG_OFFSET, buf + BIG_OFFSET + BIG_LEN, BIG_LEN) == 0);

	char atomic[8];
	memcpy(atomic, "ATOMIC!!", 8);
	CHECK(rpma_atomic_write(conn, remote, 64, atomic, RPMA_F_COMPLETION_ALWAYS, &ctx_tag));
	/* The opcode of what librpma posted: ibv_wr_atomic_write on a device with native atomic
	 * write (asked for with RPMA_SIM_NATIVE_ATOMIC_WRITE=1; some device profiles have it),
	 * else an RDMA WRITE. */
	const char *native = getenv("RPMA_SIM_NATIVE_ATOMIC_WRITE");
	if (native != NULL && strcmp(native, "1") == 0)
		wait_wc(cq, IBV_WC_ATOMIC_WRITE, NULL);
	else
		wait_wc_of(cq, IBV_WC_RDMA_WRITE, IBV_WC_ATOMIC_WRITE, NULL);
	CHECK(rpma_flush(conn, remote, 0, 64, RPMA_FLUSH_TYPE_VISIBILITY, RPMA_F_COMPLETION_ALWAYS,
			 &ctx_tag));
	wait_wc(cq, IBV_WC_RDMA_READ, NULL);

	CHECK(rpma_recv(conn, mr, 512, 64, &ctx_tag)); /* for "pong" */
	memcpy(buf + 128, "ping", 5);
	CHECK(rpma_send(conn, mr, 128, 5, RPMA_F_COMPLETION_ALWAYS, &ctx_tag));
	int got_send = 0, got_recv = 0;
	while (!got_send || !got_recv) {
		next_wc(cq, &wc);
		EXPECT(wc.status == IBV_WC_SUCCESS);
		if (wc.opcode == IBV_WC_SEND)
			got_send = 1;
		else if (wc.opcode == IBV_WC_RECV)
			got_recv = 1;
	}
	EXPECT(memcmp(buf + 512, "pong", 5) == 0);

	memcpy(buf + 1000, "imm!", 4);
	CHECK(rpma_write_with_imm(conn, remote, 4000, mr, 1000, 4, RPMA_F_COMPLETION_ALWAYS, IMM,
				  &ctx_tag));
	wait_wc(cq, IBV_WC_RDMA_WRITE, NULL);

	CHECK(rpma_conn_disconnect(conn));
	expect_event(conn, RPMA_CONN_CLOSED);
	CHECK(rpma_conn_delete(&conn));
	CHECK(rpma_mr_remote_delete(&remote));
	CHECK(rpma_mr_dereg(&mr));
	CHECK(rpma_peer_delete(&peer));
	printf("%s: ok\n", role);
	return 0;
}

static unsigned long long monotonic_ns(void)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (unsigned long long)now.tv_sec * 1000000000ull + (unsigned long long)now.tv_nsec;
}

/* Reads stdin up to a newline (or its end): the harness says go. */
static void wait_for_go(void)
{
	char c;
	while (read(0, &c, 1) > 0 && c != '\n') {
	}
}

/* Connects, then disconnects first (the DREQ): its CLOSED is the DREP's or the DREQ's timeout.
 * With `wait`, it waits for the harness's go before it looks (dreq-client); it prints the
 * CLOCK_MONOTONIC time at which CLOSED came (closing-client's order check). */
static int run_dreq_client(const char *addr, const char *port, int wait)
{
	struct rpma_peer *peer = new_peer(addr, RPMA_UTIL_IBV_CONTEXT_REMOTE);
	struct rpma_conn_req *req = NULL;
	CHECK(rpma_conn_req_new(peer, addr, port, NULL, &req));
	struct rpma_conn *conn = NULL;
	CHECK(rpma_conn_req_connect(&req, NULL, &conn));
	expect_event(conn, RPMA_CONN_ESTABLISHED);
	CHECK(rpma_conn_disconnect(conn));
	printf("%s: disconnected\n", role);
	if (wait)
		wait_for_go();
	expect_event(conn, RPMA_CONN_CLOSED); /* the DREP's, or the DREQ's timeout */
	printf("%s: closed at %llu\n", role, monotonic_ns());
	CHECK(rpma_conn_delete(&conn));
	CHECK(rpma_peer_delete(&peer));
	printf("%s: ok\n", role);
	return 0;
}

static int run_dreq_server(struct rpma_peer *peer, struct rpma_ep *ep, const char *how)
{
	static char buf[64];
	struct rpma_mr_local *mr = NULL;
	CHECK(rpma_mr_reg(peer, buf, sizeof(buf), RPMA_MR_USAGE_SEND | RPMA_MR_USAGE_RECV, &mr));
	struct rpma_conn_req *req = NULL;
	CHECK(rpma_ep_next_conn_req(ep, NULL, &req));
	CHECK(rpma_conn_req_recv(req, mr, 0, 32, &ctx_tag));
	struct rpma_conn *conn = NULL;
	CHECK(rpma_conn_req_connect(&req, NULL, &conn));
	expect_event(conn, RPMA_CONN_ESTABLISHED);
	struct rpma_cq *cq = NULL;
	CHECK(rpma_conn_get_cq(conn, &cq));

	expect_event(conn, RPMA_CONN_CLOSED); /* the client's DREQ: our QP is left alone */
	struct ibv_wc wc;
	int got = 0;
	EXPECT(rpma_cq_get_wc(cq, 1, &wc, &got) == RPMA_E_NO_COMPLETION); /* still posted */
	printf("%s: closed, the receive still posted\n", role);
	if (strcmp(how, "silent") == 0)
		wait_for_go(); /* the client is gone: its connection closed */
	CHECK(rpma_send(conn, mr, 32, 4, RPMA_F_COMPLETION_ALWAYS, &ctx_tag));
	next_wc(cq, &wc);
	printf("%s: send status %s\n", role, ibv_wc_status_str(wc.status));
	EXPECT(wc.status == IBV_WC_RETRY_EXC_ERR);
	next_wc(cq, &wc); /* the QP went to ERROR: the receive flushes */
	EXPECT(wc.status == IBV_WC_WR_FLUSH_ERR);
	CHECK(rpma_conn_disconnect(conn)); /* the DREP (answer) */
	CHECK(rpma_conn_delete(&conn));
	CHECK(rpma_mr_dereg(&mr));
	CHECK(rpma_ep_shutdown(&ep));
	CHECK(rpma_peer_delete(&peer));
	printf("%s: ok\n", role);
	return 0;
}

/* Answers the client's DREQ only after `ms` busy outside the simulator. */
static int run_busy_server(struct rpma_peer *peer, struct rpma_ep *ep, int ms)
{
	struct rpma_conn_req *req = NULL;
	CHECK(rpma_ep_next_conn_req(ep, NULL, &req));
	struct rpma_conn *conn = NULL;
	CHECK(rpma_conn_req_connect(&req, NULL, &conn));
	expect_event(conn, RPMA_CONN_ESTABLISHED);
	expect_event(conn, RPMA_CONN_CLOSED); /* the client's DREQ */
	usleep((useconds_t)ms * 1000);
	printf("%s: answering at %llu\n", role, monotonic_ns());
	CHECK(rpma_conn_disconnect(conn)); /* the DREP */
	CHECK(rpma_conn_delete(&conn));
	CHECK(rpma_ep_shutdown(&ep));
	CHECK(rpma_peer_delete(&peer));
	printf("%s: ok\n", role);
	return 0;
}

/* Connects where nobody listens: prints the first event. */
static int run_connect_only(const char *addr, const char *port)
{
	struct rpma_peer *peer = new_peer(addr, RPMA_UTIL_IBV_CONTEXT_REMOTE);
	struct rpma_conn_req *req = NULL;
	CHECK(rpma_conn_req_new(peer, addr, port, NULL, &req));
	struct rpma_conn *conn = NULL;
	CHECK(rpma_conn_req_connect(&req, NULL, &conn));
	enum rpma_conn_event event;
	CHECK(rpma_conn_next_event(conn, &event));
	printf("%s: %s\n", role, rpma_utils_conn_event_2str(event));
	CHECK(rpma_conn_delete(&conn));
	CHECK(rpma_peer_delete(&peer));
	return 0;
}

/* Writes until the connection breaks (the server is killed): prints how it ended. */
static int run_hold(const char *addr, const char *port)
{
	struct rpma_peer *peer = new_peer(addr, RPMA_UTIL_IBV_CONTEXT_REMOTE);
	static char buf[BUF_SIZE];
	struct rpma_mr_local *mr = NULL;
	CHECK(rpma_mr_reg(peer, buf, sizeof(buf), RPMA_MR_USAGE_WRITE_SRC, &mr));
	struct rpma_conn_req *req = NULL;
	CHECK(rpma_conn_req_new(peer, addr, port, NULL, &req));
	char hello[] = "client-pd:hold";
	struct rpma_conn_private_data pdata = {hello, sizeof(hello)};
	struct rpma_conn *conn = NULL;
	CHECK(rpma_conn_req_connect(&req, &pdata, &conn));
	expect_event(conn, RPMA_CONN_ESTABLISHED);
	struct rpma_conn_private_data server_pdata;
	CHECK(rpma_conn_get_private_data(conn, &server_pdata));
	struct rpma_mr_remote *remote = NULL;
	CHECK(rpma_mr_remote_from_descriptor(server_pdata.ptr, server_pdata.len, &remote));
	struct rpma_cq *cq = NULL;
	CHECK(rpma_conn_get_cq(conn, &cq));
	printf("%s: writing\n", role);
	fflush(stdout);
	for (long i = 0;; ++i) {
		int ret = rpma_write(conn, remote, 0, mr, 0, BUF_SIZE, RPMA_F_COMPLETION_ALWAYS,
				     &ctx_tag);
		if (ret != 0) {
			printf("%s: rpma_write: %s\n", role, rpma_err_2str(ret));
			break;
		}
		struct ibv_wc wc;
		int n = 0;
		while ((ret = rpma_cq_get_wc(cq, 1, &wc, &n)) == RPMA_E_NO_COMPLETION)
			CHECK(rpma_cq_wait(cq));
		CHECK(ret);
		if (wc.status != IBV_WC_SUCCESS) {
			printf("%s: completion status %s\n", role, ibv_wc_status_str(wc.status));
			break;
		}
	}
	enum rpma_conn_event event;
	CHECK(rpma_conn_next_event(conn, &event));
	printf("%s: event %s\n", role, rpma_utils_conn_event_2str(event));
	CHECK(rpma_conn_delete(&conn));
	CHECK(rpma_mr_remote_delete(&remote));
	CHECK(rpma_mr_dereg(&mr));
	CHECK(rpma_peer_delete(&peer));
	return 0;
}

#define MESSAGES 3

/* Collects completions of conn through rpma_conn_wait until `want` of `opcode` arrived; for
 * receives, each message (at buf + wr_id * 64) must start with id_prefix. */
static void wait_via_conn(struct rpma_conn *conn, enum ibv_wc_opcode opcode, int want,
			  const char *buf, const char *id_prefix)
{
	int got = 0;
	while (got < want) {
		struct rpma_cq *cq = NULL;
		bool is_rcq = false;
		CHECK(rpma_conn_wait(conn, 0, &cq, &is_rcq));
		struct ibv_wc wc[8];
		int n = 0;
		int ret = rpma_cq_get_wc(cq, 8, wc, &n);
		if (ret == RPMA_E_NO_COMPLETION)
			continue;
		CHECK(ret);
		for (int i = 0; i < n; ++i) {
			EXPECT(wc[i].status == IBV_WC_SUCCESS);
			if (wc[i].opcode != opcode)
				continue;
			EXPECT(is_rcq == (opcode == IBV_WC_RECV)); /* receives complete on the RCQ */
			const char *msg = buf + (uintptr_t)wc[i].wr_id * 64;
			if (opcode == IBV_WC_RECV && id_prefix != NULL)
				EXPECT(strncmp(msg, id_prefix, strlen(id_prefix)) == 0);
			++got;
		}
	}
}

static int run_srq_server(struct rpma_peer *peer, struct rpma_ep *ep, int clients)
{
	static char buf[BUF_SIZE];
	memset(buf, 0, sizeof(buf));
	struct rpma_mr_local *mr = NULL;
	CHECK(rpma_mr_reg(peer, buf, sizeof(buf), RPMA_MR_USAGE_RECV | RPMA_MR_USAGE_SEND, &mr));
	struct rpma_srq_cfg *srq_cfg = NULL;
	CHECK(rpma_srq_cfg_new(&srq_cfg));
	CHECK(rpma_srq_cfg_set_rq_size(srq_cfg, 64));
	CHECK(rpma_srq_cfg_set_rcq_size(srq_cfg, 0)); /* receives complete on each connection's RCQ */
	struct rpma_srq *srq = NULL;
	CHECK(rpma_srq_new(peer, srq_cfg, &srq));
	int slots = clients * MESSAGES;
	EXPECT(slots <= 64);
	/* wr_id (the op_context) is the slot number: receive i lands at offset i * 64. */
	for (intptr_t i = 0; i < slots; ++i)
		CHECK(rpma_srq_recv(srq, mr, (size_t)i * 64, 64, (const void *)i));
	struct rpma_conn_cfg *cfg = NULL;
	CHECK(rpma_conn_cfg_new(&cfg));
	CHECK(rpma_conn_cfg_set_srq(cfg, srq));
	CHECK(rpma_conn_cfg_set_compl_channel(cfg, true));
	CHECK(rpma_conn_cfg_set_rcq_size(cfg, 16));
	struct rpma_conn *conns[16];
	EXPECT(clients <= 16);
	for (int i = 0; i < clients; ++i) {
		struct rpma_conn_req *req = NULL;
		CHECK(rpma_ep_next_conn_req(ep, cfg, &req));
		CHECK(rpma_conn_req_connect(&req, NULL, &conns[i]));
		expect_event(conns[i], RPMA_CONN_ESTABLISHED);
	}
	for (int i = 0; i < clients; ++i)
		wait_via_conn(conns[i], IBV_WC_RECV, MESSAGES, buf, "msg from ");
	memcpy(buf + 4096, "bye", 4);
	for (int i = 0; i < clients; ++i) {
		CHECK(rpma_send(conns[i], mr, 4096, 4, RPMA_F_COMPLETION_ALWAYS, &ctx_tag));
		wait_via_conn(conns[i], IBV_WC_SEND, 1, buf, NULL);
	}
	for (int i = 0; i < clients; ++i) {
		expect_event(conns[i], RPMA_CONN_CLOSED);
		CHECK(rpma_conn_disconnect(conns[i]));
		CHECK(rpma_conn_delete(&conns[i]));
	}
	CHECK(rpma_conn_cfg_delete(&cfg));
	CHECK(rpma_srq_delete(&srq));
	CHECK(rpma_srq_cfg_delete(&srq_cfg));
	CHECK(rpma_mr_dereg(&mr));
	CHECK(rpma_ep_shutdown(&ep));
	CHECK(rpma_peer_delete(&peer));
	printf("%s: ok (%d clients on one SRQ)\n", role, clients);
	return 0;
}

/* Sends MESSAGES messages, waits for "bye". */
static void run_sender(struct rpma_peer *peer, const char *addr, const char *port, const char *id)
{
	char buf[1024];
	memset(buf, 0, sizeof(buf));
	struct rpma_mr_local *mr = NULL;
	CHECK(rpma_mr_reg(peer, buf, sizeof(buf), RPMA_MR_USAGE_SEND | RPMA_MR_USAGE_RECV, &mr));
	struct rpma_conn_req *req = NULL;
	CHECK(rpma_conn_req_new(peer, addr, port, NULL, &req));
	CHECK(rpma_conn_req_recv(req, mr, 512, 64, &ctx_tag)); /* for "bye" */
	struct rpma_conn *conn = NULL;
	CHECK(rpma_conn_req_connect(&req, NULL, &conn));
	expect_event(conn, RPMA_CONN_ESTABLISHED);
	struct rpma_cq *cq = NULL;
	CHECK(rpma_conn_get_cq(conn, &cq));
	for (int i = 0; i < MESSAGES; ++i) {
		int len = snprintf(buf + i * 64, 64, "msg from %s #%d", id, i) + 1;
		CHECK(rpma_send(conn, mr, (size_t)i * 64, (size_t)len, RPMA_F_COMPLETION_ALWAYS,
				&ctx_tag));
		wait_wc(cq, IBV_WC_SEND, NULL);
	}
	wait_wc(cq, IBV_WC_RECV, NULL);
	EXPECT(strcmp(buf + 512, "bye") == 0);
	CHECK(rpma_conn_disconnect(conn));
	expect_event(conn, RPMA_CONN_CLOSED);
	CHECK(rpma_conn_delete(&conn));
	CHECK(rpma_mr_dereg(&mr));
}

struct sender_arg {
	struct rpma_peer *peer;
	const char *addr, *port;
	char id[32];
};

static void *sender_thread(void *p)
{
	struct sender_arg *arg = p;
	run_sender(arg->peer, arg->addr, arg->port, arg->id);
	return NULL;
}

static pid_t fork_or_exit(void)
{
	pid_t child = fork();
	if (child < 0) {
		perror("fork");
		exit(2);
	}
	return child;
}

int main(int argc, char *argv[])
{
	if (argc < 4) {
		fprintf(stderr,
			"usage: %s server|client|fork|connect-only|hold|listen ADDR PORT [N]\n",
			argv[0]);
		return 2;
	}
	const char *mode = argv[1], *addr = argv[2], *port = argv[3];
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (strcmp(mode, "client") == 0) {
		role = "client";
		return run_client(addr, port, argc > 4 ? argv[4] : "0", argc > 5 ? argv[5] : NULL);
	}
	if (strcmp(mode, "connect-only") == 0) {
		role = "client";
		return run_connect_only(addr, port);
	}
	if (strcmp(mode, "hold") == 0) {
		role = "client";
		return run_hold(addr, port);
	}
	if (strcmp(mode, "dreq-client") == 0) {
		role = "client";
		return run_dreq_client(addr, port, 1);
	}
	if (strcmp(mode, "closing-client") == 0) {
		role = "client";
		return run_dreq_client(addr, port, 0);
	}
	if (strcmp(mode, "sender") == 0 || strcmp(mode, "sender-threads") == 0) {
		role = "sender";
		struct rpma_peer *peer = new_peer(addr, RPMA_UTIL_IBV_CONTEXT_REMOTE);
		int threads = strcmp(mode, "sender") == 0 ? 0 : (argc > 4 ? atoi(argv[4]) : 2);
		if (threads == 0) {
			run_sender(peer, addr, port, argc > 4 ? argv[4] : "0");
		} else {
			pthread_t tid[16];
			struct sender_arg args[16];
			EXPECT(threads <= 16);
			for (int i = 0; i < threads; ++i) {
				args[i] = (struct sender_arg){peer, addr, port, ""};
				snprintf(args[i].id, sizeof(args[i].id), "thread%d", i);
				EXPECT(pthread_create(&tid[i], NULL, sender_thread, &args[i]) == 0);
			}
			for (int i = 0; i < threads; ++i)
				pthread_join(tid[i], NULL);
		}
		CHECK(rpma_peer_delete(&peer));
		printf("%s: ok\n", role);
		return 0;
	}
	struct rpma_peer *peer = new_peer(addr, RPMA_UTIL_IBV_CONTEXT_LOCAL);
	struct rpma_ep *ep = NULL;
	if (strcmp(mode, "listen") == 0) {
		role = "listener";
		int ret = rpma_ep_listen(peer, addr, port, &ep);
		printf("%s: %s\n", role, ret == 0 ? "listening" : rpma_err_2str(ret));
		if (ret != 0)
			return 1;
		char c;
		while (read(0, &c, 1) > 0) {
		}
		CHECK(rpma_ep_shutdown(&ep));
		return 0;
	}
	role = "server";
	CHECK(rpma_ep_listen(peer, addr, port, &ep));
	printf("%s: listening (pid %d)\n", role, (int)getpid());
	if (strcmp(mode, "fork") == 0) {
		pid_t child = fork_or_exit();
		if (child == 0) {
			/* The child uses librpma after fork: a NIC of its own. */
			role = "child client";
			_exit(run_client(addr, port, "child", NULL));
		}
		run_server(addr, port, 1, peer, ep);
		int status = 0;
		waitpid(child, &status, 0);
		EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
		printf("harness: ok\n");
		return 0;
	}
	if (strcmp(mode, "srq-server") == 0)
		return run_srq_server(peer, ep, argc > 4 ? atoi(argv[4]) : 1);
	if (strcmp(mode, "dreq-server") == 0)
		return run_dreq_server(peer, ep, argc > 4 ? argv[4] : "answer");
	if (strcmp(mode, "busy-server") == 0)
		return run_busy_server(peer, ep, argc > 4 ? atoi(argv[4]) : 300);
	if (strcmp(mode, "fork-misuse") == 0) {
		pid_t child = fork_or_exit();
		if (child == 0) {
			role = "child";
			struct rpma_conn_req *req = NULL;
			int ret = rpma_ep_next_conn_req(ep, NULL, &req);
			printf("%s: rpma_ep_next_conn_req on the parent's endpoint: %s\n", role,
			       ret == 0 ? "succeeded" : rpma_err_2str(ret));
			fflush(stdout);
			_exit(ret == RPMA_E_PROVIDER ? 0 : 1);
		}
		int status = 0;
		waitpid(child, &status, 0);
		EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
		CHECK(rpma_ep_shutdown(&ep)); /* the parent's objects are still the parent's */
		CHECK(rpma_peer_delete(&peer));
		printf("harness: ok\n");
		return 0;
	}
	EXPECT(strcmp(mode, "server") == 0);
	return run_server(addr, port, argc > 4 ? atoi(argv[4]) : 1, peer, ep);
}
