// device_files.h: the files a kernel RDMA driver would make for the simulated device, given to
// the processes of one `rpma-sim run --device-files` and to no one else.
//
// THE MODEL
//   * Some middleware looks for a device in the file system before it opens it through
//     libibverbs: UCX lists a device only when /dev/infiniband/<its uverbs name> is a character
//     device it may read and write, and reads the port's RoCE GID attributes from
//     /sys/class/infiniband/<device>/ports/1/gid_attrs. The simulated device has no kernel
//     driver, so nothing makes them.
//   * EnterDeviceFiles makes them in a mount namespace of this process's own, which every
//     process it starts afterwards inherits: the rest of the machine sees nothing. As root,
//     a mount namespace (unshare CLONE_NEWNS); otherwise a user namespace with it, in which the
//     caller keeps its own uid and gid (programs that refuse to run as root still run).
//   * Each directory that gains an entry (/dev, or /dev/infiniband when it exists already;
//     /sys/class, or /sys/class/infiniband and /sys/class/infiniband_verbs) is covered by a
//     tmpfs holding what it held before (every entry bind-mounted from the original, symbolic
//     links copied) and the new entries: the device node is /dev/null bind-mounted there (a
//     character device anyone may read and write, with no driver behind it: the shim never
//     opens it), and the sysfs files are small text files (kDeviceName's node_type, its port's
//     GID type "RoCE v2" and net device "lo": the simulated GIDs are IPv4-mapped loopback
//     addresses; device/net/lo for tools that find the device's interface there;
//     infiniband_verbs/<uverbs name>/ibdev).
//   * Where namespaces are refused (a container without CAP_SYS_ADMIN that forbids user
//     namespaces too), EnterDeviceFiles fails with what was refused and why: nothing is made
//     and the run does not start. Where the files exist already for this device (made by hand
//     as root, docs/RPMA_SIM.md), nothing is done.
//
// Not thread-safe: call it before any thread is started (unshare(CLONE_NEWUSER) refuses a
// multi-threaded process).

#ifndef SOFTRPMA_TOOLS_RPMA_SIM_DEVICE_FILES_H_
#define SOFTRPMA_TOOLS_RPMA_SIM_DEVICE_FILES_H_

#include "absl/status/status.h"

namespace softrpma::rpma_sim {

// The simulated device's names, as the shim reports them (simverbs/sim/nic/device.cc).
inline constexpr char kDeviceName[] = "softrpma_sim0";
inline constexpr char kUverbsName[] = "uverbs_softrpma0";

// Test-only: "1" makes EnterDeviceFiles take the user-namespace path also as root, so that
// the path of an unprivileged user is tested where the tests run as root.
inline constexpr char kForceUserNamespaceVar[] = "RPMA_SIM_DEVICE_FILES_USERNS";

absl::Status EnterDeviceFiles();

}  // namespace softrpma::rpma_sim

#endif  // SOFTRPMA_TOOLS_RPMA_SIM_DEVICE_FILES_H_
