/* verbs_program.c: a C program built against Debian's libibverbs-dev / librdmacm-dev (linked
 * with rdma-core's libraries, as any verbs program is) that shim_program_test runs with the
 * shim's directory on LD_LIBRARY_PATH. Each check is one line of shim.h's lists: what works
 * works, and what fails fails with the errno that a provider without the feature gives (bad
 * input: the verbs error, never a crash). Prints one line per failed check and exits 1 if any. */

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <stdint.h>
#include <unistd.h>

static int failures;

#define CHECK(cond)                                                         \
  do {                                                                      \
    if (!(cond)) {                                                          \
      printf("FAILED line %d: %s (errno %d: %s)\n", __LINE__, #cond, errno, \
             strerror(errno));                                              \
      failures++;                                                           \
    }                                                                       \
  } while (0)

/* A NULL result with that errno. */
#define CHECK_NULL_ERRNO(expr, err) \
  do {                              \
    errno = 0;                      \
    void* got_ = (void*)(expr);     \
    CHECK(got_ == NULL);            \
    CHECK(errno == (err));          \
  } while (0)

static void Devices(void) {
  int n = -1;
  struct ibv_device** list = ibv_get_device_list(&n);
  CHECK(list != NULL);
  if (list == NULL) return;
  CHECK(n == 1);
  CHECK(list[1] == NULL);
  CHECK(strcmp(ibv_get_device_name(list[0]), "softrpma_sim0") == 0);
  CHECK(ibv_get_device_name(NULL) == NULL);
  CHECK(ibv_get_device_index(list[0]) == 0);
  CHECK(ibv_get_device_guid(list[0]) != 0);
  CHECK_NULL_ERRNO(ibv_open_device(NULL), ENODEV);

  struct ibv_context* ctx = ibv_open_device(list[0]);
  CHECK(ctx != NULL);
  ibv_free_device_list(list);
  if (ctx == NULL) return;

  struct ibv_device_attr attr;
  CHECK(ibv_query_device(ctx, &attr) == 0);
  CHECK(attr.phys_port_cnt == 1);
  CHECK(ibv_query_device(NULL, &attr) == EINVAL);
  /* The inline extended query: through the verbs_context's query_device_ex (ExtendedOps). */
  struct ibv_device_attr_ex attr_ex;
  CHECK(ibv_query_device_ex(ctx, NULL, &attr_ex) == 0);
  CHECK(attr_ex.orig_attr.max_qp_wr == attr.max_qp_wr);

  struct ibv_port_attr port;
  CHECK(ibv_query_port(ctx, 1, &port) == 0);
  CHECK(port.state == IBV_PORT_ACTIVE);
  CHECK(port.link_layer == IBV_LINK_LAYER_ETHERNET);
  CHECK(port.gid_tbl_len == 256);  /* the default profile's, mlx5's (docs/DEVICES.md) */
  CHECK(ibv_query_port(ctx, 2, &port) == EINVAL);
  CHECK(ibv_query_port(ctx, 0, &port) == EINVAL);

  union ibv_gid gid;
  CHECK(ibv_query_gid(ctx, 1, 0, &gid) == 0);
  /* This process's own GID: ::ffff:127.a.b.c, a.b.c the low 24 bits of the pid. */
  const unsigned pid = (unsigned)getpid() & 0xffffff;
  CHECK(gid.raw[10] == 0xff && gid.raw[11] == 0xff && gid.raw[12] == 127 &&
        gid.raw[13] == (pid >> 16) && gid.raw[14] == ((pid >> 8) & 0xff) &&
        gid.raw[15] == (pid & 0xff));
  /* Past GID 0 the table's entries are empty: a zero GID (rdma-core's answer for one); past the
   * table, an error. */
  union ibv_gid empty;
  memset(&empty, 0xa5, sizeof(empty));
  CHECK(ibv_query_gid(ctx, 1, 255, &empty) == 0);
  static const union ibv_gid zero_gid;
  CHECK(memcmp(&empty, &zero_gid, sizeof(empty)) == 0);
  CHECK(ibv_query_gid(ctx, 1, 256, &empty) == -1);
  CHECK(ibv_query_gid(ctx, 1, -1, &empty) == -1);
  CHECK(ibv_query_gid(ctx, 2, 0, &empty) == -1);
  struct ibv_gid_entry entry;
  CHECK(ibv_query_gid_ex(ctx, 1, 0, &entry, 0) == 0);
  CHECK(entry.gid_type == IBV_GID_TYPE_ROCE_V2);
  CHECK(ibv_query_gid_ex(ctx, 1, 5, &entry, 0) == ENODATA);
  struct ibv_gid_entry table[4];
  CHECK(ibv_query_gid_table(ctx, table, 4, 0) == 1);
  CHECK(ibv_query_gid_table(ctx, table, 1, 0) == 1);
  CHECK(ibv_query_gid_table(ctx, table, 0, 0) == -EINVAL);  /* no room: rdma-core's EINVAL */

  __be16 pkey = 0;
  CHECK(ibv_query_pkey(ctx, 1, 0, &pkey) == 0);
  CHECK(ntohs(pkey) == 0xffff);
  CHECK(ibv_query_pkey(ctx, 1, 1, &pkey) == -1);
  CHECK(ibv_get_pkey_index(ctx, 1, htons(0xffff)) == 0);

  /* PD, MR, CQ, channel. */
  CHECK_NULL_ERRNO(ibv_alloc_pd(NULL), EINVAL);
  struct ibv_pd* pd = ibv_alloc_pd(ctx);
  CHECK(pd != NULL);
  static char buf[4096];
  CHECK_NULL_ERRNO(ibv_reg_mr(pd, buf, 0, IBV_ACCESS_LOCAL_WRITE), EINVAL);
  CHECK_NULL_ERRNO(ibv_reg_mr_iova(pd, buf, sizeof(buf), 0x1000, IBV_ACCESS_LOCAL_WRITE),
                   EOPNOTSUPP);
  struct ibv_mr* mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
  CHECK(mr != NULL);
  CHECK(ibv_dealloc_pd(pd) == EBUSY);
  CHECK_NULL_ERRNO(ibv_reg_dmabuf_mr(pd, 0, 4096, 0, -1, 0), EOPNOTSUPP);

  CHECK_NULL_ERRNO(ibv_create_cq(ctx, 0, NULL, NULL, 0), EINVAL);
  struct ibv_comp_channel* channel = ibv_create_comp_channel(ctx);
  CHECK(channel != NULL);
  struct ibv_cq* cq = ibv_create_cq(ctx, 16, NULL, channel, 0);
  CHECK(cq != NULL);
  struct ibv_cq* plain_cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
  CHECK(plain_cq != NULL);
  struct ibv_wc wc;
  CHECK(ibv_poll_cq(cq, 1, &wc) == 0); /* inline: through the context's ops */
  CHECK(ibv_req_notify_cq(cq, 0) == 0);
  CHECK(ibv_req_notify_cq(plain_cq, 0) == EINVAL); /* no channel */
  CHECK(fcntl(channel->fd, F_SETFL, fcntl(channel->fd, F_GETFL) | O_NONBLOCK) == 0);
  struct ibv_cq* ev_cq = NULL;
  void* ev_ctx = NULL;
  errno = 0;
  CHECK(ibv_get_cq_event(channel, &ev_cq, &ev_ctx) == -1);
  CHECK(errno == EAGAIN);
  CHECK(ibv_destroy_comp_channel(channel) == EBUSY);
  CHECK(ibv_resize_cq(cq, 32) == EOPNOTSUPP);

  /* An RC QP without the CM, connected to itself (loopback: dgid is our own, dest_qp_num its
   * own number) through RESET -> INIT -> RTR -> RTS; a write moves bytes. No UC, no
   * multicast. */
  struct ibv_qp_init_attr qp_attr = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UC,
                                     .cap = {.max_send_wr = 1, .max_recv_wr = 1,
                                             .max_send_sge = 1, .max_recv_sge = 1}};
  CHECK_NULL_ERRNO(ibv_create_qp(pd, &qp_attr), EOPNOTSUPP);
  qp_attr.qp_type = IBV_QPT_RC;
  struct ibv_qp* qp = ibv_create_qp(pd, &qp_attr);
  CHECK(qp != NULL);
  CHECK(qp->state == IBV_QPS_RESET);
  struct ibv_qp_attr qattr = {.qp_state = IBV_QPS_INIT, .port_num = 1,
                             .qp_access_flags = IBV_ACCESS_REMOTE_WRITE};
  CHECK(ibv_modify_qp(qp, &qattr, IBV_QP_STATE | IBV_QP_PORT) == EINVAL);  /* mask too short */
  CHECK(ibv_modify_qp(qp, &qattr,
                      IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0);
  memset(&qattr, 0, sizeof(qattr));
  qattr.qp_state = IBV_QPS_RTR;
  qattr.path_mtu = IBV_MTU_1024;
  qattr.dest_qp_num = qp->qp_num;
  qattr.max_dest_rd_atomic = 1;
  qattr.min_rnr_timer = 12;
  qattr.ah_attr.port_num = 1;
  const int rtr_mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                       IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  CHECK(ibv_modify_qp(qp, &qattr, rtr_mask) == EINVAL);  /* RoCE: no GRH, no route */
  qattr.ah_attr.is_global = 1;
  qattr.ah_attr.grh.dgid = gid;
  CHECK(ibv_modify_qp(qp, &qattr, rtr_mask) == 0);
  memset(&qattr, 0, sizeof(qattr));
  qattr.qp_state = IBV_QPS_RTS;
  qattr.timeout = 14;
  qattr.retry_cnt = 7;
  qattr.rnr_retry = 7;
  qattr.max_rd_atomic = 1;
  CHECK(ibv_modify_qp(qp, &qattr, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
                                     IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                     IBV_QP_MAX_QP_RD_ATOMIC) == 0);
  struct ibv_qp_init_attr got_init;
  CHECK(ibv_query_qp(qp, &qattr, IBV_QP_STATE | IBV_QP_DEST_QPN, &got_init) == 0);
  CHECK(qattr.qp_state == IBV_QPS_RTS && qattr.dest_qp_num == qp->qp_num);
  CHECK(got_init.qp_type == IBV_QPT_RC && got_init.send_cq == cq);
  static char loop_buf[32] = "to myself";
  struct ibv_mr* loop_mr = ibv_reg_mr(pd, loop_buf, sizeof(loop_buf),
                                      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  CHECK(loop_mr != NULL);
  struct ibv_sge loop_sge = {.addr = (uintptr_t)loop_buf, .length = 10, .lkey = loop_mr->lkey};
  struct ibv_send_wr loop_wr = {.wr_id = 7, .sg_list = &loop_sge, .num_sge = 1,
                                .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED};
  loop_wr.wr.rdma.remote_addr = (uintptr_t)(loop_buf + 16);
  loop_wr.wr.rdma.rkey = loop_mr->rkey;
  struct ibv_send_wr* loop_bad = NULL;
  CHECK(ibv_post_send(qp, &loop_wr, &loop_bad) == 0);
  struct ibv_wc loop_wc;
  int loop_polled = 0;
  for (int spin = 0; spin < 10000000 && loop_polled == 0; ++spin) {
    loop_polled = ibv_poll_cq(cq, 1, &loop_wc);
  }
  CHECK(loop_polled == 1 && loop_wc.status == IBV_WC_SUCCESS && loop_wc.wr_id == 7);
  CHECK(strcmp(loop_buf + 16, "to myself") == 0);
  CHECK(ibv_destroy_qp(qp) == 0);
  CHECK(ibv_dereg_mr(loop_mr) == 0);
  CHECK(ibv_destroy_qp(NULL) == EINVAL);
  /* A UD QP sends to itself through an address handle; the receive's GRH names the sender
   * well enough for ibv_create_ah_from_wc to answer it. */
  struct ibv_ah_attr ah_attr;
  memset(&ah_attr, 0, sizeof(ah_attr));
  CHECK_NULL_ERRNO(ibv_create_ah(pd, &ah_attr), EINVAL); /* RoCE: no GRH */
  ah_attr.is_global = 1;
  ah_attr.port_num = 1;
  ah_attr.grh.dgid = gid;
  ah_attr.grh.hop_limit = 64;
  struct ibv_ah* ah = ibv_create_ah(pd, &ah_attr);
  CHECK(ah != NULL);
  qp_attr.qp_type = IBV_QPT_UD;
  struct ibv_qp* ud = ibv_create_qp(pd, &qp_attr);
  CHECK(ud != NULL);
  struct ibv_qp_attr ud_attr = {.qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = 0x1ee7a330};
  CHECK(ibv_modify_qp(ud, &ud_attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                        IBV_QP_QKEY) == 0);
  ud_attr.qp_state = IBV_QPS_RTR;
  CHECK(ibv_modify_qp(ud, &ud_attr, IBV_QP_STATE) == 0);
  ud_attr.qp_state = IBV_QPS_RTS;
  CHECK(ibv_modify_qp(ud, &ud_attr, IBV_QP_STATE | IBV_QP_SQ_PSN) == 0);
  static char ud_buf[128] = "hello, datagram";
  struct ibv_mr* ud_mr = ibv_reg_mr(pd, ud_buf, sizeof(ud_buf), IBV_ACCESS_LOCAL_WRITE);
  CHECK(ud_mr != NULL);
  struct ibv_sge ud_recv_sge = {.addr = (uintptr_t)(ud_buf + 64), .length = 64,
                                .lkey = ud_mr->lkey};
  struct ibv_recv_wr ud_recv = {.wr_id = 21, .sg_list = &ud_recv_sge, .num_sge = 1};
  struct ibv_recv_wr* ud_bad_recv = NULL;
  CHECK(ibv_post_recv(ud, &ud_recv, &ud_bad_recv) == 0);
  struct ibv_sge ud_sge = {.addr = (uintptr_t)ud_buf, .length = 16, .lkey = ud_mr->lkey};
  struct ibv_send_wr ud_wr = {.wr_id = 20, .sg_list = &ud_sge, .num_sge = 1,
                              .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED};
  ud_wr.wr.ud.ah = ah;
  ud_wr.wr.ud.remote_qpn = ud->qp_num;
  ud_wr.wr.ud.remote_qkey = 0x1ee7a330;
  struct ibv_send_wr* ud_bad = NULL;
  CHECK(ibv_post_send(ud, &ud_wr, &ud_bad) == 0);
  struct ibv_wc ud_wc[2];
  int ud_polled = 0;
  for (int spin = 0; spin < 10000000 && ud_polled < 2; ++spin) {
    ud_polled += ibv_poll_cq(cq, 2 - ud_polled, ud_wc + ud_polled);
  }
  CHECK(ud_polled == 2);
  struct ibv_wc* ud_got = ud_wc[0].wr_id == 21 ? &ud_wc[0] : &ud_wc[1];
  CHECK(ud_got->wr_id == 21 && ud_got->status == IBV_WC_SUCCESS);
  CHECK(ud_got->byte_len == 40 + 16 && ud_got->src_qp == ud->qp_num);
  CHECK((ud_got->wc_flags & IBV_WC_GRH) != 0);
  CHECK(strcmp(ud_buf + 64 + 40, "hello, datagram") == 0);
  struct ibv_ah_attr back;
  CHECK(ibv_init_ah_from_wc(ctx, 1, ud_got, (struct ibv_grh*)(ud_buf + 64), &back) == 0);
  CHECK(back.is_global == 1 && back.grh.sgid_index == 0 && back.port_num == 1);
  CHECK(memcmp(back.grh.dgid.raw, gid.raw, 16) == 0 && back.grh.hop_limit == 64);
  struct ibv_ah* answer = ibv_create_ah_from_wc(pd, ud_got, (struct ibv_grh*)(ud_buf + 64), 1);
  CHECK(answer != NULL);
  CHECK(ibv_destroy_ah(answer) == 0);
  CHECK(ibv_destroy_qp(ud) == 0);
  CHECK(ibv_dereg_mr(ud_mr) == 0);
  CHECK(ibv_destroy_ah(ah) == 0);
  CHECK(ibv_attach_mcast(NULL, &gid, 0) == EOPNOTSUPP);
  CHECK_NULL_ERRNO(ibv_import_pd(ctx, 1), EOPNOTSUPP);

  /* A bad argument to an async event call. */
  struct ibv_async_event async_event;
  errno = 0;
  CHECK(ibv_get_async_event(NULL, &async_event) == -1);
  CHECK(errno == EINVAL);

  CHECK(ibv_destroy_cq(plain_cq) == 0);
  CHECK(ibv_destroy_cq(cq) == 0);
  CHECK(ibv_destroy_comp_channel(channel) == 0);
  CHECK(ibv_dereg_mr(mr) == 0);
  CHECK(ibv_dealloc_pd(pd) == 0);
  CHECK(ibv_close_device(ctx) == 0);
  CHECK(ibv_close_device(NULL) == EINVAL);

  /* Helpers. */
  CHECK(strcmp(ibv_wc_status_str(IBV_WC_SUCCESS), "success") == 0);
  CHECK(ibv_wc_status_str((enum ibv_wc_status)1000) != NULL);
  CHECK(ibv_event_type_str(IBV_EVENT_CQ_ERR) != NULL);
  CHECK(ibv_rate_to_mult(IBV_RATE_10_GBPS) == 4);
  CHECK(mult_to_ibv_rate(4) == IBV_RATE_10_GBPS);
  CHECK(ibv_rate_to_mbps(IBV_RATE_100_GBPS) == 103125);
  CHECK(mbps_to_ibv_rate(103125) == IBV_RATE_100_GBPS);
  CHECK(mult_to_ibv_rate(3) == IBV_RATE_MAX);
  CHECK(ibv_fork_init() == 0);
  CHECK(ibv_is_fork_initialized() == IBV_FORK_UNNEEDED);
}

/* The one device, opened (NULL, counted as a failure, when it cannot be). */
static struct ibv_context* OpenTheDevice(void) {
  struct ibv_device** list = ibv_get_device_list(NULL);
  CHECK(list != NULL);
  if (list == NULL) return NULL;
  struct ibv_context* ctx = ibv_open_device(list[0]);
  ibv_free_device_list(list);
  CHECK(ctx != NULL);
  return ctx;
}

/* The extended ops of the context's verbs_context: query_device_ex, query_port, create_cq_ex and
 * create_qp_ex answer, every other inline extended verb fails by itself as on a provider
 * without the op. */
static void ExtendedOps(void) {
  struct ibv_context* ctx = OpenTheDevice();
  if (ctx == NULL) return;

  /* A verbs_context is around the context, as rdma-core's verbs_init_context makes it. */
  struct verbs_context* vctx = verbs_get_ctx(ctx);
  CHECK(vctx != NULL);
  if (vctx == NULL) return;
  CHECK(vctx->sz == sizeof(struct verbs_context));
  CHECK(verbs_get_ctx_op(ctx, query_device_ex) != NULL);
  CHECK(verbs_get_ctx_op(ctx, query_port) != NULL);
  CHECK(verbs_get_ctx_op(ctx, create_cq_ex) != NULL); /* ExtendedCq() uses it */
  CHECK(verbs_get_ctx_op(ctx, create_qp_ex) != NULL); /* ExtendedPost() uses it */

  /* query_device_ex: the same limits as ibv_query_device, the extended fields filled. */
  struct ibv_device_attr attr;
  CHECK(ibv_query_device(ctx, &attr) == 0);
  struct ibv_device_attr_ex attr_ex;
  memset(&attr_ex, 0xa5, sizeof(attr_ex));
  CHECK(ibv_query_device_ex(ctx, NULL, &attr_ex) == 0);
  CHECK(attr_ex.orig_attr.max_qp_wr == attr.max_qp_wr);
  CHECK(attr_ex.orig_attr.max_sge == attr.max_sge);
  CHECK(attr_ex.comp_mask != 0xa5a5a5a5u); /* written, not left as the caller's bytes */
  struct ibv_query_device_ex_input input = {.comp_mask = 1};
  CHECK(ibv_query_device_ex(ctx, &input, &attr_ex) == EINVAL);
  /* A caller of older headers (a smaller attr_size): only its part is written. */
  memset(&attr_ex, 0xa5, sizeof(attr_ex));
  CHECK(vctx->query_device_ex(ctx, NULL, &attr_ex, sizeof(struct ibv_device_attr)) == 0);
  CHECK(attr_ex.orig_attr.max_qp_wr == attr.max_qp_wr);
  CHECK(attr_ex.comp_mask == 0xa5a5a5a5u);
  CHECK(vctx->query_device_ex(ctx, NULL, &attr_ex, sizeof(struct ibv_device_attr) - 1) == EINVAL);
  CHECK(vctx->query_device_ex(ctx, NULL, NULL, sizeof(attr_ex)) == EINVAL);

  /* query_port: the whole ibv_port_attr, the fields after link_layer included. */
  struct ibv_port_attr port;
  memset(&port, 0xa5, sizeof(port));
  CHECK(ibv_query_port(ctx, 1, &port) == 0);
  CHECK(port.state == IBV_PORT_ACTIVE);
  CHECK(port.link_layer == IBV_LINK_LAYER_ETHERNET);
  CHECK(port.flags == 0);
  CHECK(port.port_cap_flags2 == 0);
  CHECK(ibv_query_port(ctx, 2, &port) == EINVAL);
  CHECK(vctx->query_port(ctx, 1, &port, offsetof(struct ibv_port_attr, flags)) == 0);
  CHECK(vctx->query_port(ctx, 1, &port, 4) == EINVAL);
  CHECK(vctx->query_port(NULL, 1, &port, sizeof(port)) == EINVAL);

  /* The rest: as a provider without the op. */
  struct ibv_pd* pd = ibv_alloc_pd(ctx);
  CHECK(pd != NULL);
  struct ibv_td_init_attr td_attr = {0};
  CHECK_NULL_ERRNO(ibv_alloc_td(ctx, &td_attr), EOPNOTSUPP);
  struct ibv_alloc_dm_attr dm_attr = {.length = 64};
  CHECK_NULL_ERRNO(ibv_alloc_dm(ctx, &dm_attr), EOPNOTSUPP);
  struct ibv_counters_init_attr counters_attr = {0};
  CHECK_NULL_ERRNO(ibv_create_counters(ctx, &counters_attr), EOPNOTSUPP);
  struct ibv_values_ex values = {.comp_mask = IBV_VALUES_MASK_RAW_CLOCK};
  CHECK(ibv_query_rt_values_ex(ctx, &values) == EOPNOTSUPP);
  struct ibv_xrcd_init_attr xrcd_attr = {0};
  CHECK_NULL_ERRNO(ibv_open_xrcd(ctx, &xrcd_attr), EOPNOTSUPP);
  struct ibv_parent_domain_init_attr pd_attr = {.pd = pd};
  CHECK_NULL_ERRNO(ibv_alloc_parent_domain(ctx, &pd_attr), EOPNOTSUPP);
  CHECK(ibv_dealloc_pd(pd) == 0);
  CHECK(ibv_close_device(ctx) == 0);
}

/* An RC QP of ibv_create_qp connected to itself (RESET -> INIT -> RTR -> RTS, dgid our own GID,
 * dest_qp_num its own number). */
static int ConnectToItself(struct ibv_qp* qp, const union ibv_gid* gid) {
  struct ibv_qp_attr attr;
  memset(&attr, 0, sizeof(attr));
  attr.qp_state = IBV_QPS_INIT;
  attr.port_num = 1;
  attr.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
  if (ibv_modify_qp(qp, &attr,
                    IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) != 0) {
    return -1;
  }
  memset(&attr, 0, sizeof(attr));
  attr.qp_state = IBV_QPS_RTR;
  attr.path_mtu = IBV_MTU_1024;
  attr.dest_qp_num = qp->qp_num;
  attr.max_dest_rd_atomic = 1;
  attr.min_rnr_timer = 12;
  attr.ah_attr.port_num = 1;
  attr.ah_attr.is_global = 1;
  attr.ah_attr.grh.dgid = *gid;
  if (ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                   IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
                                   IBV_QP_MIN_RNR_TIMER) != 0) {
    return -1;
  }
  memset(&attr, 0, sizeof(attr));
  attr.qp_state = IBV_QPS_RTS;
  attr.timeout = 14;
  attr.retry_cnt = 7;
  attr.rnr_retry = 7;
  attr.max_rd_atomic = 1;
  return ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
                                      IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                      IBV_QP_MAX_QP_RD_ATOMIC);
}

/* The extended CQ (ibv_create_cq_ex(3)), through verbs.h's inline calls only: its errors, then
 * as the send and receive CQ of a QP connected to itself, an RDMA WRITE WITH IMM read back
 * through ibv_start_poll / ibv_next_poll / ibv_wc_read_* (its send and its receive
 * completion), ibv_poll_cq on ibv_cq_ex_to_cq of the same CQ, and ibv_destroy_cq. */
static void ExtendedCq(void) {
  struct ibv_context* ctx = OpenTheDevice();
  if (ctx == NULL) return;
  union ibv_gid gid;
  CHECK(ibv_query_gid(ctx, 1, 0, &gid) == 0);

  const uint64_t wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM;
  struct ibv_cq_init_attr_ex cq_attr = {.cqe = 0, .wc_flags = wc_flags};
  CHECK_NULL_ERRNO(ibv_create_cq_ex(ctx, &cq_attr), EINVAL); /* cqe 0 */
  cq_attr.cqe = 16;
  cq_attr.wc_flags = wc_flags | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP; /* no device clock */
  CHECK_NULL_ERRNO(ibv_create_cq_ex(ctx, &cq_attr), EOPNOTSUPP);
  cq_attr.wc_flags = wc_flags | (UINT64_C(1) << 40); /* no such flag: libibverbs' EOPNOTSUPP */
  CHECK_NULL_ERRNO(ibv_create_cq_ex(ctx, &cq_attr), EOPNOTSUPP);
  cq_attr.wc_flags = wc_flags;
  cq_attr.comp_mask = 1u << 5; /* no such attribute */
  CHECK_NULL_ERRNO(ibv_create_cq_ex(ctx, &cq_attr), EINVAL);
  cq_attr.comp_mask = 0;
  struct ibv_cq_ex* cq_ex = ibv_create_cq_ex(ctx, &cq_attr);
  CHECK(cq_ex != NULL);
  if (cq_ex == NULL) return;
  struct ibv_cq* cq = ibv_cq_ex_to_cq(cq_ex);
  CHECK(cq->context == ctx && cq->cqe >= 16);
  CHECK(cq_ex->read_src_qp == NULL); /* not asked for: unset, as on mlx5 */
  struct ibv_poll_cq_attr poll_attr = {.comp_mask = 0};
  CHECK(ibv_start_poll(cq_ex, &poll_attr) == ENOENT); /* empty; no ibv_end_poll after it */

  struct ibv_pd* pd = ibv_alloc_pd(ctx);
  CHECK(pd != NULL);
  static char buf[64] = "extended";
  struct ibv_mr* mr =
      ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  CHECK(mr != NULL);
  struct ibv_qp_init_attr qp_attr = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
                                     .cap = {.max_send_wr = 4, .max_recv_wr = 4,
                                             .max_send_sge = 1, .max_recv_sge = 1}};
  struct ibv_qp* qp = ibv_create_qp(pd, &qp_attr);
  CHECK(qp != NULL);
  if (pd == NULL || mr == NULL || qp == NULL) return;
  CHECK(ConnectToItself(qp, &gid) == 0);

  struct ibv_sge recv_sge = {.addr = (uintptr_t)(buf + 48), .length = 16, .lkey = mr->lkey};
  struct ibv_recv_wr recv_wr = {.wr_id = 9, .sg_list = &recv_sge, .num_sge = 1};
  struct ibv_recv_wr* bad_recv = NULL;
  CHECK(ibv_post_recv(qp, &recv_wr, &bad_recv) == 0);
  struct ibv_sge sge = {.addr = (uintptr_t)buf, .length = 9, .lkey = mr->lkey};
  struct ibv_send_wr wr = {.wr_id = 8, .sg_list = &sge, .num_sge = 1,
                           .opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
                           .send_flags = IBV_SEND_SIGNALED, .imm_data = htonl(0x5a5a)};
  wr.wr.rdma.remote_addr = (uintptr_t)(buf + 16);
  wr.wr.rdma.rkey = mr->rkey;
  struct ibv_send_wr* bad = NULL;
  CHECK(ibv_post_send(qp, &wr, &bad) == 0);

  /* Both completions, in batches: the send's (RDMA_WRITE) and the receive's (WITH_IMM). */
  int got_send = 0, got_recv = 0;
  for (int spin = 0; spin < 10000000 && got_send + got_recv < 2; ++spin) {
    int ret = ibv_start_poll(cq_ex, &poll_attr);
    if (ret == ENOENT) continue;
    CHECK(ret == 0);
    if (ret != 0) break;
    do {
      CHECK(cq_ex->status == IBV_WC_SUCCESS);
      CHECK(ibv_wc_read_qp_num(cq_ex) == qp->qp_num);
      if (cq_ex->wr_id == 8) {
        got_send++;
        CHECK(ibv_wc_read_opcode(cq_ex) == IBV_WC_RDMA_WRITE);
      } else {
        CHECK(cq_ex->wr_id == 9);
        got_recv++;
        CHECK(ibv_wc_read_opcode(cq_ex) == IBV_WC_RECV_RDMA_WITH_IMM);
        CHECK(ibv_wc_read_byte_len(cq_ex) == 9);
        CHECK((ibv_wc_read_wc_flags(cq_ex) & IBV_WC_WITH_IMM) != 0);
        CHECK(ntohl(ibv_wc_read_imm_data(cq_ex)) == 0x5a5a);
      }
    } while ((ret = ibv_next_poll(cq_ex)) == 0);
    CHECK(ret == ENOENT);
    ibv_end_poll(cq_ex);
  }
  CHECK(got_send == 1 && got_recv == 1);
  CHECK(strcmp(buf + 16, "extended") == 0);

  /* The same CQ through ibv_cq_ex_to_cq: ibv_poll_cq takes what comes next. */
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.wr_id = 10;
  CHECK(ibv_post_send(qp, &wr, &bad) == 0);
  struct ibv_wc wc;
  int polled = 0;
  for (int spin = 0; spin < 10000000 && polled == 0; ++spin) polled = ibv_poll_cq(cq, 1, &wc);
  CHECK(polled == 1 && wc.wr_id == 10 && wc.status == IBV_WC_SUCCESS);
  CHECK(ibv_start_poll(cq_ex, &poll_attr) == ENOENT);

  CHECK(ibv_destroy_cq(cq) == EBUSY); /* the QP uses it */
  CHECK(ibv_destroy_qp(qp) == 0);
  CHECK(ibv_destroy_cq(cq) == 0);
  CHECK(ibv_dereg_mr(mr) == 0);
  CHECK(ibv_dealloc_pd(pd) == 0);
  CHECK(ibv_close_device(ctx) == 0);
}

/* The extended post API: a QP of ibv_create_qp_ex with send_ops_flags, connected to itself
 * out of band, writes through ibv_wr_rdma_write and sends through ibv_wr_send. */
static void ExtendedPost(void) {
  struct ibv_context* ctx = OpenTheDevice();
  if (ctx == NULL) return;
  struct ibv_pd* pd = ibv_alloc_pd(ctx);
  struct ibv_cq* cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
  CHECK(pd != NULL && cq != NULL);
  if (pd == NULL || cq == NULL) return;
  struct ibv_qp_init_attr_ex attr = {
      .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC, .pd = pd,
      .cap = {.max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1,
              .max_inline_data = 16},
      .comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
      .send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_SEND};
  /* Ops the device does not have, and other comp_mask bits: refused. */
  attr.send_ops_flags |= IBV_QP_EX_WITH_BIND_MW;
  CHECK_NULL_ERRNO(ibv_create_qp_ex(ctx, &attr), EOPNOTSUPP);
  attr.send_ops_flags &= ~(uint64_t)IBV_QP_EX_WITH_BIND_MW;
  attr.comp_mask |= IBV_QP_INIT_ATTR_CREATE_FLAGS;
  attr.create_flags = IBV_QP_CREATE_SCATTER_FCS;
  CHECK_NULL_ERRNO(ibv_create_qp_ex(ctx, &attr), EINVAL);
  attr.create_flags = 0; /* create flags present but none: a plain QP, as with every provider */
  struct ibv_qp* unflagged = ibv_create_qp_ex(ctx, &attr);
  CHECK(unflagged != NULL);
  if (unflagged != NULL) CHECK(ibv_destroy_qp(unflagged) == 0);
  attr.comp_mask &= ~(uint32_t)IBV_QP_INIT_ATTR_CREATE_FLAGS;
  struct ibv_qp* qp = ibv_create_qp_ex(ctx, &attr);
  CHECK(qp != NULL);
  if (qp == NULL) return;
  struct ibv_qp_ex* qpx = ibv_qp_to_qp_ex(qp);
  CHECK(qpx != NULL && qpx->wr_rdma_write != NULL && qpx->wr_send != NULL);
  if (qpx == NULL) return;

  union ibv_gid gid;
  CHECK(ibv_query_gid(ctx, 1, 0, &gid) == 0);
  CHECK(ConnectToItself(qp, &gid) == 0);

  static char buf[64] = "through ibv_wr";
  struct ibv_mr* mr = ibv_reg_mr(pd, buf, sizeof(buf),
                                 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  CHECK(mr != NULL);
  if (mr == NULL) return;
  struct ibv_sge recv_sge = {(uintptr_t)(buf + 48), 16, mr->lkey};
  struct ibv_recv_wr recv = {.wr_id = 9, .sg_list = &recv_sge, .num_sge = 1};
  struct ibv_recv_wr* bad_recv = NULL;
  CHECK(ibv_post_recv(qp, &recv, &bad_recv) == 0);

  ibv_wr_start(qpx);
  qpx->wr_id = 1;
  qpx->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_rdma_write(qpx, mr->rkey, (uintptr_t)(buf + 32));
  ibv_wr_set_sge(qpx, mr->lkey, (uintptr_t)buf, 15);
  qpx->wr_id = 2;
  ibv_wr_send(qpx);
  ibv_wr_set_inline_data(qpx, "sent", 5);
  CHECK(ibv_wr_complete(qpx) == 0);
  struct ibv_wc wc[4];
  int got = 0;
  for (int tries = 0; got < 3 && tries < 100000; tries++) {
    int n = ibv_poll_cq(cq, 4 - got, wc + got);
    CHECK(n >= 0);
    if (n < 0) break;
    got += n;
  }
  CHECK(got == 3);
  for (int i = 0; i < got; i++) CHECK(wc[i].status == IBV_WC_SUCCESS);
  CHECK(strcmp(buf + 32, "through ibv_wr") == 0);
  CHECK(strcmp(buf + 48, "sent") == 0);
  /* A builder the device does not have (a provider leaves it NULL) fails the batch; nothing of
   * it is posted. */
  ibv_wr_start(qpx);
  ibv_wr_atomic_fetch_add(qpx, mr->rkey, (uintptr_t)buf, 1);
  CHECK(ibv_wr_complete(qpx) == EINVAL);
  CHECK(ibv_poll_cq(cq, 4, wc) == 0);

  CHECK(ibv_destroy_qp(qp) == 0);
  CHECK(ibv_dereg_mr(mr) == 0);
  CHECK(ibv_destroy_cq(cq) == 0);
  CHECK(ibv_dealloc_pd(pd) == 0);
  CHECK(ibv_close_device(ctx) == 0);
}

static void Cm(void) {
  struct rdma_event_channel* channel = rdma_create_event_channel();
  CHECK(channel != NULL);
  struct rdma_cm_id* id = NULL;
  CHECK(rdma_create_id(channel, &id, NULL, RDMA_PS_TCP) == 0);
  errno = 0;
  CHECK(rdma_create_id(channel, NULL, NULL, RDMA_PS_TCP) == -1);
  CHECK(errno == EINVAL);
  errno = 0;
  CHECK(rdma_get_cm_event(NULL, NULL) == -1);
  CHECK(errno == EINVAL);
  errno = 0;
  CHECK(rdma_create_qp(id, NULL, NULL) == -1);
  CHECK(errno == EINVAL);
  errno = 0;
  CHECK(rdma_connect(id, NULL) == -1); /* no route resolved */
  CHECK(errno == EINVAL);
  struct ibv_qp_attr qp_attr;
  int mask = 0;
  errno = 0;
  CHECK(rdma_init_qp_attr(id, &qp_attr, &mask) == -1);
  CHECK(errno == ENOSYS);
  errno = 0;
  CHECK(rsocket(AF_INET, SOCK_STREAM, 0) == -1);
  CHECK(errno == ENOSYS);
  int n = 0;
  struct ibv_context** devices = rdma_get_devices(&n);
  CHECK(devices != NULL && n == 1 && devices[0] != NULL && devices[1] == NULL);
  rdma_free_devices(devices);
  CHECK(strcmp(rdma_event_str(RDMA_CM_EVENT_ESTABLISHED), "RDMA_CM_EVENT_ESTABLISHED") == 0);
  CHECK(rdma_destroy_id(id) == 0);
  rdma_destroy_event_channel(channel);
}

/* rdma_create_qp with a NULL PD and NULL CQs (the id's device's PD; CQs made for the QP and
 * destroyed with it), and rdma_destroy_ep, which destroys the id's QP before the id, so that
 * the caller's CQ can go after it (libfabric's fi_close: ibv_destroy_cq after
 * rdma_destroy_ep). */
static void CmEndpoint(void) {
  struct sockaddr_in dst = {.sin_family = AF_INET, .sin_port = htons(7471)};
  inet_pton(AF_INET, "127.0.0.1", &dst.sin_addr);
  struct rdma_cm_id* id = NULL;
  CHECK(rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP) == 0);
  if (id == NULL) return;
  CHECK(rdma_resolve_addr(id, NULL, (struct sockaddr*)&dst, 100) == 0);
  CHECK(id->verbs != NULL);
  if (id->verbs == NULL) return;
  struct ibv_qp_init_attr attr = {
      .cap = {.max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1},
      .qp_type = IBV_QPT_RC};
  CHECK(rdma_create_qp(id, NULL, &attr) == 0);
  CHECK(id->qp != NULL && id->pd != NULL);
  CHECK(id->send_cq != NULL && id->send_cq->cqe >= 8);
  CHECK(id->recv_cq != NULL && id->recv_cq->cqe >= 8);
  rdma_destroy_qp(id);
  CHECK(id->qp == NULL && id->send_cq == NULL && id->recv_cq == NULL);

  struct ibv_cq* cq = ibv_create_cq(id->verbs, 16, NULL, NULL, 0);
  CHECK(cq != NULL);
  if (cq == NULL) return;
  attr.send_cq = cq;
  attr.recv_cq = cq;
  CHECK(rdma_create_qp(id, NULL, &attr) == 0);
  CHECK(ibv_destroy_cq(cq) == EBUSY); /* the QP uses it */
  rdma_destroy_ep(id);
  CHECK(ibv_destroy_cq(cq) == 0);
}

/* Synchronous ids, as rdma-core's: an id made without a channel has one of its own, its
 * resolve calls return with the event they caused held in id->event, rdma_get_request needs a
 * synchronous listener, a synchronous id cannot be migrated to NULL again, and migrating it to
 * a channel of the user's moves its later events there. rdma_create_ep: a passive endpoint is
 * bound and keeps no QP; an active one toward nobody fails at no step before rdma_connect,
 * which fails with ECONNREFUSED (the REJECTED event) and holds that event. */
static void SyncIds(void) {
  struct sockaddr_in dst = {.sin_family = AF_INET, .sin_port = htons(7481)};
  inet_pton(AF_INET, "127.0.0.1", &dst.sin_addr);
  struct rdma_cm_id* id = NULL;
  CHECK(rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP) == 0);
  if (id == NULL) return;
  CHECK(id->channel != NULL && id->channel->fd >= 0);
  CHECK(rdma_resolve_addr(id, NULL, (struct sockaddr*)&dst, 100) == 0);
  CHECK(id->event != NULL && id->event->event == RDMA_CM_EVENT_ADDR_RESOLVED);
  CHECK(rdma_resolve_route(id, 100) == 0);
  CHECK(id->event != NULL && id->event->event == RDMA_CM_EVENT_ROUTE_RESOLVED);
  errno = 0;
  CHECK(rdma_migrate_id(id, NULL) == -1 && errno == EINVAL);
  struct rdma_cm_id* not_listening = id;
  errno = 0;
  struct rdma_cm_id* got = NULL;
  struct rdma_event_channel* channel = rdma_create_event_channel();
  CHECK(channel != NULL);
  if (channel == NULL) return;
  CHECK(rdma_migrate_id(id, channel) == 0);
  CHECK(id->channel == channel && id->event == NULL);
  CHECK(rdma_get_request(not_listening, &got) == -1 && errno == EINVAL); /* not synchronous */
  CHECK(rdma_destroy_id(id) == 0);

  /* An endpoint toward a port nobody listens on: rdma_connect is refused. */
  struct rdma_addrinfo hints = {.ai_port_space = RDMA_PS_TCP};
  struct rdma_addrinfo* res = NULL;
  CHECK(rdma_getaddrinfo("127.0.0.1", "7482", &hints, &res) == 0);
  if (res == NULL) return;
  struct ibv_qp_init_attr attr = {
      .cap = {.max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1}};
  struct rdma_cm_id* ep = NULL;
  CHECK(rdma_create_ep(&ep, res, NULL, &attr) == 0);
  if (ep == NULL) return;
  CHECK(attr.qp_type == IBV_QPT_RC && ep->qp != NULL && ep->pd != NULL);
  CHECK(ep->recv_cq_channel != NULL && ep->send_cq_channel != NULL);
  errno = 0;
  CHECK(rdma_connect(ep, NULL) == -1 && errno == ECONNREFUSED);
  CHECK(ep->event != NULL && ep->event->event == RDMA_CM_EVENT_REJECTED);
  rdma_destroy_ep(ep);

  /* A passive endpoint: bound to its address, no QP until a request comes. */
  struct rdma_addrinfo* passive = NULL;
  hints.ai_flags = RAI_PASSIVE;
  CHECK(rdma_getaddrinfo("127.0.0.1", "7483", &hints, &passive) == 0);
  if (passive != NULL) {
    CHECK(rdma_create_ep(&ep, passive, NULL, &attr) == 0);
    CHECK(ep != NULL && ep->qp == NULL && ntohs(rdma_get_src_port(ep)) == 7483);
    CHECK(rdma_listen(ep, 1) == 0);
    rdma_destroy_ep(ep);
    rdma_freeaddrinfo(passive);
  }
  /* Bad arguments: nothing made. */
  errno = 0;
  CHECK(rdma_create_ep(NULL, res, NULL, NULL) == -1 && errno == EINVAL);
  CHECK(rdma_get_request(NULL, &got) == -1);
  rdma_freeaddrinfo(res);
  rdma_destroy_event_channel(channel);
}

/* Run with RPMA_SIM_DEVICE=siw: siw's port (docs/DEVICES.md, "The port"): a GID table of one
 * entry and no pkey table, so ibv_query_pkey fails for every index, as rdma-core's does when the
 * port has no sysfs pkeys/. */
static int SiwPort(void) {
  struct ibv_device** list = ibv_get_device_list(NULL);
  CHECK(list != NULL && list[0] != NULL);
  if (list == NULL || list[0] == NULL) return 1;
  struct ibv_context* ctx = ibv_open_device(list[0]);
  ibv_free_device_list(list);
  CHECK(ctx != NULL);
  if (ctx == NULL) return 1;
  struct ibv_port_attr port;
  CHECK(ibv_query_port(ctx, 1, &port) == 0);
  CHECK(port.gid_tbl_len == 1 && port.pkey_tbl_len == 0);
  CHECK(port.max_mtu == IBV_MTU_1024 && port.active_mtu == IBV_MTU_1024);
  CHECK(port.link_layer == IBV_LINK_LAYER_ETHERNET);
  union ibv_gid gid;
  CHECK(ibv_query_gid(ctx, 1, 0, &gid) == 0 && gid.raw[12] == 127);
  CHECK(ibv_query_gid(ctx, 1, 1, &gid) == -1);
  __be16 pkey = 0;
  CHECK(ibv_query_pkey(ctx, 1, 0, &pkey) == -1);
  CHECK(ibv_get_pkey_index(ctx, 1, htons(0xffff)) == -1);
  CHECK(ibv_close_device(ctx) == 0);
  printf(failures > 0 ? "%d check(s) failed\n" : "PASS (siw's port)\n", failures);
  return failures > 0 ? 1 : 0;
}

int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "siw-port") == 0) return SiwPort();
  Devices();
  ExtendedOps();
  ExtendedCq();
  ExtendedPost();
  Cm();
  CmEndpoint();
  SyncIds();
  if (failures > 0) {
    printf("%d check(s) failed\n", failures);
    return 1;
  }
  printf("PASS\n");
  return 0;
}
