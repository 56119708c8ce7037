// conn_private_data_fuzz: connection private data both ways through the public API, on the
// simulated NIC in this process: a client connects with the input's private data
// (rpma_conn_req_connect), the server reads it from its request
// (rpma_conn_req_get_private_data), accepts with private data of its own, and both read the
// other's from their connection (rpma_conn_get_private_data). That is the path that copies the
// bytes a peer chose (private_data.cc, conn_req.cc, conn.cc, the CM's REQ and REP).
//
// Input: [flags] [client length] [server length] bytes...: the client's private data is the
// next `client length` bytes (fewer if the input is shorter), then the server's. An empty one
// is NULL, or {ptr, 0} when flags has bit 0 (bit 1 for the server's), which must be
// RPMA_E_INVAL. Checked: more than the REQ carries (56 bytes) or the REP (196) is refused;
// what is accepted arrives whole and unchanged; every object is deleted (ASan checks leaks).

#include <fcntl.h>
#include <poll.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "librpma.h"
#include "tools/fuzz/check.h"
#include "tools/fuzz/rpma_env.h"

namespace {

constexpr char kAddr[] = "127.0.0.1";
constexpr char kPort[] = "7412";
constexpr size_t kMaxConnectPrivateData = 56;  // what an IB CM REQ carries
constexpr size_t kMaxAcceptPrivateData = 196;  // and a REP
constexpr int kPollLimitMs = 5000;             // a bound against hangs, not a timing assertion

using softrpma::fuzz::SimListener;

SimListener* GetServer() {
  // The listener is on the host fabric too (docs/FABRIC.md): a fabric of its own.
  static auto* server =
      new SimListener(softrpma::fuzz::ListenOnOwnFabric("fuzz-pdata", kAddr, kPort));
  return server;
}

bool Readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, kPollLimitMs) == 1;
}

rpma_conn_event NextEvent(rpma_conn* conn) {
  int fd = -1;
  FUZZ_CHECK(rpma_conn_get_event_fd(conn, &fd) == 0);
  FUZZ_CHECK(Readable(fd));
  rpma_conn_event event = RPMA_CONN_UNDEFINED;
  FUZZ_CHECK(rpma_conn_next_event(conn, &event) == 0);
  return event;
}

// True when `got` holds `want` (a provider may pad private data, never change it).
bool Holds(const rpma_conn_private_data& got, const rpma_conn_private_data* want) {
  if (want == nullptr || want->len == 0) return true;
  return got.len >= want->len && std::memcmp(got.ptr, want->ptr, want->len) == 0;
}

// The private data of one side: `len` bytes at `*data` (fewer if `*size` is), consumed.
// nullptr when empty, unless `empty_struct`: then {ptr, 0} in *storage.
const rpma_conn_private_data* Take(const uint8_t** data, size_t* size, size_t len,
                                   bool empty_struct, rpma_conn_private_data* storage) {
  if (len > *size) len = *size;
  storage->ptr = const_cast<uint8_t*>(*data);
  storage->len = static_cast<uint8_t>(len);
  *data += len;
  *size -= len;
  return len > 0 || empty_struct ? storage : nullptr;
}

void Disconnect(rpma_conn** client, rpma_conn** server) {
  FUZZ_CHECK(rpma_conn_disconnect(*client) == 0);
  FUZZ_CHECK(NextEvent(*client) == RPMA_CONN_CLOSED);
  FUZZ_CHECK(NextEvent(*server) == RPMA_CONN_CLOSED);
  FUZZ_CHECK(rpma_conn_disconnect(*server) == 0);
  FUZZ_CHECK(rpma_conn_delete(client) == 0);
  FUZZ_CHECK(rpma_conn_delete(server) == 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  const uint8_t flags = data[0];
  const size_t client_len = data[1];
  const size_t server_len = data[2];
  data += 3;
  size -= 3;
  rpma_conn_private_data client_storage;
  rpma_conn_private_data server_storage;
  const rpma_conn_private_data* client_pdata =
      Take(&data, &size, client_len, (flags & 1) != 0, &client_storage);
  const rpma_conn_private_data* server_pdata =
      Take(&data, &size, server_len, (flags & 2) != 0, &server_storage);
  SimListener* s = GetServer();

  rpma_conn_req* client_req = nullptr;
  FUZZ_CHECK(rpma_conn_req_new(s->peer, kAddr, kPort, nullptr, &client_req) == 0);
  rpma_conn* client = nullptr;
  const int connected = rpma_conn_req_connect(&client_req, client_pdata, &client);
  FUZZ_CHECK(client_req == nullptr);  // consumed, whatever happened
  if (client_pdata != nullptr && client_pdata->len == 0) {
    FUZZ_CHECK(connected == RPMA_E_INVAL);
    return 0;
  }
  if (client_pdata != nullptr && client_pdata->len > kMaxConnectPrivateData) {
    FUZZ_CHECK(connected != 0 && client == nullptr);
    return 0;
  }
  FUZZ_CHECK(connected == 0);

  FUZZ_CHECK(Readable(s->ep_fd));
  rpma_conn_req* server_req = nullptr;
  FUZZ_CHECK(rpma_ep_next_conn_req(s->ep, nullptr, &server_req) == 0);
  rpma_conn_private_data got{};
  FUZZ_CHECK(rpma_conn_req_get_private_data(server_req, &got) == 0);
  FUZZ_CHECK(Holds(got, client_pdata));
  FUZZ_CHECK(got.len <= kMaxConnectPrivateData);

  rpma_conn* server = nullptr;
  const int accepted = rpma_conn_req_connect(&server_req, server_pdata, &server);
  FUZZ_CHECK(server_req == nullptr);
  const bool refused = server_pdata != nullptr && (server_pdata->len == 0 ||
                                                   server_pdata->len > kMaxAcceptPrivateData);
  if (refused) {
    FUZZ_CHECK(accepted != 0 && server == nullptr);
    if (server_pdata->len == 0) FUZZ_CHECK(accepted == RPMA_E_INVAL);
    // The request is gone: the client learns it was turned down.
    const rpma_conn_event event = NextEvent(client);
    FUZZ_CHECK(event == RPMA_CONN_REJECTED || event == RPMA_CONN_UNREACHABLE ||
               event == RPMA_CONN_LOST);
    FUZZ_CHECK(rpma_conn_delete(&client) == 0);
    return 0;
  }
  FUZZ_CHECK(accepted == 0);
  FUZZ_CHECK(NextEvent(client) == RPMA_CONN_ESTABLISHED);
  FUZZ_CHECK(NextEvent(server) == RPMA_CONN_ESTABLISHED);
  FUZZ_CHECK(rpma_conn_get_private_data(client, &got) == 0);
  FUZZ_CHECK(Holds(got, server_pdata));
  FUZZ_CHECK(rpma_conn_get_private_data(server, &got) == 0);
  FUZZ_CHECK(Holds(got, client_pdata));
  Disconnect(&client, &server);
  return 0;
}
