// A progress line for long work (precompute, training, pretraining).
// On a terminal it redraws one line at most ~4 times a second; in logs (stderr
// not a TTY) it prints a plain line every 10% so CI output stays readable.
#pragma once
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <string>

namespace mtp {

// A diagnostic on stderr that never throws: fmt::print throws when the write
// fails, which in a destructor, a signal watcher or a worker thread aborts the
// process. A failed write leaves ferror(stderr) set, and run_cli
// (cli/run_cli.h) exits 2 for it once the command ends.
template <class... Args>
void note(fmt::format_string<Args...> f, Args&&... args) noexcept {
  try {
    const std::string s = fmt::format(f, std::forward<Args>(args)...);
    std::fwrite(s.data(), 1, s.size(), stderr);
    std::fflush(stderr);
  } catch (...) {  // out of memory formatting a diagnostic: drop it
  }
}

class Progress {
 public:
  // total: units of work (tokens, steps); unit: their name ("tok", "step").
  Progress(std::string label, double total, std::string unit, bool enabled = true);
  ~Progress();
  // Sets the amount done so far; extra: a short suffix ("loss 2.31").
  void update(double done, const std::string& extra = "");
  void finish(const std::string& extra = "");
  double rate() const;  // units per second since start
  // When the work is planned in one measure but produces another (self-
  // distillation plans a token budget; generations stop early at EOS, and a
  // resumed run skips finished shards), the units actually produced in THIS
  // run: the line then shows them and their rate, not the plan's. The
  // fraction and the ETA stay in planned units.
  void set_produced(double produced) { produced_ = produced; }

 private:
  void draw(bool final);

  std::string label_, unit_, extra_;
  double total_, done_ = 0, produced_ = -1;
  bool enabled_, tty_, finished_ = false;
  int last_decile_ = -1;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

// "1h02m", "3m12s", "45s".
std::string format_duration(double seconds);

}  // namespace mtp
