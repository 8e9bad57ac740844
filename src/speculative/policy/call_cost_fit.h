// A drafter module call's seconds by its rows, learnt live from the calls
// seen (every module has the same shape, so one estimate serves all), for
// choices that price module calls before making them. Rows matter: on a
// memory-bound drafter a call costs mostly its weight read, on a
// compute-bound one mostly its rows.
//
// CallCostFit: a + b · rows, decayed least squares — the tree chooser
// (tree_shape.h), whose calls are all drafting calls of a few to a few dozen
// rows.
#pragma once
#include <algorithm>

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

}  // namespace mtp::speculative
