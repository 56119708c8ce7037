// common.h: what several of rpma-sim's subcommands share: the flags of both run and sweep (and
// report merge's --report / --junit), the usage error, help text wrapping, and the libraries a
// run is given.
//
// Thread-safety: as the commands (command.h): main's thread only.

#ifndef SOFTRPMA_TOOLS_RPMA_SIM_COMMANDS_COMMON_H_
#define SOFTRPMA_TOOLS_RPMA_SIM_COMMANDS_COMMON_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/strings/string_view.h"
#include "tools/rpma_sim/command_line.h"
#include "tools/rpma_sim/sim_env.h"

ABSL_DECLARE_FLAG(uint64_t, seed);
ABSL_DECLARE_FLAG(std::string, execution);
ABSL_DECLARE_FLAG(bool, races);
ABSL_DECLARE_FLAG(std::string, device);
ABSL_DECLARE_FLAG(std::string, lib);
ABSL_DECLARE_FLAG(std::string, verbs_lib);
ABSL_DECLARE_FLAG(bool, upstream_librpma);
ABSL_DECLARE_FLAG(std::string, upstream_lib);
ABSL_DECLARE_FLAG(std::string, report);
ABSL_DECLARE_FLAG(std::string, junit);

namespace softrpma::rpma_sim {

constexpr int kExitUsage = 2;

// Prints `rpma-sim: MESSAGE` and the pointer to --help on stderr; returns kExitUsage.
int Usage(absl::string_view message);

// `text` wrapped at 100 columns, to be printed where the cursor is at `first_column`; the lines
// after the first start with `indent` blanks. Ends with a newline.
std::string Wrap(absl::string_view text, size_t indent, size_t first_column);

// How replay lines call rpma-sim: as it was called when that was a path, else by name.
std::string ToolName(const char* argv0);

// The libraries of a run (sim_env.h): the flags as given, for replay lines, and the directories
// they lead to.
struct Libraries {
  LibraryFlags flags;
  std::string lib_dir;        // softrpma's librpma.so.0; "" with --upstream-librpma
  std::string verbs_lib_dir;  // the verbs shim's
  bool upstream_librpma = false;
  std::string upstream_lib_dir;  // --upstream-lib's directory; "" for the system's
};

// The libraries the flags (--lib, --verbs-lib, --upstream-librpma, --upstream-lib) ask for,
// each found near `argv0` unless given; nullopt with the error printed (a missing shim, or a
// missing upstream librpma with --upstream-librpma, would make the run a run on something else
// than asked).
std::optional<Libraries> ResolveLibraries(const char* argv0);

// Sets `config`'s library directories to `libraries`'.
void ApplyLibraries(const Libraries& libraries, SimConfig* config);

// --execution: "" (the default) or a mode the simulator knows; nullopt after a usage message.
std::optional<std::string> ExecutionFlag();

// The devices --device names (empty when not given: the simulator's default), or a usage error
// printed and nullopt.
std::optional<std::vector<std::string>> DevicesFlag(const CommandLine& line);

// Writes `text` to `path`; false (said on stderr) when it cannot.
bool WriteTextFile(const std::string& path, const std::string& text, const char* what);

}  // namespace softrpma::rpma_sim

#endif  // SOFTRPMA_TOOLS_RPMA_SIM_COMMANDS_COMMON_H_
