// device_files.cc: device_files.h has the model.

#include "tools/rpma_sim/device_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace softrpma::rpma_sim {
namespace {

absl::Status Errno(const std::string& what) {
  return absl::FailedPreconditionError(absl::StrCat(what, ": ", std::strerror(errno)));
}

bool IsDirectory(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

absl::Status WriteFile(const std::string& path, const std::string& text) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0444);
  if (fd < 0) return Errno(absl::StrCat("cannot create ", path));
  const ssize_t n = write(fd, text.data(), text.size());
  close(fd);
  if (n != static_cast<ssize_t>(text.size())) return Errno(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

absl::Status MakeDirectories(const std::string& path) {
  std::string prefix;
  for (size_t at = 1; at <= path.size(); ++at) {
    if (at != path.size() && path[at] != '/') continue;
    prefix = path.substr(0, at);
    if (mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
      return Errno(absl::StrCat("cannot create ", prefix));
    }
  }
  return absl::OkStatus();
}

// Creates `path` as an empty file (a mount point for a bind of a file).
bool CreateEmptyFile(const std::string& path) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  return fd >= 0 && close(fd) == 0;
}

// A descriptor closed when it goes out of scope.
struct ScopedFd {
  explicit ScopedFd(int value) : fd(value) {}
  ~ScopedFd() {
    if (fd >= 0) close(fd);
  }
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  const int fd;
};

// The entries of the directory `fd` (not . and ..) with their types; those gone meanwhile are
// left out.
std::vector<std::pair<std::string, mode_t>> EntriesOf(int fd) {
  std::vector<std::pair<std::string, mode_t>> entries;
  DIR* list = fdopendir(dup(fd));
  if (list == nullptr) return entries;
  while (const dirent* entry = readdir(list)) {
    const std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    struct stat st;
    if (fstatat(fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
      entries.emplace_back(name, st.st_mode);
    }
  }
  closedir(list);
  return entries;
}

// Covers `dir` with a tmpfs that holds what `dir` held: each entry bind-mounted from the
// original (reached through a descriptor opened before the cover), symbolic links copied.
absl::Status Cover(const std::string& dir) {
  const ScopedFd original(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  struct stat st;
  if (original.fd < 0 || fstat(original.fd, &st) != 0) {
    return Errno(absl::StrCat("cannot open ", dir));
  }
  // The entries first: once covered, `dir` shows the tmpfs.
  const std::vector<std::pair<std::string, mode_t>> entries = EntriesOf(original.fd);
  char mode_octal[16];
  std::snprintf(mode_octal, sizeof(mode_octal), "mode=%o", st.st_mode & 07777);
  if (mount("tmpfs", dir.c_str(), "tmpfs", MS_NOSUID, mode_octal) != 0) {
    return Errno(absl::StrCat("cannot mount a tmpfs on ", dir));
  }
  const std::string from = absl::StrCat("/proc/self/fd/", original.fd, "/");
  for (const auto& [name, mode] : entries) {
    const std::string to = absl::StrCat(dir, "/", name);
    if (S_ISLNK(mode)) {
      char target[4096];
      const ssize_t n = readlinkat(original.fd, name.c_str(), target, sizeof(target) - 1);
      if (n < 0) continue;  // gone meanwhile
      target[n] = '\0';
      if (symlink(target, to.c_str()) != 0) {
        return Errno(absl::StrCat("cannot copy the link ", to));
      }
      continue;
    }
    const bool made = S_ISDIR(mode) ? mkdir(to.c_str(), 0755) == 0 : CreateEmptyFile(to);
    if (!made || mount(absl::StrCat(from, name).c_str(), to.c_str(), nullptr, MS_BIND | MS_REC,
                       nullptr) != 0) {
      return Errno(absl::StrCat("cannot keep ", to, " under the tmpfs"));
    }
  }
  return absl::OkStatus();
}

// Makes `path` (a directory that may not exist) writable: covers it when it exists, else its
// parent (which must), and creates it.
absl::Status MakeWritable(const std::string& path) {
  if (IsDirectory(path)) return Cover(path);
  const std::string parent = path.substr(0, path.rfind('/'));
  if (absl::Status status = Cover(parent); !status.ok()) return status;
  return MakeDirectories(path);
}

absl::Status WriteId(const char* map, unsigned id) {
  return WriteFile(absl::StrCat("/proc/self/", map), absl::StrCat(id, " ", id, " 1\n"));
}

// A mount namespace of this process's own, as root; else (or when forced) in a user
// namespace in which the caller keeps its uid and gid.
absl::Status EnterNamespace() {
  const char* force = std::getenv(kForceUserNamespaceVar);
  const std::string forced = force != nullptr ? force : "0";
  if (forced != "0" && forced != "1") {
    return absl::InvalidArgumentError(
        absl::StrCat(kForceUserNamespaceVar, ": bad value \"", forced, "\": expected 0 or 1"));
  }
  if (geteuid() == 0 && forced == "0") {
    if (unshare(CLONE_NEWNS) != 0) return Errno("cannot enter a mount namespace (unshare)");
  } else {
    const uid_t uid = geteuid();
    const gid_t gid = getegid();
    if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) {
      return Errno(
          "cannot enter a user and mount namespace (unshare; unprivileged user namespaces may "
          "be disabled: see docs/RPMA_SIM.md for the one-time setup as root)");
    }
    if (absl::Status status = WriteFile("/proc/self/setgroups", "deny\n"); !status.ok()) {
      return status;
    }
    if (absl::Status status = WriteId("uid_map", uid); !status.ok()) return status;
    if (absl::Status status = WriteId("gid_map", gid); !status.ok()) return status;
  }
  // Nothing mounted here reaches the namespace the caller came from.
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    return Errno("cannot make the mounts of the namespace private");
  }
  return absl::OkStatus();
}

// True when this device's node is there already (made by hand, or by an enclosing run).
bool NodeExists() {
  struct stat st;
  const std::string node = absl::StrCat("/dev/infiniband/", kUverbsName);
  return stat(node.c_str(), &st) == 0 && S_ISCHR(st.st_mode) &&
         access(node.c_str(), R_OK | W_OK) == 0 &&
         IsDirectory(absl::StrCat("/sys/class/infiniband/", kDeviceName));
}

}  // namespace

absl::Status EnterDeviceFiles() {
  if (NodeExists()) return absl::OkStatus();
  if (absl::Status status = EnterNamespace(); !status.ok()) return status;

  // /dev/infiniband/<uverbs name>: /dev/null, bound there.
  if (absl::Status status = MakeWritable("/dev/infiniband"); !status.ok()) return status;
  const std::string node = absl::StrCat("/dev/infiniband/", kUverbsName);
  if (!CreateEmptyFile(node) || mount("/dev/null", node.c_str(), nullptr, MS_BIND, nullptr) != 0) {
    return Errno(absl::StrCat("cannot make ", node));
  }

  // /sys/class/infiniband/<device> and /sys/class/infiniband_verbs/<uverbs name>.
  const bool has_infiniband = IsDirectory("/sys/class/infiniband");
  const bool has_verbs = IsDirectory("/sys/class/infiniband_verbs");
  if (!has_infiniband || !has_verbs) {
    if (absl::Status status = Cover("/sys/class"); !status.ok()) return status;
  }
  for (const char* dir : {"/sys/class/infiniband", "/sys/class/infiniband_verbs"}) {
    absl::Status status = IsDirectory(dir) ? Cover(dir) : MakeDirectories(dir);
    if (!status.ok()) return status;
  }
  const std::string device = absl::StrCat("/sys/class/infiniband/", kDeviceName);
  const std::string port = absl::StrCat(device, "/ports/1");
  const std::string verbs = absl::StrCat("/sys/class/infiniband_verbs/", kUverbsName);
  for (const std::string& dir : {absl::StrCat(port, "/gid_attrs/types"),
                                 absl::StrCat(port, "/gid_attrs/ndevs"),
                                 absl::StrCat(device, "/device/net/lo"), verbs}) {
    if (absl::Status status = MakeDirectories(dir); !status.ok()) return status;
  }
  const std::pair<std::string, std::string> files[] = {
      {absl::StrCat(device, "/node_type"), "1: CA\n"},
      {absl::StrCat(port, "/state"), "4: ACTIVE\n"},
      {absl::StrCat(port, "/link_layer"), "Ethernet\n"},
      {absl::StrCat(port, "/gid_attrs/types/0"), "RoCE v2\n"},
      {absl::StrCat(port, "/gid_attrs/ndevs/0"), "lo\n"},
      {absl::StrCat(verbs, "/ibdev"), absl::StrCat(kDeviceName, "\n")},
  };
  for (const auto& [path, text] : files) {
    if (absl::Status status = WriteFile(path, text); !status.ok()) return status;
  }
  return absl::OkStatus();
}

}  // namespace softrpma::rpma_sim
