#include "simverbs/sim/fabric/host.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <deque>
#include <new>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "simverbs/sim/fabric/cma.h"
#include "simverbs/sim/fabric/detached_thread.h"
#include "simverbs/sim/fabric/fork_locks.h"

namespace softrpma::sim::host {

// The fabric's view of a connection, for the code in this file only.
struct Conn::Internal {
  static void SetHandler(Conn* conn, std::shared_ptr<Handler> handler);
  // `busy`: a busy poller's drive (Progress), which reads only the ring of a connection on
  // rings: it leaves the socket (bells, the end) to the others and never arms the ring.
  static void Drive(const std::shared_ptr<Conn>& conn, bool busy = false);
  static void ReadLocked(const std::shared_ptr<Conn>& conn, bool busy);
  static bool PollerActive(const Conn& conn);
  // When the connection stops counting as busy-polled (its last poll + kBusyPollWindowNs).
  static uint64_t PollerUntilNs(const Conn& conn);
  // The fabric thread, on news for `conn`: true when a sleeper watches it and has it now (the
  // connection stays disarmed until the last Unwatch). Never with bytes queued to send: those
  // need the fabric thread's writable watch, which a sleeper does not keep.
  static bool Park(Conn* conn);
  static void Rearm(Conn* conn);
  static void Flush(Conn* conn);
  static void NotifyDrainedLocked(Conn* conn);
  static void End(const std::shared_ptr<Conn>& conn);
  static bool ExpireHandshake(const std::shared_ptr<Conn>& conn);
  static bool DrainedPending(const Conn& conn) { return conn.drained_pending_.load(); }
  static int Fd(const Conn& conn) { return conn.fd_; }
  static bool IsCarrierMessage(const wire::Header& header) {
    const auto type = static_cast<wire::Type>(header.type);
    return type == wire::Type::kShmRing || type == wire::Type::kShmSwitch;
  }
  // Nothing of it in flight: no byte unread in its socket or queued to send.
  static bool Idle(Conn* conn);

  // THE SHARED-MEMORY RINGS (host.h).
  // Makes this side's ring and sends the offer (kShmRing with the memfd); `switched`: this
  // side's later messages go to the ring (the listener's answer). False when none was made
  // or sent (the connection stays on its socket).
  static bool OfferLocked(Conn* conn, bool switched) ABSL_EXCLUSIVE_LOCKS_REQUIRED(conn->mu_);
  static void OfferFirst(Conn* conn) ABSL_LOCKS_EXCLUDED(conn->mu_) {
    softrpma::MutexLock lock(&conn->mu_);
    OfferLocked(conn, /*switched=*/false);
  }
  // Sends (or queues) the switch on the socket; this side's messages go to its ring from here.
  static void SwitchOutLocked(Conn* conn) ABSL_EXCLUSIVE_LOCKS_REQUIRED(conn->mu_);
  // The socket's queued bytes (up to and with the switch) become its tail; out_ is the ring's.
  static void SwitchToRingLocked(Conn* conn) ABSL_EXCLUSIVE_LOCKS_REQUIRED(conn->mu_);
  // Writes socket_tail_ into the socket; false while some of it is left (EAGAIN or broken).
  static bool FlushSocketTailLocked(Conn* conn) ABSL_EXCLUSIVE_LOCKS_REQUIRED(conn->mu_);
  // Bytes queued to send: for the current medium, and the socket's tail.
  static bool HasQueuedLocked(const Conn* conn) ABSL_EXCLUSIVE_LOCKS_REQUIRED(conn->mu_) {
    return conn->out_offset_ < conn->out_.size() ||
           conn->socket_tail_offset_ < conn->socket_tail_.size();
  }
  // Sends `iov` (a message) on the current medium, queueing what it does not take.
  static void SendLocked(Conn* conn, const iovec* iov, int count)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(conn->mu_);
  static void QueueLocked(Conn* conn, const iovec* iov, int count, size_t skip)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(conn->mu_);
  // The peer wrote a counter of our ring it cannot have written: the connection ends.
  static void BreakRingLocked(Conn* conn) ABSL_EXCLUSIVE_LOCKS_REQUIRED(conn->mu_);
  // Writes out_ into the ring while it takes bytes; rings the peer when it sleeps.
  static void FlushRingLocked(Conn* conn) ABSL_EXCLUSIVE_LOCKS_REQUIRED(conn->mu_);
  // One byte into the socket: the peer has news in a ring (bytes, or room). Only on rings.
  static void BellLocked(Conn* conn) ABSL_EXCLUSIVE_LOCKS_REQUIRED(conn->mu_);
  // The last watcher of a parked connection left: the fabric thread arms it again at the
  // backstop (RearmOwed), unless a watcher has it then (host.h, Watch).
  static void OweRearm(Conn* conn);
  static void RearmOwed();
  // recv(2) that keeps a descriptor the peer passed (in_fd_; a second one ends the
  // connection: returns -1 with errno EPROTO).
  static ssize_t ReceiveLocked(Conn* conn, void* into, size_t want);
  // Reads the bells in the socket. False when the socket ended (the peer closed or died).
  static bool DrainBellsLocked(Conn* conn);
  // A kShmRing or kShmSwitch read whole (in_header_, in_body_). False: it ends the connection.
  static bool TakeCarrierMessageLocked(Conn* conn);
  // THE REQUESTER PUSH: the grant word back to 0, no fence (callable under any lock).
  static void DropGrant(Conn* conn) {
    if (shm::Ring* out = conn->out_ring_live_.load(std::memory_order_acquire); out != nullptr) {
      out->word(kGrantWord).store(0, std::memory_order_seq_cst);
    }
  }
};

// Threads inside Conn::Internal::Drive (reading, or in a handler), and how many times one
// entered it: Quiesce waits for them, and looks again when one came and went meanwhile.
std::atomic<int> g_readers{0};
std::atomic<uint64_t> g_drives{0};

struct Listener::State {
  std::string name;  // the abstract name, for messages
  int fd = -1;
  uint64_t token = 0;
  uint64_t generation = 0;
  softrpma::Mutex mu;
  AcceptFn on_accept ABSL_GUARDED_BY(mu);
  // The fabric thread's alone: accept(2) failed for want of resources and the backlog has not
  // been emptied since (stderr said so once).
  bool starved = false;
};

namespace {

// A listener's abstract socket name is "softrpma/<fabric>/<[IPv6]:port>" in sun_path's 107
// bytes: 40 leaves room for the longest address.
constexpr size_t kMaxFabricName = 40;
// A message body is read into memory this much at a time (Conn::Internal::ReadLocked).
constexpr size_t kBodyChunkBytes = size_t{1} << 20;

std::atomic<bool> g_cma_enabled{true};
std::atomic<bool> g_shm_enabled{true};
std::atomic<bool> g_push_enabled{true};

// A descriptor that is always readable: what Watch returns when the news is already there.
int ReadyFd() {
  static const int fd = eventfd(1, EFD_CLOEXEC);
  return fd;
}

void ReportCorruptRing(pid_t peer_pid) {
  static std::atomic<bool> reported{false};
  if (reported.exchange(true)) return;
  std::fprintf(stderr,
               "softrpma: fabric: the shared-memory ring of a connection with process %d holds a "
               "counter that process cannot have written; its connection is ended (later ones "
               "are not reported)\n",
               static_cast<int>(peer_pid));
}

softrpma::Mutex g_name_mu;
std::string* g_name ABSL_GUARDED_BY(g_name_mu) = nullptr;

std::string DefaultFabricName() {
  std::string name = absl::StrCat("uid", geteuid());
  const char* test_tmpdir = std::getenv("TEST_TMPDIR");
  if (test_tmpdir != nullptr && *test_tmpdir != '\0') {
    uint64_t hash = 0xcbf29ce484222325ULL;  // FNV-1a
    for (const char* p = test_tmpdir; *p != '\0'; ++p) {
      hash = (hash ^ static_cast<uint8_t>(*p)) * 0x100000001b3ULL;
    }
    absl::StrAppendFormat(&name, "-test-%016x", hash);
  }
  return name;
}

bool ValidFabricName(const char* name) {
  const size_t length = std::strlen(name);
  if (length == 0 || length > kMaxFabricName) return false;
  for (const char* p = name; *p != '\0'; ++p) {
    const char c = *p;
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

// "192.0.2.1:7204" or "[2001:db8::1]:7204"; a v4-mapped v6 address in its v4 form.
std::string AddressName(const sockaddr* addr) {
  char text[INET6_ADDRSTRLEN] = "";
  uint16_t port = 0;
  if (addr->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(addr);
    inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text));
    port = ntohs(in->sin_port);
    return absl::StrCat(text, ":", port);
  }
  const auto* in6 = reinterpret_cast<const sockaddr_in6*>(addr);
  port = ntohs(in6->sin6_port);
  if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
    in_addr v4;
    std::memcpy(&v4.s_addr, &in6->sin6_addr.s6_addr[12], 4);
    inet_ntop(AF_INET, &v4, text, sizeof(text));
    return absl::StrCat(text, ":", port);
  }
  inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof(text));
  return absl::StrCat("[", text, "]:", port);
}

bool IsV4(const sockaddr* addr) {
  if (addr->sa_family == AF_INET) return true;
  return IN6_IS_ADDR_V4MAPPED(&reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr);
}

// The abstract socket address of listener name `name`.
socklen_t AbstractAddress(const std::string& name, sockaddr_un* out) {
  std::memset(out, 0, sizeof(*out));
  out->sun_family = AF_UNIX;
  const size_t length = std::min(name.size(), sizeof(out->sun_path) - 1);
  std::memcpy(out->sun_path + 1, name.data(), length);  // sun_path[0] = '\0': abstract
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + length);
}

// connect(2)s `fd` to listener name `name`, again after a signal interrupted it. Returns 0 or
// connect's errno.
int ConnectAbstract(int fd, const std::string& name) {
  sockaddr_un address;
  const socklen_t address_len = AbstractAddress(name, &address);
  int rc;
  do {
    rc = connect(fd, reinterpret_cast<sockaddr*>(&address), address_len);
  } while (rc != 0 && errno == EINTR);
  return rc == 0 ? 0 : errno;
}

// Bumped in every fork child: objects of an older generation belong to the parent, and their
// descriptors (closed at fork) must not be closed again.
std::atomic<uint64_t> g_generation{1};
// Set on the fabric thread (RunFabric): OnFabricThread.
thread_local bool t_on_fabric_thread = false;

struct Watch {
  std::shared_ptr<Conn> conn;
  std::shared_ptr<Listener::State> listener;
};

struct Fabric {
  int epoll_fd = -1;
  int timer_fd = -1;  // CallSoon's, watched as kTimerToken
  // Posted by the thread once it runs: until then the thread's start-up (its stack, its TLS,
  // a sanitizer's bookkeeping) may hold allocator locks, and a fork would copy them held.
  sem_t started;
  uint64_t next_token = 1;
  absl::flat_hash_map<uint64_t, Watch> watches;
  // Parked connections whose last watcher left (Conn::Internal::OweRearm).
  std::vector<std::weak_ptr<Conn>> rearm_owed;
};

constexpr uint64_t kTimerToken = 0;  // below every watch's token
// CallSoon's state: its function, and whether the timer is armed (cleared by the fabric thread
// before it calls the function, so a request seen as already armed is served by that call).
std::atomic<void (*)()> g_soon_fn{nullptr};
std::atomic<bool> g_soon_armed{false};

softrpma::Mutex g_mu;
Fabric* g_fabric ABSL_GUARDED_BY(g_mu) = nullptr;
// The sockets of this process's PortReservations, which a fork child closes.
absl::flat_hash_set<int>* g_reservations ABSL_GUARDED_BY(g_mu) = nullptr;

// Held by the fabric thread from each wake-up until it sleeps in epoll_wait again, and taken
// (before g_mu) by a fork: the child is never a copy of the thread half-way through its work.
// Otherwise a lock that thread held at the fork (one of ours, or one of an allocator without
// fork handlers, such as GCC 12's AddressSanitizer) stays held in the child forever, and the
// child hangs on its first use of it.
softrpma::Mutex g_work_mu ABSL_ACQUIRED_BEFORE(g_mu);

// fork(): g_work_mu and g_mu are taken at their places in the lock order (host.h, LOCK ORDER;
// fork_locks.h runs every module's fork handlers in that order): the work lock first, the
// copy pool's locks (cma.cc) between the two.
void LockWorkForFork() ABSL_NO_THREAD_SAFETY_ANALYSIS { g_work_mu.Lock(); }
void UnlockWorkAfterFork() ABSL_NO_THREAD_SAFETY_ANALYSIS { g_work_mu.Unlock(); }
void LockStateForFork() ABSL_NO_THREAD_SAFETY_ANALYSIS { g_mu.Lock(); }
void UnlockStateInParent() ABSL_NO_THREAD_SAFETY_ANALYSIS { g_mu.Unlock(); }
// The child: the parent's sockets are not ours. Close them (the parent keeps its own copies),
// forget the parent's fabric (its thread does not exist here) and start afresh on first use.
// (g_mu is a plain mutex, which the forking thread's copy may unlock.)
void UnlockStateInChild() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  g_generation.fetch_add(1, std::memory_order_acq_rel);
  Fabric* fabric = g_fabric;
  g_fabric = nullptr;  // leaked: objects of the parent may still point at it
  if (g_reservations != nullptr) {
    // The parent's port reservations are its own: the child's copies go (PortReservation's
    // generation keeps the parent's objects here from closing the numbers again).
    for (int fd : *g_reservations) close(fd);
    g_reservations->clear();
  }
  g_mu.Unlock();
  g_soon_armed.store(false);
  if (fabric == nullptr) return;
  close(fabric->epoll_fd);
  close(fabric->timer_fd);
  for (const auto& [token, watch] : fabric->watches) {
    close(watch.conn != nullptr ? Conn::Internal::Fd(*watch.conn) : watch.listener->fd);
  }
}
const fork_locks::Handlers kWorkForkHandlers = {&LockWorkForFork, &UnlockWorkAfterFork,
                                                &UnlockWorkAfterFork};
const fork_locks::Handlers kStateForkHandlers = {&LockStateForFork, &UnlockStateInParent,
                                                 &UnlockStateInChild};

void* RunFabric(void* arg);
void ReadHandshakeTimeout();

// The process's fabric, started on first use. Errors: the errno of epoll_create1 or
// pthread_create.
int GetFabric(Fabric** out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(g_mu) {
  if (g_fabric != nullptr) {
    *out = g_fabric;
    return 0;
  }
  fork_locks::Enrol(fork_locks::Rank::kFabricWork, &kWorkForkHandlers);
  fork_locks::Enrol(fork_locks::Rank::kFabricState, &kStateForkHandlers);
  ReadHandshakeTimeout();
  auto* fabric = new (std::nothrow) Fabric();
  if (fabric == nullptr) return ENOMEM;
  fabric->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  if (ReadyFd() < 0) {  // made once, for every fabric of the process (a fork child's too)
    const int err = errno;
    if (fabric->epoll_fd >= 0) close(fabric->epoll_fd);
    delete fabric;
    return err;
  }
  fabric->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  epoll_event timer_event{};
  timer_event.events = EPOLLIN;
  timer_event.data.u64 = kTimerToken;
  if (fabric->epoll_fd < 0 || fabric->timer_fd < 0 ||
      epoll_ctl(fabric->epoll_fd, EPOLL_CTL_ADD, fabric->timer_fd, &timer_event) != 0) {
    const int err = errno;
    if (fabric->epoll_fd >= 0) close(fabric->epoll_fd);
    if (fabric->timer_fd >= 0) close(fabric->timer_fd);
    delete fabric;
    return err;
  }
  // The thread takes no signals: the application's handlers run on the application's threads.
  sem_init(&fabric->started, 0, 0);
  const int err = StartDetachedThread(&RunFabric, fabric);
  if (err != 0) {
    sem_destroy(&fabric->started);
    close(fabric->epoll_fd);
    close(fabric->timer_fd);
    delete fabric;
    return err;
  }
  while (sem_wait(&fabric->started) != 0 && errno == EINTR) {
  }
  g_fabric = fabric;
  *out = fabric;
  return 0;
}

// Connections are watched one event at a time (EPOLLONESHOT, re-armed by Rearm once handled
// or left to a poller, so a busy-polling program is not interrupted by the fabric thread for
// every message) and edge-triggered (whoever reads, reads until EAGAIN); listeners
// level-triggered.
uint32_t ConnEvents(bool writable) {
  return EPOLLIN | EPOLLRDHUP | EPOLLET | EPOLLONESHOT |
         (writable ? static_cast<uint32_t>(EPOLLOUT) : 0u);
}

// Adds a watch for `fd` (readable) and returns its token. REQUIRES: g_mu held.
int AddWatchLocked(Fabric* fabric, int fd, uint64_t token, Watch watch)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(g_mu) {
  const bool is_conn = watch.conn != nullptr;
  fabric->watches[token] = std::move(watch);
  epoll_event event;
  std::memset(&event, 0, sizeof(event));
  event.events = is_conn ? ConnEvents(false) : static_cast<uint32_t>(EPOLLIN);
  event.data.u64 = token;
  if (epoll_ctl(fabric->epoll_fd, EPOLL_CTL_ADD, fd, &event) != 0) {
    const int err = errno;
    fabric->watches.erase(token);
    return err;
  }
  return 0;
}

void RemoveWatch(int fd, uint64_t token, uint64_t generation) {
  softrpma::MutexLock lock(&g_mu);
  if (g_fabric == nullptr || generation != g_generation.load(std::memory_order_acquire)) return;
  epoll_ctl(g_fabric->epoll_fd, EPOLL_CTL_DEL, fd, nullptr);
  g_fabric->watches.erase(token);
}

void SetWritableInterest(int fd, uint64_t token, bool writable) {
  softrpma::MutexLock lock(&g_mu);
  if (g_fabric == nullptr) return;
  epoll_event event;
  std::memset(&event, 0, sizeof(event));
  event.events = ConnEvents(writable);
  event.data.u64 = token;
  epoll_ctl(g_fabric->epoll_fd, EPOLL_CTL_MOD, fd, &event);
}

// The fabric thread's own bookkeeping of what a peer may not hold forever.
struct Deadlines {
  // Accepted connections waiting for their first whole message, oldest first (one timeout for
  // all, so the order of acceptance is the order of expiry).
  struct Handshake {
    uint64_t deadline_ns;
    std::weak_ptr<Conn> conn;
  };
  std::deque<Handshake> handshakes;
  // Listeners left unwatched after accept(2) ran out of resources, until resume_ns.
  struct Paused {
    uint64_t resume_ns;
    std::shared_ptr<Listener::State> listener;
  };
  std::vector<Paused> paused;
};

std::atomic<uint64_t> g_handshake_timeout_ns{kHandshakeTimeoutMs * 1000 * 1000};
std::atomic<uint64_t> g_call_soon_ns{kCallSoonNs};

// The tests' setting `name` (milliseconds, 1 to a day) into *ns; otherwise the default stays.
void ReadTestMs(const char* name, std::atomic<uint64_t>* ns) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return;
  char* end = nullptr;
  const unsigned long long ms = std::strtoull(value, &end, 10);
  if (*end != '\0' || ms == 0 || ms > 24ULL * 3600 * 1000) return;
  ns->store(ms * 1000 * 1000);
}

void ReadHandshakeTimeout() {
  ReadTestMs(kHandshakeTimeoutEnvVar, &g_handshake_timeout_ns);
  ReadTestMs(kBackstopEnvVar, &g_call_soon_ns);
}

// accept(2) failed with `err`: for want of resources (EMFILE & co.) the listener stays
// readable, and watching it would wake this thread again at once, forever. It is left unwatched
// for kAcceptBackoffMs; its connections wait in its backlog.
void PauseListener(const std::shared_ptr<Listener::State>& listener, int err,
                   Deadlines* deadlines) {
  {
    softrpma::MutexLock lock(&g_mu);
    if (g_fabric == nullptr || !g_fabric->watches.contains(listener->token)) return;
    epoll_ctl(g_fabric->epoll_fd, EPOLL_CTL_DEL, listener->fd, nullptr);
  }
  deadlines->paused.push_back(
      Deadlines::Paused{NowNs() + kAcceptBackoffMs * 1000 * 1000, listener});
  if (listener->starved) return;  // said once per episode
  listener->starved = true;
  rlimit limit;
  std::string fd_limit = "?";
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0) fd_limit = absl::StrCat(limit.rlim_cur);
  std::fprintf(stderr, "softrpma: fabric: accept on %s: %s (fd limit %s); connections wait\n",
               listener->name.c_str(), std::strerror(err), fd_limit.c_str());
}

// Watches the paused listeners whose backoff is over again (level-triggered: one with
// connections waiting wakes the thread at once).
void ResumeListeners(uint64_t now_ns, Deadlines* deadlines) {
  auto& paused = deadlines->paused;
  for (auto it = paused.begin(); it != paused.end();) {
    if (it->resume_ns > now_ns) {
      ++it;
      continue;
    }
    {
      softrpma::MutexLock lock(&g_mu);
      // A listener destroyed meanwhile has no watch left (and its descriptor may be reused).
      if (g_fabric != nullptr && g_fabric->watches.contains(it->listener->token)) {
        epoll_event event;
        std::memset(&event, 0, sizeof(event));
        event.events = EPOLLIN;
        event.data.u64 = it->listener->token;
        epoll_ctl(g_fabric->epoll_fd, EPOLL_CTL_ADD, it->listener->fd, &event);
      }
    }
    it = paused.erase(it);
  }
}

// Closes the accepted connections whose first message has not come in time.
void ExpireHandshakes(uint64_t now_ns, Deadlines* deadlines) {
  auto& handshakes = deadlines->handshakes;
  while (!handshakes.empty() && handshakes.front().deadline_ns <= now_ns) {
    std::shared_ptr<Conn> conn = handshakes.front().conn.lock();
    handshakes.pop_front();
    if (conn != nullptr) Conn::Internal::ExpireHandshake(conn);
  }
}

// The fabric thread's timeout, in ns (-1: none): the next deadline, the first deferred
// connection's included (`deferred_until_ns`, UINT64_MAX for none).
int64_t WaitTimeoutNs(uint64_t deferred_until_ns, const Deadlines& deadlines) {
  uint64_t next_ns = deferred_until_ns;
  if (!deadlines.handshakes.empty()) {
    next_ns = std::min(next_ns, deadlines.handshakes.front().deadline_ns);
  }
  for (const Deadlines::Paused& paused : deadlines.paused) {
    next_ns = std::min(next_ns, paused.resume_ns);
  }
  if (next_ns == UINT64_MAX) return -1;
  const uint64_t now_ns = NowNs();
  return next_ns <= now_ns
             ? 0
             : static_cast<int64_t>(std::min<uint64_t>(next_ns - now_ns, uint64_t{60} * 1000000000));
}

// epoll_wait with a timeout in ns (epoll_pwait2, Linux 5.11; rounded up to ms before).
int EpollWaitNs(int epoll_fd, epoll_event* events, int max, int64_t timeout_ns) {
  static std::atomic<bool> no_pwait2{false};
  if (timeout_ns >= 0 && !no_pwait2.load(std::memory_order_relaxed)) {
    const timespec timeout{static_cast<time_t>(timeout_ns / 1000000000),
                           static_cast<long>(timeout_ns % 1000000000)};
    const int n = epoll_pwait2(epoll_fd, events, max, &timeout, nullptr);
    if (n >= 0 || errno != ENOSYS) return n;
    no_pwait2.store(true, std::memory_order_relaxed);
  }
  const int timeout_ms = timeout_ns < 0 ? -1 : static_cast<int>((timeout_ns + 999999) / 1000000);
  return epoll_wait(epoll_fd, events, max, timeout_ms);
}

void AcceptAll(const std::shared_ptr<Listener::State>& listener, Deadlines* deadlines) {
  while (true) {
    const int fd = accept4(listener->fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      const int err = errno;
      if (err == EINTR || err == ECONNABORTED) continue;
      if (err == EAGAIN || err == EWOULDBLOCK) {
        listener->starved = false;  // nobody waits any more: the episode is over
        return;
      }
      // EMFILE, ENFILE, ENOBUFS, ENOMEM, or anything else that would fail again at once.
      return PauseListener(listener, err, deadlines);
    }
    ucred cred;
    socklen_t cred_len = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cred_len) != 0 || cred.uid != geteuid() ||
        cred.pid <= 0) {
      close(fd);  // another user's process: fabrics of different users never meet
      continue;
    }
    std::shared_ptr<Conn> conn;
    uint64_t token = 0;
    {
      softrpma::MutexLock lock(&g_mu);
      if (g_fabric == nullptr) {
        close(fd);
        return;
      }
      token = g_fabric->next_token++;
    }
    conn = std::make_shared<Conn>(fd, token, cred.pid, cred.uid);
    std::shared_ptr<Conn::Handler> handler;
    {
      softrpma::MutexLock lock(&listener->mu);
      if (listener->on_accept) handler = listener->on_accept(conn);
    }
    if (handler == nullptr) continue;  // refused: the last reference closes the socket
    Conn::Internal::SetHandler(conn.get(), std::move(handler));
    bool watched;
    {
      softrpma::MutexLock lock(&g_mu);
      watched = g_fabric != nullptr &&
                AddWatchLocked(g_fabric, fd, token, Watch{conn, nullptr}) == 0;
    }
    if (!watched) {
      // Not under g_mu: a connection's mu_ comes first (Send takes g_mu under it).
      Conn::Internal::SetHandler(conn.get(), nullptr);
      continue;
    }
    deadlines->handshakes.push_back(Deadlines::Handshake{
        NowNs() + g_handshake_timeout_ns.load(std::memory_order_relaxed), conn});
  }
}

void* RunFabric(void* arg) {
  t_on_fabric_thread = true;
  Fabric* fabric = static_cast<Fabric*>(arg);
  const int epoll_fd = fabric->epoll_fd;
  epoll_event events[64];
  // Connections with news that a busy poller is about to read (Conn::kBusyPollWindowNs), and
  // when to look at each again (NextDeferredLookNs).
  struct Deferred {
    std::shared_ptr<Conn> conn;
    uint64_t look_ns;
    uint64_t since_ns;  // when it was deferred
  };
  absl::flat_hash_map<uint64_t, Deferred> deferred;
  // Built before `started` is posted: from that post on the process may fork, and a fork
  // child inherits the allocator's locks as this thread held them (std::deque allocates when
  // constructed; under ASan a child forked during that allocation hung in its first new).
  // Later allocations here happen under g_work_mu, which the fork handlers hold.
  Deadlines deadlines;
  // The default timer slack (50 us) would stretch the look at a deferred connection, a few
  // us after its poller stopped, by more than the window itself.
  prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
  sem_post(&fabric->started);
  // When the first deferred connection's poller counts as gone (UINT64_MAX: none deferred).
  uint64_t deferred_until_ns = UINT64_MAX;
  while (true) {
    const int n =
        EpollWaitNs(epoll_fd, events, 64, WaitTimeoutNs(deferred_until_ns, deadlines));
    if (n < 0 && errno != EINTR) return nullptr;
    softrpma::MutexLock work(&g_work_mu);
    const uint64_t now_ns = NowNs();
    ResumeListeners(now_ns, &deadlines);
    ExpireHandshakes(now_ns, &deadlines);
    for (auto it = deferred.begin(); it != deferred.end();) {
      Deferred& entry = it->second;
      if (entry.look_ns > now_ns) {
        ++it;
        continue;
      }
      if (Conn::Internal::PollerActive(*entry.conn)) {
        entry.look_ns = NextDeferredLookNs(now_ns, Conn::Internal::PollerUntilNs(*entry.conn),
                                           now_ns - entry.since_ns);
        ++it;
        continue;
      }
      Conn::Internal::Drive(entry.conn);
      Conn::Internal::Rearm(entry.conn.get());
      deferred.erase(it++);
    }
    for (int i = 0; i < n; ++i) {
      // A copy: epoll_event is packed on x86-64, so its u64 is misaligned and may not be
      // bound to the const uint64_t& that find() takes.
      const uint64_t token = events[i].data.u64;
      if (token == kTimerToken) {
        uint64_t expirations = 0;
        if (read(fabric->timer_fd, &expirations, sizeof(expirations)) < 0) continue;
        g_soon_armed.store(false, std::memory_order_seq_cst);
        Conn::Internal::RearmOwed();
        if (void (*fn)() = g_soon_fn.load(std::memory_order_acquire); fn != nullptr) fn();
        continue;
      }
      Watch watch;
      {
        softrpma::MutexLock lock(&g_mu);
        if (g_fabric != fabric) return nullptr;
        auto it = fabric->watches.find(token);
        if (it == fabric->watches.end()) continue;
        watch = it->second;
      }
      if (watch.listener != nullptr) {
        // A reader for Quiesce: between accept4 and its watch, a connection is in neither.
        g_readers.fetch_add(1, std::memory_order_seq_cst);
        g_drives.fetch_add(1, std::memory_order_seq_cst);
        AcceptAll(watch.listener, &deadlines);
        g_readers.fetch_sub(1, std::memory_order_seq_cst);
        continue;
      }
      bool drive = (events[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0;
      if ((events[i].events & EPOLLOUT) != 0) {
        Conn::Internal::Flush(watch.conn.get());
        // Its OnDrained is called by the connection's reader (one handler call at a time).
        if (Conn::Internal::DrainedPending(*watch.conn)) drive = true;
      }
      if (drive) {
        // A sleeper watches it (Conn::Watch): left disarmed for it, armed by its Unwatch.
        if (Conn::Internal::Park(watch.conn.get())) continue;
        if (Conn::Internal::PollerActive(*watch.conn)) {
          // It stays disarmed while it is polled.
          deferred[token] = Deferred{
              watch.conn, NextDeferredLookNs(now_ns, Conn::Internal::PollerUntilNs(*watch.conn), 0),
              now_ns};
          continue;
        }
        Conn::Internal::Drive(watch.conn);
      }
      Conn::Internal::Rearm(watch.conn.get());
    }
    deferred_until_ns = UINT64_MAX;
    for (const auto& [token, entry] : deferred) {
      deferred_until_ns = std::min(deferred_until_ns, entry.look_ns);
    }
  }
}

}  // namespace

namespace {

// Whether every connection of this process to itself is idle, and no thread reads one.
bool SelfConnectionsIdle() {
  // First: a reader that starts after this changes it (and is looked at again); one that
  // ended before it has its connections in the watches taken below.
  const uint64_t drives = g_drives.load(std::memory_order_seq_cst);
  std::vector<std::shared_ptr<Conn>> own;
  std::vector<pollfd> listeners;
  {
    softrpma::MutexLock lock(&g_mu);
    if (g_fabric == nullptr) return true;
    const pid_t self = getpid();
    for (const auto& [token, watch] : g_fabric->watches) {
      if (watch.conn != nullptr && watch.conn->peer_pid() == self) own.push_back(watch.conn);
      if (watch.listener != nullptr) listeners.push_back(pollfd{watch.listener->fd, POLLIN, 0});
    }
  }
  // A connection dialed and not accepted yet (its first message waits in it).
  if (!listeners.empty() && poll(listeners.data(), listeners.size(), 0) > 0) return false;
  if (g_readers.load(std::memory_order_seq_cst) != 0) return false;
  for (const std::shared_ptr<Conn>& conn : own) {
    if (!Conn::Internal::Idle(conn.get())) return false;
  }
  // A reader that came and went meanwhile may have moved bytes from one socket to another.
  return g_readers.load(std::memory_order_seq_cst) == 0 &&
         g_drives.load(std::memory_order_seq_cst) == drives;
}

}  // namespace

void Quiesce() {
  const uint64_t deadline_ns = NowNs() + kQuiesceCapNs;
  while (!SelfConnectionsIdle() && NowNs() < deadline_ns) sched_yield();
}

ScopedFabricThreadHeldForTest::ScopedFabricThreadHeldForTest() { LockWorkForFork(); }
ScopedFabricThreadHeldForTest::~ScopedFabricThreadHeldForTest() { UnlockWorkAfterFork(); }

namespace {

// Arms the backstop's timer (CallSoon) unless it is armed. REQUIRES: g_mu held, `fabric`
// the process's (running) fabric.
void ArmSoonLocked(Fabric* fabric) ABSL_EXCLUSIVE_LOCKS_REQUIRED(g_mu) {
  if (g_soon_armed.load(std::memory_order_acquire) || g_soon_armed.exchange(true)) return;
  itimerspec soon{};
  const uint64_t delay_ns = g_call_soon_ns.load(std::memory_order_relaxed);
  soon.it_value.tv_sec = static_cast<time_t>(delay_ns / 1000000000);
  soon.it_value.tv_nsec = static_cast<long>(delay_ns % 1000000000);
  if (timerfd_settime(fabric->timer_fd, 0, &soon, nullptr) != 0) g_soon_armed.store(false);
}

}  // namespace

void CallSoon(void (*fn)()) {
  if (g_soon_fn.load(std::memory_order_acquire) != fn) g_soon_fn.store(fn, std::memory_order_release);
  if (g_soon_armed.load(std::memory_order_acquire)) return;
  softrpma::MutexLock lock(&g_mu);
  Fabric* fabric = nullptr;
  if (GetFabric(&fabric) != 0) return;
  ArmSoonLocked(fabric);
}

// ---- Names ----------------------------------------------------------------------------------

std::atomic<uint64_t> g_peer_answer_ns{kPeerAnswerWaitMs * 1000 * 1000};

uint64_t PeerAnswerWaitNs() { return g_peer_answer_ns.load(std::memory_order_relaxed); }

uint64_t NextDeferredLookNs(uint64_t now_ns, uint64_t poller_until_ns, uint64_t deferred_ns) {
  if (deferred_ns == 0) return poller_until_ns;
  return std::max(poller_until_ns,
                  now_ns + std::clamp(deferred_ns, Conn::kBusyPollWindowNs, kDeferredLookCapNs));
}

uint64_t NowNs() {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1000000000ULL + static_cast<uint64_t>(now.tv_nsec);
}

absl::Status ConfigureFabric() {
  bool cma = true;
  bool shm = true;
  bool push = true;
  for (const auto& [name, on] : {std::pair<const char*, bool*>{kCmaEnvVar, &cma},
                                 std::pair<const char*, bool*>{kShmEnvVar, &shm},
                                 std::pair<const char*, bool*>{kPushEnvVar, &push}}) {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') continue;
    if (std::strcmp(value, "0") != 0 && std::strcmp(value, "1") != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, ": bad value \"", value, "\": expected 0 (off) or 1 (on, the default)"));
    }
    *on = std::strcmp(value, "1") == 0;
  }
  g_cma_enabled.store(cma);
  g_shm_enabled.store(shm);
  g_push_enabled.store(push);
  const char* answer = std::getenv(kPeerAnswerEnvVar);
  uint64_t answer_ms = kPeerAnswerWaitMs;
  if (answer != nullptr && *answer != '\0') {
    const bool digits = std::strspn(answer, "0123456789") == std::strlen(answer);
    answer_ms = digits && std::strlen(answer) <= 6 ? std::strtoull(answer, nullptr, 10) : 0;
    if (!digits || std::strlen(answer) > 6 || answer_ms > 600000) {
      return absl::InvalidArgumentError(absl::StrCat(
          kPeerAnswerEnvVar, ": bad value \"", answer,
          "\": expected milliseconds, 0 (no wait) to 600000 (default ", kPeerAnswerWaitMs, ")"));
    }
  }
  g_peer_answer_ns.store(answer_ms * 1000 * 1000);
  const char* value = std::getenv(kFabricEnvVar);
  std::string name;
  if (value == nullptr || *value == '\0') {
    name = DefaultFabricName();
  } else if (!ValidFabricName(value)) {
    return absl::InvalidArgumentError(absl::StrCat(
        kFabricEnvVar, ": bad fabric name \"", value, "\": expected 1 to ", kMaxFabricName,
        " characters of A-Z a-z 0-9 . _ -"));
  } else {
    name = value;
  }
  softrpma::MutexLock lock(&g_name_mu);
  delete g_name;
  g_name = new std::string(std::move(name));
  return absl::OkStatus();
}

std::string FabricName() {
  softrpma::MutexLock lock(&g_name_mu);
  return g_name != nullptr ? *g_name : DefaultFabricName();
}

std::string ListenerName(const sockaddr* addr, PortSpace space) {
  return absl::StrCat("softrpma/", FabricName(), space == PortSpace::kUdp ? "/udp/" : "/",
                      AddressName(addr));
}

// ---- Conn -----------------------------------------------------------------------------------

Conn::Conn(int fd, uint64_t token, pid_t peer_pid, uid_t peer_uid)
    : fd_(fd),
      token_(token),
      peer_pid_(peer_pid),
      peer_uid_(peer_uid),
      generation_(g_generation.load(std::memory_order_acquire)) {}

Conn::~Conn() {
  if (generation_ == g_generation.load(std::memory_order_acquire)) close(fd_);
  if (in_fd_ >= 0) close(in_fd_);
  if (in_table_fd_ >= 0) close(in_table_fd_);
}

int Conn::Send(const wire::Header& header, const iovec* body, int iovcnt) {
  softrpma::MutexLock lock(&mu_);
  if (closing_ || broken_) return 0;
  // In a fork child, the parent's connection (its fd was closed here; the number may now be a
  // socket of the child's) is never written: the child's backstop may still find the parent's
  // deferred WRs (nic/progress.cc, DeferredLinks).
  if (generation_ != g_generation.load(std::memory_order_acquire)) return 0;
  iovec iov[1 + 64];
  int count = 0;
  iov[count++] = iovec{const_cast<wire::Header*>(&header), sizeof(header)};
  for (int i = 0; i < iovcnt && count < 65; ++i) iov[count++] = body[i];
  Internal::SendLocked(this, iov, count);
  return 0;
}

void Conn::Internal::SendLocked(Conn* conn, const iovec* iov, int count) {
  size_t total = 0;
  for (int i = 0; i < count; ++i) total += iov[i].iov_len;
  size_t sent = 0;
  if (conn->out_offset_ == conn->out_.size()) {
    if (conn->out_mode_ == OutMode::kRing) {
      const ssize_t n = conn->out_ring_->Write(iov, count, 0);
      if (n < 0) return BreakRingLocked(conn);
      if (n > 0 && conn->out_ring_->TakeBellRequest()) BellLocked(conn);
      sent = static_cast<size_t>(n);
    } else {
      msghdr msg;
      std::memset(&msg, 0, sizeof(msg));
      msg.msg_iov = const_cast<iovec*>(iov);
      msg.msg_iovlen = count;
      while (true) {
        const ssize_t n = sendmsg(conn->fd_, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n >= 0) {
          sent = static_cast<size_t>(n);
          break;
        }
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        conn->broken_ = true;  // the peer is gone; the fabric thread will see the end
        return;
      }
    }
    if (sent == total) return;
    conn->out_.clear();
    conn->out_offset_ = 0;
  }
  QueueLocked(conn, iov, count, sent);
}

void Conn::Internal::QueueLocked(Conn* conn, const iovec* iov, int count, size_t skip) {
  for (int i = 0; i < count; ++i) {
    const uint8_t* bytes = static_cast<const uint8_t*>(iov[i].iov_base);
    const size_t length = iov[i].iov_len;
    if (skip >= length) {
      skip -= length;
      continue;
    }
    conn->out_.insert(conn->out_.end(), bytes + skip, bytes + length);
    skip = 0;
  }
  if (conn->out_.size() - conn->out_offset_ > kBacklogBytes) conn->over_backlog_ = true;
  if (conn->out_mode_ == OutMode::kRing) {
    // The fabric thread writes the rest when the peer rings for room; a busy poller's
    // Progress writes it meanwhile.
    conn->ring_queued_.store(true, std::memory_order_relaxed);
    if (conn->out_ring_->WaitForRoom()) FlushRingLocked(conn);
    return;
  }
  if (!conn->want_writable_) {
    conn->want_writable_ = true;
    SetWritableInterest(conn->fd_, conn->token_, true);
  }
}

size_t Conn::QueuedBytes() {
  softrpma::MutexLock lock(&mu_);
  return out_.size() - out_offset_ + socket_tail_.size() - socket_tail_offset_;
}

void Conn::Close() {
  // No push from either side after the close, and none of the peer's left in flight.
  ended_.store(true);
  if (granted_.load()) {
    Grant(0);
    FencePushes(0);
  }
  std::shared_ptr<Handler> handler;
  {
    softrpma::MutexLock lock(&mu_);
    if (closing_) return;
    closing_ = true;
    handler.swap(handler_);
    if (!Internal::HasQueuedLocked(this)) shutdown(fd_, SHUT_RDWR);  // else once flushed
  }
  // `handler` is released here, outside the lock.
}

bool Conn::OnRings() {
  softrpma::MutexLock lock(&mu_);
  return out_mode_ == OutMode::kRing && in_ring_live_.load(std::memory_order_acquire) != nullptr;
}

namespace {
bool FirstWarning(const std::string& name);  // (below: each name is said once per process)
}  // namespace

bool Conn::GetPushWords(PushWords* words) {
  shm::RegionTable* table = peer_table_live_.load(std::memory_order_acquire);
  shm::Ring* in = in_ring_live_.load(std::memory_order_acquire);
  shm::Ring* out = out_ring_live_.load(std::memory_order_acquire);
  if (table == nullptr || in == nullptr || out == nullptr || ended_.load() ||
      generation_ != g_generation.load(std::memory_order_acquire)) {
    return false;
  }
  words->peer_table = table;
  words->peer_grant = &in->word(kGrantWord);
  words->own_pushing = &out->word(kPushingWord);
  return true;
}

namespace {
// The connections this process ever granted pushes on (FencePushesEverywhere); a leaf lock.
softrpma::Mutex g_granted_mu;
std::vector<std::weak_ptr<Conn>>* g_granted ABSL_GUARDED_BY(g_granted_mu) = nullptr;
}  // namespace

bool Conn::Grant(uint64_t grant) {
  shm::Ring* out = out_ring_live_.load(std::memory_order_acquire);
  if (out == nullptr || generation_ != g_generation.load(std::memory_order_acquire)) return false;
  if (grant != 0 && (ended_.load() || fence_expired_.load())) grant = 0;
  if (grant != 0 && !granted_.exchange(true)) {
    softrpma::MutexLock lock(&g_granted_mu);
    if (g_granted == nullptr) g_granted = new std::vector<std::weak_ptr<Conn>>();
    // Forget connections that are gone, so that the list stays as long as the live ones.
    g_granted->erase(std::remove_if(g_granted->begin(), g_granted->end(),
                                    [](const std::weak_ptr<Conn>& c) { return c.expired(); }),
                     g_granted->end());
    g_granted->push_back(weak_from_this());
  }
  // Sequentially consistent: a withdrawn grant and the peer's pushing word are a Dekker pair
  // (the peer stores its word, then loads this; FencePushes loads its word after this store).
  out->word(kGrantWord).store(grant, std::memory_order_seq_cst);
  return true;
}

void Conn::FencePushes(uint64_t tag) { FencePushesUntil(tag, NowNs() + kPushFenceNs); }

void Conn::FencePushesUntil(uint64_t tag, uint64_t deadline_ns) {
  shm::Ring* in = in_ring_mapped_.load(std::memory_order_acquire);
  if (in == nullptr || !granted_.load(std::memory_order_acquire) || fence_expired_.load() ||
      generation_ != g_generation.load(std::memory_order_acquire)) {
    return;  // (a fork child's copy of its parent's connection pushes nothing of the child's)
  }
  const std::atomic<uint64_t>& pushing = in->word(kPushingWord);
  auto names = [&] {
    const uint64_t now = pushing.load(std::memory_order_seq_cst);
    return now != 0 && (tag == 0 || now == tag);
  };
  while (names()) {
    if (NowNs() >= deadline_ns) {
      // Stopped, or hostile: no new push on this connection, and no fence waits for it again.
      fence_expired_.store(true);
      Internal::DropGrant(this);
      if (FirstWarning(absl::StrCat("push-fence/", peer_pid_))) {
        std::fprintf(stderr,
                     "softrpma-sim: process %d has been writing into a region of this process "
                     "for over %llu ms (stopped?); a deregistration (or a QP's end) goes on "
                     "without waiting for it, and it may not push here any more\n",
                     static_cast<int>(peer_pid_),
                     static_cast<unsigned long long>(kPushFenceNs / 1000000));
      }
      return;
    }
    sched_yield();
  }
}

void FencePushesEverywhere(uint64_t tag) {
  std::vector<std::shared_ptr<Conn>> conns;
  {
    softrpma::MutexLock lock(&g_granted_mu);
    if (g_granted == nullptr) return;
    for (const std::weak_ptr<Conn>& weak : *g_granted) {
      if (std::shared_ptr<Conn> conn = weak.lock()) conns.push_back(std::move(conn));
    }
  }
  const uint64_t deadline_ns = NowNs() + Transport::kPushFenceNs;  // one bound for all
  for (const std::shared_ptr<Conn>& conn : conns) conn->FencePushesUntil(tag, deadline_ns);
}

bool OnFabricThread() { return t_on_fabric_thread; }

bool AnyPeerMayStopUs() {
  static const bool any = [] {
    char text[8] = {};
    const int fd = open("/proc/sys/kernel/yama/ptrace_scope", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return errno == ENOENT;  // no Yama: the classic rules, same user may
    const ssize_t n = read(fd, text, sizeof(text) - 1);
    close(fd);
    return n > 0 && text[0] == '0';
  }();
  return any;
}

void Conn::Shutdown() {
  cut_.store(true);
  ended_.store(true);
  Internal::DropGrant(this);  // no new push either way (a store: no lock, no wait)
  if (generation_ == g_generation.load(std::memory_order_acquire)) shutdown(fd_, SHUT_RDWR);
}

void Conn::Internal::SetHandler(Conn* conn, std::shared_ptr<Handler> handler) {
  std::shared_ptr<Handler> old;
  softrpma::MutexLock lock(&conn->mu_);
  old.swap(conn->handler_);
  conn->handler_ = std::move(handler);
}

void Conn::Internal::Flush(Conn* conn) {
  softrpma::MutexLock lock(&conn->mu_);
  if (conn->out_mode_ == OutMode::kRing) {
    if (FlushSocketTailLocked(conn)) FlushRingLocked(conn);
    return;
  }
  while (conn->out_offset_ < conn->out_.size() && !conn->broken_) {
    const ssize_t n = send(conn->fd_, conn->out_.data() + conn->out_offset_,
                           conn->out_.size() - conn->out_offset_, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n >= 0) {
      conn->out_offset_ += static_cast<size_t>(n);
      continue;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {  // still interested in writable
      if (conn->over_backlog_ && conn->out_.size() - conn->out_offset_ < kBacklogBytes) {
        conn->over_backlog_ = false;
        conn->drained_pending_.store(true);
      }
      return;
    }
    conn->broken_ = true;
  }
  conn->out_.clear();
  conn->out_offset_ = 0;
  if (conn->over_backlog_) {
    conn->over_backlog_ = false;
    if (!conn->broken_) conn->drained_pending_.store(true);
  }
  if (conn->want_writable_) {
    conn->want_writable_ = false;
    SetWritableInterest(conn->fd_, conn->token_, false);
  }
  if (conn->closing_) shutdown(conn->fd_, SHUT_RDWR);
}

bool Conn::Internal::FlushSocketTailLocked(Conn* conn) {
  std::vector<uint8_t>& tail = conn->socket_tail_;
  while (conn->socket_tail_offset_ < tail.size() && !conn->broken_) {
    const ssize_t n = send(conn->fd_, tail.data() + conn->socket_tail_offset_,
                           tail.size() - conn->socket_tail_offset_, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n >= 0) {
      conn->socket_tail_offset_ += static_cast<size_t>(n);
      continue;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return false;  // still interested in writable
    conn->broken_ = true;
  }
  if (conn->broken_) return false;
  if (!tail.empty()) {
    std::vector<uint8_t>().swap(tail);
    conn->socket_tail_offset_ = 0;
    if (conn->want_writable_) {
      conn->want_writable_ = false;
      SetWritableInterest(conn->fd_, conn->token_, false);
    }
  }
  if (conn->bell_owed_) {  // the socket took the switch: bells may follow it now
    conn->bell_owed_ = false;
    BellLocked(conn);
  }
  return true;
}

void Conn::Internal::FlushRingLocked(Conn* conn) {
  while (conn->out_offset_ < conn->out_.size() && !conn->broken_) {
    const iovec iov{conn->out_.data() + conn->out_offset_, conn->out_.size() - conn->out_offset_};
    const ssize_t n = conn->out_ring_->Write(&iov, 1, 0);
    if (n < 0) return BreakRingLocked(conn);
    if (n > 0) {
      conn->out_offset_ += static_cast<size_t>(n);
      if (conn->out_ring_->TakeBellRequest()) BellLocked(conn);
      continue;
    }
    if (!conn->out_ring_->WaitForRoom()) {  // full: the peer rings when it made room
      if (conn->over_backlog_ && conn->out_.size() - conn->out_offset_ < kBacklogBytes) {
        conn->over_backlog_ = false;
        conn->drained_pending_.store(true);
      }
      return;
    }
  }
  conn->out_.clear();
  conn->out_offset_ = 0;
  conn->ring_queued_.store(false, std::memory_order_relaxed);
  if (conn->over_backlog_) {
    conn->over_backlog_ = false;
    if (!conn->broken_) conn->drained_pending_.store(true);
  }
  if (conn->closing_ && !HasQueuedLocked(conn)) shutdown(conn->fd_, SHUT_RDWR);
}

void Conn::Internal::BellLocked(Conn* conn) {
  // The socket still carries messages (before the switch, or the switch itself): later.
  if (conn->out_mode_ != OutMode::kRing || conn->socket_tail_offset_ < conn->socket_tail_.size()) {
    conn->bell_owed_ = true;
    return;
  }
  const uint8_t bell = 0;
  while (send(conn->fd_, &bell, 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
    if (errno == EINTR) continue;
    // Full of bells already: the peer has wake-ups enough.
    if (errno != EAGAIN && errno != EWOULDBLOCK) conn->broken_ = true;
    return;
  }
}

void Conn::Internal::BreakRingLocked(Conn* conn) {
  ReportCorruptRing(conn->peer_pid_);
  conn->broken_ = true;
  conn->ring_queued_.store(false, std::memory_order_relaxed);
  shutdown(conn->fd_, SHUT_RDWR);  // the fabric thread finds the end and tells the handler
}

bool Conn::Internal::OfferLocked(Conn* conn, bool switched) {
  if (!g_shm_enabled.load() || conn->out_ring_ != nullptr ||
      conn->out_mode_ != OutMode::kSocket || conn->out_offset_ != conn->out_.size() ||
      conn->closing_ || conn->broken_) {
    return false;
  }
  int memfd = -1;
  std::unique_ptr<shm::Ring> ring = shm::Ring::Create(shm::Ring::kDefaultCapacityLog2, &memfd);
  if (ring == nullptr) return false;  // (EMFILE, ENOMEM): this connection stays on its socket
  wire::Header header = wire::MakeHeader(wire::Type::kShmRing);
  header.body_len = sizeof(wire::ShmRingBody);
  wire::ShmRingBody body;
  std::memset(&body, 0, sizeof(body));
  body.version = wire::kShmRingVersion;
  body.capacity_log2 = shm::Ring::kDefaultCapacityLog2;
  body.switched = switched ? 1 : 0;
  // This process's region table goes with it (the requester push, nic/carrier_host.cc): where
  // the peer may write by itself. A process without one offers its ring alone.
  int fds[2] = {memfd, -1};
  const bool with_table = g_cma_enabled.load() && shm::RegionTable::Mine(&fds[1]) != nullptr;
  body.with_table = with_table ? 1 : 0;
  const size_t fd_count = with_table ? 2 : 1;
  iovec iov[2] = {{&header, sizeof(header)}, {&body, sizeof(body)}};
  alignas(cmsghdr) char control[CMSG_SPACE(2 * sizeof(int))];
  std::memset(control, 0, sizeof(control));
  msghdr msg;
  std::memset(&msg, 0, sizeof(msg));
  msg.msg_iov = iov;
  msg.msg_iovlen = 2;
  msg.msg_control = control;
  msg.msg_controllen = CMSG_SPACE(fd_count * sizeof(int));
  cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
  cmsg->cmsg_level = SOL_SOCKET;
  cmsg->cmsg_type = SCM_RIGHTS;
  cmsg->cmsg_len = CMSG_LEN(fd_count * sizeof(int));
  std::memcpy(CMSG_DATA(cmsg), fds, fd_count * sizeof(int));
  ssize_t n;
  do {
    n = sendmsg(conn->fd_, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  close(memfd);  // the peer has its own copy (the descriptor went with the first byte)
  if (n < 0) {
    if (errno != EAGAIN && errno != EWOULDBLOCK) conn->broken_ = true;
    return false;
  }
  conn->out_ring_ = std::move(ring);
  conn->out_ring_live_.store(conn->out_ring_.get(), std::memory_order_release);
  if (static_cast<size_t>(n) < sizeof(header) + sizeof(body)) {
    conn->out_.clear();
    conn->out_offset_ = 0;
    QueueLocked(conn, iov, 2, static_cast<size_t>(n));
  }
  if (switched) SwitchToRingLocked(conn);
  return true;
}

void Conn::Internal::SwitchOutLocked(Conn* conn) {
  wire::Header header = wire::MakeHeader(wire::Type::kShmSwitch);
  const iovec iov{&header, sizeof(header)};
  SendLocked(conn, &iov, 1);  // on the socket, after what it has still to take
  if (!conn->broken_) SwitchToRingLocked(conn);
}

void Conn::Internal::SwitchToRingLocked(Conn* conn) {
  // What the socket has not taken yet is its tail (its writable watch stays on for it); every
  // message from here goes to the ring, which the peer reads once it has read the switch.
  if (conn->out_offset_ < conn->out_.size()) {
    conn->socket_tail_.assign(conn->out_.begin() + static_cast<ptrdiff_t>(conn->out_offset_),
                              conn->out_.end());
    conn->socket_tail_offset_ = 0;
  }
  conn->out_.clear();
  conn->out_offset_ = 0;
  conn->out_mode_ = OutMode::kRing;
}

void Conn::Internal::End(const std::shared_ptr<Conn>& conn) {
  conn->ended_.store(true);
  std::shared_ptr<Handler> handler;
  bool notify = false;
  {
    softrpma::MutexLock lock(&conn->mu_);
    notify = !conn->closing_;
    conn->closing_ = true;
    conn->broken_ = true;
    handler.swap(conn->handler_);
  }
  RemoveWatch(conn->fd_, conn->token_, conn->generation_);
  if (notify && handler != nullptr) handler->OnClosed();
}

void Conn::Internal::NotifyDrainedLocked(Conn* conn)
    ABSL_NO_THREAD_SAFETY_ANALYSIS {  // REQUIRES: conn->read_mu_ held
  if (!conn->drained_pending_.exchange(false)) return;
  std::shared_ptr<Handler> handler;
  {
    softrpma::MutexLock lock(&conn->mu_);
    if (conn->closing_) return;
    handler = conn->handler_;
  }
  if (handler != nullptr) handler->OnDrained();
}

bool Conn::Internal::ExpireHandshake(const std::shared_ptr<Conn>& conn) {
  if (conn->got_message_.load()) return false;
  // A reader of the moment is reading its first message: it is not idle.
  if (!conn->read_mu_.TryLock()) return false;
  const bool expire = !conn->got_message_.load();
  if (expire) End(conn);
  conn->read_mu_.Unlock();
  return expire;
}

void Conn::Progress() {
  last_poll_ns_.store(NowNs(), std::memory_order_relaxed);
  // On rings, a poll that finds nothing is memory loads: no system call, no lock.
  if (shm::Ring* ring = in_ring_live_.load(std::memory_order_acquire);
      ring != nullptr && ring->Empty() && !ring_queued_.load(std::memory_order_relaxed) &&
      !drive_pending_.load(std::memory_order_relaxed)) {
    // What this poller waits for may be a cross-memory copy, of its own process or of the
    // peer's (of our memory), which needs a CPU: on a machine whose cores all spin (two busy
    // pollers on two cores) the copy's worker would wait for a time slice. The poller gives its
    // CPU up instead.
    if (cma::Pending()) sched_yield();
    return;
  }
  Internal::Drive(shared_from_this(), /*busy=*/true);
}

int Conn::Watch() {
  softrpma::MutexLock lock(&mu_);
  if (closing_ || broken_ || generation_ != g_generation.load(std::memory_order_acquire)) {
    return -1;
  }
  watchers_.fetch_add(1, std::memory_order_seq_cst);
  // On rings the peer rings the socket only for an armed ring; news already there must not
  // wait for a bell that will not come.
  if (shm::Ring* ring = in_ring_live_.load(std::memory_order_acquire);
      ring != nullptr && !ring->Arm()) {
    return ReadyFd();
  }
  return fd_;
}

void Conn::Unwatch() {
  if (watchers_.fetch_sub(1, std::memory_order_seq_cst) == 1 &&
      parked_.exchange(false, std::memory_order_seq_cst)) {
    Internal::OweRearm(this);  // what arrives from then on is the fabric thread's again
  }
}

void Conn::Internal::OweRearm(Conn* conn) {
  {
    softrpma::MutexLock lock(&g_mu);
    if (g_fabric != nullptr && conn->generation_ == g_generation.load(std::memory_order_acquire)) {
      g_fabric->rearm_owed.push_back(conn->weak_from_this());
      ArmSoonLocked(g_fabric);
      return;
    }
  }
  Rearm(conn);  // (no fabric to ask: a connection of a fork's parent; as before)
}

void Conn::Internal::RearmOwed() {
  std::vector<std::weak_ptr<Conn>> owed;
  {
    softrpma::MutexLock lock(&g_mu);
    if (g_fabric != nullptr) owed.swap(g_fabric->rearm_owed);
  }
  for (const std::weak_ptr<Conn>& weak : owed) {
    const std::shared_ptr<Conn> conn = weak.lock();
    if (conn == nullptr) continue;
    // As Park: a watcher that has it now owes the rearm again when it leaves.
    conn->parked_.store(true, std::memory_order_seq_cst);
    if (conn->watchers_.load(std::memory_order_seq_cst) == 0 &&
        conn->parked_.exchange(false, std::memory_order_seq_cst)) {
      Rearm(conn.get());
    }
  }
}

bool Conn::Internal::Park(Conn* conn) {
  if (conn->watchers_.load(std::memory_order_seq_cst) == 0 || conn->QueuedBytes() != 0) {
    return false;
  }
  conn->parked_.store(true, std::memory_order_seq_cst);
  // The last watcher may have left between the two looks: then it is ours after all.
  if (conn->watchers_.load(std::memory_order_seq_cst) == 0 &&
      conn->parked_.exchange(false, std::memory_order_seq_cst)) {
    return false;
  }
  return true;
}

void Conn::Serve() { Internal::Drive(shared_from_this()); }

void Conn::Settle() {
  const std::shared_ptr<Conn> self = shared_from_this();
  g_readers.fetch_add(1, std::memory_order_seq_cst);  // a reader for Quiesce, as in Drive
  g_drives.fetch_add(1, std::memory_order_seq_cst);
  struct Leave {
    ~Leave() { g_readers.fetch_sub(1, std::memory_order_seq_cst); }
  } leave;
  read_mu_.Lock();  // after the reader of the moment
  drive_pending_.store(false, std::memory_order_seq_cst);
  bool queued;
  {
    softrpma::MutexLock lock(&mu_);
    queued = Internal::HasQueuedLocked(this);
  }
  if (queued) Internal::Flush(this);
  drain_pending_.store(false, std::memory_order_seq_cst);
  Internal::NotifyDrainedLocked(this);
  Internal::ReadLocked(self, /*busy=*/false);
  read_mu_.Unlock();
  if (drive_pending_.load(std::memory_order_seq_cst)) Internal::Drive(self);
}

void Conn::Internal::Rearm(Conn* conn) {
  bool writable;
  {
    softrpma::MutexLock lock(&conn->mu_);
    writable = conn->want_writable_;
  }
  SetWritableInterest(conn->fd_, conn->token_, writable);
}

bool Conn::Internal::PollerActive(const Conn& conn) {
  return NowNs() - conn.last_poll_ns_.load(std::memory_order_relaxed) < kBusyPollWindowNs;
}

uint64_t Conn::Internal::PollerUntilNs(const Conn& conn) {
  return conn.last_poll_ns_.load(std::memory_order_relaxed) + kBusyPollWindowNs;
}

bool Conn::Internal::Idle(Conn* conn) {
  // Readable: bytes unread, or its end (EOF / hang-up) not taken yet by the fabric thread.
  pollfd pfd{conn->fd_, POLLIN | POLLRDHUP, 0};
  if (poll(&pfd, 1, 0) > 0 && pfd.revents != 0) return false;
  if (shm::Ring* ring = conn->in_ring_live_.load(std::memory_order_acquire);
      ring != nullptr && !ring->Empty()) {
    return false;
  }
  return conn->QueuedBytes() == 0;
}

void Conn::Internal::Drive(const std::shared_ptr<Conn>& conn, bool busy) {
  g_readers.fetch_add(1, std::memory_order_seq_cst);
  g_drives.fetch_add(1, std::memory_order_seq_cst);
  struct Leave {
    ~Leave() { g_readers.fetch_sub(1, std::memory_order_seq_cst); }
  } leave;
  if (!busy) conn->drain_pending_.store(true, std::memory_order_seq_cst);
  conn->drive_pending_.store(true, std::memory_order_seq_cst);
  while (conn->drive_pending_.load(std::memory_order_seq_cst)) {
    if (!conn->read_mu_.TryLock()) return;  // its holder looks again after letting go
    conn->drive_pending_.store(false, std::memory_order_seq_cst);
    bool queued;
    {
      softrpma::MutexLock lock(&conn->mu_);
      queued = HasQueuedLocked(conn.get());
    }
    if (queued) Flush(conn.get());
    // Whoever holds the read lock reads as the most thorough driver that came asked.
    const bool drain = conn->drain_pending_.exchange(false, std::memory_order_seq_cst);
    NotifyDrainedLocked(conn.get());
    ReadLocked(conn, /*busy=*/!drain);
    conn->read_mu_.Unlock();
  }
}

void Conn::Internal::ReadLocked(const std::shared_ptr<Conn>& conn, bool busy)
    ABSL_NO_THREAD_SAFETY_ANALYSIS {  // REQUIRES: conn->read_mu_ held
  Conn* c = conn.get();
  // A fork child's copy of its parent's connection: its socket and its rings are the parent's.
  if (c->generation_ != g_generation.load(std::memory_order_acquire)) return End(conn);
  bool peer_ended = false;  // on rings: the socket ended; what the ring holds is still read
  while (true) {
    uint8_t* into;
    size_t want;
    const bool in_header = c->in_header_got_ < sizeof(wire::Header);
    if (in_header) {
      into = reinterpret_cast<uint8_t*>(&c->in_header_) + c->in_header_got_;
      want = sizeof(wire::Header) - c->in_header_got_;
    } else {
      // The body grows as it arrives, a chunk at a time: a header alone must not make this
      // process allocate (and zero) the up to 2 GiB it announces, which its sender may never
      // send.
      want = std::min<size_t>(c->in_header_.body_len - c->in_body_got_, kBodyChunkBytes);
      if (c->in_body_.size() < c->in_body_got_ + want) {
        try {
          c->in_body_.resize(c->in_body_got_ + want);
        } catch (const std::bad_alloc&) {
          return End(conn);
        }
      }
      into = c->in_body_.data() + c->in_body_got_;
    }
    if (want > 0) {
      ssize_t n;
      if (shm::Ring* ring = c->in_ring_live_.load(std::memory_order_relaxed); ring != nullptr) {
        n = ring->Read(into, want);
        if (n < 0) {
          ReportCorruptRing(c->peer_pid_);
          return End(conn);
        }
        if (n == 0) {
          if (peer_ended || c->cut_.load()) return End(conn);
          if (busy) return;  // the socket and the arming are the sleepers' (host.h)
          if (!DrainBellsLocked(c)) {
            peer_ended = true;  // what the peer wrote before it ended comes first
            continue;
          }
          // A bell just read may have been for room in this side's ring: write what waits.
          if (c->ring_queued_.load(std::memory_order_relaxed)) Flush(c);
          if (!ring->Arm()) continue;  // a byte came meanwhile
          return;
        }
        if (ring->TakeRoomRequest()) {
          softrpma::MutexLock lock(&c->mu_);
          BellLocked(c);
        }
      } else {
        n = ReceiveLocked(c, into, want);
        if (n == 0) return End(conn);  // the peer closed (or died: the kernel closed for it)
        if (n < 0) {
          if (errno == EINTR) continue;
          if (errno == EAGAIN || errno == EWOULDBLOCK) return;
          return End(conn);
        }
      }
      if (in_header) {
        c->in_header_got_ += static_cast<size_t>(n);
        if (c->in_header_got_ < sizeof(wire::Header)) continue;
        if (!wire::ValidateHeader(c->in_header_)) return End(conn);  // untrusted: ends it
        // Its handler may refuse it before its body is read (and buffered); the carrier's own
        // messages are never the handler's.
        std::shared_ptr<Handler> handler;
        {
          softrpma::MutexLock lock(&c->mu_);
          handler = c->handler_;
        }
        if (!IsCarrierMessage(c->in_header_) && handler != nullptr &&
            !handler->OnHeader(c->in_header_)) {
          return End(conn);
        }
        c->in_body_.clear();
        c->in_body_got_ = 0;
        if (c->in_header_.body_len > 0) continue;
      } else {
        c->in_body_got_ += static_cast<size_t>(n);
        if (c->in_body_got_ < c->in_header_.body_len) continue;
      }
    }
    // A whole message.
    c->in_header_got_ = 0;
    if (IsCarrierMessage(c->in_header_)) {
      if (!TakeCarrierMessageLocked(c)) return End(conn);
      continue;
    }
    // A descriptor came with a message that has none.
    if (c->in_fd_ >= 0 || c->in_table_fd_ >= 0) return End(conn);
    c->got_message_.store(true);
    std::shared_ptr<Handler> handler;
    {
      softrpma::MutexLock lock(&c->mu_);
      if (c->closing_) return;
      handler = c->handler_;
    }
    if (handler != nullptr) handler->OnMessage(c->in_header_, c->in_body_.data());
  }
}

ssize_t Conn::Internal::ReceiveLocked(Conn* conn, void* into, size_t want)
    ABSL_NO_THREAD_SAFETY_ANALYSIS {  // REQUIRES: conn->read_mu_ held
  iovec iov{into, want};
  alignas(cmsghdr) char control[CMSG_SPACE(3 * sizeof(int))];
  msghdr msg;
  std::memset(&msg, 0, sizeof(msg));
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  const ssize_t n = recvmsg(conn->fd_, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  if (n < 0 || msg.msg_controllen == 0) return n;
  // Descriptors the peer passed: one or two, with an offer (its ring, and its region table;
  // kept until its message is whole); any other is closed at once, and so is the connection.
  bool extra = (msg.msg_flags & MSG_CTRUNC) != 0;
  for (cmsghdr* cmsg = CMSG_FIRSTHDR(&msg); cmsg != nullptr; cmsg = CMSG_NXTHDR(&msg, cmsg)) {
    if (cmsg->cmsg_level != SOL_SOCKET || cmsg->cmsg_type != SCM_RIGHTS) continue;
    const size_t fds = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < fds; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(cmsg) + i * sizeof(int), sizeof(int));
      if (conn->in_fd_ < 0) {
        conn->in_fd_ = fd;
      } else if (conn->in_table_fd_ < 0) {
        conn->in_table_fd_ = fd;
      } else {
        close(fd);
        extra = true;
      }
    }
  }
  if (extra) {
    errno = EPROTO;
    return -1;
  }
  return n;
}

bool Conn::Internal::DrainBellsLocked(Conn* conn) {
  uint8_t bells[64];
  while (true) {
    // recv(2) without room for descriptors: the kernel closes any the peer sent with bells.
    const ssize_t n = recv(conn->fd_, bells, sizeof(bells), MSG_DONTWAIT);
    // A short read took every bell there was: no second recv(2) to hear EAGAIN (a later bell,
    // or the end, makes the socket readable again for whoever watches it).
    if (n > 0 && static_cast<size_t>(n) < sizeof(bells)) return true;
    if (n > 0) continue;
    if (n == 0) return false;
    if (errno == EINTR) continue;
    return errno == EAGAIN || errno == EWOULDBLOCK;
  }
}

bool Conn::Internal::TakeCarrierMessageLocked(Conn* conn) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  Conn* c = conn;
  if (static_cast<wire::Type>(c->in_header_.type) == wire::Type::kShmSwitch) {
    // The peer's messages are in its ring from here: it must have offered one, once.
    if (c->in_ring_ == nullptr || c->in_ring_live_.load() != nullptr) return false;
    c->in_ring_live_.store(c->in_ring_.get(), std::memory_order_release);
    return true;
  }
  struct Closer {
    int fd;
    ~Closer() {
      if (fd >= 0) close(fd);
    }
  } offered{c->in_fd_}, offered_table{c->in_table_fd_};
  c->in_fd_ = -1;
  c->in_table_fd_ = -1;
  wire::ShmRingBody body;
  std::memcpy(&body, c->in_body_.data(), sizeof(body));
  if (offered.fd < 0 || !wire::ValidateShmRingBody(body) || c->in_ring_ != nullptr) return false;
  // Its region table comes with it exactly when the offer says so.
  if ((offered_table.fd >= 0) != (body.with_table != 0)) return false;
  std::unique_ptr<shm::Ring> ring =
      shm::Ring::Attach(offered.fd, static_cast<int>(body.capacity_log2));
  if (ring == nullptr) return false;  // not a sealed ring of its size: a hostile peer
  if (offered_table.fd >= 0) {
    c->peer_table_ = shm::RegionTable::Attach(offered_table.fd);
    if (c->peer_table_ == nullptr) return false;  // not a sealed table: a hostile peer
    c->peer_table_live_.store(c->peer_table_.get(), std::memory_order_release);
  }
  softrpma::MutexLock lock(&c->mu_);
  if (body.switched != 0) {
    // The listener's answer, which only this side's own offer may have: its messages are in
    // its ring from here, and this side's go to its own after the switch.
    if (c->out_ring_ == nullptr || c->out_mode_ != OutMode::kSocket) return false;
    c->in_ring_ = std::move(ring);
    c->in_ring_mapped_.store(c->in_ring_.get(), std::memory_order_release);
    c->in_ring_live_.store(c->in_ring_.get(), std::memory_order_release);
    SwitchOutLocked(c);
    return true;
  }
  // The dialer's offer: answered with this side's ring, or not at all (then both directions
  // stay on the socket: the dialer reads it until an answer that never comes).
  if (c->out_ring_ != nullptr) return false;  // two offers of a first message: not a dialer's
  if (OfferLocked(c, /*switched=*/true)) {
    c->in_ring_ = std::move(ring);
    c->in_ring_mapped_.store(c->in_ring_.get(), std::memory_order_release);
  }
  return true;
}

// ---- Cross-memory attach -------------------------------------------------------------------

namespace {
const volatile uint64_t g_probe_word = wire::kProbeMagic;
}  // namespace

bool PushesEnabled() { return g_cma_enabled.load() && g_push_enabled.load(); }

uint64_t ProbeAddress() {
  // With RPMA_SIM_CMA=0 no peer may reach this process either: it offers no probe word.
  if (!g_cma_enabled.load()) return 0;
  return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(&g_probe_word));
}

bool CanReach(int32_t pid, uint64_t probe_addr) {
  // Never this process itself: a peer must not be able to make this NIC copy its own memory.
  if (!g_cma_enabled.load() || pid <= 0 || pid == getpid() || probe_addr == 0) return false;
  uint64_t word = 0;
  iovec local{&word, sizeof(word)};
  iovec remote{reinterpret_cast<void*>(static_cast<uintptr_t>(probe_addr)), sizeof(word)};
  return process_vm_readv(pid, &local, 1, &remote, 1, 0) == static_cast<ssize_t>(sizeof(word)) &&
         word == wire::kProbeMagic;
}

// ---- Listener -------------------------------------------------------------------------------

Listener::~Listener() {
  {
    softrpma::MutexLock lock(&state_->mu);
    state_->on_accept = nullptr;
  }
  RemoveWatch(state_->fd, state_->token, state_->generation);
  if (state_->generation == g_generation.load(std::memory_order_acquire)) close(state_->fd);
}

namespace {
// Names whose squatter stderr has named already (each is said once per process).
softrpma::Mutex g_warned_mu;
absl::flat_hash_set<std::string>* g_warned ABSL_GUARDED_BY(g_warned_mu) = nullptr;

bool FirstWarning(const std::string& listener_name) {
  softrpma::MutexLock lock(&g_warned_mu);
  if (g_warned == nullptr) g_warned = new absl::flat_hash_set<std::string>();
  return g_warned->insert(listener_name).second;
}

// Who holds the abstract name `listener_name`, as the kernel says: connects to it (without
// waiting: a full backlog is "unknown") and reads SO_PEERCRED. False when nobody could be
// asked. The holder sees a connection that ends without a message.
bool WhoHolds(const std::string& listener_name, ucred* cred) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const int rc = ConnectAbstract(fd, listener_name);
  socklen_t cred_len = sizeof(*cred);
  const bool known = rc == 0 &&
                     getsockopt(fd, SOL_SOCKET, SO_PEERCRED, cred, &cred_len) == 0 &&
                     cred->pid > 0;
  close(fd);
  return known;
}

int ListenAt(const std::string& listener_name, AcceptFn on_accept,
             std::unique_ptr<Listener>* listener);
int DialAt(const std::vector<std::string>& names, std::shared_ptr<Conn::Handler> handler,
           std::shared_ptr<Conn>* conn);

std::string EndpointName(const std::string& endpoint) {
  return absl::StrCat("softrpma/", FabricName(), "/ep/", endpoint);
}
}  // namespace

int ListenEndpoint(const std::string& endpoint, AcceptFn on_accept,
                   std::unique_ptr<Listener>* listener) {
  return ListenAt(EndpointName(endpoint), std::move(on_accept), listener);
}

int DialEndpoint(const std::string& endpoint, std::shared_ptr<Conn::Handler> handler,
                 std::shared_ptr<Conn>* conn) {
  return DialAt({EndpointName(endpoint)}, std::move(handler), conn);
}

PortReservation::~PortReservation() {
  softrpma::MutexLock lock(&g_mu);
  if (generation_ != g_generation.load(std::memory_order_acquire)) return;  // closed at the fork
  if (g_reservations != nullptr) g_reservations->erase(fd_);
  close(fd_);
}

int ReservePort(uint16_t port, std::unique_ptr<PortReservation>* reservation) {
  fork_locks::Enrol(fork_locks::Rank::kFabricState, &kStateForkHandlers);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  sockaddr_un name;
  const socklen_t name_len =
      AbstractAddress(absl::StrCat("softrpma/", FabricName(), "/port/", port), &name);
  if (bind(fd, reinterpret_cast<sockaddr*>(&name), name_len) != 0) {
    const int err = errno;
    close(fd);
    return err;
  }
  softrpma::MutexLock lock(&g_mu);
  if (g_reservations == nullptr) {
    g_reservations = new (std::nothrow) absl::flat_hash_set<int>();
    if (g_reservations == nullptr) {
      close(fd);
      return ENOMEM;
    }
  }
  g_reservations->insert(fd);
  *reservation = std::make_unique<PortReservation>(
      fd, g_generation.load(std::memory_order_acquire));
  return 0;
}

int Listen(const sockaddr* addr, AcceptFn on_accept, std::unique_ptr<Listener>* listener,
           PortSpace space) {
  return ListenAt(ListenerName(addr, space), std::move(on_accept), listener);
}

namespace {
int ListenAt(const std::string& listener_name, AcceptFn on_accept,
             std::unique_ptr<Listener>* listener) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  sockaddr_un name;
  const socklen_t name_len = AbstractAddress(listener_name, &name);
  if (bind(fd, reinterpret_cast<sockaddr*>(&name), name_len) != 0 || listen(fd, SOMAXCONN) != 0) {
    const int err = errno;
    close(fd);
    // EADDRINUSE: another process listens there. When it is another user's, the name is
    // squatted (abstract names are anyone's to bind): say who holds it.
    ucred holder;
    if (err == EADDRINUSE && WhoHolds(listener_name, &holder) && holder.uid != geteuid()) {
      std::fprintf(stderr,
                   "softrpma: fabric listener %s is held by another user (uid %u, pid %d): "
                   "cannot listen\n",
                   listener_name.c_str(), static_cast<unsigned>(holder.uid),
                   static_cast<int>(holder.pid));
    }
    return err;
  }
  auto state = std::make_shared<Listener::State>();
  state->name = listener_name;
  state->fd = fd;
  state->generation = g_generation.load(std::memory_order_acquire);
  {
    softrpma::MutexLock lock(&state->mu);
    state->on_accept = std::move(on_accept);
  }
  softrpma::MutexLock lock(&g_mu);
  Fabric* fabric = nullptr;
  int err = GetFabric(&fabric);
  if (err == 0) {
    state->token = fabric->next_token++;
    err = AddWatchLocked(fabric, fd, state->token, Watch{nullptr, state});
  }
  if (err != 0) {
    close(fd);
    return err;
  }
  *listener = std::make_unique<Listener>(std::move(state));
  return 0;
}
}  // namespace

int Dial(const sockaddr* dst, std::shared_ptr<Conn::Handler> handler,
         std::shared_ptr<Conn>* conn, PortSpace space) {
  // The exact address first, then the wildcards of its port (a v6 wildcard serves v4 too).
  std::vector<std::string> names = {ListenerName(dst, space)};
  sockaddr_in any4;
  std::memset(&any4, 0, sizeof(any4));
  any4.sin_family = AF_INET;
  any4.sin_port = dst->sa_family == AF_INET ? reinterpret_cast<const sockaddr_in*>(dst)->sin_port
                                            : reinterpret_cast<const sockaddr_in6*>(dst)->sin6_port;
  sockaddr_in6 any6;
  std::memset(&any6, 0, sizeof(any6));
  any6.sin6_family = AF_INET6;
  any6.sin6_port = any4.sin_port;
  if (IsV4(dst)) names.push_back(ListenerName(reinterpret_cast<sockaddr*>(&any4), space));
  names.push_back(ListenerName(reinterpret_cast<sockaddr*>(&any6), space));
  return DialAt(names, std::move(handler), conn);
}

namespace {
int DialAt(const std::vector<std::string>& names, std::shared_ptr<Conn::Handler> handler,
           std::shared_ptr<Conn>* conn) {
  int err = ECONNREFUSED;
  for (const std::string& listener_name : names) {
    const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return errno;
    if (const int rc = ConnectAbstract(fd, listener_name); rc != 0) {
      err = rc;
      close(fd);
      if (err == ECONNREFUSED || err == ENOENT) {
        err = ECONNREFUSED;
        continue;  // nobody listens under that name: try the next
      }
      return err;
    }
    // Who listens there, as the kernel says (the process that called listen(2)).
    ucred cred;
    socklen_t cred_len = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cred_len) != 0 || cred.pid <= 0) {
      err = errno != 0 ? errno : ECONNREFUSED;
      close(fd);
      return err;
    }
    if (cred.uid != geteuid()) {
      // Another user bound the name first: what this process would send (connect requests,
      // data) is not for that user's process.
      close(fd);
      if (FirstWarning(listener_name)) {
        std::fprintf(stderr,
                     "softrpma: fabric listener %s is held by another user (uid %u, pid %d): "
                     "not connecting\n",
                     listener_name.c_str(), static_cast<unsigned>(cred.uid),
                     static_cast<int>(cred.pid));
      }
      return EACCES;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    uint64_t token = 0;
    {
      softrpma::MutexLock lock(&g_mu);
      Fabric* fabric = nullptr;
      err = GetFabric(&fabric);
      if (err != 0) {
        close(fd);
        return err;
      }
      token = fabric->next_token++;
    }
    auto made = std::make_shared<Conn>(fd, token, cred.pid, cred.uid);
    // Not under g_mu: a connection's mu_ comes first (Send takes g_mu under it).
    Conn::Internal::SetHandler(made.get(), std::move(handler));
    {
      softrpma::MutexLock lock(&g_mu);
      // Only a fork child loses its fabric, and this thread is not a child's copy.
      err = g_fabric != nullptr ? AddWatchLocked(g_fabric, fd, token, Watch{made, nullptr}) : EIO;
    }
    if (err != 0) return err;  // `made` closes the socket
    // The first message of every connection: this side's ring (THE SHARED-MEMORY RINGS),
    // before the caller can send anything. Without one the connection stays on its socket.
    Conn::Internal::OfferFirst(made.get());
    *conn = std::move(made);
    return 0;
  }
  return err;
}

}  // namespace

}  // namespace softrpma::sim::host
