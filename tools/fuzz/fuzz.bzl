"""softrpma_fuzz_test: one LLVMFuzzerTestOneInput source, built two ways (README.md, Fuzzing).

  <name>_corpus_test  a cc_test (GCC, every `bazel test`): runs the committed seed corpus through
                      the target with tools/fuzz/corpus_driver.cc as main; fails on a crash or a
                      failed FUZZ_CHECK.
  <name>_fuzzer       the libFuzzer binary under --config=fuzz (clang-14, ASan + UBSan):
                      bazel run --config=fuzz //pkg:<name>_fuzzer -- -max_total_time=150 DIR
                      Tagged manual: `bazel build //...` (GCC) leaves it alone; built without
                      the config it is the corpus driver again.
"""

def softrpma_fuzz_test(name, srcs, corpus, deps = [], size = "small", **kwargs):
    """Declares <name>_corpus_test and <name>_fuzzer.

    Args:
      name: the target's name, e.g. "mr_remote_from_descriptor".
      srcs: the source defining LLVMFuzzerTestOneInput (and its private headers).
      corpus: the seed files (e.g. glob(["testdata/fuzz/<name>/*"])), one input each.
      deps: what the source needs; tools/fuzz:check is added.
      size: of the corpus test.
      **kwargs: passed to both rules (e.g. copts).
    """
    deps = deps + ["//tools/fuzz:check"]
    native.filegroup(
        name = name + "_corpus",
        srcs = corpus,
    )
    native.cc_test(
        name = name + "_corpus_test",
        size = size,
        srcs = srcs,
        args = ["$(rootpaths :%s_corpus)" % name],
        data = [":" + name + "_corpus"],
        deps = deps + ["//tools/fuzz:corpus_driver"],
        **kwargs
    )
    native.cc_binary(
        name = name + "_fuzzer",
        testonly = True,
        srcs = srcs,
        data = [":" + name + "_corpus"],
        linkopts = select({
            "//tools/fuzz:fuzzing": ["-fsanitize=fuzzer"],
            "//conditions:default": [],
        }),
        tags = ["manual"],
        deps = deps + select({
            "//tools/fuzz:fuzzing": [],
            "//conditions:default": ["//tools/fuzz:corpus_driver"],
        }),
        **kwargs
    )
