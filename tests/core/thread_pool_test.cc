#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <vector>

#include "core/thread_pool.h"

namespace mtp {
namespace {

TEST(ThreadPool, CoversEveryIndexOnceWithAlignedChunks) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    for (size_t n : {0, 1, 7, 64, 1000, 1001}) {
      for (size_t grain : {1, 4, 16}) {
        std::vector<std::atomic<int>> hits(n);
        pool.parallel_for(n, [&](size_t b, size_t e, size_t t) {
          EXPECT_LT(t, size_t(threads));
          EXPECT_TRUE(b % grain == 0);
          for (size_t i = b; i < e; ++i) hits[i]++;
        }, grain);
        for (size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << i;
      }
    }
  }
}

TEST(ThreadPool, RethrowsWorkerExceptions) {
  ThreadPool pool(2);
  EXPECT_THROW(pool.parallel_for(100, [](size_t b, size_t, size_t) {
    if (b > 0) throw std::runtime_error("boom");
  }), std::runtime_error);
  // Still usable afterwards.
  std::atomic<int> n{0};
  pool.parallel_for(10, [&](size_t b, size_t e, size_t) { n += int(e - b); });
  EXPECT_EQ(n.load(), 10);
}

TEST(ThreadPool, ManySmallJobs) {
  ThreadPool pool(2);
  std::atomic<long> sum{0};
  for (int i = 0; i < 20000; ++i) {
    pool.parallel_for(2, [&](size_t b, size_t e, size_t) { sum += long(e - b); });
  }
  EXPECT_EQ(sum.load(), 40000);
}

}  // namespace
}  // namespace mtp
