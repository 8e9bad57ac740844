// core/memory_headroom.h: the least of MemAvailable, the cgroup's and the
// address-space limit's headroom.
#include "core/memory_headroom.h"

#include <sys/resource.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <fmt/core.h>

namespace mtp {
namespace {

constexpr double kKiB = 1024.0;

// The first number after `key` on a line of a "key value" file (/proc/meminfo,
// /proc/self/status, memory.stat), or -1.
double keyed_value(const std::string& path, const std::string& key) {
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line)) {
    if (line.compare(0, key.size(), key) != 0) continue;
    std::istringstream rest(line.substr(key.size()));
    double v = -1;
    return rest >> v ? v : -1;
  }
  return -1;
}

// The single number in a cgroup file, -1 for "max" (no limit) or unreadable.
double cgroup_number(const std::string& path) {
  std::ifstream f(path);
  std::string s;
  if (!(f >> s) || s == "max") return -1;
  try {
    return std::stod(s);
  } catch (...) {
    return -1;
  }
}

// The process's cgroup path for the v2 hierarchy ("0::/path") or for the v1
// controller `controller` ("N:memory:/path"), "" if not listed.
std::string own_cgroup(const std::string& controller) {
  std::ifstream f("/proc/self/cgroup");
  std::string line;
  while (std::getline(f, line)) {
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string ctrls = line.substr(a + 1, b - a - 1);
    if (controller.empty() ? ctrls.empty() : ctrls.find(controller) != std::string::npos) {
      return line.substr(b + 1);
    }
  }
  return "";
}

// The files a cgroup version keeps its limit, use and page-cache count in.
struct CgroupFiles {
  const char* limit;
  const char* usage;
  const char* inactive_file_key;  // of memory.stat
};
// v1's unlimited memory.limit_in_bytes is ~2^63; v2 writes "max".
constexpr double kUnlimitedV1 = 1e18;
constexpr CgroupFiles kV1{"/memory.limit_in_bytes", "/memory.usage_in_bytes", "total_inactive_file "};
constexpr CgroupFiles kV2{"/memory.max", "/memory.current", "inactive_file "};

// limit − use + inactive page cache (dropped before the cgroup's OOM killer
// runs) of the folder `dir`; negative without a limit or when unreadable.
double headroom_in(const std::string& dir, const CgroupFiles& f) {
  const double limit = cgroup_number(dir + f.limit), usage = cgroup_number(dir + f.usage);
  if (limit < 0 || limit >= kUnlimitedV1 || usage < 0) return -1;
  const double inactive_file = std::max(0.0, keyed_value(dir + "/memory.stat", f.inactive_file_key));
  return std::max(0.0, limit - usage + inactive_file);
}

// The least non-negative headroom_in over the process's cgroup folder under
// `root` and its ancestors (a limit set on a parent slice binds its
// children): root + "/a/b", root + "/a", root. Negative: no limit found.
double least_up_to_root(const std::string& root, const std::string& own, const CgroupFiles& f) {
  double best = -1;
  std::string dir = root + (own == "/" ? "" : own);
  while (true) {
    const double h = headroom_in(dir, f);
    if (h >= 0 && (best < 0 || h < best)) best = h;
    if (dir.size() <= root.size()) return best;
    dir.resize(dir.rfind('/'));
  }
}

double cgroup_headroom() {
  if (std::filesystem::exists("/sys/fs/cgroup/cgroup.controllers")) {  // v2 (unified)
    const std::string own = own_cgroup("");
    return own.empty() ? -1 : least_up_to_root("/sys/fs/cgroup", own, kV2);
  }
  const std::string own = own_cgroup("memory");  // v1
  return own.empty() ? -1 : least_up_to_root("/sys/fs/cgroup/memory", own, kV1);
}

}  // namespace

double cgroup_v2_headroom(const std::string& dir) { return headroom_in(dir, kV2); }

std::string MemoryHeadroom::describe() const {
  return fmt::format("{:.2f} GiB ({})", bytes / (kKiB * kKiB * kKiB), limit);
}

MemoryHeadroom memory_headroom() {
  MemoryHeadroom h;
  const auto take = [&h](double bytes, const char* limit) {
    if (bytes >= 0 && (h.limit.empty() || bytes < h.bytes)) {
      h.bytes = bytes;
      h.limit = limit;
    }
  };
  const double avail_kb = keyed_value("/proc/meminfo", "MemAvailable:");
  if (avail_kb > 0) take(avail_kb * kKiB, "MemAvailable");
  take(cgroup_headroom(), "cgroup memory.max");
  rlimit as{};
  if (::getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) {
    const double vm_kb = keyed_value("/proc/self/status", "VmSize:");
    if (vm_kb >= 0) take(std::max(0.0, double(as.rlim_cur) - vm_kb * kKiB), "ulimit -v");
  }
  return h;
}

double resident_set_bytes() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) * 1024;
  }
  return 0;
}

}  // namespace mtp
