#include "tests/testing/connected_pair.h"

#include <atomic>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace softrpma::testing {
namespace {

// Each pair listens on its own port, so pairs never meet.
std::string NextPort() {
  static std::atomic<int> next{20000};
  return std::to_string(next.fetch_add(1));
}

absl::Status Check(int ret, const char* call) {
  if (ret == 0) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(call, " returned ", RpmaErrorName(ret)));
}

#define RETURN_IF_RPMA_ERROR(expr)                       \
  do {                                                   \
    absl::Status status_ = Check((expr), #expr);         \
    if (!status_.ok()) return status_;                   \
  } while (0)

}  // namespace

absl::StatusOr<std::unique_ptr<ConnectedPair>> ConnectedPair::Create(
    const PairOptions& options) {
  std::unique_ptr<ConnectedPair> pair(new ConnectedPair());
  absl::Status status = pair->Connect(options);
  if (!status.ok()) return status;
  return pair;
}

absl::Status ConnectedPair::Connect(const PairOptions& options) {
  client_buf_.assign(options.buffer_size, 0);
  server_buf_.assign(options.buffer_size, 0);
  const std::string port = NextPort();

  ibv_context* dev = nullptr;
  RETURN_IF_RPMA_ERROR(
      rpma_utils_get_ibv_context(TestAddress(), RPMA_UTIL_IBV_CONTEXT_LOCAL, &dev));
  RETURN_IF_RPMA_ERROR(rpma_peer_new(dev, &peer_));
  RETURN_IF_RPMA_ERROR(rpma_conn_cfg_new(&cfg_));
  RETURN_IF_RPMA_ERROR(rpma_conn_cfg_set_compl_channel(cfg_, options.shared_channel));
  RETURN_IF_RPMA_ERROR(rpma_conn_cfg_set_rcq_size(cfg_, options.rcq_size));
  RETURN_IF_RPMA_ERROR(rpma_conn_cfg_set_cq_size(cfg_, options.cq_size));
  rpma_conn_cfg* server_cfg = cfg_;
  if (options.server_uses_srq) {
    RETURN_IF_RPMA_ERROR(rpma_srq_cfg_new(&srq_cfg_));
    RETURN_IF_RPMA_ERROR(rpma_srq_cfg_set_rq_size(srq_cfg_, options.srq_rq_size));
    RETURN_IF_RPMA_ERROR(rpma_srq_cfg_set_rcq_size(srq_cfg_, options.srq_rcq_size));
    RETURN_IF_RPMA_ERROR(rpma_srq_new(peer_, srq_cfg_, &server_srq_));
    RETURN_IF_RPMA_ERROR(rpma_conn_cfg_new(&server_cfg_));
    RETURN_IF_RPMA_ERROR(rpma_conn_cfg_set_compl_channel(server_cfg_, options.shared_channel));
    RETURN_IF_RPMA_ERROR(rpma_conn_cfg_set_cq_size(server_cfg_, options.cq_size));
    RETURN_IF_RPMA_ERROR(rpma_conn_cfg_set_srq(server_cfg_, server_srq_));
    server_cfg = server_cfg_;
  }
  RETURN_IF_RPMA_ERROR(rpma_ep_listen(peer_, TestAddress(), port.c_str(), &ep_));

  const int usage = RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_READ_DST | RPMA_MR_USAGE_WRITE_SRC |
                    RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_SEND | RPMA_MR_USAGE_RECV;
  RETURN_IF_RPMA_ERROR(
      rpma_mr_reg(peer_, client_buf_.data(), client_buf_.size(), usage, &client_mr_));
  RETURN_IF_RPMA_ERROR(
      rpma_mr_reg(peer_, server_buf_.data(), server_buf_.size(), usage, &server_mr_));

  rpma_conn_req* client_req = nullptr;
  RETURN_IF_RPMA_ERROR(
      rpma_conn_req_new(peer_, TestAddress(), port.c_str(), cfg_, &client_req));
  int ret = rpma_conn_req_connect(&client_req, nullptr, &client_);
  if (ret != 0) {
    if (client_req != nullptr) rpma_conn_req_delete(&client_req);
    return Check(ret, "rpma_conn_req_connect(client)");
  }

  rpma_conn_req* server_req = nullptr;
  RETURN_IF_RPMA_ERROR(rpma_ep_next_conn_req(ep_, server_cfg, &server_req));
  size_t desc_size = 0;
  RETURN_IF_RPMA_ERROR(rpma_mr_get_descriptor_size(server_mr_, &desc_size));
  std::vector<char> desc(desc_size);
  RETURN_IF_RPMA_ERROR(rpma_mr_get_descriptor(server_mr_, desc.data()));
  rpma_conn_private_data pdata{desc.data(), static_cast<uint8_t>(desc_size)};
  ret = rpma_conn_req_connect(&server_req, &pdata, &server_);
  if (ret != 0) {
    if (server_req != nullptr) rpma_conn_req_delete(&server_req);
    return Check(ret, "rpma_conn_req_connect(server)");
  }

  rpma_conn_event event = RPMA_CONN_UNDEFINED;
  // The client first: as with librdmacm on IB, the server's ESTABLISHED comes only after the
  // client got (and so processed) its own.
  RETURN_IF_RPMA_ERROR(rpma_conn_next_event(client_, &event));
  if (event != RPMA_CONN_ESTABLISHED) return absl::InternalError("client not established");
  RETURN_IF_RPMA_ERROR(rpma_conn_next_event(server_, &event));
  if (event != RPMA_CONN_ESTABLISHED) return absl::InternalError("server not established");

  rpma_conn_private_data received{};
  RETURN_IF_RPMA_ERROR(rpma_conn_get_private_data(client_, &received));
  RETURN_IF_RPMA_ERROR(
      rpma_mr_remote_from_descriptor(received.ptr, received.len, &server_mr_remote_));
  return absl::OkStatus();
}

int ConnectedPair::DeleteClient() {
  if (client_ == nullptr) return 0;
  rpma_conn_disconnect(client_);
  return rpma_conn_delete(&client_);
}

ConnectedPair::~ConnectedPair() {
  if (server_mr_remote_ != nullptr) rpma_mr_remote_delete(&server_mr_remote_);
  if (client_ != nullptr) rpma_conn_disconnect(client_);
  if (client_ != nullptr) rpma_conn_delete(&client_);
  if (server_ != nullptr) rpma_conn_delete(&server_);
  if (client_mr_ != nullptr) rpma_mr_dereg(&client_mr_);
  if (server_mr_ != nullptr) rpma_mr_dereg(&server_mr_);
  if (ep_ != nullptr) rpma_ep_shutdown(&ep_);
  if (server_srq_ != nullptr) rpma_srq_delete(&server_srq_);
  if (srq_cfg_ != nullptr) rpma_srq_cfg_delete(&srq_cfg_);
  if (server_cfg_ != nullptr) rpma_conn_cfg_delete(&server_cfg_);
  if (cfg_ != nullptr) rpma_conn_cfg_delete(&cfg_);
  if (peer_ != nullptr) rpma_peer_delete(&peer_);
}

}  // namespace softrpma::testing
