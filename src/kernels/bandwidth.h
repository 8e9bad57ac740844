// Memory-system facts the benchmarks compare against.
#pragma once
#include <cstddef>

namespace mtp {
class ThreadPool;
}

namespace mtp::kernels {

// Read-only streaming bandwidth in bytes/s with the pool's threads, over a
// buffer of `bytes` (use ≥ 4× the last-level cache). Median of `reps` passes.
double stream_bandwidth(ThreadPool& pool, size_t bytes, int reps);

// Last-level cache size in bytes (sysfs; 32 MiB if unknown).
size_t llc_bytes();

}  // namespace mtp::kernels
