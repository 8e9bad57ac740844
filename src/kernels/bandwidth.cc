// The bandwidth probe (bandwidth.h). Compiled once per SIMD target (Highway
// foreach_target) for the streaming sum; the rest is in the HWY_ONCE section.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/bandwidth.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/cache_control.h>
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace mtp::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Sum of p[0, n) (n a multiple of 4 vectors): four independent accumulators,
// so the loop is bound by loads, not add latency, and a software prefetch
// 4 KiB ahead, so it measures what a core can stream.
float StreamSum(const float* p, size_t n) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  auto a0 = hn::Zero(d), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i + 4 * N <= n; i += 4 * N) {
    for (size_t l = 0; l < 4 * N * sizeof(float); l += 64)
      hwy::Prefetch(reinterpret_cast<const char*>(p + i) + 4096 + l);
    a0 = hn::Add(a0, hn::LoadU(d, p + i));
    a1 = hn::Add(a1, hn::LoadU(d, p + i + N));
    a2 = hn::Add(a2, hn::LoadU(d, p + i + 2 * N));
    a3 = hn::Add(a3, hn::LoadU(d, p + i + 3 * N));
  }
  return hn::GetLane(hn::SumOfLanes(d, hn::Add(hn::Add(a0, a1), hn::Add(a2, a3))));
}

}  // namespace mtp::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "kernels/bandwidth.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <string>
#include <vector>

#include "core/large_alloc.h"
#include "core/thread_pool.h"
#include "kernels/simd.h"

namespace mtp::kernels {
HWY_EXPORT(StreamSum);

namespace {
using StreamFn = float (*)(const float*, size_t);
// StreamSum of every compiled x86 target this CPU executes, whatever
// MTPSPEC_SIMD pins (else the dispatched one).
std::vector<StreamFn> stream_loops() {
  [[maybe_unused]] const int64_t host = detail::host_simd_targets();
  std::vector<StreamFn> v;
#if HWY_TARGETS & HWY_AVX3_DL
  if (host & HWY_AVX3_DL) v.push_back(&N_AVX3_DL::StreamSum);
#endif
#if HWY_TARGETS & HWY_AVX3
  if (host & HWY_AVX3) v.push_back(&N_AVX3::StreamSum);
#endif
#if HWY_TARGETS & HWY_AVX2
  if (host & HWY_AVX2) v.push_back(&N_AVX2::StreamSum);
#endif
#if HWY_TARGETS & HWY_SSE4
  if (host & HWY_SSE4) v.push_back(&N_SSE4::StreamSum);
#endif
  if (v.empty()) v.push_back(HWY_DYNAMIC_DISPATCH(StreamSum));
  return v;
}
}  // namespace

Bandwidth stream_bandwidth(ThreadPool& pool, size_t bytes, int reps) {
  detail::ensure_simd_target();
  constexpr size_t kUnit = 1024;  // floats per parallel_for unit (a multiple of 4 vectors)
  const size_t units = std::max<size_t>(1, bytes / (kUnit * sizeof(float)));
  const size_t n = units * kUnit;
  // The same pages as the weights (huge where they are), so the limit is the
  // one a weight stream can reach.
  LargeBuffer mem = alloc_large(n * sizeof(float));
  auto* buf = reinterpret_cast<float*>(mem.get());
  pool.parallel_for(units, [&](size_t b, size_t e, size_t) {  // first touch by the readers
    std::fill(buf + b * kUnit, buf + e * kUnit, 1.f);
  }, 1);
  std::vector<float> part(size_t(pool.size()), 0.f);
  volatile float sink = 0;
  const double b = double(n) * sizeof(float);
  Bandwidth out;
  for (const StreamFn loop : stream_loops()) {  // the fastest loop's median
    std::vector<double> times;
    for (int r = 0; r < std::max(1, reps) + 1; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      pool.parallel_for(units, [&](size_t b0, size_t e, size_t t) {
        part[t] += loop(buf + b0 * kUnit, (e - b0) * kUnit);
      }, 1);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (r > 0) times.push_back(s);  // the first pass warms page tables and caches
    }
    std::sort(times.begin(), times.end());
    if (b / times[times.size() / 2] > out.median) out = {b / times[times.size() / 2], b / times.front()};
  }
  for (float p : part) sink = sink + p;
  return out;
}

size_t llc_bytes() {
  size_t l3 = 0, best = 0;
  for (int i = 0; i < 8; ++i) {
    const std::string base =
        "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    std::ifstream lf(base + "level"), sf(base + "size");
    int level = 0;
    std::string size;
    if (!(lf >> level) || !(sf >> size) || size.empty()) continue;
    size_t v = 0;
    try {
      v = std::stoull(size);
    } catch (const std::exception&) {
      continue;
    }
    if (size.back() == 'K') v <<= 10;
    if (size.back() == 'M') v <<= 20;
    if (level == 3) l3 = std::max(l3, v);
    if (level >= 2) best = std::max(best, v);
  }
  if (l3) return l3;
  return best ? best : size_t(32) << 20;
}

}  // namespace mtp::kernels
#endif  // HWY_ONCE
