"""rpma_sim_sweep_test: a fault sweep of a librpma program as a Bazel test (docs/CI.md).

In a repository that has softrpma as an external repository (`local_repository` or
`http_archive` named `softrpma`):

    load("@softrpma//tools/rpma_sim:defs.bzl", "rpma_sim_sweep_test")

    rpma_sim_sweep_test(
        name = "my_app_sweep_test",
        program = ":my_app",          # a cc_binary using librpma (@softrpma//api:rpma)
        args = ["--once"],
        shard_count = 4,              # Bazel runs 4 shards, on remote workers if it has them
        max_runs = 400,
    )

The test runs `rpma-sim sweep -- PROGRAM ARGS...`; with shard_count each shard runs its part
of the plan (Bazel's TEST_TOTAL_SHARDS / TEST_SHARD_INDEX, which rpma-sim reads). The runs are
the test's JUnit cases (XML_OUTPUT_FILE: Bazel's test.xml, a case per run) and the sweep's JSON
report is an undeclared output (`bazel-testlogs/<target>/[shard_K_of_N/]test.outputs/`), ready
for `rpma-sim report merge`. The test fails when a run crashed or hung (or leaked, with leaks).
"""

def rpma_sim_sweep_test(
        name,
        program,
        args = [],
        shard_count = None,
        jobs = 2,
        run_timeout = "10s",
        max_runs = 0,
        points = [],
        kinds = [],
        device = None,
        seed = None,
        leaks = False,
        data = [],
        **kwargs):
    """A sh_test that sweeps every fault point `program` hits (rpma-sim sweep).

    Args:
      name: the test's name.
      program: the label of the program to sweep (an executable: cc_binary, sh_binary).
      args: its arguments.
      shard_count: how many shards Bazel runs (None: one).
      jobs: runs at once in each shard (-j).
      run_timeout: each run's timeout (--timeout; "10s", "2m"); the test's own timeout is
        Bazel's (size / timeout).
      max_runs: at most this many runs over all shards (--max-runs; 0: every hit).
      points: only these fault points (--points).
      kinds: only these kinds of fault (--kinds: fail, wc, conn, kill; []: every kind).
      device: the device profile (--device: mlx5, rxe or siw; None: mlx5). One per test: a
        test per device gives each its own test.xml.
      seed: the simulator's seed (--seed; None: its default).
      leaks: also fail on leaks (--leaks; the program must be built with ASan, or valgrind
        installed).
      data: more runfiles the program needs.
      **kwargs: what sh_test takes (size, timeout, tags, env, ...).
    """
    rpma_sim = Label("//tools/rpma_sim:rpma-sim")
    flags = ["-j", str(jobs), "--timeout=" + run_timeout]
    if max_runs:
        flags.append("--max-runs=%d" % max_runs)
    if points:
        flags.append("--points=" + ",".join(points))
    if kinds:
        flags.append("--kinds=" + ",".join(kinds))
    if device:
        flags.append("--device=" + device)
    if seed != None:
        flags.append("--seed=%d" % seed)
    if leaks:
        flags.append("--leaks")
    native.sh_test(
        name = name,
        srcs = [Label("//tools/rpma_sim:sweep_test_runner.sh")],
        args = ["$(rootpath %s)" % rpma_sim] + flags + ["--", "$(rootpath %s)" % program] + args,
        data = [program, rpma_sim] + data,
        shard_count = shard_count,
        **kwargs
    )
