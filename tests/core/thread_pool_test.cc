#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <stdexcept>
#include <vector>

#include "core/error.h"
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

// Workers poll for up to ThreadPool::kSpinBeforeSleepSeconds, then sleep: jobs
// that arrive after they slept must wake them (a lost wake-up hangs here).
TEST(ThreadPool, WakesWorkersThatSlept) {
  ThreadPool pool(3);
  const auto gap = std::chrono::duration<double>(ThreadPool::kSpinBeforeSleepSeconds * 3);
  for (int i = 0; i < 20; ++i) {
    std::this_thread::sleep_for(gap);
    std::vector<std::atomic<int>> hits(30);
    pool.parallel_for(30, [&](size_t b, size_t e, size_t) {
      for (size_t j = b; j < e; ++j) hits[j]++;
    });
    for (auto& h : hits) ASSERT_EQ(h.load(), 1);
  }
}

// More threads than cores: polling workers must hand the core to the thread
// that has work. Without that each job waited for scheduler slices (~ms per
// job: this loop took tens of seconds); it takes well under a second.
TEST(ThreadPool, OversubscribedPoolKeepsMakingProgress) {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  ThreadPool pool(int(std::min(4 * cores, 64u)));
  std::atomic<long> sum{0};
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 2000; ++i) {
    pool.parallel_for(size_t(pool.size()), [&](size_t b, size_t e, size_t) { sum += long(e - b); });
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(sum.load(), 2000L * pool.size());
  EXPECT_LT(s, 5.0) << "2000 jobs on " << pool.size() << " threads over " << cores << " CPUs";
}

// --threads: 0 = the physical cores; up to kMaxOversubscribe x the logical
// CPUs honoured (with a warning above them); beyond, an InputError naming the
// value instead of starting that many spinning workers.
TEST(ResolveThreads, RefusesACountNoMachineCouldRun) {
  EXPECT_EQ(resolve_threads(0), physical_cores());
  EXPECT_EQ(resolve_threads(1), 1);
  const unsigned logical = std::thread::hardware_concurrency();
  const int most = logical > 0 ? kMaxOversubscribe * int(logical) : kMaxThreadsUnknown;
  EXPECT_EQ(resolve_threads(most), most);
  try {
    resolve_threads(most + 1);
    ADD_FAILURE() << "--threads " << most + 1 << " accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(most + 1)), std::string::npos) << e.what();
  }
  EXPECT_THROW(resolve_threads(100000), InputError);
}

}  // namespace
}  // namespace mtp
