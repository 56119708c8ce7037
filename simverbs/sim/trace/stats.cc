#include "simverbs/sim/trace/stats.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "simverbs/sim/faults/fault.h"

namespace softrpma::sim {
namespace {

// The RPMA_SIM_STATS file, written at exit, and its path (%p expanded), for messages.
std::FILE* g_stats_file = nullptr;
std::string* g_stats_path = nullptr;

// A write error (a full disk, /dev/full) is said on stderr: the exit status is the program's,
// and a sweep that reads the file would otherwise find nothing and not know why.
void WriteStatsNow() {
  if (g_stats_file == nullptr) return;
  errno = 0;
  GlobalFaultInjector().WriteStats(g_stats_file);
  bool ok = std::ferror(g_stats_file) == 0 && std::fflush(g_stats_file) == 0;
  const int err = errno;
  ok = std::fclose(g_stats_file) == 0 && ok;
  g_stats_file = nullptr;
  if (!ok) {
    std::fprintf(stderr, "softrpma-sim: %s: cannot write \"%s\": %s; the hit counts are lost\n",
                 kStatsEnvVar, g_stats_path != nullptr ? g_stats_path->c_str() : "?",
                 std::strerror(err != 0 ? err : EIO));
  }
}

}  // namespace

void WriteStatsAtExit(std::FILE* file, const std::string& path) {
  GlobalFaultInjector().CountAllHits();
  if (g_stats_file != nullptr) std::fclose(g_stats_file);  // a start that failed later
  static const bool registered = (std::atexit(&WriteStatsNow), true);
  (void)registered;
  g_stats_file = file;
  if (g_stats_path == nullptr) g_stats_path = new std::string();  // Never freed: used at exit.
  *g_stats_path = path;
}

void AbandonStatsInChild() { g_stats_file = nullptr; }

}  // namespace softrpma::sim
