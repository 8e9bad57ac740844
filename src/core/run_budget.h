// What a long run needs, printed and checked before it starts: tokens, steps,
// the disk it writes and the memory it holds (estimated from the sizes), and
// the time it will take (estimated from a short warm-up, once measured).
// A run whose disk or memory does not fit is refused naming both numbers,
// unless forced (docs/PERFORMANCE.md "Training budgets").
#pragma once
#include <string>

namespace mtp {

struct RunBudget {
  std::string what;          // "precompute", "training", ...
  long sequences = 0, tokens = 0, steps = 0;  // 0 = not applicable
  double disk_bytes = 0;     // written under disk_dir (0 = nothing large)
  std::string disk_dir;
  double memory_bytes = 0;   // to be allocated up to the peak (0 = not estimated)
  // Already resident when the budget is made (a loaded target, its frozen
  // copies): part of the peak, but already out of the headroom memory_bytes
  // is checked against. 0 = not said.
  double held_bytes = 0;
  std::string text() const;  // "precompute budget: 1200 sequences, ... shards 2.1 GiB (free 40 GiB)"
};

// InputError about the setting "force" when disk_bytes exceeds the free space
// of disk_dir or memory_bytes exceeds memory_headroom(), naming both numbers;
// with force a warning instead. Unknown free space or headroom: not checked.
void check_budget(const RunBudget& b, bool force);

// The time a run of `total` units will take at the rate of a warm-up that did
// `done` units in `seconds`: "estimated 3m12s for 5000 steps (from 20 steps in 0.8 s)".
std::string estimate_line(const std::string& what, double done, double seconds, double total,
                          const std::string& unit);

// "512 B", "3.2 MiB", "2.10 GiB".
std::string format_bytes(double bytes);

}  // namespace mtp
