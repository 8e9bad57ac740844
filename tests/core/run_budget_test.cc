// Budgets before long work (core/run_budget.h): a run whose disk or memory
// does not fit is refused naming both numbers; forced, it only warns.
#include "core/run_budget.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "core/error.h"
#include "core/memory_headroom.h"
#include "core/setting.h"
#include "test_util.h"

namespace mtp {
namespace {

namespace fs = std::filesystem;

double free_bytes(const std::string& dir) { return double(fs::space(dir).available); }

TEST(RunBudget, DiskThatDoesNotFitIsRefusedNamingBothNumbers) {
  const std::string dir = test::temp_dir("budget_disk");
  RunBudget b;
  b.what = "precompute";
  b.disk_dir = dir + "/shards";  // not created yet: its parent's free space counts
  b.disk_bytes = free_bytes(dir) + 1e12;
  try {
    check_budget(b, false);
    FAIL() << "not refused";
  } catch (const InputError& e) {
    const std::string m = e.what();
    EXPECT_STREQ(setting_of(e), "force");
    EXPECT_NE(m.find(fmt::format("{:.0f} bytes", b.disk_bytes)), std::string::npos) << m;
    EXPECT_NE(m.find("bytes) free"), std::string::npos) << m;
    EXPECT_NE(m.find("precompute does not fit"), std::string::npos) << m;
  }
  std::string warned;
  set_warning_sink([&](const char*, const std::string& msg) { warned = msg; });
  EXPECT_NO_THROW(check_budget(b, true));
  set_warning_sink(nullptr);
  EXPECT_NE(warned.find("running anyway"), std::string::npos) << warned;
  b.disk_bytes = 1;  // fits
  EXPECT_NO_THROW(check_budget(b, false));
  EXPECT_NE(b.text().find("disk 1 B"), std::string::npos) << b.text();
}

TEST(RunBudget, MemoryThatDoesNotFitIsRefusedNamingBothNumbers) {
  const MemoryHeadroom h = memory_headroom();
  if (!h.known()) GTEST_SKIP() << "no memory limit is readable here";
  RunBudget b;
  b.what = "training";
  b.memory_bytes = h.bytes * 4 + 1e9;
  try {
    check_budget(b, false);
    FAIL() << "not refused";
  } catch (const InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(fmt::format("{:.0f} bytes) of memory", b.memory_bytes)), std::string::npos)
        << m;
    EXPECT_NE(m.find("this process may take"), std::string::npos) << m;
  }
  set_warning_sink([](const char*, const std::string&) {});
  EXPECT_NO_THROW(check_budget(b, true));
  set_warning_sink(nullptr);
  b.memory_bytes = 1024;
  EXPECT_NO_THROW(check_budget(b, false));
}

// What is already resident (a loaded target and its frozen copies: GiBs for a
// 1 B-shaped target before training allocates anything) is said beside what
// the run will still allocate, and the peak is their sum.
TEST(RunBudget, MemoryHeldNowIsSaidWithThePeak) {
  RunBudget b;
  b.what = "training";
  b.memory_bytes = 1.5 * 1024 * 1024 * 1024;
  b.held_bytes = 6.0 * 1024 * 1024 * 1024;
  const std::string t = b.text();
  EXPECT_NE(t.find("memory 1.50 GiB beyond the 6.00 GiB held now (peak 7.50 GiB"),
            std::string::npos) << t;
  EXPECT_EQ(t.find(") ("), std::string::npos) << "one parenthesis of notes: " << t;
  EXPECT_GT(resident_set_bytes(), 0.0);
}

TEST(RunBudget, EstimateFromAWarmUp) {
  EXPECT_EQ(estimate_line("training", 4, 2.0, 400, "step"),
            "training: estimated 3m20s for 400 steps (from 4 steps in 2.00 s)");
  EXPECT_NE(estimate_line("training", 0, 0, 10, "step").find("no estimate"), std::string::npos);
}

}  // namespace
}  // namespace mtp
