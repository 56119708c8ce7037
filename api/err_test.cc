// Tests of rpma_err_2str(3) and rpma_utils_conn_event_2str(3).

#include <set>
#include <string>

#include "gtest/gtest.h"
#include "librpma.h"

namespace {

TEST(Err2StrTest, EveryCode_HasItsOwnText) {
  const int codes[] = {RPMA_E_UNKNOWN,       RPMA_E_NOSUPP,         RPMA_E_PROVIDER,
                       RPMA_E_NOMEM,         RPMA_E_INVAL,          RPMA_E_NO_COMPLETION,
                       RPMA_E_NO_EVENT,      RPMA_E_AGAIN,          RPMA_E_SHARED_CHANNEL,
                       RPMA_E_NOT_SHARED_CHNL};
  std::set<std::string> texts;
  for (int code : codes) {
    const char* text = rpma_err_2str(code);
    ASSERT_NE(text, nullptr) << code;
    EXPECT_STRNE(text, "Unknown error") << code;
    texts.insert(text);
  }
  EXPECT_EQ(texts.size(), sizeof(codes) / sizeof(codes[0]));
}

TEST(Err2StrTest, SpecificTexts) {
  EXPECT_STREQ(rpma_err_2str(RPMA_E_INVAL), "Invalid argument");
  EXPECT_STREQ(rpma_err_2str(RPMA_E_NOMEM), "Out of memory");
  EXPECT_STREQ(rpma_err_2str(RPMA_E_NOSUPP), "Not supported");
}

TEST(Err2StrTest, UnknownCode_ReturnsUnknownError) {
  EXPECT_STREQ(rpma_err_2str(-1), "Unknown error");
  EXPECT_STREQ(rpma_err_2str(RPMA_E_NOT_SHARED_CHNL - 1), "Unknown error");
  EXPECT_STREQ(rpma_err_2str(12345), "Unknown error");
}

TEST(ConnEvent2StrTest, EveryEvent_HasItsOwnText) {
  EXPECT_STREQ(rpma_utils_conn_event_2str(RPMA_CONN_UNDEFINED), "Undefined connection event");
  EXPECT_STREQ(rpma_utils_conn_event_2str(RPMA_CONN_ESTABLISHED), "Connection established");
  EXPECT_STREQ(rpma_utils_conn_event_2str(RPMA_CONN_CLOSED), "Connection closed");
  EXPECT_STREQ(rpma_utils_conn_event_2str(RPMA_CONN_LOST), "Connection lost");
  EXPECT_STREQ(rpma_utils_conn_event_2str(RPMA_CONN_REJECTED),
               "Connection rejected by the other side");
  EXPECT_STREQ(rpma_utils_conn_event_2str(RPMA_CONN_UNREACHABLE),
               "Other side of the connection unreachable");
}

TEST(ConnEvent2StrTest, UnknownEvent_ReturnsUnknownConnectionEvent) {
  EXPECT_STREQ(rpma_utils_conn_event_2str(static_cast<rpma_conn_event>(5)),
               "Unknown connection event");
  EXPECT_STREQ(rpma_utils_conn_event_2str(static_cast<rpma_conn_event>(-2)),
               "Unknown connection event");
}

}  // namespace
