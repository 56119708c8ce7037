// man_page.h: rpma-sim(1) in roff (man(7) macros), made from the same tables as `--help`
// (main.cc: the overview's parts, each subcommand's synopsis, description, flags and examples),
// so the two never tell different stories. `rpma-sim --man` prints it; `man -l` renders it.
//
// Thread-safety: every function is thread-safe (none keeps state).

#ifndef SOFTRPMA_TOOLS_RPMA_SIM_MAN_PAGE_H_
#define SOFTRPMA_TOOLS_RPMA_SIM_MAN_PAGE_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace softrpma::rpma_sim {

// One flag as its help line shows it: `--seed=S  (default: ...)` and its help text.
struct ManFlag {
  std::string spelling;       // "--seed", "-j"
  std::string placeholder;    // "S"; "" for a boolean flag
  std::string default_value;  // "" when none is shown
  std::string help;
};

// One subcommand's section.
struct ManCommand {
  std::string name;         // "sweep"
  std::string synopsis;     // its Usage: line(s), as --help prints them
  std::string description;  // paragraphs separated by blank lines; lines in one are joined,
                            // except in a paragraph with an indented line (kept as laid out)
  std::vector<ManFlag> flags;
  std::string examples;  // one a line
};

struct ManSource {
  std::string version;       // "softrpma 0.29.0", the page's footer
  std::string summary;       // NAME's one line: what rpma-sim is
  std::string synopsis;      // the SYNOPSIS lines, one a line
  std::string description;   // DESCRIPTION, paragraphs as ManCommand::description
  std::vector<ManCommand> commands;
  std::string exit_status;   // EXIT STATUS, one paragraph
  std::string see_also;      // SEE ALSO, one paragraph
};

// The page. Every text is escaped for roff: a backslash is printed as one, a line never starts
// with a control character, a '-' is a minus (as options are typed).
std::string ManPage(const ManSource& source);

// `text` escaped for one line of roff text (RoffText) or for an argument of a macro (the same,
// in double quotes).
std::string RoffText(absl::string_view text);

}  // namespace softrpma::rpma_sim

#endif  // SOFTRPMA_TOOLS_RPMA_SIM_MAN_PAGE_H_
