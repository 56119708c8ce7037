// sim_env.h: the environment a program runs in under rpma-sim (the RPMA_SIM_* variables, the
// backend, and LD_LIBRARY_PATH leading to softrpma's librpma.so.0 and to the verbs shim's
// libibverbs.so.1 / librdmacm.so.1), where those libraries are, and the one-line
// `rpma-sim run ...` command that replays a run.
//
// Two ways to run. The default: softrpma's librpma.so.0 first in LD_LIBRARY_PATH, then the
// shim's directory, RPMA_BACKEND=sim: a librpma program runs on softrpma's simulator inside its
// librpma (which calls no libibverbs function then), and a raw verbs program (ibv_devinfo,
// rping) runs on the shim, whose simulator reads the same RPMA_SIM_* variables. With
// --upstream-librpma: another librpma.so.0 (the distro's, upstream librpma) is loaded instead,
// over the shim: the shim's directory first, softrpma's librpma directory nowhere in
// LD_LIBRARY_PATH (inherited entries that hold it are dropped), RPMA_BACKEND=ibverbs (so that a
// program with softrpma's librpma linked in statically also reaches the NIC through the shim).
//
// Thread-safety: every function is thread-safe (none keeps state).

#ifndef SOFTRPMA_TOOLS_RPMA_SIM_SIM_ENV_H_
#define SOFTRPMA_TOOLS_RPMA_SIM_SIM_ENV_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tools/rpma_sim/process.h"

namespace softrpma::rpma_sim {

// The variables the simulated NIC reads (docs/FAULTS.md, docs/TRACE.md).
inline constexpr char kBackendVar[] = "RPMA_BACKEND";
inline constexpr char kSeedVar[] = "RPMA_SIM_SEED";
inline constexpr char kFaultsVar[] = "RPMA_SIM_FAULTS";
inline constexpr char kScenarioVar[] = "RPMA_SIM_SCENARIO";
inline constexpr char kTraceVar[] = "RPMA_SIM_TRACE";
inline constexpr char kStatsVar[] = "RPMA_SIM_STATS";
inline constexpr char kFabricVar[] = "RPMA_SIM_FABRIC";
inline constexpr char kDeviceVar[] = "RPMA_SIM_DEVICE";
inline constexpr char kExecutionVar[] = "RPMA_SIM_EXECUTION";
inline constexpr char kRaceDetectorVar[] = "RPMA_SIM_RACE_DETECTOR";
// Where each process of a run records how it ended (simverbs/sim/trace/process_end.h).
inline constexpr char kRunDirVar[] = "RPMA_SIM_RUN_DIR";

// The library file that LD_LIBRARY_PATH must find.
inline constexpr char kLibraryName[] = "librpma.so.0";
// The verbs shim's libraries (//simverbs/shim:verbs_lib_dir), both in one directory.
inline constexpr char kVerbsLibraryName[] = "libibverbs.so.1";
inline constexpr char kRdmacmLibraryName[] = "librdmacm.so.1";

// One run's simulator settings; what is unset here is removed from the environment, so that a
// run depends on the command line only (and its replay line reproduces it).
struct SimConfig {
  std::optional<uint64_t> seed;
  std::optional<std::string> faults;  // a fault spec; "" is a valid, empty plan
  std::string scenario;               // a scenario file, "" for none
  std::string trace;                  // where the simulator writes its trace, "" for none
  std::string stats;                  // where it writes hit counts at exit, "" for none
  std::string lib_dir;                // prepended to LD_LIBRARY_PATH, "" for none
  // The verbs shim's directory, in LD_LIBRARY_PATH after lib_dir, "" for none.
  std::string verbs_lib_dir;
  // --upstream-librpma: RPMA_BACKEND=ibverbs, and directories that hold softrpma's
  // librpma.so.0 removed from the inherited LD_LIBRARY_PATH (lib_dir must be "").
  bool upstream_librpma = false;
  // The directory of the upstream librpma.so.0 when it is not the loader's default (after
  // verbs_lib_dir), "" for the system's.
  std::string upstream_lib_dir;
  // The host fabric the run's processes meet on (docs/FABRIC.md); "" keeps the inherited one.
  // A sweep gives each run its own, so that runs side by side never see each other's
  // listeners.
  std::string fabric;
  // The device profile (docs/DEVICES.md), "" for the simulator's default (mlx5).
  std::string device;
  // When work requests execute: "async" / "eager" (docs/RPMA_SIM.md), "" for the default
  // (async).
  std::string execution;
  // The buffer-race detector: on unless --races=false.
  bool race_detector = true;
  // The run's directory, where every process of the run records how it ended (a signal, an
  // abort message, a sanitizer report, its exit status), "" for none: only a run whose
  // processes rpma-sim reads afterwards has one (sweep, run --junit).
  std::string run_dir;
};

// How the user chose the libraries, for replay lines: the flags as given ("" / false: not).
struct LibraryFlags {
  std::string lib;           // --lib
  std::string verbs_lib;     // --verbs-lib
  bool upstream_librpma = false;  // --upstream-librpma
  std::string upstream_lib;  // --upstream-lib
};

// `program` (argv) to be run with `config`: RPMA_BACKEND=sim (ibverbs with upstream_librpma),
// the RPMA_SIM_* variables that `config` sets (the others removed) and
// LD_LIBRARY_PATH=<lib_dir>:<verbs_lib_dir>:<upstream_lib_dir>:<inherited value> (each part
// only when not empty; with upstream_librpma, the inherited value without the directories that
// hold softrpma's librpma.so.0).
ChildCommand SimCommand(const SimConfig& config, std::vector<std::string> program);

// Where softrpma's librpma.so.0 may be, in order, for rpma-sim at `exe` (symlinks resolved)
// and, when not empty, as it was called (`argv0`, absolute) and $RUNFILES_DIR; each path once.
// For each of exe and argv0, with D its directory: D itself (both in one directory),
// D/../lib/softrpma (an install prefix: bin/rpma-sim and lib/softrpma/, the layout of
// `./run install` and //api:librpma_pc's tree), D/../lib (bin/ and lib/), D/../../api
// (bazel-bin), D/../../api/librpma/lib/softrpma (bazel-bin's install tree) and
// <it>.runfiles/softrpma/api; then $RUNFILES_DIR/softrpma/api.
std::vector<std::string> LibDirCandidates(absl::string_view exe, absl::string_view argv0,
                                          absl::string_view runfiles_dir);

// The directory of softrpma's librpma.so.0 that runs use (absolute, canonical). A librpma.so.0
// counts only when it is softrpma's (it holds the simulator's messages), never the distro's.
// With `lib_flag` (--lib) non-empty: that directory, which must contain it. Otherwise, the
// first of LibDirCandidates() that does.
// Errors: NotFound naming where it looked (each directory once) and any librpma.so.0 found there
// that is not softrpma's.
absl::StatusOr<std::string> FindLibDir(absl::string_view lib_flag, absl::string_view argv0);

// Where the verbs shim's directory may be, in the order and for the programs of
// LibDirCandidates(): D itself, D/../lib/softrpma/verbs-shim (an install prefix),
// D/../../simverbs/shim/lib (bazel-bin) and <it>.runfiles/softrpma/simverbs/shim/lib; then
// $RUNFILES_DIR/softrpma/simverbs/shim/lib.
std::vector<std::string> VerbsLibDirCandidates(absl::string_view exe, absl::string_view argv0,
                                               absl::string_view runfiles_dir);

// The verbs shim's directory that runs use (absolute, canonical): one with the shim's
// libibverbs.so.1 (it holds the simulator's messages, rdma-core's does not) and a
// librdmacm.so.1. With `verbs_lib_flag` (--verbs-lib) non-empty: that directory, which must
// hold them. Otherwise, the first of VerbsLibDirCandidates() that does.
// Errors: NotFound naming where it looked, and a libibverbs.so.1 found there that is not the
// shim's.
absl::StatusOr<std::string> FindVerbsLibDir(absl::string_view verbs_lib_flag,
                                            absl::string_view argv0);

// Whether `dir` holds softrpma's librpma.so.0 (a run on upstream librpma must not have it on
// LD_LIBRARY_PATH: the loader would take it).
bool HoldsOurLibrpma(const std::string& dir);

// Where the distro puts librpma.so.0 (librpma0), in the loader's order: /lib/<multiarch>,
// /usr/lib/<multiarch>, /lib64, /usr/lib64, /lib, /usr/lib, /usr/local/lib.
std::vector<std::string> SystemLibDirs();

// The upstream librpma.so.0 that --upstream-librpma runs on: with `upstream_lib_flag`
// (--upstream-lib) non-empty, the one in that directory; otherwise the first in `system_dirs`.
// It must not be softrpma's. Returns the directory (absolute, canonical).
// Errors: NotFound naming where it looked and how to install it (Debian: librpma0), or that
// the one found is softrpma's.
absl::StatusOr<std::string> FindUpstreamLibDir(absl::string_view upstream_lib_flag,
                                               const std::vector<std::string>& system_dirs);

// `word` quoted for a POSIX shell when it needs it: as is when it has only [A-Za-z0-9_@%+=:,./-],
// otherwise in single quotes ('\'' for a quote inside).
std::string ShellQuote(absl::string_view word);

// The words of a command, each ShellQuote()d, joined by spaces.
std::string ShellJoin(const std::vector<std::string>& words);

// The one-line command that replays one run:
//   <tool> run [--device=D] [--execution=E] [--races=false] [--seed=S] [--faults='SPEC']
//   [--scenario='FILE'] [--lib=DIR] [--verbs-lib=DIR] [--upstream-librpma] [--upstream-lib=DIR]
//   -- PROGRAM ARGS...
// `tool` is how rpma-sim was called; `libraries` are the library flags as given. config.trace,
// stats and the library directories are not part of it.
std::string ReplayCommand(absl::string_view tool, const SimConfig& config,
                          const LibraryFlags& libraries, const std::vector<std::string>& program);

}  // namespace softrpma::rpma_sim

#endif  // SOFTRPMA_TOOLS_RPMA_SIM_SIM_ENV_H_
