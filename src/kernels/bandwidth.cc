#include "kernels/bandwidth.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "core/large_alloc.h"
#include "core/thread_pool.h"

namespace mtp::kernels {

namespace {
// Integer sum: the compiler vectorises it at -O2 (no FP reassociation needed),
// so the loop is limited by loads, not arithmetic.
uint64_t sum_words(const uint64_t* p, size_t n) {
  uint64_t s = 0;
  for (size_t i = 0; i < n; ++i) s += p[i];
  return s;
}
}  // namespace

double stream_bandwidth(ThreadPool& pool, size_t bytes, int reps) {
  const size_t n = bytes / sizeof(uint64_t);
  // The same pages as the weights (huge where they are), so the limit is the
  // one a weight stream can reach.
  LargeBuffer mem = alloc_large(n * sizeof(uint64_t));
  auto* buf = reinterpret_cast<uint64_t*>(mem.get());
  pool.parallel_for(n, [&](size_t b, size_t e, size_t) {  // first touch by the reading threads
    for (size_t i = b; i < e; ++i) buf[i] = i;
  }, 4096);
  std::atomic<uint64_t> sink{0};
  std::vector<double> t;
  for (int r = 0; r < reps + 1; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    pool.parallel_for(n, [&](size_t b, size_t e, size_t) { sink += sum_words(buf + b, e - b); },
                      4096);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r > 0) t.push_back(s);  // the first pass warms up
  }
  std::sort(t.begin(), t.end());
  return double(n * sizeof(uint64_t)) / t[t.size() / 2];
}

size_t llc_bytes() {
  size_t best = 0;
  for (int i = 0; i < 8; ++i) {
    std::string base = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    std::ifstream lf(base + "level"), sf(base + "size");
    int level = 0;
    std::string size;
    if (!(lf >> level) || !(sf >> size) || size.empty()) continue;
    size_t v = std::stoul(size);
    if (size.back() == 'K') v <<= 10;
    if (size.back() == 'M') v <<= 20;
    if (level >= 2) best = std::max(best, v);
  }
  return best ? best : size_t(32) << 20;
}

}  // namespace mtp::kernels
