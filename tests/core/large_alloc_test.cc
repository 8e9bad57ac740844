// core/large_alloc.h: zeroed, aligned, huge-page advised buffers.
#include "core/large_alloc.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

#include "core/error.h"

namespace mtp {
namespace {

// The VmFlags line of the mapping that holds `p` in /proc/self/smaps ("" if
// the file or the mapping is not found).
std::string vm_flags_of(const void* p) {
  std::ifstream f("/proc/self/smaps");
  const auto a = reinterpret_cast<uintptr_t>(p);
  std::string line;
  bool inside = false;
  while (std::getline(f, line)) {
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-') {
      inside = lo <= a && a < hi;
      continue;
    }
    if (inside && line.rfind("VmFlags:", 0) == 0) return line;
  }
  return "";
}

std::string thp_mode() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  std::getline(f, line);
  return line;
}

TEST(LargeAlloc, ZeroedAndAligned) {
  for (size_t n : {size_t(1), size_t(63), size_t(4096), kHugePageBytes - 1, kHugePageBytes,
                   3 * kHugePageBytes + 100}) {
    LargeBuffer b = alloc_large(n);
    ASSERT_NE(b.get(), nullptr);
    const auto addr = reinterpret_cast<uintptr_t>(b.get());
    EXPECT_EQ(addr % 64, 0u) << n;
    if (n >= kHugePageBytes && huge_pages_enabled()) EXPECT_EQ(addr % kHugePageBytes, 0u) << n;
    size_t nonzero = 0;
    for (size_t i = 0; i < n; ++i) nonzero += b[i] != 0;
    EXPECT_EQ(nonzero, 0u) << n;
    b[n - 1] = 1;  // the whole size is writable (ASan checks the bound)
  }
}

// The advice is recorded on the mapping ("hg" in VmFlags) whether or not the
// kernel found free huge pages: deterministic where THP exists at all.
TEST(LargeAlloc, LargeBuffersAreAdvisedOntoHugePages) {
  const std::string mode = thp_mode();
  if (mode.empty() || mode.find("[never]") != std::string::npos)
    GTEST_SKIP() << "transparent huge pages unavailable here ('" << mode << "')";
  if (!huge_pages_enabled()) GTEST_SKIP() << "MTPSPEC_HUGE_PAGES=0 in this environment";
  LargeBuffer big = alloc_large(4 * kHugePageBytes);
  const std::string flags = vm_flags_of(big.get());
  ASSERT_FALSE(flags.empty()) << "mapping not found in /proc/self/smaps";
  EXPECT_NE(flags.find(" hg"), std::string::npos) << flags;
}

TEST(LargeAlloc, EnvironmentRule) {
  EXPECT_TRUE(detail::parse_huge_pages_env(nullptr));
  EXPECT_TRUE(detail::parse_huge_pages_env(""));
  EXPECT_TRUE(detail::parse_huge_pages_env("1"));
  EXPECT_FALSE(detail::parse_huge_pages_env("0"));
  try {
    detail::parse_huge_pages_env("yes");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("MTPSPEC_HUGE_PAGES"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'yes'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mtp
