#include "core/thread_pool.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <set>
#include <string>
#include <utility>

#include "core/error.h"
#include "core/setting.h"

namespace mtp {

namespace {
// One iteration of a polling loop: tells the core we are spinning (x86 PAUSE:
// lower power, and no memory-order mis-speculation when the line changes).
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Chunk t of n items split over `parts`, aligned to `grain`.
std::pair<size_t, size_t> chunk(size_t n, size_t grain, size_t parts, size_t t) {
  size_t units = (n + grain - 1) / grain;
  size_t per = units / parts, extra = units % parts;
  size_t b = t * per + std::min(t, extra);
  size_t e = b + per + (t < extra ? 1 : 0);
  return {std::min(n, b * grain), std::min(n, e * grain)};
}
}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
  for (int i = 1; i < n_threads_; ++i) threads_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
    generation_.fetch_add(1);
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void ThreadPool::parallel_for(size_t n, const Fn& fn, size_t grain) {
  if (n == 0) return;
  if (grain == 0) grain = 1;
  if (n_threads_ == 1 || n <= grain) {
    fn(0, n, 0);
    return;
  }
  // Every worker finished the previous job (pending_ reached 0 with acquire),
  // so the job fields are free to write; the generation bump publishes them.
  job_ = &fn;
  job_n_ = n;
  job_grain_ = grain;
  error_ = nullptr;
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_seq_cst);
  // A worker counts itself in sleepers_ before testing the generation under
  // mu_ (both seq_cst), so either it sees the new generation or we see it here
  // and wake it; taking mu_ orders our notify after its wait began.
  if (sleepers_.load(std::memory_order_seq_cst) > 0) {
    { std::lock_guard<std::mutex> lk(mu_); }
    cv_.notify_all();
  }
  auto [b, e] = chunk(n, grain, n_threads_, 0);
  try {
    if (b < e) fn(b, e, 0);
  } catch (...) {
    std::lock_guard<std::mutex> lk(error_mu_);
    if (!error_) error_ = std::current_exception();
  }
  for (int spins = 0; pending_.load(std::memory_order_acquire) != 0; ++spins) {
    if (spins > 2000) std::this_thread::yield();
  }
  if (error_) std::rethrow_exception(error_);
}

void ThreadPool::worker(int index) {
  using Clock = std::chrono::steady_clock;
  const auto budget = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(kSpinBeforeSleepSeconds));
  uint64_t seen = 0;
  while (true) {
    // Poll for the next job (decode issues many small jobs), then sleep.
    uint64_t g = generation_.load(std::memory_order_acquire);
    if (g == seen) {
      const auto until = Clock::now() + budget;
      for (unsigned spins = 1; g == seen; ++spins) {
        cpu_relax();
        g = generation_.load(std::memory_order_acquire);
        if (spins % 64 == 0) {
          if (Clock::now() > until) break;
          std::this_thread::yield();
        }
      }
    }
    if (g == seen) {
      std::unique_lock<std::mutex> lk(mu_);
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      cv_.wait(lk, [&] { return generation_.load(std::memory_order_seq_cst) != seen; });
      sleepers_.fetch_sub(1, std::memory_order_relaxed);
      g = generation_.load(std::memory_order_acquire);
    }
    seen = g;
    if (stop_.load(std::memory_order_acquire)) return;
    auto [b, e] = chunk(job_n_, job_grain_, n_threads_, index);
    try {
      if (b < e) (*job_)(b, e, index);
    } catch (...) {
      std::lock_guard<std::mutex> lk(error_mu_);
      if (!error_) error_ = std::current_exception();
    }
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

int physical_cores() {
  // Count distinct (physical id, core id) pairs; fall back to hardware_concurrency.
  std::ifstream f("/proc/cpuinfo");
  std::set<std::pair<int, int>> cores;
  std::string line;
  int phys = 0;
  while (std::getline(f, line)) {
    auto val = [&] { return std::stoi(line.substr(line.find(':') + 1)); };
    if (line.rfind("physical id", 0) == 0) phys = val();
    if (line.rfind("core id", 0) == 0) cores.insert({phys, val()});
  }
  if (!cores.empty()) return int(cores.size());
  unsigned h = std::thread::hardware_concurrency();
  return h ? int(h) : 1;
}

int resolve_threads(int requested) {
  if (requested <= 0) return physical_cores();
  const unsigned logical = std::thread::hardware_concurrency();
  const long most = logical > 0 ? long(kMaxOversubscribe) * logical : kMaxThreadsUnknown;
  if (requested > most) {
    fail_setting<InputError>("threads",
                             "a thread count of {} is more than {} ({}x this machine's {} logical "
                             "CPUs): oversubscribed workers spin and would run orders of "
                             "magnitude slower",
                             requested, most, kMaxOversubscribe, logical);
  }
  static std::atomic<bool> warned{false};
  if (logical > 0 && unsigned(requested) > logical && !warned.exchange(true)) {
    warn_setting("threads",
                 fmt::format("a thread count of {} is more than this machine's {} logical CPUs; "
                             "the workers will compete for cores and run much slower than {} "
                             "threads would", requested, logical, logical));
  }
  return requested;
}

}  // namespace mtp
