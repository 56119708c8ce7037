#include "tests/ops/ops_pair.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace softrpma::ops_testing {
namespace {

// Each pair listens on its own port.
std::string NextPort() {
  static std::atomic<int> next{23000};
  return std::to_string(next.fetch_add(1));
}

absl::Status Check(int ret, const char* call) {
  if (ret == 0) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(call, " returned ", ret, " (", rpma_err_2str(ret), ")"));
}

#define OPS_RETURN_IF_ERROR(expr)                  \
  do {                                             \
    absl::Status status_ = Check((expr), #expr);   \
    if (!status_.ok()) return status_;             \
  } while (0)

// Keeps the first failure.
void Keep(absl::Status* first, int ret, const char* call) {
  if (first->ok()) *first = Check(ret, call);
}

}  // namespace

const char* TestAddress() {
  const char* addr = std::getenv("SOFTRPMA_TEST_ADDR");
  return addr != nullptr && *addr != '\0' ? addr : "127.0.0.1";
}

bool SimulatedNicSelected() {
  const char* backend = std::getenv("RPMA_BACKEND");
  return backend == nullptr || *backend == '\0' || std::strcmp(backend, "sim") == 0;
}

rpma_cq* CqOf(rpma_conn* conn) {
  rpma_cq* cq = nullptr;
  (void)rpma_conn_get_cq(conn, &cq);
  return cq;
}

absl::StatusOr<ibv_wc> NextCompletion(rpma_cq* cq) {
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (true) {
    ibv_wc wc;
    std::memset(&wc, 0, sizeof(wc));
    int got = 0;
    const int ret = rpma_cq_get_wc(cq, 1, &wc, &got);
    if (ret == 0 && got == 1) return wc;
    if (ret != 0 && ret != RPMA_E_NO_COMPLETION) return Check(ret, "rpma_cq_get_wc");
    if (absl::Now() > deadline) return absl::DeadlineExceededError("no completion in 10 s");
    std::this_thread::yield();
  }
}

absl::StatusOr<std::unique_ptr<OpsPair>> OpsPair::Create(const OpsPairOptions& options) {
  std::unique_ptr<OpsPair> pair(new OpsPair());
  absl::Status status = pair->Connect(options);
  if (!status.ok()) return status;
  return pair;
}

absl::Status OpsPair::Connect(const OpsPairOptions& options) {
  client_buf_.assign(4096, 0);
  server_buf_.assign(options.server_region_offset + options.server_region_size, 0);
  server_inbox_buf_.assign(64, 0);
  server_region_offset_ = options.server_region_offset;
  server_region_size_ = options.server_region_size;
  const std::string port = NextPort();

  ibv_context* dev = nullptr;
  OPS_RETURN_IF_ERROR(
      rpma_utils_get_ibv_context(TestAddress(), RPMA_UTIL_IBV_CONTEXT_LOCAL, &dev));
  OPS_RETURN_IF_ERROR(rpma_peer_new(dev, &peer_));
  OPS_RETURN_IF_ERROR(rpma_ep_listen(peer_, TestAddress(), port.c_str(), &ep_));
  OPS_RETURN_IF_ERROR(rpma_mr_reg(peer_, client_buf_.data(), client_buf_.size(),
                                  RPMA_MR_USAGE_WRITE_SRC | RPMA_MR_USAGE_READ_DST |
                                      RPMA_MR_USAGE_SEND | RPMA_MR_USAGE_RECV,
                                  &client_mr_));
  OPS_RETURN_IF_ERROR(rpma_mr_reg(peer_, server_region(), server_region_size_,
                                  options.server_usage, &server_mr_));
  OPS_RETURN_IF_ERROR(rpma_mr_reg(peer_, server_inbox_buf_.data(), server_inbox_buf_.size(),
                                  RPMA_MR_USAGE_RECV, &server_inbox_));

  rpma_conn_req* client_req = nullptr;
  OPS_RETURN_IF_ERROR(rpma_conn_req_new(peer_, TestAddress(), port.c_str(), nullptr, &client_req));
  int ret = rpma_conn_req_connect(&client_req, nullptr, &client_);
  if (ret != 0) {
    if (client_req != nullptr) rpma_conn_req_delete(&client_req);
    return Check(ret, "rpma_conn_req_connect(client)");
  }

  // The server's private data: its region's descriptor, then its peer cfg's descriptor.
  size_t mr_desc_size = 0;
  OPS_RETURN_IF_ERROR(rpma_mr_get_descriptor_size(server_mr_, &mr_desc_size));
  rpma_peer_cfg* pcfg = nullptr;
  OPS_RETURN_IF_ERROR(rpma_peer_cfg_new(&pcfg));
  size_t pcfg_desc_size = 0;
  ret = rpma_peer_cfg_set_direct_write_to_pmem(pcfg, options.server_direct_write_to_pmem);
  if (ret == 0) ret = rpma_peer_cfg_get_descriptor_size(pcfg, &pcfg_desc_size);
  std::vector<char> pdata_bytes(mr_desc_size + pcfg_desc_size);
  if (ret == 0) ret = rpma_mr_get_descriptor(server_mr_, pdata_bytes.data());
  if (ret == 0) ret = rpma_peer_cfg_get_descriptor(pcfg, pdata_bytes.data() + mr_desc_size);
  rpma_peer_cfg_delete(&pcfg);
  OPS_RETURN_IF_ERROR(ret);

  rpma_conn_req* server_req = nullptr;
  OPS_RETURN_IF_ERROR(rpma_ep_next_conn_req(ep_, nullptr, &server_req));
  rpma_conn_private_data pdata{pdata_bytes.data(), static_cast<uint8_t>(pdata_bytes.size())};
  ret = rpma_conn_req_connect(&server_req, &pdata, &server_);
  if (ret != 0) {
    if (server_req != nullptr) rpma_conn_req_delete(&server_req);
    return Check(ret, "rpma_conn_req_connect(server)");
  }
  rpma_conn_event event = RPMA_CONN_UNDEFINED;
  // The client first: as with librdmacm on IB, the server's ESTABLISHED comes only after the
  // client got (and so processed) its own.
  OPS_RETURN_IF_ERROR(rpma_conn_next_event(client_, &event));
  if (event != RPMA_CONN_ESTABLISHED) return absl::InternalError("client not established");
  OPS_RETURN_IF_ERROR(rpma_conn_next_event(server_, &event));
  if (event != RPMA_CONN_ESTABLISHED) return absl::InternalError("server not established");

  rpma_conn_private_data received{};
  OPS_RETURN_IF_ERROR(rpma_conn_get_private_data(client_, &received));
  // At least what was sent: IB reports the REP's whole private data field (196 bytes).
  if (received.len < mr_desc_size + pcfg_desc_size) {
    return absl::InternalError(absl::StrCat("private data of ", received.len, " bytes"));
  }
  const char* bytes = static_cast<const char*>(received.ptr);
  OPS_RETURN_IF_ERROR(rpma_mr_remote_from_descriptor(bytes, mr_desc_size, &server_remote_));
  if (options.client_applies_peer_cfg) {
    rpma_peer_cfg* remote_cfg = nullptr;
    OPS_RETURN_IF_ERROR(
        rpma_peer_cfg_from_descriptor(bytes + mr_desc_size, pcfg_desc_size, &remote_cfg));
    ret = rpma_conn_apply_remote_peer_cfg(client_, remote_cfg);
    rpma_peer_cfg_delete(&remote_cfg);
    OPS_RETURN_IF_ERROR(ret);
  }
  return absl::OkStatus();
}

absl::Status OpsPair::Close() {
  if (closed_) return absl::OkStatus();
  closed_ = true;
  absl::Status first = absl::OkStatus();
  if (server_remote_ != nullptr) Keep(&first, rpma_mr_remote_delete(&server_remote_), "remote");
  if (client_ != nullptr) (void)rpma_conn_disconnect(client_);
  if (client_ != nullptr) Keep(&first, rpma_conn_delete(&client_), "rpma_conn_delete(client)");
  if (server_ != nullptr) Keep(&first, rpma_conn_delete(&server_), "rpma_conn_delete(server)");
  if (client_mr_ != nullptr) Keep(&first, rpma_mr_dereg(&client_mr_), "rpma_mr_dereg(client)");
  if (server_mr_ != nullptr) Keep(&first, rpma_mr_dereg(&server_mr_), "rpma_mr_dereg(server)");
  if (server_inbox_ != nullptr) Keep(&first, rpma_mr_dereg(&server_inbox_), "rpma_mr_dereg");
  if (ep_ != nullptr) Keep(&first, rpma_ep_shutdown(&ep_), "rpma_ep_shutdown");
  if (peer_ != nullptr) Keep(&first, rpma_peer_delete(&peer_), "rpma_peer_delete");
  return first;
}

OpsPair::~OpsPair() { (void)Close(); }

}  // namespace softrpma::ops_testing
