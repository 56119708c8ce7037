// read_file.h: ReadFileUpTo, how the simulator and rpma-sim read a file a user
// named (a scenario, a sweep report): whole, but never more than a limit, so
// that /dev/zero, a FIFO nobody closes or a file that keeps growing is an error
// naming the file and the limit instead of a read that never ends or exhausts
// memory (issue 18).

#ifndef SOFTRPMA_SIMVERBS_SIM_READ_FILE_H_
#define SOFTRPMA_SIMVERBS_SIM_READ_FILE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace softrpma::sim {

// The contents of the file at `path`, if it holds at most `max_bytes`. Reads
// regular files, pipes and character devices alike, never more than max_bytes +
// 1 bytes (a regular file larger than the limit, a sparse one included, is
// refused from its size before anything is read). `what` names the kind of file
// for the messages ("scenario file"), all of the form
// "<path>: cannot read <what>: <reason>", the reason being strerror's text, "it
// is a directory" or "it is larger than <N> MiB, the most softrpma reads as
// one". Errors: NotFound (ENOENT), PermissionDenied (EACCES, EPERM),
// InvalidArgument (a directory, over the limit), Unknown (any other errno of
// open / fstat / read).
absl::StatusOr<std::string> ReadFileUpTo(const std::string& path, uint64_t max_bytes,
                                         absl::string_view what);

}  // namespace softrpma::sim

#endif  // SOFTRPMA_SIMVERBS_SIM_READ_FILE_H_
