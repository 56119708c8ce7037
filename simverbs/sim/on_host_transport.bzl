"""on_host_transport_test: an existing gtest binary of the simulator run a second time, on the host
transport.

on_host_transport_test(name = "qp_test") adds the sh_test "qp_test_on_host": the same binary with
RPMA_SIM_TRANSPORT=host, so that every connection its cases make inside the process goes through
the host fabric as a connection to another process does (sched.h, Transport): one suite of QP / CQ /
CM behaviour for both transports, and a difference between them is a failing case.
"""

def on_host_transport_test(name, excluded = {}, size = "small", socket = False, **kwargs):
    """Adds `name + "_on_host"`, running the test binary `:name` on the host transport.

    The host transport's connections carry their messages through shared-memory rings (the
    default); with `socket`, `name + "_on_host_socket"` runs the same cases with RPMA_SIM_SHM=0,
    every message through the connections' sockets, as with a peer that offers no ring.

    Args:
      name: a cc_test of this package (gtest).
      excluded: {gtest pattern: why}, the cases that cannot hold across processes for a
        physical reason (one NIC model, two ends that each see only their own side); passed as
        a negative --gtest_filter.
      size: the test size.
      socket: also the `_on_host_socket` variant.
      **kwargs: passed to the sh_test (tags, timeout, ...).
    """
    args = ["$(location :%s)" % name]
    if excluded:
        args.append("--gtest_filter=-" + ":".join(sorted(excluded.keys())))
    native.sh_test(
        name = name + "_on_host",
        size = size,
        srcs = ["on_host_transport_test.sh"],
        args = args,
        data = [":" + name],
        **kwargs
    )
    if socket:
        native.sh_test(
            name = name + "_on_host_socket",
            size = size,
            srcs = ["on_host_transport_test.sh"],
            args = args,
            data = [":" + name],
            env = {"RPMA_SIM_SHM": "0"},
            **kwargs
        )
