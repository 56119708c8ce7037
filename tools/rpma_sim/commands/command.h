// command.h: rpma-sim's command table. Each subcommand lives in one file of this directory
// (points.cc, devices.cc, run.cc, sweep.cc, trace.cc, report.cc) with its own flags, its help
// and its run function, and is reached through one of the functions below; main.cc holds the
// overview and the dispatch. common.h has what several subcommands share.
//
// Thread-safety: a command runs once, on main's thread, after its flags were parsed.

#ifndef SOFTRPMA_TOOLS_RPMA_SIM_COMMANDS_COMMAND_H_
#define SOFTRPMA_TOOLS_RPMA_SIM_COMMANDS_COMMAND_H_

#include "tools/rpma_sim/command_line.h"

namespace softrpma::rpma_sim {

// One subcommand: what it accepts, its help and what it does.
struct Command {
  SubcommandSpec spec;      // its name, the absl flags it takes (in help order), its arguments
  const char* synopsis;     // `rpma-sim SUB --help`'s Usage: line(s)
  const char* description;  // what it does, wrapped at 100 columns
  const char* examples;     // one example a line, each ending with '\n'
  // Runs it: returns rpma-sim's exit status. `argv0` is how rpma-sim was called.
  int (*run)(const CommandLine& line, const char* argv0);
};

// The subcommands, in the order the overview and the error messages name them.
const Command& PointsCommand();   // points.cc
const Command& DevicesCommand();  // devices.cc
const Command& RunCommand();      // run.cc
const Command& SweepCommand();    // sweep.cc
const Command& TraceCommand();    // trace.cc
const Command& ReportCommand();   // report.cc

}  // namespace softrpma::rpma_sim

#endif  // SOFTRPMA_TOOLS_RPMA_SIM_COMMANDS_COMMAND_H_
