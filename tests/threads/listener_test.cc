// A listener in one thread accepts while clients connect from others (librpma(7), THREAD
// SAFETY: one thread uses the endpoint; each connection request and connection is used by one
// thread at a time, and may be handed to another).
//
// kClients client threads, each with its own configuration and region on the shared peer,
// connect at once to one endpoint; the listener thread takes the requests in whatever order they
// come, reads which client each is from its private data, posts a receive for that client,
// accepts with private data naming the client, and waits for ESTABLISHED. Each client checks
// that the accept's private data names it, then sends a message naming itself; the listener
// checks that each client's message arrived on that client's connection. The main thread then
// disconnects and releases every connection (handed over by join()).

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "librpma.h"
#include "tests/threads/waits.h"

namespace softrpma {
namespace {

using threads_testing::NextCompletion;
using threads_testing::NextConnReq;
using threads_testing::NextEvent;
using threads_testing::PrivateDataString;
using threads_testing::RpmaStatus;
using threads_testing::TestAddress;

constexpr char kPort[] = "27000";
constexpr int kClients = 6;
constexpr size_t kMessage = 32;
constexpr char kClientPrefix[] = "client ";
constexpr char kAcceptPrefix[] = "accepted client ";

std::string Hello(int client) { return absl::StrFormat("hello from client %d", client); }

#define RETURN_IF_ERROR(expr)          \
  do {                                 \
    absl::Status status_ = (expr);     \
    if (!status_.ok()) return status_; \
  } while (0)

// Server side: the listener's endpoint and what it accepted, indexed by client.
struct Server {
  rpma_ep* ep = nullptr;
  rpma_conn_cfg* cfg = nullptr;  // used by the listener thread only
  std::vector<char> buf = std::vector<char>(kClients * kMessage);
  rpma_mr_local* mr = nullptr;
  std::vector<rpma_conn*> conns = std::vector<rpma_conn*>(kClients);
};

// A client thread's own objects.
struct Client {
  rpma_conn_cfg* cfg = nullptr;
  std::vector<char> buf = std::vector<char>(kMessage);
  rpma_mr_local* mr = nullptr;
  rpma_conn* conn = nullptr;
};

absl::Status ExpectEvent(absl::StatusOr<rpma_conn_event> event, rpma_conn_event want,
                         const std::string& who) {
  if (!event.ok()) return absl::InternalError(absl::StrCat(who, ": ", event.status().ToString()));
  if (*event != want) {
    return absl::InternalError(absl::StrCat(who, ": got ", rpma_utils_conn_event_2str(*event),
                                            ", want ", rpma_utils_conn_event_2str(want)));
  }
  return absl::OkStatus();
}

// The listener thread: kClients requests, in arrival order, each matched to its client.
absl::Status Listen(Server& server) {
  for (int n = 0; n < kClients; ++n) {
    absl::StatusOr<rpma_conn_req*> req = NextConnReq(server.ep, server.cfg);
    if (!req.ok()) return req.status();
    rpma_conn_private_data pdata{};
    THREADS_RETURN_IF_RPMA_ERROR(rpma_conn_req_get_private_data(*req, &pdata));
    const std::string from = PrivateDataString(pdata);
    int client = -1;
    if (from.rfind(kClientPrefix, 0) != 0 ||
        !absl::SimpleAtoi(from.substr(strlen(kClientPrefix)), &client) || client < 0 ||
        client >= kClients || server.conns[client] != nullptr) {
      rpma_conn_req_delete(&*req);
      return absl::InternalError(absl::StrCat("request ", n, " has private data '", from, "'"));
    }
    THREADS_RETURN_IF_RPMA_ERROR(rpma_conn_req_recv(*req, server.mr, client * kMessage, kMessage,
                                                    reinterpret_cast<void*>(client + 1)));
    const std::string accept = absl::StrCat(kAcceptPrefix, client);
    rpma_conn_private_data accept_pdata{const_cast<char*>(accept.data()),
                                        static_cast<uint8_t>(accept.size())};
    rpma_conn* conn = nullptr;
    THREADS_RETURN_IF_RPMA_ERROR(rpma_conn_req_connect(&*req, &accept_pdata, &conn));
    server.conns[client] = conn;
    RETURN_IF_ERROR(ExpectEvent(NextEvent(conn), RPMA_CONN_ESTABLISHED,
                                absl::StrCat("server side of client ", client)));
  }
  // Every client's message, on that client's connection.
  for (int client = 0; client < kClients; ++client) {
    rpma_cq* rcq = nullptr;
    THREADS_RETURN_IF_RPMA_ERROR(rpma_conn_get_rcq(server.conns[client], &rcq));
    absl::StatusOr<ibv_wc> wc = NextCompletion(rcq);
    if (!wc.ok()) return wc.status();
    const std::string got(server.buf.data() + client * kMessage, Hello(client).size());
    if (wc->status != IBV_WC_SUCCESS || wc->opcode != IBV_WC_RECV ||
        wc->wr_id != static_cast<uint64_t>(client + 1) || wc->byte_len != Hello(client).size() ||
        got != Hello(client)) {
      return absl::InternalError(absl::StrFormat(
          "client %d's receive: status %s, opcode %d, wr_id %d, byte_len %d, data '%s'", client,
          ibv_wc_status_str(wc->status), wc->opcode, wc->wr_id, wc->byte_len, got));
    }
  }
  return absl::OkStatus();
}

// A client thread: connect with private data naming itself, check the accept's, send hello.
absl::Status RunClient(rpma_peer* peer, int id, Client& client) {
  THREADS_RETURN_IF_RPMA_ERROR(rpma_conn_cfg_new(&client.cfg));
  THREADS_RETURN_IF_RPMA_ERROR(
      rpma_mr_reg(peer, client.buf.data(), client.buf.size(), RPMA_MR_USAGE_SEND, &client.mr));
  rpma_conn_req* req = nullptr;
  THREADS_RETURN_IF_RPMA_ERROR(rpma_conn_req_new(peer, TestAddress(), kPort, client.cfg, &req));
  const std::string hello_pdata = absl::StrCat(kClientPrefix, id);
  rpma_conn_private_data pdata{const_cast<char*>(hello_pdata.data()),
                               static_cast<uint8_t>(hello_pdata.size())};
  int ret = rpma_conn_req_connect(&req, &pdata, &client.conn);
  if (ret != 0) {
    if (req != nullptr) rpma_conn_req_delete(&req);
    return RpmaStatus(ret, "rpma_conn_req_connect(client)");
  }
  const std::string who = absl::StrCat("client ", id);
  RETURN_IF_ERROR(ExpectEvent(NextEvent(client.conn), RPMA_CONN_ESTABLISHED, who));
  rpma_conn_private_data accepted{};
  THREADS_RETURN_IF_RPMA_ERROR(rpma_conn_get_private_data(client.conn, &accepted));
  if (PrivateDataString(accepted) != absl::StrCat(kAcceptPrefix, id)) {
    return absl::InternalError(
        absl::StrCat(who, " was accepted as '", PrivateDataString(accepted), "'"));
  }

  const std::string hello = Hello(id);
  std::memcpy(client.buf.data(), hello.data(), hello.size());
  THREADS_RETURN_IF_RPMA_ERROR(
      rpma_send(client.conn, client.mr, 0, hello.size(), RPMA_F_COMPLETION_ALWAYS, nullptr));
  rpma_cq* cq = nullptr;
  THREADS_RETURN_IF_RPMA_ERROR(rpma_conn_get_cq(client.conn, &cq));
  absl::StatusOr<ibv_wc> wc = NextCompletion(cq);
  if (!wc.ok()) return wc.status();
  if (wc->status != IBV_WC_SUCCESS || wc->opcode != IBV_WC_SEND) {
    return absl::InternalError(absl::StrCat(who, ": send ", ibv_wc_status_str(wc->status)));
  }
  return absl::OkStatus();
}

TEST(ListenerTest, ListenerThreadAcceptsWhileClientsConnect_EachMatchedToItsClient) {
  ibv_context* dev = nullptr;
  ASSERT_EQ(rpma_utils_get_ibv_context(TestAddress(), RPMA_UTIL_IBV_CONTEXT_LOCAL, &dev), 0);
  rpma_peer* peer = nullptr;
  ASSERT_EQ(rpma_peer_new(dev, &peer), 0);
  Server server;
  ASSERT_EQ(rpma_conn_cfg_new(&server.cfg), 0);
  ASSERT_EQ(rpma_conn_cfg_set_rcq_size(server.cfg, 4), 0);
  ASSERT_EQ(rpma_mr_reg(peer, server.buf.data(), server.buf.size(), RPMA_MR_USAGE_RECV, &server.mr),
            0);
  ASSERT_EQ(rpma_ep_listen(peer, TestAddress(), kPort, &server.ep), 0);

  absl::Status listened;
  std::thread listener([&] { listened = Listen(server); });
  std::vector<Client> clients(kClients);
  std::vector<absl::Status> results(kClients);
  std::vector<std::thread> client_threads;
  for (int id = 0; id < kClients; ++id) {
    client_threads.emplace_back([&, id] { results[id] = RunClient(peer, id, clients[id]); });
  }
  for (std::thread& thread : client_threads) thread.join();  // every wait inside is bounded
  listener.join();

  EXPECT_TRUE(listened.ok()) << listened;
  for (int id = 0; id < kClients; ++id) EXPECT_TRUE(results[id].ok()) << results[id];

  // Teardown in this thread: the connections were handed over by join().
  for (int id = 0; id < kClients; ++id) {
    Client& client = clients[id];
    rpma_conn*& server_conn = server.conns[id];
    if (client.conn != nullptr && server_conn != nullptr) {
      EXPECT_EQ(rpma_conn_disconnect(client.conn), 0);
      EXPECT_TRUE(ExpectEvent(NextEvent(client.conn), RPMA_CONN_CLOSED, "client").ok());
      EXPECT_TRUE(ExpectEvent(NextEvent(server_conn), RPMA_CONN_CLOSED, "server").ok());
    }
    if (client.conn != nullptr) {
      EXPECT_EQ(rpma_conn_delete(&client.conn), 0);
    }
    if (server_conn != nullptr) {
      EXPECT_EQ(rpma_conn_delete(&server_conn), 0);
    }
    if (client.mr != nullptr) {
      EXPECT_EQ(rpma_mr_dereg(&client.mr), 0);
    }
    if (client.cfg != nullptr) {
      EXPECT_EQ(rpma_conn_cfg_delete(&client.cfg), 0);
    }
  }
  EXPECT_EQ(rpma_ep_shutdown(&server.ep), 0);
  EXPECT_EQ(rpma_mr_dereg(&server.mr), 0);
  EXPECT_EQ(rpma_conn_cfg_delete(&server.cfg), 0);
  EXPECT_EQ(rpma_peer_delete(&peer), 0);
}

}  // namespace
}  // namespace softrpma
