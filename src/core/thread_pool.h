// A fixed pool of worker threads for data-parallel loops.
//
// Contract: parallel_for splits [0, n) into contiguous chunks, at most one per
// thread, and calls fn(begin, end, thread_index). Work is partitioned over
// independent outputs only (matrix rows, attention heads), never over a
// reduction, so results never depend on the thread count (batch invariance).
// The calling thread takes chunk 0. Between jobs a worker polls for up to
// kSpinBeforeSleepSeconds (2 ms), then sleeps on a condition variable: one
// decoded token issues ~100 jobs separated by single-threaded work of 10-100 µs
// (small products, attention, sampling, the drafter), and a worker woken from
// sleep starts 20-50 µs late on a VM. Measured on a 24-layer, 896-wide Q4_K_M
// model at 2 threads: with a 20000-iteration poll (~10 µs) the calling thread
// waited 30 µs per job for its worker and a token took 9.9-11 ms; polling
// through the gaps, 8.2-8.5 ms. The poll yields the core every 64 iterations:
// without that, a pool with more threads than free cores (--threads 4 on 2
// cores, or two runs side by side) spent whole scheduler slices polling while
// the thread with the work waited (0.7 ms decodes became 63 ms). Publishing a
// job takes no lock unless a worker sleeps.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace mtp {

class ThreadPool {
 public:
  using Fn = std::function<void(size_t begin, size_t end, size_t thread)>;

  explicit ThreadPool(int n_threads);  // n_threads >= 1; 1 = run inline
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // How long an idle worker polls for the next job before sleeping.
  static constexpr double kSpinBeforeSleepSeconds = 2e-3;

  // Runs fn over [0, n) split into size() contiguous chunks whose boundaries are
  // multiples of `grain` (except the end). Blocks until all chunks finish.
  // Exceptions thrown by fn are rethrown here (the first one).
  void parallel_for(size_t n, const Fn& fn, size_t grain = 1);

 private:
  void worker(int index);

  int n_threads_;
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable cv_;
  const Fn* job_ = nullptr;
  size_t job_n_ = 0, job_grain_ = 1;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<int> sleepers_{0};  // workers in (or entering) cv_.wait
  std::atomic<bool> stop_{false};
  std::exception_ptr error_;
  std::mutex error_mu_;
};

// Number of physical cores (docs/SEMANTICS.md: threads default to this).
int physical_cores();

// The thread count a run uses when `requested` threads are asked for:
// requested when > 0, else physical_cores(). Above the machine's logical CPUs
// it still honours the request (a benchmark may want that) but warns once
// (warn_setting "threads", core/setting.h): oversubscribed spinning workers
// run orders of magnitude slower, which a user must not discover from the
// timings alone. Beyond kMaxOversubscribe × the logical CPUs
// (kMaxThreadsUnknown where the count is unknown) it is an InputError about
// the setting "threads", naming the value: 100000 workers took minutes to
// start and then spun on 2 cores (a hang, from the user's side). The one
// rule every entry point uses.
inline constexpr int kMaxOversubscribe = 8;
inline constexpr int kMaxThreadsUnknown = 1024;
int resolve_threads(int requested);

}  // namespace mtp
