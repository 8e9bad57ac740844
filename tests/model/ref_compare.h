// Engine outputs against a double-precision reference forward, row by row,
// within a tolerance derived from the dimensions (shared by the reference
// tests of tests/model).
#pragma once
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "model_util.h"

namespace mtp::test {

// Per-row tolerance, relative to the row's magnitude ‖ref_row‖∞:
//
//   tol = 64 · ε32 · sqrt(K · L) · ‖ref_row‖∞,   ε32 = 2^-23,
//   K = the longest reduction of a layer (and n tokens), L = layers.
//
// Why: the engine rounds every product and sum to fp32 (ε32 relative). A
// length-K fp32 dot product has error ≈ sqrt(K)·ε32·‖a‖‖b‖ when rounding errors
// have random sign (the worst case K·ε32 is not reached in practice). RMSNorm,
// softmax and the residual adds keep errors relative to the row's scale, and
// the small random weights (0.5/√cols) give every sub-layer a gain of order 1,
// so the per-layer errors add up over the L layers no faster than L·sqrt(K)·ε32
// in the worst sign pattern and sqrt(L·K)·ε32 for random signs; we take the
// latter. The factor 64 covers the ~13 sequential rounding stages of a layer
// (norm, qkv, qk-norm, RoPE, scores, softmax, weighted sum, o_proj, post-norm,
// gate/up, activation, down, post-norm), fp32 exp/tanh/sin/cos (a few ulp
// each) and ×2–3 headroom. For these sizes tol ≈ 1e-4 · ‖row‖∞; every planted
// error in the perturbation tests lands far above it. (Observed on a correct
// engine: ≤ 0.03 · tol.)
inline double ref_tolerance(double K, int layers, double row_scale) {
  return test::fp32_forward_tolerance(K, layers, row_scale);
}

struct RefComparison {
  double worst_ratio = 0;  // max over rows and elements of |Δ| / tol (pass: <= 1)
  double worst_abs = 0;
  std::string where;
};

// eng: [rows, w] row-major; ref: rows of w values.
inline void compare_ref_rows(const std::vector<float>& eng, const std::vector<std::vector<double>>& ref,
                             double K, int layers, const char* what, RefComparison& c) {
  for (size_t t = 0; t < ref.size(); ++t) {
    const size_t w = ref[t].size();
    double scale = 0;
    for (double v : ref[t]) scale = std::max(scale, std::abs(v));
    const double tol = ref_tolerance(K, layers, scale);
    for (size_t i = 0; i < w; ++i) {
      const double diff = std::abs(double(eng[t * w + i]) - ref[t][i]);
      if (!(diff / tol <= c.worst_ratio)) {  // NaN also lands here
        c.worst_ratio = std::isnan(diff) ? INFINITY : diff / tol;
        c.worst_abs = diff;
        c.where = std::string(what) + " row " + std::to_string(t) + " [" + std::to_string(i) +
                  "]: engine " + std::to_string(eng[t * w + i]) + " ref " +
                  std::to_string(ref[t][i]) + " tol " + std::to_string(tol);
      }
    }
  }
}

}  // namespace mtp::test
