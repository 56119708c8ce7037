#include "simverbs/sim/read_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace softrpma::sim {

absl::StatusOr<std::string> ReadFileUpTo(const std::string& path, uint64_t max_bytes,
                                         absl::string_view what) {
  auto error = [&](absl::StatusCode code, absl::string_view reason) {
    return absl::Status(code, absl::StrCat(path, ": cannot read ", what, ": ", reason));
  };
  auto errno_error = [&](int err) {
    const absl::StatusCode code = err == ENOENT ? absl::StatusCode::kNotFound
                                  : err == EACCES || err == EPERM
                                      ? absl::StatusCode::kPermissionDenied
                                      : absl::StatusCode::kUnknown;
    return error(code, std::strerror(err));
  };
  auto too_large = [&]() {
    const std::string limit = max_bytes >= (uint64_t{1} << 20)
                                  ? absl::StrCat(max_bytes >> 20, " MiB")
                                  : absl::StrCat(max_bytes, " bytes");
    return error(absl::StatusCode::kInvalidArgument,
                 absl::StrCat("it is larger than ", limit, ", the most softrpma reads as one"));
  };
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno_error(errno);
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    close(fd);
    return errno_error(err);
  }
  if (S_ISDIR(st.st_mode)) {
    close(fd);
    return error(absl::StatusCode::kInvalidArgument, "it is a directory");
  }
  if (S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) > max_bytes) {
    close(fd);
    return too_large();
  }
  std::string text;
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      close(fd);
      return errno_error(err);
    }
    if (n == 0) break;
    if (text.size() + static_cast<size_t>(n) > max_bytes) {  // /dev/zero, a growing file
      close(fd);
      return too_large();
    }
    text.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  return text;
}

}  // namespace softrpma::sim
