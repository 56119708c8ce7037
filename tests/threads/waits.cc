#include "tests/threads/waits.h"

#include <poll.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace softrpma::threads_testing {
namespace {

constexpr int kAllUsages = RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_READ_DST |
                           RPMA_MR_USAGE_WRITE_SRC | RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_SEND |
                           RPMA_MR_USAGE_RECV;

// Keeps the first error of a sequence of release steps.
void Keep(absl::Status* first, absl::Status status) {
  if (first->ok()) *first = std::move(status);
}

}  // namespace

absl::Status RpmaStatus(int ret, const char* call) {
  if (ret == 0) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(call, " returned ", ret, " (", rpma_err_2str(ret), ")"));
}

absl::Status AwaitReadable(int fd, const char* what) {
  pollfd pfd{fd, POLLIN, 0};
  const int limit_ms = static_cast<int>(absl::ToInt64Milliseconds(kWaitLimit));
  int ret;
  do {
    ret = poll(&pfd, 1, limit_ms);
  } while (ret < 0 && errno == EINTR);
  if (ret < 0) return absl::InternalError(absl::StrCat("poll(", what, "): ", strerror(errno)));
  if (ret == 0) {
    return absl::DeadlineExceededError(
        absl::StrCat("nothing on the ", what, " fd within ", absl::FormatDuration(kWaitLimit)));
  }
  return absl::OkStatus();
}

absl::StatusOr<ibv_wc> NextCompletion(rpma_cq* cq) {
  int fd = -1;
  THREADS_RETURN_IF_RPMA_ERROR(rpma_cq_get_fd(cq, &fd));
  while (true) {
    ibv_wc wc{};
    int got = 0;
    int ret = rpma_cq_get_wc(cq, 1, &wc, &got);
    if (ret == 0) {
      if (got != 1) return absl::InternalError(absl::StrCat("rpma_cq_get_wc gave ", got));
      return wc;
    }
    if (ret != RPMA_E_NO_COMPLETION) return RpmaStatus(ret, "rpma_cq_get_wc(cq, 1, &wc, &got)");
    absl::Status readable = AwaitReadable(fd, "CQ");
    if (!readable.ok()) return readable;
    THREADS_RETURN_IF_RPMA_ERROR(rpma_cq_wait(cq));
  }
}

absl::StatusOr<rpma_conn_event> NextEvent(rpma_conn* conn) {
  int fd = -1;
  THREADS_RETURN_IF_RPMA_ERROR(rpma_conn_get_event_fd(conn, &fd));
  absl::Status readable = AwaitReadable(fd, "connection event");
  if (!readable.ok()) return readable;
  rpma_conn_event event = RPMA_CONN_UNDEFINED;
  THREADS_RETURN_IF_RPMA_ERROR(rpma_conn_next_event(conn, &event));
  return event;
}

absl::StatusOr<rpma_conn_req*> NextConnReq(rpma_ep* ep, rpma_conn_cfg* cfg) {
  int fd = -1;
  THREADS_RETURN_IF_RPMA_ERROR(rpma_ep_get_fd(ep, &fd));
  absl::Status readable = AwaitReadable(fd, "endpoint");
  if (!readable.ok()) return readable;
  rpma_conn_req* req = nullptr;
  THREADS_RETURN_IF_RPMA_ERROR(rpma_ep_next_conn_req(ep, cfg, &req));
  return req;
}

std::string PrivateDataString(const rpma_conn_private_data& pdata) {
  if (pdata.ptr == nullptr) return "";
  // IB / RoCE report the whole private data field, zero-padded: the text ends at its NUL.
  const char* text = static_cast<const char*>(pdata.ptr);
  return std::string(text, strnlen(text, pdata.len));
}

absl::Status ConnectPair(rpma_peer* peer, const PairOptions& options, Pair* pair) {
  THREADS_RETURN_IF_RPMA_ERROR(rpma_conn_cfg_new(&pair->cfg));
  THREADS_RETURN_IF_RPMA_ERROR(rpma_conn_cfg_set_compl_channel(pair->cfg, options.shared_channel));
  THREADS_RETURN_IF_RPMA_ERROR(rpma_conn_cfg_set_cq_size(pair->cfg, options.cq_size));
  THREADS_RETURN_IF_RPMA_ERROR(rpma_conn_cfg_set_rcq_size(pair->cfg, options.rcq_size));
  THREADS_RETURN_IF_RPMA_ERROR(rpma_conn_cfg_set_sq_size(pair->cfg, options.sq_size));
  THREADS_RETURN_IF_RPMA_ERROR(rpma_conn_cfg_set_rq_size(pair->cfg, options.rq_size));
  THREADS_RETURN_IF_RPMA_ERROR(
      rpma_ep_listen(peer, TestAddress(), options.port.c_str(), &pair->ep));

  pair->client_buf.assign(options.buffer_size, 0);
  pair->server_buf.assign(options.buffer_size, 0);
  THREADS_RETURN_IF_RPMA_ERROR(rpma_mr_reg(peer, pair->client_buf.data(), pair->client_buf.size(),
                                           kAllUsages, &pair->client_mr));
  THREADS_RETURN_IF_RPMA_ERROR(rpma_mr_reg(peer, pair->server_buf.data(), pair->server_buf.size(),
                                           kAllUsages, &pair->server_mr));

  rpma_conn_req* req = nullptr;
  THREADS_RETURN_IF_RPMA_ERROR(
      rpma_conn_req_new(peer, TestAddress(), options.port.c_str(), pair->cfg, &req));
  int ret = rpma_conn_req_connect(&req, nullptr, &pair->client);
  if (ret != 0) {
    if (req != nullptr) rpma_conn_req_delete(&req);
    return RpmaStatus(ret, "rpma_conn_req_connect(client)");
  }

  absl::StatusOr<rpma_conn_req*> incoming = NextConnReq(pair->ep, pair->cfg);
  if (!incoming.ok()) return incoming.status();
  req = *incoming;
  size_t desc_size = 0;
  THREADS_RETURN_IF_RPMA_ERROR(rpma_mr_get_descriptor_size(pair->server_mr, &desc_size));
  std::vector<char> desc(desc_size);
  THREADS_RETURN_IF_RPMA_ERROR(rpma_mr_get_descriptor(pair->server_mr, desc.data()));
  rpma_conn_private_data pdata{desc.data(), static_cast<uint8_t>(desc_size)};
  ret = rpma_conn_req_connect(&req, &pdata, &pair->server);
  if (ret != 0) {
    if (req != nullptr) rpma_conn_req_delete(&req);
    return RpmaStatus(ret, "rpma_conn_req_connect(server)");
  }

  // The client first: the server's ESTABLISHED comes once the client got its own (IB's RTU).
  for (rpma_conn* conn : {pair->client, pair->server}) {
    absl::StatusOr<rpma_conn_event> event = NextEvent(conn);
    if (!event.ok()) return event.status();
    if (*event != RPMA_CONN_ESTABLISHED) {
      return absl::InternalError(
          absl::StrCat("expected ESTABLISHED, got ", rpma_utils_conn_event_2str(*event)));
    }
  }
  rpma_conn_private_data received{};
  THREADS_RETURN_IF_RPMA_ERROR(rpma_conn_get_private_data(pair->client, &received));
  THREADS_RETURN_IF_RPMA_ERROR(
      rpma_mr_remote_from_descriptor(received.ptr, desc_size, &pair->server_mr_remote));
  return absl::OkStatus();
}

absl::Status ReleasePair(Pair* pair) {
  absl::Status first;
  if (pair->client != nullptr && pair->server != nullptr) {
    Keep(&first, RpmaStatus(rpma_conn_disconnect(pair->client), "rpma_conn_disconnect"));
    for (rpma_conn* conn : {pair->client, pair->server}) {
      absl::StatusOr<rpma_conn_event> event = NextEvent(conn);
      if (!event.ok()) {
        Keep(&first, event.status());
      } else if (*event != RPMA_CONN_CLOSED) {
        Keep(&first, absl::InternalError(absl::StrCat("expected CLOSED, got ",
                                                      rpma_utils_conn_event_2str(*event))));
      }
    }
  }
  if (pair->server_mr_remote != nullptr) {
    Keep(&first,
         RpmaStatus(rpma_mr_remote_delete(&pair->server_mr_remote), "rpma_mr_remote_delete"));
  }
  if (pair->client != nullptr) {
    Keep(&first, RpmaStatus(rpma_conn_delete(&pair->client), "rpma_conn_delete(client)"));
  }
  if (pair->server != nullptr) {
    Keep(&first, RpmaStatus(rpma_conn_delete(&pair->server), "rpma_conn_delete(server)"));
  }
  if (pair->client_mr != nullptr) {
    Keep(&first, RpmaStatus(rpma_mr_dereg(&pair->client_mr), "rpma_mr_dereg(client)"));
  }
  if (pair->server_mr != nullptr) {
    Keep(&first, RpmaStatus(rpma_mr_dereg(&pair->server_mr), "rpma_mr_dereg(server)"));
  }
  if (pair->ep != nullptr)
    Keep(&first, RpmaStatus(rpma_ep_shutdown(&pair->ep), "rpma_ep_shutdown"));
  if (pair->cfg != nullptr) {
    Keep(&first, RpmaStatus(rpma_conn_cfg_delete(&pair->cfg), "rpma_conn_cfg_delete"));
  }
  return first;
}

}  // namespace softrpma::threads_testing
