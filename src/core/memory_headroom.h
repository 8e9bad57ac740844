// How much more memory this process may take, so that a request that cannot
// fit (a KV cache of --ctx positions x --parallel slots) is refused with a
// clear error before anything is allocated — instead of std::bad_alloc half
// way, or the kernel's OOM killer ending the process without a word.
//
// The least of the limits that apply:
//  - MemAvailable (/proc/meminfo): the machine's free and reclaimable memory;
//  - the memory cgroup's limit minus its use (cgroup v2 memory.max −
//    memory.current + inactive file pages, every ancestor up to the root; v1
//    memory.limit_in_bytes − memory.usage_in_bytes): a container's limit
//    (docker --memory, systemd MemoryMax=), which MemAvailable does not see;
//  - RLIMIT_AS (ulimit -v) minus the address space already mapped (VmSize):
//    mapped model files count there too.
// Each is read at the call (limits change while a server runs); an unreadable
// or unlimited source is left out. All unknown: limit = "" (bytes = 0 with a
// limit named means none left).
#pragma once
#include <string>

namespace mtp {

struct MemoryHeadroom {
  double bytes = 0;
  std::string limit;  // which limit gave `bytes`: "MemAvailable", "cgroup memory.max", "ulimit -v"

  bool known() const { return !limit.empty(); }

  // "3.20 GiB (ulimit -v)", for error messages.
  std::string describe() const;
};

MemoryHeadroom memory_headroom();

// This process's resident set (VmRSS of /proc/self/status), in bytes; 0 when
// unknown. What a budget made after loading a model already holds.
double resident_set_bytes();

// The cgroup v2 headroom of the folder `dir` alone (memory.max − memory.current
// + inactive_file of memory.stat), or a negative value when it has no limit or
// the files cannot be read. Separate for tests (a folder of fake files).
double cgroup_v2_headroom(const std::string& dir);

}  // namespace mtp
