#include "tools/rpma_sim/env_page.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "tools/rpma_sim/man_page.h"

namespace softrpma::rpma_sim {
namespace {

constexpr char kIntro[] =
    "softrpma's librpma.so.0 and verbs shim read these variables when the simulated NIC starts "
    "(the first call that reaches it); a value they cannot use makes that call fail "
    "(rpma_utils_get_ibv_context() returns RPMA_E_INVAL, a verbs call EINVAL) with a line on "
    "stderr naming the variable, never a silent default. rpma-sim run and sweep set them from "
    "their flags and remove the inherited ones, so that a replay line is the whole "
    "configuration.";

// Words wrapped to `width` columns, each line after the first indented by `indent`.
std::string Wrap(absl::string_view text, size_t width, size_t indent) {
  std::string out;
  size_t column = indent;
  for (absl::string_view word : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    if (column > indent && column + 1 + word.size() > width) {
      absl::StrAppend(&out, "\n", std::string(indent, ' '));
      column = indent;
    } else if (column > indent) {
      out += ' ';
      ++column;
    }
    absl::StrAppend(&out, word);
    column += word.size();
  }
  return out;
}

}  // namespace

const std::vector<EnvVar>& EnvironmentVariables() {
  static const std::vector<EnvVar>* vars = new std::vector<EnvVar>{
      {"RPMA_BACKEND", "sim | ibverbs",
       "The NIC librpma.so.0 runs on: sim (the default, or unset), the simulated NIC; ibverbs, "
       "the real libibverbs and librdmacm. Any other value makes rpma_utils_get_ibv_context() "
       "fail with RPMA_E_INVAL; softrpma never falls back silently.",
       false},
      {"RPMA_SIM_FAULTS", "SPEC",
       "Fault rules, separated by ';', each naming the verbs or rdma_cm call it fails and when: "
       "'ibv_post_send:fail=EIO:nth=3'. The grammar, the points and the actions: "
       "`rpma-sim points`, docs/FAULTS.md.",
       false},
      {"RPMA_SIM_SCENARIO", "FILE",
       "A file of fault rules, one a line, '#' comments, an optional 'seed' line.", false},
      {"RPMA_SIM_SEED", "S (decimal or 0x hex, 64 bits)",
       "The seed of everything the simulator may choose: when a work request executes, the "
       "interleaving of completions across QPs, prob= faults. The same program with the same "
       "seed gives the same trace.",
       false},
      {"RPMA_SIM_DEVICE", "mlx5 | rxe | siw",
       "The device the simulated NIC stands for (default mlx5): transport (siw is iWARP), "
       "immediate data, native atomic write, ODP, limits, queue rounding, private data lengths "
       "(`rpma-sim devices`).",
       false},
      {"RPMA_SIM_NATIVE_ATOMIC_WRITE", "0 | 1",
       "Overrides the device's native atomic write: 1, rpma_atomic_write posts "
       "ibv_wr_atomic_write; 0, the 8-byte fenced RDMA WRITE librpma emulates it with.",
       false},
      {"RPMA_SIM_EXECUTION", "async | eager",
       "async (the default): a work request executes after the call that posted it returns, at "
       "a later post or progress point the seed chooses, as on a NIC; eager: inside its post.",
       false},
      {"RPMA_SIM_RACE_DETECTOR", "0 | 1",
       "1: a write's or send's source changed between its post and its execution is reported "
       "(a 'softrpma-sim: race:' line), and a read's destination and a receive's buffers hold "
       "poison until their completion. On by default under rpma-sim run and sweep.",
       false},
      {"RPMA_SIM_TRACE", "PATH",
       "Write a trace of every post, completion, CQ and CM event, fault and librpma call there "
       "(`rpma-sim trace` reads it). %p is replaced by the pid, %r by the role.",
       false},
      {"RPMA_SIM_STATS", "PATH",
       "Write how often each fault point was hit there, at exit (what rpma-sim sweep plans "
       "from). %p and %r as in RPMA_SIM_TRACE.",
       false},
      {"RPMA_SIM_ROLE", "NAME",
       "This process's name for prog= fault rules, traces and reports (default: the "
       "executable's name).",
       false},
      {"RPMA_SIM_FABRIC", "NAME (1 to 40 of A-Z a-z 0-9 . _ -)",
       "The fabric on which the processes of this machine meet: processes on different fabrics "
       "never see each other. Default: one per user (uid<uid>), and one per Bazel test.",
       false},
      {"RPMA_SIM_SHM", "0 | 1",
       "0: this process's connections to other processes keep every message on their socket "
       "instead of shared-memory rings (default 1: rings where both processes offer one).",
       false},
      {"RPMA_SIM_CMA", "0 | 1",
       "0: large transfers between processes go through the fabric too, not by cross-memory "
       "attach (default 1: where the kernel allows it).",
       false},
      {"RPMA_SIM_PUSH", "0 | 1",
       "0: this process never writes an RDMA WRITE into a peer process's memory itself, nor lets "
       "its peers write into its own: every write waits for the target's NIC (default 1: where "
       "cross-memory attach is on, a write its QP has alone in flight, or of 16 KiB or more, "
       "whose target range the target published).",
       false},
      {"RPMA_SIM_RUN_DIR", "DIR",
       "Set by rpma-sim sweep and run --junit for each run: where every process of the run "
       "records how it ended (signal, abort message, sanitizer report, exit status) and where "
       "it waits when asked. Must be a writable directory.",
       false},
      {"RPMA_SIM_TRANSPORT", "local | host",
       "How a connection between two ids of one process is carried: local (the default), or "
       "host, through the fabric as a connection to another process is. For running one test "
       "suite over both.",
       true},
      {"RPMA_SIM_PEER_ANSWER_MS", "MS (0 to 600000, default 2000)",
       "How long, in real time, a timer that a peer in another process could still beat waits "
       "for it: after rdma_disconnect, the DREQ's timeout (DISCONNECTED with status -ETIMEDOUT, "
       "RPMA_CONN_CLOSED) is taken only when the peer's answer has not come in this long and "
       "the peer process is alive, because each process has its own simulated clock and the "
       "peer may be busy outside the simulator. 0: the timeout at once. The trace says "
       "cm_peer_silent where real time decided.",
       false},
      {"RPMA_SIM_FABRIC_HANDSHAKE_MS", "MS",
       "How long an accepted fabric connection may wait for its first message (default 10000).",
       true},
      {"RPMA_SIM_FABRIC_BACKSTOP_MS", "MS",
       "How long a deferred work request of a process that calls nothing waits before the "
       "fabric thread sends it (default 1).",
       true},
      {"RPMA_FAULT_INJECTION", "(refused)",
       "Upstream librpma's debug-build fault injection. softrpma refuses to start with it set "
       "and names the RPMA_SIM_FAULTS rule that does the same.",
       false},
  };
  return *vars;
}

std::string EnvHelpText() {
  std::string out = absl::StrCat(Wrap(kIntro, 100, 0), "\n\n");
  for (bool tests : {false, true}) {
    if (tests) out += "For softrpma's own tests:\n\n";
    for (const EnvVar& var : EnvironmentVariables()) {
      if (var.for_tests != tests) continue;
      absl::StrAppend(&out, "  ", var.name, "=", var.value, "\n      ", Wrap(var.text, 100, 6),
                      "\n");
    }
    out += "\n";
  }
  out += "More: docs/FAULTS.md, docs/FABRIC.md, docs/TRACE.md (share/doc/softrpma when installed).\n";
  return out;
}

std::string EnvManPage(absl::string_view version) {
  std::string out = absl::StrCat(".TH SOFTRPMA\\-ENV 7 \"\" \"", RoffText(version),
                                 "\" \"softrpma\"\n.SH NAME\nsoftrpma\\-env \\- ",
                                 "the environment variables of softrpma's simulated RDMA NIC\n",
                                 ".SH DESCRIPTION\n.PP\n", RoffText(kIntro), "\n");
  for (bool tests : {false, true}) {
    absl::StrAppend(&out, ".SH ", tests ? "FOR SOFTRPMA'S OWN TESTS" : "VARIABLES", "\n");
    for (const EnvVar& var : EnvironmentVariables()) {
      if (var.for_tests != tests) continue;
      absl::StrAppend(&out, ".TP\n.B ", RoffText(var.name), "=", RoffText(var.value), "\n",
                      RoffText(var.text), "\n");
    }
  }
  absl::StrAppend(&out, ".SH SEE ALSO\n.BR rpma\\-sim (1),\n.BR librpma (7)\n");
  return out;
}

}  // namespace softrpma::rpma_sim
