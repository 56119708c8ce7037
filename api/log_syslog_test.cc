// The default logging function's syslog connection: opened as librpma opens it (ident "rpma",
// LOG_PID, facility LOCAL7) when the library is loaded. This binary defines openlog(3) itself
// to see the call, which happens before main().

#include <syslog.h>

#include <cstring>

#include "gtest/gtest.h"
#include "librpma.h"

namespace {

// Written before main() (by the library's constructor): plain constant-initialized storage.
int g_openlog_calls = 0;
const char* g_ident = nullptr;
int g_option = -1;
int g_facility = -1;

}  // namespace

extern "C" void openlog(const char* ident, int option, int facility) noexcept {
  ++g_openlog_calls;
  g_ident = ident;
  g_option = option;
  g_facility = facility;
}

namespace {

TEST(LogSyslogTest, LibraryLoad_OpensSyslogAsLibrpma) {
  // Reference the library so that it is linked in (it is, alwayslink; this also documents it).
  enum rpma_log_level level;
  ASSERT_EQ(rpma_log_get_threshold(RPMA_LOG_THRESHOLD, &level), 0);
  ASSERT_EQ(g_openlog_calls, 1);
  ASSERT_NE(g_ident, nullptr);
  EXPECT_STREQ(g_ident, "rpma");
  EXPECT_EQ(g_option, LOG_PID);
  EXPECT_EQ(g_facility, LOG_LOCAL7);
}

}  // namespace
