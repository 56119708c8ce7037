// env_page.h: the environment variables softrpma reads, one table, and what is made from it:
// `rpma-sim help env` and the man page softrpma-env(7) (`rpma-sim --man-env`, installed by
// `./run install`). //tools/rpma_sim:env_page_test checks that the table names every
// RPMA_SIM_* variable the simulator's sources read and nothing they do not, so the page cannot
// drift from the code.
//
// Thread-safety: every function is thread-safe (the table is constant).

#ifndef SOFTRPMA_TOOLS_RPMA_SIM_ENV_PAGE_H_
#define SOFTRPMA_TOOLS_RPMA_SIM_ENV_PAGE_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace softrpma::rpma_sim {

struct EnvVar {
  const char* name;   // "RPMA_SIM_SEED"
  const char* value;  // what it takes: "S (decimal or 0x hex)"
  const char* text;   // what it does; one paragraph
  bool for_tests;     // a knob for softrpma's own tests, listed apart
};

// Every variable, in the order the page lists them.
const std::vector<EnvVar>& EnvironmentVariables();

// `rpma-sim help env`: the table as text, 100 columns.
std::string EnvHelpText();

// softrpma-env(7) in roff. `version`: the footer's ("softrpma 0.29.0").
std::string EnvManPage(absl::string_view version);

}  // namespace softrpma::rpma_sim

#endif  // SOFTRPMA_TOOLS_RPMA_SIM_ENV_PAGE_H_
