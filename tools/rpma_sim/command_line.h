// command_line.h: rpma-sim's command line: `rpma-sim SUBCOMMAND [FLAGS] [ARGS] [-- PROGRAM ARGS]`.
// The flags are absl flags (ABSL_FLAG, defined in commands/); this parser knows which of them
// each subcommand takes, so that a flag given to the wrong subcommand is an error rather than
// silently ignored, and it accepts the spellings people type: --max-runs as well as --max_runs,
// `--flag value`, -j 4 and -j4.
//
// Thread-safety: ParseArgs sets absl flag values: call it once, from main, before other threads.

#ifndef SOFTRPMA_TOOLS_RPMA_SIM_COMMAND_LINE_H_
#define SOFTRPMA_TOOLS_RPMA_SIM_COMMAND_LINE_H_

#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace softrpma::rpma_sim {

// What one subcommand accepts.
struct SubcommandSpec {
  std::string name;                // "run"
  std::vector<std::string> flags;  // absl flag names it takes ("max_runs", with underscores)
  bool takes_program = false;      // requires `-- PROGRAM [ARGS...]`
  int min_args = 0;                // positional arguments before "--"
  int max_args = 0;
};

// A parsed command line.
struct CommandLine {
  std::string subcommand;            // "" when none was given (then help is true)
  bool help = false;                 // --help / -h / `help [SUBCOMMAND]`: print usage, run nothing
  std::vector<std::string> args;     // positional arguments after the subcommand, before "--"
  std::vector<std::string> program;  // everything after "--"
  // The absl flag names given (normalized: "max_runs"), and the same flags as
  // "--name=value" words for absl::ParseCommandLine.
  absl::flat_hash_set<std::string> given;
  std::vector<std::string> flag_words;
};

// Parses `args` (argv without argv[0]). Flags may come anywhere before "--"; each is looked up
// among the absl flags (absl::FindCommandLineFlag) and its value parsed and set
// (absl::CommandLineFlag::ParseFrom). `--name` alone sets a bool flag; `--noname` clears it.
// Errors (InvalidArgument, the message says what to do): no subcommand, an unknown subcommand,
// an unknown flag, a flag the subcommand does not take, a bad flag value, a missing flag value,
// too few / too many arguments, a missing `-- PROGRAM` or one where none is taken.
absl::StatusOr<CommandLine> ParseArgs(const std::vector<SubcommandSpec>& subcommands,
                                      const std::vector<std::string>& args);

// "--max-runs" for "max_runs": how help and messages spell a flag.
std::string FlagSpelling(absl::string_view name);

}  // namespace softrpma::rpma_sim

#endif  // SOFTRPMA_TOOLS_RPMA_SIM_COMMAND_LINE_H_
