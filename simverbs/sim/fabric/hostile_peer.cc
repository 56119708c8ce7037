#include "simverbs/sim/fabric/hostile_peer.h"

#include <arpa/inet.h>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace softrpma::sim::testing {

sockaddr_in Loopback(uint16_t port) {
  sockaddr_in addr;
  std::memset(&addr, 0, sizeof(addr));
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return addr;
}

socklen_t AbstractAddress(const std::string& name, sockaddr_un* out) {
  std::memset(out, 0, sizeof(*out));
  out->sun_family = AF_UNIX;
  const size_t length = std::min(name.size(), sizeof(out->sun_path) - 1);
  std::memcpy(out->sun_path + 1, name.data(), length);
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + length);
}

wire::ConnectBody MakeConnectBody(uint16_t port, uint16_t src_port, int32_t pid,
                                  uint64_t probe_addr, uint32_t qp_num) {
  wire::ConnectBody body;
  std::memset(&body, 0, sizeof(body));
  body.qp_num = qp_num;
  body.responder_resources = 1;
  body.initiator_depth = 1;
  body.pid = pid;
  body.probe_addr = probe_addr;
  const sockaddr_in src = Loopback(src_port);
  const sockaddr_in dst = Loopback(port);
  std::memcpy(&body.src, &src, sizeof(src));
  std::memcpy(&body.dst, &dst, sizeof(dst));
  return body;
}

namespace {

// The child's end: wait to be killed, 60 s at most.
[[noreturn]] void SleepUntilStopped() {
  alarm(60);
  while (true) pause();
}

// Forks; the child runs `body(ready_fd)`, which writes one byte when ready. Returns the child's
// pid once that byte came, or -1 (the child exited or failed first).
template <typename Body>
pid_t ForkReady(Body body) {
  int ready[2];
  if (pipe(ready) != 0) return -1;
  const pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    close(ready[0]);
    alarm(60);  // whatever happens, the child is gone within a minute
    body(ready[1]);
    SleepUntilStopped();
  }
  close(ready[1]);
  char byte;
  ssize_t n;
  do {
    n = read(ready[0], &byte, 1);
  } while (n < 0 && errno == EINTR);
  close(ready[0]);
  if (n == 1) return pid;
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  return -1;
}

}  // namespace

int RawConnect(const std::string& name) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_un address;
  const socklen_t length = AbstractAddress(name, &address);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), length) != 0) {
    const int err = errno;
    close(fd);
    errno = err;
    return -1;
  }
  return fd;
}

int RawListen(const std::string& name) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_un address;
  const socklen_t length = AbstractAddress(name, &address);
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), length) != 0 || listen(fd, 16) != 0) {
    const int err = errno;
    close(fd);
    errno = err;
    return -1;
  }
  return fd;
}

bool SendWithFd(int sock, const void* data, size_t length, int fd) {
  iovec iov{const_cast<void*>(data), length};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  std::memset(control, 0, sizeof(control));
  msghdr msg;
  std::memset(&msg, 0, sizeof(msg));
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
  cmsg->cmsg_level = SOL_SOCKET;
  cmsg->cmsg_type = SCM_RIGHTS;
  cmsg->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(cmsg), &fd, sizeof(int));
  return sendmsg(sock, &msg, MSG_NOSIGNAL) == static_cast<ssize_t>(length);
}

bool WriteAll(int fd, const void* data, size_t length) {
  const auto* bytes = static_cast<const uint8_t*>(data);
  while (length > 0) {
    const ssize_t n = send(fd, bytes, length, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes += n;
    length -= static_cast<size_t>(n);
  }
  return true;
}

bool WaitClosed(int fd, int limit_ms) {
  const int step_ms = 50;
  for (int waited_ms = 0; waited_ms < limit_ms; waited_ms += step_ms) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, step_ms) <= 0) continue;
    char buffer[4096];
    const ssize_t n = recv(fd, buffer, sizeof(buffer), MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return true;
  }
  return false;
}

Child& Child::operator=(Child&& other) noexcept {
  if (this != &other) {
    Stop();
    pid_ = other.pid_;
    other.pid_ = -1;
  }
  return *this;
}

void Child::Stop() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

void SquatAsNobody(const std::string& name, Child* child) {
  *child = Child(ForkReady([&name](int ready_fd) {
    if (setgroups(0, nullptr) != 0 || setresgid(kNobody, kNobody, kNobody) != 0 ||
        setresuid(kNobody, kNobody, kNobody) != 0) {
      std::perror("squatter: dropping to nobody");
      _exit(1);
    }
    const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un address;
    const socklen_t length = AbstractAddress(name, &address);
    if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&address), length) != 0 ||
        listen(fd, 16) != 0) {
      std::perror("squatter: binding the name");
      _exit(1);
    }
    const char byte = 1;
    if (write(ready_fd, &byte, 1) != 1) _exit(1);
  }));
}

void StartServer(void (*serve)(int ready_fd), Child* child) {
  *child = Child(ForkReady([serve](int ready_fd) { serve(ready_fd); }));
}

long CpuTicks(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return -1;
  // The fields after the command's closing parenthesis: state is field 3, utime 14, stime 15.
  const size_t close_paren = line.rfind(')');
  if (close_paren == std::string::npos) return -1;
  std::istringstream fields(line.substr(close_paren + 2));
  std::string field;
  long utime = -1, stime = -1;
  for (int number = 3; number <= 15 && fields >> field; ++number) {
    if (number == 14) utime = std::stol(field);
    if (number == 15) stime = std::stol(field);
  }
  return utime < 0 || stime < 0 ? -1 : utime + stime;
}

long RssKiB(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

}  // namespace softrpma::sim::testing
