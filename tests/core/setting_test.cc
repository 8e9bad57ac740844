// core/setting.h: errors and warnings tagged with the setting they are about,
// caught as their own type; a front end's warning sink.
#include "core/setting.h"

#include <gtest/gtest.h>

#include <string>

#include "core/error.h"

namespace mtp {
namespace {

TEST(Setting, AnErrorNamesItsSettingAndKeepsItsType) {
  try {
    fail_setting<ConfigError>("tree", "a tree shape {:?}: too wide", "9,9");
    FAIL() << "fail_setting returned";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(), "a tree shape \"9,9\": too wide");
    ASSERT_NE(setting_of(e), nullptr);
    EXPECT_STREQ(setting_of(e), "tree");
  }
  EXPECT_EQ(setting_of(InputError("plain")), nullptr);
}

TEST(Setting, AboutSettingRetagsAndKeepsTheTypeAndMessage) {
  EXPECT_EQ(about_setting("threads", [] { return 7; }), 7);
  try {
    about_setting("tree_shapes", [] { fail_setting<InputError>("tree", "bad {}", 1); });
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "bad 1");
    EXPECT_STREQ(setting_of(e), "tree_shapes");  // the outer setting wins
  }
  bool as_format = false;
  try {
    about_setting("tokenizer", [] { fail<FormatError>("no tokens"); });
  } catch (const ConfigError&) {
  } catch (const FormatError& e) {
    as_format = true;
    EXPECT_STREQ(setting_of(e), "tokenizer");
  }
  EXPECT_TRUE(as_format);
  // Not an mtp::Error (a bug, or a library's own exception): untouched.
  EXPECT_THROW(about_setting("threads", [] { MTP_CHECK(false, "x"); }), InternalError);
}

TEST(Setting, WarningsGoToTheSinkElseToStderr) {
  testing::internal::CaptureStderr();
  warn_setting("threads", "too many");
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "warning: too many\n");
  std::string got;
  set_warning_sink([&](const char* s, const std::string& m) { got = std::string(s) + "|" + m; });
  warn_setting("threads", "too many");
  set_warning_sink(nullptr);
  EXPECT_EQ(got, "threads|too many");
}

}  // namespace
}  // namespace mtp
