#include "tests/multiprocess/hostile_wire.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace softrpma::hostile {
namespace {

// Waits until `fd` is ready for `events` or the deadline passed. True: ready (or in error,
// which the next call reports).
bool WaitReady(int fd, short events, int64_t deadline_ms) {
  while (true) {
    const int64_t left = deadline_ms - NowMs();
    if (left <= 0) return false;
    pollfd p{fd, events, 0};
    const int n = poll(&p, 1, static_cast<int>(left));
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return false;
  }
}

// Writes [data, data + size) before the deadline.
SendResult WriteAll(int fd, const uint8_t* data, size_t size, int64_t deadline_ms) {
  while (size > 0) {
    const ssize_t n = send(fd, data, size, MSG_NOSIGNAL);
    if (n > 0) {
      data += n;
      size -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!WaitReady(fd, POLLOUT, deadline_ms)) return SendResult::kTimedOut;
      continue;
    }
    return SendResult::kClosed;
  }
  return SendResult::kSent;
}

// Reads exactly `size` bytes before the deadline.
ReadResult ReadAll(int fd, uint8_t* data, size_t size, int64_t deadline_ms) {
  while (size > 0) {
    const ssize_t n = recv(fd, data, size, 0);
    if (n > 0) {
      data += n;
      size -= static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return ReadResult::kClosed;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!WaitReady(fd, POLLIN, deadline_ms)) return ReadResult::kTimedOut;
      continue;
    }
    return ReadResult::kClosed;  // ECONNRESET
  }
  return ReadResult::kMessage;
}

}  // namespace

int64_t NowMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

std::string ListenerSocketName(const std::string& fabric, const std::string& addr, uint16_t port) {
  return std::string(1, '\0') + "softrpma/" + fabric + "/" + addr + ":" + std::to_string(port);
}

std::string EndpointSocketName(const std::string& fabric, const uint8_t gid[16]) {
  static const char kHex[] = "0123456789abcdef";
  std::string name = std::string(1, '\0') + "softrpma/" + fabric + "/ep/gid-";
  for (int i = 0; i < 16; ++i) {
    name += kHex[gid[i] >> 4];
    name += kHex[gid[i] & 15];
  }
  return name;
}

void GidOfPid(pid_t pid, uint8_t gid[16]) {
  std::memset(gid, 0, 16);
  gid[10] = 0xff;
  gid[11] = 0xff;
  gid[12] = 127;
  const uint32_t low = static_cast<uint32_t>(pid) & 0xffffff;
  gid[13] = static_cast<uint8_t>(low >> 16);
  gid[14] = static_cast<uint8_t>(low >> 8);
  gid[15] = static_cast<uint8_t>(low);
}

int DialAbstract(const std::string& name) {
  if (name.empty() || name[0] != '\0') {
    errno = EINVAL;  // not an abstract name
    return -1;
  }
  if (name.size() > sizeof(sockaddr_un::sun_path)) {
    errno = ENAMETOOLONG;
    return -1;
  }
  const int fd = sim::testing::RawConnect(name.substr(1));
  if (fd < 0) return -1;
  const int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) {
    const int err = errno;
    close(fd);
    errno = err;
    return -1;
  }
  return fd;
}

SendResult SendMessage(int fd, wire::Header header, const void* body, size_t body_len,
                       int timeout_ms) {
  const int64_t deadline_ms = NowMs() + timeout_ms;
  header.body_len = static_cast<uint32_t>(body_len);
  const SendResult sent =
      WriteAll(fd, reinterpret_cast<const uint8_t*>(&header), sizeof(header), deadline_ms);
  if (sent != SendResult::kSent || body_len == 0) return sent;
  return WriteAll(fd, static_cast<const uint8_t*>(body), body_len, deadline_ms);
}

ReadResult ReadMessage(int fd, int timeout_ms, wire::Header* header, std::vector<uint8_t>* body) {
  const int64_t deadline_ms = NowMs() + timeout_ms;
  const ReadResult got =
      ReadAll(fd, reinterpret_cast<uint8_t*>(header), sizeof(*header), deadline_ms);
  if (got != ReadResult::kMessage) return got;
  if (!wire::ValidateHeader(*header) || header->body_len > kMaxReadBodyBytes) {
    return ReadResult::kGarbage;
  }
  body->resize(header->body_len);
  if (header->body_len == 0) return ReadResult::kMessage;
  return ReadAll(fd, body->data(), body->size(), deadline_ms);
}

bool AwaitClosed(int fd, int timeout_ms, std::vector<wire::Header>* seen) {
  const int64_t deadline_ms = NowMs() + timeout_ms;
  while (true) {
    const int64_t left = deadline_ms - NowMs();
    if (left <= 0) return false;
    wire::Header header;
    std::vector<uint8_t> body;
    switch (ReadMessage(fd, static_cast<int>(left), &header, &body)) {
      case ReadResult::kMessage:
        if (seen != nullptr) seen->push_back(header);
        continue;
      case ReadResult::kClosed:
        return true;
      case ReadResult::kTimedOut:
        return false;
      case ReadResult::kGarbage:
        return false;  // not the victim's wire: the test says so
    }
  }
}

}  // namespace softrpma::hostile
