// shm_conn_test: fabric connections on shared-memory rings (host.h, THE SHARED-MEMORY RINGS;
// shm/ring.h) between real processes: messages of every size arrive whole and in order, a
// peer that offers no ring keeps the socket, a peer that dies or is stopped for seconds, and a
// hostile peer that writes garbage or impossible counters into its ring or passes descriptors
// it should not. Every child is bounded (alarm) and killed at the end of its test.

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <cstddef>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "simverbs/sim/fabric/host.h"
#include "simverbs/sim/fabric/hostile_peer.h"
#include "simverbs/sim/fabric/shm/ring.h"
#include "simverbs/sim/fabric/wire.h"

namespace softrpma::sim::host {
namespace {

using ::softrpma::sim::testing::Child;
using ::softrpma::sim::testing::Loopback;
using ::softrpma::sim::testing::RawConnect;
using ::softrpma::sim::testing::RawListen;
using ::softrpma::sim::testing::SendWithFd;
using ::softrpma::sim::testing::WaitClosed;
using ::softrpma::sim::testing::WriteAll;

constexpr int kLimitMs = 30 * 1000;  // a bound against hangs, never a timing assertion

const sockaddr* AsSockaddr(const sockaddr_in& addr) {
  return reinterpret_cast<const sockaddr*>(&addr);
}

template <typename Done>
bool WaitFor(Done done) {
  for (int waited_ms = 0; waited_ms < kLimitMs; waited_ms += 5) {
    if (done()) return true;
    usleep(5 * 1000);
  }
  return done();
}

// Answers every message with a kSend carrying the same body.
class Echo final : public Conn::Handler {
 public:
  explicit Echo(std::weak_ptr<Conn> conn) : conn_(std::move(conn)) {}
  void OnMessage(const wire::Header& header, const uint8_t* body) override {
    std::shared_ptr<Conn> conn = conn_.lock();
    if (conn == nullptr) return;
    wire::Header answer = wire::MakeHeader(wire::Type::kSend);
    answer.body_len = header.body_len;
    answer.seq = header.seq;
    iovec iov{const_cast<uint8_t*>(body), header.body_len};
    conn->Send(answer, &iov, 1);
  }
  void OnClosed() override {}

 private:
  std::weak_ptr<Conn> conn_;
};

// Keeps what comes back, in order.
class Collector final : public Conn::Handler {
 public:
  void OnMessage(const wire::Header& header, const uint8_t* body) override {
    std::lock_guard<std::mutex> lock(mu);
    seqs.push_back(header.seq);
    bodies.emplace_back(body, body + header.body_len);
  }
  void OnClosed() override { closed.store(true); }
  size_t Count() {
    std::lock_guard<std::mutex> lock(mu);
    return bodies.size();
  }
  std::mutex mu;
  std::vector<uint64_t> seqs;
  std::vector<std::vector<uint8_t>> bodies;
  std::atomic<bool> closed{false};
};

// A child process that echoes every message of every connection made to `port`; `shm` is its
// RPMA_SIM_SHM. Returns once it listens.
Child StartEcho(uint16_t port, const char* shm) {
  int ready[2];
  if (pipe(ready) != 0) return Child();
  const pid_t pid = fork();
  if (pid == 0) {
    alarm(60);
    close(ready[0]);
    setenv(kShmEnvVar, shm, 1);
    if (!ConfigureFabric().ok()) _exit(2);
    const sockaddr_in addr = Loopback(port);
    std::unique_ptr<Listener> listener;
    const int err = Listen(
        AsSockaddr(addr),
        [](const std::shared_ptr<Conn>& conn) {
          return std::static_pointer_cast<Conn::Handler>(std::make_shared<Echo>(conn));
        },
        &listener);
    if (err != 0) _exit(3);
    const char byte = 1;
    if (write(ready[1], &byte, 1) != 1) _exit(4);
    while (true) pause();
  }
  close(ready[1]);
  char byte = 0;
  const bool up = pid > 0 && read(ready[0], &byte, 1) == 1;
  close(ready[0]);
  Child child(pid);
  if (!up) child.Stop();
  return child;
}

std::vector<uint8_t> Pattern(size_t length, uint64_t seed) {
  std::vector<uint8_t> bytes(length);
  for (size_t i = 0; i < length; ++i) bytes[i] = static_cast<uint8_t>((i * 131 + seed * 7) >> 1);
  return bytes;
}

void SendPattern(Conn* conn, uint64_t seq, size_t length) {
  std::vector<uint8_t> body = Pattern(length, seq);
  wire::Header header = wire::MakeHeader(wire::Type::kSend);
  header.body_len = static_cast<uint32_t>(length);
  header.seq = seq;
  iovec iov{body.data(), body.size()};
  ASSERT_EQ(conn->Send(header, &iov, 1), 0);
}

// Every echo arrived, in order, byte for byte.
void ExpectEchoes(Collector* got, const std::vector<size_t>& lengths) {
  ASSERT_TRUE(WaitFor([&] { return got->Count() >= lengths.size(); }))
      << got->Count() << " of " << lengths.size() << " echoes";
  std::lock_guard<std::mutex> lock(got->mu);
  ASSERT_EQ(got->bodies.size(), lengths.size());
  for (size_t i = 0; i < lengths.size(); ++i) {
    ASSERT_EQ(got->seqs[i], i);
    ASSERT_EQ(got->bodies[i], Pattern(lengths[i], i)) << "message " << i;
  }
}

// A connection of this process to an echo child on `port` (the child's RPMA_SIM_SHM `shm`), and
// what comes back on it.
struct EchoPair {
  Child echo;
  std::shared_ptr<Collector> got = std::make_shared<Collector>();
  std::shared_ptr<Conn> conn;
};

// Connects `pair`; with `on_rings`, waits until the connection is on its rings both ways.
void ConnectToEcho(uint16_t port, const char* shm, bool on_rings, EchoPair* pair) {
  pair->echo = StartEcho(port, shm);
  ASSERT_GT(pair->echo.pid(), 0);
  const sockaddr_in addr = Loopback(port);
  ASSERT_EQ(Dial(AsSockaddr(addr), pair->got, &pair->conn), 0);
  if (on_rings) {
    ASSERT_TRUE(WaitFor([&] { return pair->conn->OnRings(); })) << "the rings never came on";
  }
}

TEST(ShmConnTest, TwoProcesses_EveryMessageSizeArrivesWholeThroughTheRings) {
  EchoPair pair;
  ASSERT_NO_FATAL_FAILURE(ConnectToEcho(7301, "1", /*on_rings=*/true, &pair));
  std::vector<size_t> lengths;
  for (size_t i = 0; i < 300; ++i) lengths.push_back((i * 977) % 9000);  // 0 to 9 KB
  lengths.push_back(size_t{1} << 20);  // bigger than a ring: goes through in pieces
  lengths.push_back((size_t{3} << 20) + 17);
  for (size_t i = 0; i < lengths.size(); ++i) SendPattern(pair.conn.get(), i, lengths[i]);
  ExpectEchoes(pair.got.get(), lengths);
  EXPECT_FALSE(pair.got->closed.load());
  pair.conn->Close();
}

TEST(ShmConnTest, APeerThatOffersNoRingKeepsTheSocketBothWays) {
  EchoPair pair;
  ASSERT_NO_FATAL_FAILURE(ConnectToEcho(7302, "0", /*on_rings=*/false, &pair));
  const std::vector<size_t> lengths = {10, 300000, 0, 5};
  for (size_t i = 0; i < lengths.size(); ++i) SendPattern(pair.conn.get(), i, lengths[i]);
  ExpectEchoes(pair.got.get(), lengths);
  EXPECT_FALSE(pair.conn->OnRings());
  pair.conn->Close();
}

TEST(ShmConnTest, APeerThatDiesEndsItsConnectionAtOnce) {
  EchoPair pair;
  ASSERT_NO_FATAL_FAILURE(ConnectToEcho(7303, "1", /*on_rings=*/true, &pair));
  pair.echo.Stop();  // SIGKILL
  EXPECT_TRUE(WaitFor([&] { return pair.got->closed.load(); }));
}

TEST(ShmConnTest, APeerStoppedForSecondsLosesNothing) {
  EchoPair pair;
  ASSERT_NO_FATAL_FAILURE(ConnectToEcho(7304, "1", /*on_rings=*/true, &pair));
  ASSERT_EQ(kill(pair.echo.pid(), SIGSTOP), 0);
  int status = 0;  // stopped for sure before anything is sent
  ASSERT_EQ(waitpid(pair.echo.pid(), &status, WUNTRACED), pair.echo.pid());
  ASSERT_TRUE(WIFSTOPPED(status));
  std::vector<size_t> lengths(64, size_t{64} << 10);  // 4 MiB: many rings full
  for (size_t i = 0; i < lengths.size(); ++i) SendPattern(pair.conn.get(), i, lengths[i]);
  EXPECT_GT(pair.conn->QueuedBytes(), 0u) << "a stopped peer's ring fills; the rest waits here";
  sleep(2);
  EXPECT_EQ(pair.got->Count(), 0u);
  ASSERT_EQ(kill(pair.echo.pid(), SIGCONT), 0);
  ExpectEchoes(pair.got.get(), lengths);
  EXPECT_FALSE(pair.got->closed.load());
  pair.conn->Close();
}

// A sleeper watched the connection while its news came (the fabric thread parked it) and then
// left without handling it, as a thread woken by its channel's own event does: the fabric
// thread arms the connection again at the backstop and serves what waits, with no poll of the
// program's.
TEST(ShmConnTest, NewsLeftByASleeperIsServedByTheFabricThread) {
  EchoPair pair;
  ASSERT_NO_FATAL_FAILURE(ConnectToEcho(7315, "1", /*on_rings=*/true, &pair));
  ASSERT_GE(pair.conn->Watch(), 0);
  SendPattern(pair.conn.get(), 0, 8);
  usleep(200 * 1000);  // the echo comes meanwhile: the fabric thread parks the connection
  pair.conn->Unwatch();
  ExpectEchoes(pair.got.get(), {8});
  pair.conn->Close();
}

// ---- A hostile dialer on a listener of this process -----------------------------------------

class Counting final : public Conn::Handler {
 public:
  void OnMessage(const wire::Header&, const uint8_t*) override { messages.fetch_add(1); }
  void OnClosed() override { closed.store(true); }
  std::atomic<int> messages{0};
  std::atomic<bool> closed{false};
};

struct Accepted;
AcceptFn Accepting(Accepted* accepted);

// A listener of this process at an address, and the handlers of what it accepted.
struct Accepted {
  void Listen(const sockaddr_in& addr) {
    ASSERT_EQ(host::Listen(AsSockaddr(addr), Accepting(this), &listener), 0);
  }
  std::unique_ptr<Listener> listener;
  std::mutex mu;
  std::vector<std::shared_ptr<Counting>> handlers;
  std::shared_ptr<Counting> Last() {
    std::lock_guard<std::mutex> lock(mu);
    return handlers.empty() ? nullptr : handlers.back();
  }
};

AcceptFn Accepting(Accepted* accepted) {
  return [accepted](const std::shared_ptr<Conn>&) {
    auto handler = std::make_shared<Counting>();
    std::lock_guard<std::mutex> lock(accepted->mu);
    accepted->handlers.push_back(handler);
    return std::static_pointer_cast<Conn::Handler>(handler);
  };
}

struct Offer {
  wire::Header header;
  wire::ShmRingBody body;
};

Offer MakeOffer(int capacity_log2, uint8_t switched) {
  Offer offer;
  offer.header = wire::MakeHeader(wire::Type::kShmRing);
  offer.header.body_len = sizeof(wire::ShmRingBody);
  std::memset(&offer.body, 0, sizeof(offer.body));
  offer.body.version = wire::kShmRingVersion;
  offer.body.capacity_log2 = static_cast<uint32_t>(capacity_log2);
  offer.body.switched = switched;
  return offer;
}

// A hostile dialer that does the ring handshake by the rules and then owns the ring the
// listener reads: `ring` writes into it, `memfd` maps it raw.
struct HostileOnRings {
  int sock = -1;
  int memfd = -1;
  std::unique_ptr<shm::Ring> ring;
  ~HostileOnRings() {
    if (sock >= 0) close(sock);
    if (memfd >= 0) close(memfd);
  }
};

void StartOnRings(const sockaddr_in& addr, HostileOnRings* peer) {
  constexpr int kLog2 = shm::Ring::kMinCapacityLog2;
  peer->ring = shm::Ring::Create(kLog2, &peer->memfd);
  ASSERT_NE(peer->ring, nullptr);
  peer->sock = RawConnect(ListenerName(AsSockaddr(addr)));
  ASSERT_GE(peer->sock, 0);
  const Offer offer = MakeOffer(kLog2, 0);
  ASSERT_TRUE(SendWithFd(peer->sock, &offer, sizeof(offer), peer->memfd));
  // The listener answers with its own ring (switched); this peer never reads it.
  Offer answer;
  ASSERT_EQ(recv(peer->sock, &answer, sizeof(answer), MSG_WAITALL),
            static_cast<ssize_t>(sizeof(answer)));
  ASSERT_EQ(answer.header.type, static_cast<uint16_t>(wire::Type::kShmRing));
  ASSERT_EQ(answer.body.switched, 1);
  const wire::Header switch_header = wire::MakeHeader(wire::Type::kShmSwitch);
  ASSERT_TRUE(WriteAll(peer->sock, &switch_header, sizeof(switch_header)));
}

void Ring(HostileOnRings* peer, const void* data, size_t length) {
  iovec iov{const_cast<void*>(data), length};
  ASSERT_EQ(peer->ring->Write(&iov, 1, 0), static_cast<ssize_t>(length));
  const uint8_t bell = 0;
  ASSERT_TRUE(WriteAll(peer->sock, &bell, 1));
}

// A well-behaved connection to the same listener still works: its message arrives.
void ExpectOthersServed(const sockaddr_in& addr, Accepted* accepted) {
  std::shared_ptr<Conn> good;
  ASSERT_EQ(Dial(AsSockaddr(addr), std::make_shared<Counting>(), &good), 0);
  ASSERT_TRUE(WaitFor([&] { return good->OnRings(); }));
  const std::shared_ptr<Counting> served = accepted->Last();
  ASSERT_NE(served, nullptr);
  good->Send(wire::MakeHeader(wire::Type::kAck), nullptr, 0);
  EXPECT_TRUE(WaitFor([&] { return served->messages.load() == 1; }));
  good->Close();
}

TEST(ShmHostileTest, AMessageThroughTheRingIsServedLikeOneThroughTheSocket) {
  const sockaddr_in addr = Loopback(7311);
  Accepted accepted;
  ASSERT_NO_FATAL_FAILURE(accepted.Listen(addr));
  HostileOnRings peer;
  ASSERT_NO_FATAL_FAILURE(StartOnRings(addr, &peer));
  const wire::Header ack = wire::MakeHeader(wire::Type::kAck);
  ASSERT_NO_FATAL_FAILURE(Ring(&peer, &ack, sizeof(ack)));
  ASSERT_TRUE(WaitFor([&] { return accepted.Last()->messages.load() == 1; }))
      << "the control case: the hostile cases below differ from it only in what they break";
}

TEST(ShmHostileTest, GarbageInTheRingEndsThatConnectionOnly) {
  const sockaddr_in addr = Loopback(7312);
  Accepted accepted;
  ASSERT_NO_FATAL_FAILURE(accepted.Listen(addr));
  HostileOnRings peer;
  ASSERT_NO_FATAL_FAILURE(StartOnRings(addr, &peer));
  const std::shared_ptr<Counting> victim = accepted.Last();
  std::vector<uint8_t> garbage(300);
  for (size_t i = 0; i < garbage.size(); ++i) garbage[i] = static_cast<uint8_t>(i * 37 + 11);
  ASSERT_NO_FATAL_FAILURE(Ring(&peer, garbage.data(), garbage.size()));
  EXPECT_TRUE(WaitClosed(peer.sock, kLimitMs));
  EXPECT_TRUE(WaitFor([&] { return victim->closed.load(); }));
  EXPECT_EQ(victim->messages.load(), 0);
  ExpectOthersServed(addr, &accepted);
}

TEST(ShmHostileTest, ACounterThePeerCannotHaveWrittenEndsTheConnectionAndSaysSo) {
  const sockaddr_in addr = Loopback(7313);
  Accepted accepted;
  ASSERT_NO_FATAL_FAILURE(accepted.Listen(addr));
  HostileOnRings peer;
  ASSERT_NO_FATAL_FAILURE(StartOnRings(addr, &peer));
  const std::shared_ptr<Counting> victim = accepted.Last();
  ::testing::internal::CaptureStderr();
  // The head counter (the first word of the mapping) far beyond the ring.
  void* map = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, peer.memfd, 0);
  ASSERT_NE(map, MAP_FAILED);
  static_cast<std::atomic<uint64_t>*>(map)->store(uint64_t{1} << 40);
  munmap(map, 4096);
  // The bell wakes a victim asleep on its ring. A victim that looked at its ring meanwhile (it
  // may, at any time: a reader arms its ring and then looks once more) has found the counter
  // and ended the connection already, and the bell's send fails (EPIPE): either way is right.
  const uint8_t bell = 0;
  WriteAll(peer.sock, &bell, 1);
  EXPECT_TRUE(WaitClosed(peer.sock, kLimitMs));
  EXPECT_TRUE(WaitFor([&] { return victim->closed.load(); }));
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("shared-memory ring"), std::string::npos) << err;
  ExpectOthersServed(addr, &accepted);
}

TEST(ShmHostileTest, AnOfferThatIsNotASealedRingEndsTheConnection) {
  const sockaddr_in addr = Loopback(7314);
  Accepted accepted;
  ASSERT_NO_FATAL_FAILURE(accepted.Listen(addr));
  // An unsealed memfd of the right size: its owner could truncate it under the mapping.
  const int memfd = memfd_create("hostile", MFD_CLOEXEC);
  ASSERT_GE(memfd, 0);
  ASSERT_EQ(ftruncate(memfd, 512 + 4096), 0);
  const int sock = RawConnect(ListenerName(AsSockaddr(addr)));
  ASSERT_GE(sock, 0);
  const Offer offer = MakeOffer(shm::Ring::kMinCapacityLog2, 0);
  ASSERT_TRUE(SendWithFd(sock, &offer, sizeof(offer), memfd));
  // A message after it, which an accepted offer would let through (and which keeps the
  // connection from ending by the handshake timeout instead).
  const wire::Header ack = wire::MakeHeader(wire::Type::kAck);
  WriteAll(sock, &ack, sizeof(ack));
  EXPECT_TRUE(WaitClosed(sock, kLimitMs));
  ASSERT_NE(accepted.Last(), nullptr);
  EXPECT_EQ(accepted.Last()->messages.load(), 0);
  close(sock);
  close(memfd);
  ExpectOthersServed(addr, &accepted);
}

TEST(ShmHostileTest, ADescriptorWithAnOrdinaryMessageEndsTheConnection) {
  const sockaddr_in addr = Loopback(7315);
  Accepted accepted;
  ASSERT_NO_FATAL_FAILURE(accepted.Listen(addr));
  const int sock = RawConnect(ListenerName(AsSockaddr(addr)));
  ASSERT_GE(sock, 0);
  const wire::Header ack = wire::MakeHeader(wire::Type::kAck);
  ASSERT_TRUE(SendWithFd(sock, &ack, sizeof(ack), STDERR_FILENO));
  EXPECT_TRUE(WaitClosed(sock, kLimitMs));
  ASSERT_NE(accepted.Last(), nullptr);
  EXPECT_EQ(accepted.Last()->messages.load(), 0);
  close(sock);
}

TEST(ShmHostileTest, ASwitchWithoutAnOfferEndsTheConnection) {
  const sockaddr_in addr = Loopback(7316);
  Accepted accepted;
  ASSERT_NO_FATAL_FAILURE(accepted.Listen(addr));
  const int sock = RawConnect(ListenerName(AsSockaddr(addr)));
  ASSERT_GE(sock, 0);
  const wire::Header switch_header = wire::MakeHeader(wire::Type::kShmSwitch);
  ASSERT_TRUE(WriteAll(sock, &switch_header, sizeof(switch_header)));
  const wire::Header ack = wire::MakeHeader(wire::Type::kAck);
  WriteAll(sock, &ack, sizeof(ack));
  EXPECT_TRUE(WaitClosed(sock, kLimitMs));
  ASSERT_NE(accepted.Last(), nullptr);
  EXPECT_EQ(accepted.Last()->messages.load(), 0);
  close(sock);
}

// ---- The switch behind queued bytes ----------------------------------------------------------

// Reads exactly `length` bytes of `sock`; the first descriptor passed with them, or -1.
int ReceiveWithFd(int sock, void* data, size_t length) {
  int fd = -1;
  size_t got = 0;
  while (got < length) {
    iovec iov{static_cast<uint8_t*>(data) + got, length - got};
    alignas(cmsghdr) char control[CMSG_SPACE(2 * sizeof(int))] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    const ssize_t n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_type == SCM_RIGHTS && fd < 0) std::memcpy(&fd, CMSG_DATA(c), sizeof(int));
    }
  }
  return got == length ? fd : -1;
}

bool ReceiveAll(int sock, void* data, size_t length) {
  return recv(sock, data, length, MSG_WAITALL) == static_cast<ssize_t>(length);
}

// Reads one message (a header and its body) out of `ring`, waiting (a bounded while) for it.
bool ReadMessage(shm::Ring* ring, wire::Header* header, std::vector<uint8_t>* body) {
  auto read_all = [&](void* into, size_t length) {
    size_t got = 0;
    for (int tries = 0; got < length && tries < kLimitMs * 10; ++tries) {
      const ssize_t n = ring->Read(static_cast<uint8_t*>(into) + got, length - got);
      if (n < 0) return false;
      if (n == 0) usleep(100);
      got += static_cast<size_t>(n);
    }
    return got == length;
  };
  if (!read_all(header, sizeof(*header))) return false;
  body->resize(header->body_len);
  return read_all(body->data(), body->size());
}

// A switch that finds the dialer's socket still full of what it sent before (a message bigger
// than the socket takes) waits behind those bytes, and every message sent after it goes to the
// ring: never onto the socket after the switch, where the listener, which reads the ring from
// the switch on, would take it for bells and lose it.
TEST(ShmProtocolTest, MessagesAfterASwitchQueuedBehindOthersGoToTheRing) {
  const sockaddr_in addr = Loopback(7320);
  const int raw = RawListen(ListenerName(AsSockaddr(addr)));
  ASSERT_GE(raw, 0);
  auto got = std::make_shared<Collector>();
  std::shared_ptr<Conn> conn;
  ASSERT_EQ(Dial(AsSockaddr(addr), got, &conn), 0);
  const int peer = accept(raw, nullptr, nullptr);
  ASSERT_GE(peer, 0);
  Offer offer;
  const int dialer_ring_fd = ReceiveWithFd(peer, &offer, sizeof(offer));
  ASSERT_GE(dialer_ring_fd, 0);
  ASSERT_EQ(offer.header.type, static_cast<uint16_t>(wire::Type::kShmRing));
  ASSERT_EQ(offer.body.switched, 0);

  const size_t big = size_t{4} << 20;
  SendPattern(conn.get(), 0, big);
  ASSERT_GT(conn->QueuedBytes(), 0u) << "the socket took the whole message: nothing to test";
  int answer_fd = -1;
  std::unique_ptr<shm::Ring> mine = shm::Ring::Create(shm::Ring::kMinCapacityLog2, &answer_fd);
  ASSERT_NE(mine, nullptr);
  const Offer answer = MakeOffer(shm::Ring::kMinCapacityLog2, 1);
  ASSERT_TRUE(SendWithFd(peer, &answer, sizeof(answer), answer_fd));
  close(answer_fd);
  ASSERT_TRUE(WaitFor([&] { return conn->OnRings(); })) << "the dialer never switched";
  for (uint64_t i = 1; i <= 5; ++i) SendPattern(conn.get(), i, 100);

  // The socket: the big message, the switch, then nothing but bells.
  wire::Header header;
  ASSERT_TRUE(ReceiveAll(peer, &header, sizeof(header)));
  ASSERT_EQ(header.type, static_cast<uint16_t>(wire::Type::kSend));
  std::vector<uint8_t> body(header.body_len);
  ASSERT_EQ(body.size(), big);
  ASSERT_TRUE(ReceiveAll(peer, body.data(), body.size()));
  EXPECT_EQ(body, Pattern(big, 0));
  ASSERT_TRUE(ReceiveAll(peer, &header, sizeof(header)));
  ASSERT_EQ(header.type, static_cast<uint16_t>(wire::Type::kShmSwitch));
  usleep(100 * 1000);  // (what may still come after the switch)
  uint8_t after[4096];
  const ssize_t n = recv(peer, after, sizeof(after), MSG_DONTWAIT);
  for (ssize_t i = 0; i < n; ++i) {
    ASSERT_EQ(after[i], 0) << "a message on the socket after the switch";
  }

  // The ring: the later messages, in order.
  std::unique_ptr<shm::Ring> theirs =
      shm::Ring::Attach(dialer_ring_fd, static_cast<int>(offer.body.capacity_log2));
  ASSERT_NE(theirs, nullptr);
  for (uint64_t i = 1; i <= 5; ++i) {
    ASSERT_TRUE(ReadMessage(theirs.get(), &header, &body)) << "message " << i;
    EXPECT_EQ(header.seq, i);
    EXPECT_EQ(body, Pattern(100, i));
  }
  conn->Close();
  for (const int fd : {peer, raw, dialer_ring_fd}) close(fd);
}

}  // namespace
}  // namespace softrpma::sim::host
