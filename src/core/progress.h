// A progress line for long work (precompute, training, pretraining).
// On a terminal it redraws one line at most ~4 times a second; in logs (stderr
// not a TTY) it prints a plain line every 10% so CI output stays readable.
#pragma once
#include <chrono>
#include <string>

namespace mtp {

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
