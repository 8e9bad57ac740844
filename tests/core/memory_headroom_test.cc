// core/memory_headroom.h: the least of MemAvailable, the cgroup's headroom and
// the address-space limit's — each checked against the value its source gives.
#include "core/memory_headroom.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "test_util.h"

namespace mtp {
namespace {

// A "key value" line of a /proc file, in bytes (the file's kB times 1024); -1 if absent.
double proc_kb(const std::string& path, const std::string& key) {
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(key, 0) == 0) return std::stod(line.substr(key.size())) * 1024.0;
  }
  return -1;
}

void write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

TEST(MemoryHeadroom, CgroupV2IsTheLimitMinusTheUseWithInactiveFilePagesFree) {
  const std::string dir = test::temp_dir("cgroup-v2");
  write(dir + "/memory.max", "1000000\n");
  write(dir + "/memory.current", "400000\n");
  write(dir + "/memory.stat", "anon 300000\nfile 100000\nactive_file 30000\ninactive_file 70000\n");
  EXPECT_EQ(cgroup_v2_headroom(dir), 1000000.0 - 400000.0 + 70000.0);
  write(dir + "/memory.current", "1200000\n");  // over the limit (reclaim pending): none left
  write(dir + "/memory.stat", "anon 1200000\n");
  EXPECT_EQ(cgroup_v2_headroom(dir), 0.0);
  write(dir + "/memory.max", "max\n");  // no limit here
  EXPECT_LT(cgroup_v2_headroom(dir), 0.0);
  EXPECT_LT(cgroup_v2_headroom(dir + "/absent"), 0.0);
}

TEST(MemoryHeadroom, NeverAboveMemAvailable) {
  const double avail = proc_kb("/proc/meminfo", "MemAvailable:");
  if (avail <= 0) GTEST_SKIP() << "no MemAvailable in /proc/meminfo";
  const MemoryHeadroom h = memory_headroom();
  ASSERT_FALSE(h.limit.empty());
  EXPECT_GT(h.bytes, 0.0);
  // MemAvailable moves between two reads: allow what another process may free.
  EXPECT_LE(h.bytes, avail + (256 << 20)) << h.describe();
}

// Under ulimit -v, the headroom is the limit minus the address space already
// mapped, and names the limit. Run in a child: the limit cannot be raised again.
TEST(MemoryHeadroom, AnAddressSpaceLimitBindsAndIsNamed) {
  const double vm = proc_kb("/proc/self/status", "VmSize:");
  if (vm <= 0) GTEST_SKIP() << "no VmSize in /proc/self/status";
  constexpr double kRoom = 512.0 * (1 << 20);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    rlimit as{};
    as.rlim_cur = as.rlim_max = rlim_t(proc_kb("/proc/self/status", "VmSize:") + kRoom);
    if (setrlimit(RLIMIT_AS, &as) != 0) _exit(3);
    const MemoryHeadroom h = memory_headroom();
    // A little of the room may go to the reads themselves; never more than it.
    const bool ok = h.limit == "ulimit -v" && h.bytes <= kRoom && h.bytes > kRoom - (64 << 20);
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the headroom under ulimit -v was not the limit's";
}

TEST(MemoryHeadroom, DescribeNamesTheLimit) {
  const MemoryHeadroom h{3.5 * (1 << 30), "ulimit -v"};
  EXPECT_EQ(h.describe(), "3.50 GiB (ulimit -v)");
}

}  // namespace
}  // namespace mtp
