// A drafter module call's seconds by its rows, learnt live from the calls
// seen (every module has the same shape, so one estimate serves all), for
// choices that price module calls before making them. Rows matter: on a
// memory-bound drafter a call costs mostly its weight read, on a
// compute-bound one mostly its rows.
//
// CallCostFit: a + b · rows, decayed least squares — the tree chooser
// (tree_shape.h), whose calls are all drafting calls of a few to a few dozen
// rows. CallCostByRows: seconds per row by powers of two of rows — the union
// (union_proposer.h), whose calls range from 1 row to a prompt's catch-up of
// hundreds: a line fitted over both, weighted to the last few calls, priced a
// 1-row call at ~6x its cost right after a prompt's catch-up (stories260K
// drafter).
#pragma once
#include <algorithm>
#include <array>
#include <bit>

namespace mtp::speculative {

class CallCostFit {
 public:
  explicit CallCostFit(double decay) : decay_(decay) {}

  void observe(int rows, double seconds) {
    const double x = rows, y = seconds;
    n_ = n_ * decay_ + 1;
    sx_ = sx_ * decay_ + x;
    sy_ = sy_ * decay_ + y;
    sxx_ = sxx_ * decay_ + x * x;
    sxy_ = sxy_ * decay_ + x * y;
  }

  // Seconds of a call of `rows` rows: the fitted line once 4 calls of more
  // than one row count were seen; before that the mean call seen (rows
  // unknown to the fit), or default_call_s before any call.
  double seconds(double rows, double default_call_s) const {
    double a = default_call_s, b = 0;
    const double det = n_ * sxx_ - sx_ * sx_;
    if (n_ >= 4 && det > 1e-12 * n_ * n_) {
      b = std::max(0.0, (n_ * sxy_ - sx_ * sy_) / det);
      a = std::max(0.0, (sy_ - b * sx_) / n_);
    } else if (n_ > 0) {
      a = sy_ / n_;
    }
    return a + b * rows;
  }

  bool empty() const { return n_ == 0; }

 private:
  double decay_;
  double n_ = 0, sx_ = 0, sy_ = 0, sxx_ = 0, sxy_ = 0;  // decayed sums
};

class CallCostByRows {
 public:
  static constexpr int kBuckets = 8;  // rows 1, 2-3, 4-7, ..., 64-127, 128+

  void observe(int rows, double seconds) {
    if (rows < 1) return;
    const size_t b = bucket(rows);
    const double per_row = seconds / rows;
    per_row_[b] = seen_[b] ? per_row_[b] + kWeight * (per_row - per_row_[b]) : per_row;
    seen_[b] = true;
  }

  // Seconds of a call of `rows` rows: its bucket's seconds per row; else,
  // priced high rather than low (a call priced too cheap is chosen, one too
  // dear is only chosen later), the nearest bucket of fewer rows seen (a row
  // costs at most what it costs in a smaller call), or the smallest call of
  // the nearest bucket of more rows (a call costs at most what a larger one
  // does) — a prompt's catch-up is seen first and a 1-row call costs 5x its
  // per row there (stories260K drafter); 0 before any call.
  double seconds(int rows) const {
    if (rows < 1) return 0;
    const int b = int(bucket(rows));
    for (int x = b; x >= 0; --x) {
      if (seen_[size_t(x)]) return per_row_[size_t(x)] * rows;
    }
    for (int x = b + 1; x < kBuckets; ++x) {
      if (seen_[size_t(x)]) return per_row_[size_t(x)] * double(1 << x);
    }
    return 0;
  }

 private:
  static constexpr double kWeight = 0.2;  // of a new call (~5 calls per bucket)
  static size_t bucket(int rows) {
    return size_t(std::min(kBuckets - 1, int(std::bit_width(unsigned(rows))) - 1));
  }
  std::array<double, kBuckets> per_row_{};
  std::array<bool, kBuckets> seen_{};
};

}  // namespace mtp::speculative
