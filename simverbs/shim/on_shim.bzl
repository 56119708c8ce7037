"""on_shim_test: an existing gtest binary run a second time, on the verbs shim.

on_shim_test(name = "client_server_test") adds the sh_test "client_server_test_on_shim": the same
binary with RPMA_BACKEND=ibverbs and LD_LIBRARY_PATH leading to the shim's libibverbs.so.1 and
librdmacm.so.1 (//simverbs/shim:verbs_lib_dir), so that softrpma's ibverbs backend, which calls
libibverbs / librdmacm, reaches the simulated NIC through the verbs API itself instead of rdma-core
(which finds no device on these machines). on_shim_test.sh checks that the binary loads the shim
and that at least one case passed (a target whose every case skipped fails).
"""

_SHIM_LIB = "//simverbs/shim:lib/libibverbs.so.1"
_SHIM_RDMACM = "//simverbs/shim:lib/librdmacm.so.1"

def on_shim_test(name, excluded = {}, size = "small", **kwargs):
    """Adds `name + "_on_shim"`, running the test binary `:name` on the verbs shim.

    Args:
      name: a cc_test of this package (gtest).
      excluded: {gtest pattern: why}, the cases that cannot run on the shim; passed as a negative
        --gtest_filter. Each reason should name the call, its arguments and the errno.
      size: the test size.
      **kwargs: passed to the sh_test (tags, timeout, ...).
    """
    args = [
        "$(location %s)" % _SHIM_LIB,
        "$(location :%s)" % name,
    ]
    if excluded:
        args.append("--gtest_filter=-" + ":".join(sorted(excluded.keys())))
    native.sh_test(
        name = name + "_on_shim",
        size = size,
        srcs = ["//simverbs/shim:on_shim_test.sh"],
        args = args,
        data = [
            _SHIM_LIB,
            _SHIM_RDMACM,
            ":" + name,
        ],
        **kwargs
    )
