#include "tests/conformance/testing/rig.h"

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/conformance/testing/conformance_test.h"

namespace softrpma::conformance {

absl::StatusOr<std::unique_ptr<Rig>> Rig::Create() {
  std::unique_ptr<Rig> rig(new Rig());
  int ret = GetLocalDevice(&rig->dev_);
  if (ret != 0) {
    return absl::InternalError(absl::StrCat("rpma_utils_get_ibv_context: ", RpmaCodeName(ret)));
  }
  ret = rpma_peer_new(rig->dev_, &rig->peer_);
  if (ret != 0) return absl::InternalError(absl::StrCat("rpma_peer_new: ", RpmaCodeName(ret)));
  ret = rpma_conn_cfg_new(&rig->cfg_);
  if (ret != 0) {
    return absl::InternalError(absl::StrCat("rpma_conn_cfg_new: ", RpmaCodeName(ret)));
  }
  return rig;
}

Rig::~Rig() {
  if (client_ != nullptr) (void)rpma_conn_disconnect(client_);
  if (server_ != nullptr) (void)rpma_conn_disconnect(server_);
  (void)rpma_conn_delete(&client_);
  (void)rpma_conn_delete(&server_);
  (void)rpma_conn_req_delete(&client_req_);
  (void)rpma_conn_req_delete(&server_req_);
  for (rpma_mr_remote*& mr : remote_mrs_) (void)rpma_mr_remote_delete(&mr);
  for (rpma_mr_local*& mr : mrs_) (void)rpma_mr_dereg(&mr);
  (void)rpma_ep_shutdown(&ep_);
  (void)rpma_conn_cfg_delete(&cfg_);
  (void)rpma_peer_delete(&peer_);
}

int Rig::Listen() {
  port_ = NextPort();
  return rpma_ep_listen(peer_, kAddress, port_.c_str(), &ep_);
}

int Rig::NewClientRequest() {
  return rpma_conn_req_new(peer_, kAddress, port_.c_str(), cfg_, &client_req_);
}

int Rig::ConnectClient(const rpma_conn_private_data* pdata) {
  if (client_req_ == nullptr) {
    const int ret = NewClientRequest();
    if (ret != 0) return ret;
  }
  return rpma_conn_req_connect(&client_req_, pdata, &client_);
}

int Rig::NextServerRequest() {
  int fd = -1;
  const int ret = rpma_ep_get_fd(ep_, &fd);
  if (ret != 0) return ret;
  if (!Readable(fd)) return kWaitTimedOut;
  return rpma_ep_next_conn_req(ep_, cfg_, &server_req_);
}

int Rig::AcceptServer(const rpma_conn_private_data* pdata) {
  return rpma_conn_req_connect(&server_req_, pdata, &server_);
}

int Rig::NextEvent(rpma_conn* conn, rpma_conn_event* event) {
  int fd = -1;
  const int ret = rpma_conn_get_event_fd(conn, &fd);
  if (ret != 0) return ret;
  if (!Readable(fd)) return kWaitTimedOut;
  return rpma_conn_next_event(conn, event);
}

int Rig::Establish() {
  int ret = 0;
  if (ep_ == nullptr && (ret = Listen()) != 0) return ret;
  if ((ret = ConnectClient()) != 0) return ret;
  if ((ret = NextServerRequest()) != 0) return ret;
  if ((ret = AcceptServer()) != 0) return ret;
  rpma_conn_event event = RPMA_CONN_UNDEFINED;
  // The client first: as with librdmacm on IB, the server's ESTABLISHED comes only after the
  // client got (and so processed) its own.
  if ((ret = NextEvent(client_, &event)) != 0) return ret;
  if (event != RPMA_CONN_ESTABLISHED) return RPMA_E_UNKNOWN;
  if ((ret = NextEvent(server_, &event)) != 0) return ret;
  if (event != RPMA_CONN_ESTABLISHED) return RPMA_E_UNKNOWN;
  return 0;
}

rpma_mr_local* Rig::RegisterMr(size_t size, int usage) {
  buffers_.push_back(std::make_unique<char[]>(size));
  std::memset(buffers_.back().get(), 0, size);
  rpma_mr_local* mr = nullptr;
  const int ret = rpma_mr_reg(peer_, buffers_.back().get(), size, usage, &mr);
  EXPECT_RPMA(ret, 0) << "rpma_mr_reg in the rig";
  if (ret != 0) return nullptr;
  mrs_.push_back(mr);
  return mr;
}

rpma_mr_remote* Rig::RemoteOf(const rpma_mr_local* mr) {
  size_t size = 0;
  EXPECT_RPMA(rpma_mr_get_descriptor_size(mr, &size), 0);
  std::vector<char> desc(size);
  EXPECT_RPMA(rpma_mr_get_descriptor(mr, desc.data()), 0);
  rpma_mr_remote* remote = nullptr;
  const int ret = rpma_mr_remote_from_descriptor(desc.data(), desc.size(), &remote);
  EXPECT_RPMA(ret, 0) << "rpma_mr_remote_from_descriptor in the rig";
  if (ret != 0) return nullptr;
  remote_mrs_.push_back(remote);
  return remote;
}

}  // namespace softrpma::conformance
