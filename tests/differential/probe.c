/*
 * probe.c: a librpma program for the differential test (differential_test.sh), written against
 * the librpma 1.2 API only (it is compiled against the distro's librpma.h and run on upstream
 * librpma and on softrpma's). A client and a server in one process connect on 127.0.0.1 and go
 * through the API, printing in one canonical form what each call returned, every connection
 * event, every completion's defined fields and the bytes read back. Codes and events are printed
 * by their names in librpma.h, not by rpma_err_2str / rpma_utils_conn_event_2str, whose texts
 * are each library's own wording (docs/STATUS.md). Two runs that behave the same print the
 * same lines; the test diffs them.
 *
 *   probe basic PORT     the data path: write, read back, atomic write, flushes, send/recv,
 *                        write and send with immediate data, a read past a region's end
 *   probe errors PORT    argument errors, a connection nobody accepts, a rejected request,
 *                        configuration defaults and getters
 *
 * Exit status: 0 when the program ran to its end (whatever the calls returned), 2 when a step it
 * needs to go on failed (the line says which).
 */
#include <librpma.h>

#include <arpa/inet.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUF 4096

static const char *code_name(int ret)
{
	switch (ret) {
	case 0: return "OK";
	case RPMA_E_UNKNOWN: return "RPMA_E_UNKNOWN";
	case RPMA_E_NOSUPP: return "RPMA_E_NOSUPP";
	case RPMA_E_PROVIDER: return "RPMA_E_PROVIDER";
	case RPMA_E_NOMEM: return "RPMA_E_NOMEM";
	case RPMA_E_INVAL: return "RPMA_E_INVAL";
	case RPMA_E_NO_COMPLETION: return "RPMA_E_NO_COMPLETION";
	case RPMA_E_NO_EVENT: return "RPMA_E_NO_EVENT";
	case RPMA_E_AGAIN: return "RPMA_E_AGAIN";
	case RPMA_E_SHARED_CHANNEL: return "RPMA_E_SHARED_CHANNEL";
	case RPMA_E_NOT_SHARED_CHNL: return "RPMA_E_NOT_SHARED_CHNL";
	default: return "(another code)";
	}
}

/* Prints what `expr` returned; evaluates to it. */
#define SHOW(expr) show_ret(#expr, (expr))
static int show_ret(const char *what, int ret)
{
	printf("%s -> %s\n", what, code_name(ret));
	return ret;
}

/* As SHOW, but the program cannot go on without it. */
#define MUST(expr)                                                                   \
	do {                                                                         \
		if (show_ret(#expr, (expr)) != 0) {                                  \
			printf("cannot go on\n");                                    \
			exit(2);                                                     \
		}                                                                    \
	} while (0)

static const char *event_name(enum rpma_conn_event event)
{
	switch (event) {
	case RPMA_CONN_UNDEFINED: return "RPMA_CONN_UNDEFINED";
	case RPMA_CONN_ESTABLISHED: return "RPMA_CONN_ESTABLISHED";
	case RPMA_CONN_CLOSED: return "RPMA_CONN_CLOSED";
	case RPMA_CONN_LOST: return "RPMA_CONN_LOST";
	case RPMA_CONN_REJECTED: return "RPMA_CONN_REJECTED";
	case RPMA_CONN_UNREACHABLE: return "RPMA_CONN_UNREACHABLE";
	}
	return "(another event)";
}

static void show_event(const char *who, struct rpma_conn *conn)
{
	enum rpma_conn_event event = RPMA_CONN_UNDEFINED;
	int ret = rpma_conn_next_event(conn, &event);
	printf("%s event -> %s %s\n", who, code_name(ret), ret == 0 ? event_name(event) : "");
}

/* Waits for the next completion of cq and prints the fields that are defined for it. After a
 * failed post (a fault from rpma-sim sweep) none comes: after 5 s, says so. */
static void show_wc(const char *who, struct rpma_cq *cq)
{
	struct ibv_wc wc;
	int got = 0;
	int ret;
	int fd = -1;
	if (rpma_cq_get_fd(cq, &fd) != 0)
		fd = -1;
	while ((ret = rpma_cq_get_wc(cq, 1, &wc, &got)) == RPMA_E_NO_COMPLETION) {
		struct pollfd pfd = {fd, POLLIN, 0};
		if (fd >= 0 && poll(&pfd, 1, 5000) == 0) {
			printf("%s wc -> none within 5 s\n", who);
			return;
		}
		ret = rpma_cq_wait(cq);
		if (ret != 0)
			break;
	}
	if (ret != 0) {
		printf("%s wc -> %s\n", who, code_name(ret));
		return;
	}
	printf("%s wc got=%d status=%s wr_id=%#llx", who, got, ibv_wc_status_str(wc.status),
	       (unsigned long long)wc.wr_id);
	if (wc.status == IBV_WC_SUCCESS) {
		printf(" opcode=%d", (int)wc.opcode);
		/* byte_len and imm_data are defined for receives only */
		if (wc.opcode & IBV_WC_RECV) {
			printf(" byte_len=%u", wc.byte_len);
			if (wc.wc_flags & IBV_WC_WITH_IMM)
				printf(" imm=%#x", ntohl(wc.imm_data));
		}
	}
	printf("\n");
}

static void show_bytes(const char *what, const char *p, size_t n)
{
	printf("%s: \"", what);
	for (size_t i = 0; i < n; ++i)
		putchar(p[i] >= 32 && p[i] < 127 ? p[i] : '.');
	printf("\"\n");
}

struct world {
	struct rpma_peer *peer;
	struct rpma_ep *ep;
	struct rpma_conn *client, *server;
	struct rpma_mr_local *client_mr, *server_mr;
	struct rpma_mr_remote *remote; /* the server's region, at the client */
	struct rpma_cq *client_cq, *server_cq;
};

static char client_buf[BUF], server_buf[BUF];

static void connect_world(struct world *w, const char *port)
{
	struct ibv_context *dev = NULL;
	MUST(rpma_utils_get_ibv_context("127.0.0.1", RPMA_UTIL_IBV_CONTEXT_LOCAL, &dev));
	int odp = -1;
	SHOW(rpma_utils_ibv_context_is_odp_capable(dev, &odp));
	MUST(rpma_peer_new(dev, &w->peer));
	MUST(rpma_ep_listen(w->peer, "127.0.0.1", port, &w->ep));
	MUST(rpma_mr_reg(w->peer, client_buf, BUF,
			 RPMA_MR_USAGE_WRITE_SRC | RPMA_MR_USAGE_READ_DST | RPMA_MR_USAGE_SEND |
				 RPMA_MR_USAGE_RECV,
			 &w->client_mr));
	MUST(rpma_mr_reg(w->peer, server_buf, BUF,
			 RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_SEND |
				 RPMA_MR_USAGE_RECV | RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY,
			 &w->server_mr));
	size_t desc_size = 0;
	MUST(rpma_mr_get_descriptor_size(w->server_mr, &desc_size));
	printf("descriptor size %zu\n", desc_size);
	char desc[64];
	MUST(rpma_mr_get_descriptor(w->server_mr, desc));

	struct rpma_conn_req *req = NULL;
	MUST(rpma_conn_req_new(w->peer, "127.0.0.1", port, NULL, &req));
	struct rpma_conn_private_data hello = {"hello", 6};
	MUST(rpma_conn_req_connect(&req, &hello, &w->client));
	printf("request consumed: %s\n", req == NULL ? "yes" : "no");
	MUST(rpma_ep_next_conn_req(w->ep, NULL, &req));
	struct rpma_conn_private_data pdata = {NULL, 0};
	SHOW(rpma_conn_req_get_private_data(req, &pdata));
	show_bytes("server got private data", pdata.ptr, pdata.len);
	SHOW(rpma_conn_req_recv(req, w->server_mr, 100, 16, (void *)0x10));
	struct rpma_conn_private_data answer = {desc, (uint8_t)desc_size};
	MUST(rpma_conn_req_connect(&req, &answer, &w->server));
	show_event("client", w->client);
	show_event("server", w->server);
	MUST(rpma_conn_get_private_data(w->client, &pdata));
	printf("client got private data of %u bytes\n", (unsigned)pdata.len);
	MUST(rpma_mr_remote_from_descriptor(pdata.ptr, pdata.len, &w->remote));
	size_t size = 0;
	int flush_type = -1;
	SHOW(rpma_mr_remote_get_size(w->remote, &size));
	SHOW(rpma_mr_remote_get_flush_type(w->remote, &flush_type));
	printf("remote size %zu flush type %#x\n", size, flush_type);
	MUST(rpma_conn_get_cq(w->client, &w->client_cq));
	MUST(rpma_conn_get_cq(w->server, &w->server_cq));
	struct rpma_cq *rcq = (struct rpma_cq *)1;
	SHOW(rpma_conn_get_rcq(w->client, &rcq));
	printf("client rcq: %s\n", rcq == NULL ? "none" : "one");
}

static void release_world(struct world *w)
{
	SHOW(rpma_conn_disconnect(w->client));
	show_event("client", w->client);
	show_event("server", w->server);
	SHOW(rpma_conn_disconnect(w->server));
	SHOW(rpma_conn_delete(&w->client));
	SHOW(rpma_conn_delete(&w->server));
	SHOW(rpma_mr_remote_delete(&w->remote));
	SHOW(rpma_mr_dereg(&w->client_mr));
	SHOW(rpma_mr_dereg(&w->server_mr));
	SHOW(rpma_ep_shutdown(&w->ep));
	SHOW(rpma_peer_delete(&w->peer));
}

static void basic(struct world *w)
{
	/* The receive posted with the request waits for the send below. */
	memcpy(client_buf, "written by the client", 22);
	SHOW(rpma_write(w->client, w->remote, 0, w->client_mr, 0, 22, RPMA_F_COMPLETION_ALWAYS,
			(void *)0x1));
	show_wc("client", w->client_cq);
	SHOW(rpma_read(w->client, w->client_mr, 1000, w->remote, 0, 22, RPMA_F_COMPLETION_ALWAYS,
		       (void *)0x2));
	show_wc("client", w->client_cq);
	show_bytes("read back", client_buf + 1000, 22);
	show_bytes("server memory", server_buf, 22);

	char atomic[8];
	memcpy(atomic, "ATOMIC!!", 8);
	SHOW(rpma_atomic_write(w->client, w->remote, 64, atomic, RPMA_F_COMPLETION_ALWAYS,
			       (void *)0x3));
	show_wc("client", w->client_cq);
	show_bytes("after the atomic write", server_buf + 64, 8);
	SHOW(rpma_atomic_write(w->client, w->remote, 65, atomic, RPMA_F_COMPLETION_ALWAYS,
			       (void *)0x4)); /* misaligned */
	SHOW(rpma_flush(w->client, w->remote, 0, 64, RPMA_FLUSH_TYPE_VISIBILITY,
			RPMA_F_COMPLETION_ALWAYS, (void *)0x5));
	show_wc("client", w->client_cq);
	SHOW(rpma_flush(w->client, w->remote, 0, 64, RPMA_FLUSH_TYPE_PERSISTENT,
			RPMA_F_COMPLETION_ALWAYS, (void *)0x6)); /* no direct write to PMem */

	/* send -> the receive posted with the request */
	memcpy(client_buf + 200, "ping", 5);
	SHOW(rpma_send(w->client, w->client_mr, 200, 5, RPMA_F_COMPLETION_ALWAYS, (void *)0x7));
	show_wc("client", w->client_cq);
	show_wc("server", w->server_cq);
	show_bytes("server received", server_buf + 100, 5);

	/* write with immediate data: consumes a receive */
	SHOW(rpma_recv(w->server, w->server_mr, 300, 16, (void *)0x11));
	memcpy(client_buf + 400, "imm!", 4);
	SHOW(rpma_write_with_imm(w->client, w->remote, 500, w->client_mr, 400, 4,
				 RPMA_F_COMPLETION_ALWAYS, 0xfeed5eed, (void *)0x8));
	show_wc("client", w->client_cq);
	show_wc("server", w->server_cq);
	show_bytes("written with imm", server_buf + 500, 4);

	/* send with immediate data, the other way */
	SHOW(rpma_recv(w->client, w->client_mr, 600, 16, (void *)0x12));
	memcpy(server_buf + 700, "pong", 5);
	SHOW(rpma_send_with_imm(w->server, w->server_mr, 700, 5, RPMA_F_COMPLETION_ALWAYS,
				0x1234, (void *)0x9));
	show_wc("server", w->server_cq);
	show_wc("client", w->client_cq);
	show_bytes("client received", client_buf + 600, 5);

	/* A completion only on error: nothing to poll after a good write. */
	SHOW(rpma_write(w->client, w->remote, 0, w->client_mr, 0, 8, RPMA_F_COMPLETION_ON_ERROR,
			(void *)0xa));
	SHOW(rpma_flush(w->client, w->remote, 0, 8, RPMA_FLUSH_TYPE_VISIBILITY,
			RPMA_F_COMPLETION_ALWAYS, (void *)0xb));
	show_wc("client", w->client_cq);

	/* A read past the end of the server's region: an error completion. */
	SHOW(rpma_read(w->client, w->client_mr, 0, w->remote, BUF - 8, 16,
		       RPMA_F_COMPLETION_ALWAYS, (void *)0xc));
	show_wc("client", w->client_cq);
}

static void errors(const char *port)
{
	struct ibv_context *dev = NULL;
	struct rpma_peer *peer = NULL;
	SHOW(rpma_utils_get_ibv_context(NULL, RPMA_UTIL_IBV_CONTEXT_LOCAL, &dev));
	SHOW(rpma_utils_get_ibv_context("127.0.0.1", RPMA_UTIL_IBV_CONTEXT_LOCAL, NULL));
	SHOW(rpma_peer_new(NULL, &peer));
	MUST(rpma_utils_get_ibv_context("127.0.0.1", RPMA_UTIL_IBV_CONTEXT_REMOTE, &dev));
	MUST(rpma_peer_new(dev, &peer));

	struct rpma_mr_local *mr = NULL;
	SHOW(rpma_mr_reg(peer, client_buf, BUF, 0, &mr));
	SHOW(rpma_mr_reg(peer, NULL, BUF, RPMA_MR_USAGE_SEND, &mr));
	SHOW(rpma_mr_reg(peer, client_buf, 0, RPMA_MR_USAGE_SEND, &mr));
	MUST(rpma_mr_reg(peer, client_buf, BUF, RPMA_MR_USAGE_SEND | RPMA_MR_USAGE_RECV, &mr));
	void *addr = NULL;
	size_t len = 0;
	SHOW(rpma_mr_get_ptr(mr, &addr));
	SHOW(rpma_mr_get_size(mr, &len));
	printf("local region: at the buffer %s, %zu bytes\n", addr == client_buf ? "yes" : "no",
	       len);

	/* Configuration defaults and setters. */
	struct rpma_conn_cfg *cfg = NULL;
	MUST(rpma_conn_cfg_new(&cfg));
	int timeout = -1;
	uint32_t sq = 0, rq = 0, cq = 0, rcq = 0;
	bool shared = true;
	SHOW(rpma_conn_cfg_get_timeout(cfg, &timeout));
	SHOW(rpma_conn_cfg_get_sq_size(cfg, &sq));
	SHOW(rpma_conn_cfg_get_rq_size(cfg, &rq));
	SHOW(rpma_conn_cfg_get_cq_size(cfg, &cq));
	SHOW(rpma_conn_cfg_get_rcq_size(cfg, &rcq));
	SHOW(rpma_conn_cfg_get_compl_channel(cfg, &shared));
	printf("conn cfg defaults: timeout %d sq %u rq %u cq %u rcq %u shared %d\n", timeout, sq,
	       rq, cq, rcq, (int)shared);
	SHOW(rpma_conn_cfg_set_sq_size(NULL, 8));
	SHOW(rpma_conn_cfg_set_timeout(cfg, 100));
	SHOW(rpma_conn_cfg_get_timeout(cfg, &timeout));
	printf("timeout now %d\n", timeout);

	struct rpma_srq_cfg *srq_cfg = NULL;
	MUST(rpma_srq_cfg_new(&srq_cfg));
	SHOW(rpma_srq_cfg_get_rq_size(srq_cfg, &rq));
	SHOW(rpma_srq_cfg_get_rcq_size(srq_cfg, &rcq));
	printf("srq cfg defaults: rq %u rcq %u\n", rq, rcq);
	SHOW(rpma_srq_cfg_delete(&srq_cfg));

	struct rpma_peer_cfg *pcfg = NULL;
	bool direct = true;
	MUST(rpma_peer_cfg_new(&pcfg));
	SHOW(rpma_peer_cfg_get_direct_write_to_pmem(pcfg, &direct));
	printf("peer cfg default: direct write to pmem %d\n", (int)direct);
	size_t pdesc = 0;
	SHOW(rpma_peer_cfg_get_descriptor_size(pcfg, &pdesc));
	printf("peer cfg descriptor size %zu\n", pdesc);
	SHOW(rpma_peer_cfg_delete(&pcfg));

	int level = -1;
	SHOW(rpma_log_get_threshold(RPMA_LOG_THRESHOLD, &level));
	SHOW(rpma_log_set_threshold(RPMA_LOG_THRESHOLD, (enum rpma_log_level)99));

	/* A connection nobody accepts: nobody listens on PORT + 1. */
	char other[16];
	snprintf(other, sizeof(other), "%d", atoi(port) + 1);
	struct rpma_conn_req *req = NULL;
	struct rpma_conn *conn = NULL;
	MUST(rpma_conn_req_new(peer, "127.0.0.1", other, cfg, &req));
	SHOW(rpma_conn_req_connect(&req, NULL, NULL));
	printf("request consumed: %s\n", req == NULL ? "yes" : "no");
	if (req != NULL)
		SHOW(rpma_conn_req_delete(&req));
	MUST(rpma_conn_req_new(peer, "127.0.0.1", other, cfg, &req));
	MUST(rpma_conn_req_connect(&req, NULL, &conn));
	show_event("client", conn);
	SHOW(rpma_conn_delete(&conn));

	/* A request the server deletes: the client is rejected. */
	struct rpma_ep *ep = NULL;
	SHOW(rpma_ep_listen(peer, "127.0.0.1", NULL, &ep));
	MUST(rpma_ep_listen(peer, "127.0.0.1", port, &ep));
	struct rpma_ep *ep2 = NULL;
	SHOW(rpma_ep_listen(peer, "127.0.0.1", port, &ep2)); /* the port is taken */
	MUST(rpma_conn_req_new(peer, "127.0.0.1", port, cfg, &req));
	MUST(rpma_conn_req_connect(&req, NULL, &conn));
	struct rpma_conn_req *incoming = NULL;
	MUST(rpma_ep_next_conn_req(ep, NULL, &incoming));
	SHOW(rpma_conn_req_delete(&incoming));
	show_event("client", conn);
	SHOW(rpma_conn_delete(&conn));
	SHOW(rpma_conn_delete(&conn)); /* already NULL */

	SHOW(rpma_ep_shutdown(&ep));
	SHOW(rpma_conn_cfg_delete(&cfg));
	SHOW(rpma_mr_dereg(&mr));
	SHOW(rpma_peer_delete(&peer));
}

int main(int argc, char *argv[])
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc != 3 || (strcmp(argv[1], "basic") != 0 && strcmp(argv[1], "errors") != 0)) {
		fprintf(stderr, "usage: %s basic|errors PORT\n", argv[0]);
		return 2;
	}
	if (strcmp(argv[1], "errors") == 0) {
		errors(argv[2]);
	} else {
		struct world w = {0};
		connect_world(&w, argv[2]);
		basic(&w);
		release_world(&w);
	}
	printf("end\n");
	return 0;
}
