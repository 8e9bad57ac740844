// Memory-system facts the benchmarks compare against: ONE bandwidth probe
// (bench-kernels and bench-decode both report against it) and the LLC size.
#pragma once
#include <cstddef>

namespace mtp {
class ThreadPool;
}

namespace mtp::kernels {

// Read-only streaming bandwidth in bytes/s with the pool's threads over a
// buffer of `bytes` (use >= 4x the last-level cache) on the weights' kind of
// pages (core/large_alloc.h): the median and the best of `reps` timed passes
// after one warm-up pass. Each thread sums its share with SIMD loads (four
// accumulators, software prefetch 4 KiB ahead), so the probe is bound by the
// memory system, not by arithmetic: it is the limit a weight stream can
// approach, and "decode reaches N % of the limit" is measured against it.
// The loop of every SIMD target the CPU executes runs (whatever
// MTPSPEC_SIMD pins) and the fastest one's median and best are reported:
// the limit is the machine's, not one loop's (on a Zen 4 core the AVX2 loop
// streams 31 GB/s where the AVX-512 one reaches 27-30: docs/lab/
// performance-history.md "one bandwidth probe for every SIMD target"), so
// every target is measured against the same limit.
struct Bandwidth {
  double median = 0, best = 0;
};
Bandwidth stream_bandwidth(ThreadPool& pool, size_t bytes, int reps);

// Size of the last-level cache of cpu0 in bytes from sysfs (the level-3
// cache; else the largest level >= 2), 32 MiB if unknown.
size_t llc_bytes();

}  // namespace mtp::kernels
