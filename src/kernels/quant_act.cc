// Activation quantization for the quantized kernels (quant_dot.h's contract),
// vectorized with Highway: the same fields, bit for bit, as the scalar
// quantize_act_ref (tests compare them on every target, special values included).
//
// Why SIMD: it runs once per quantized product on q·cols values. The scalar
// form (a serial maxss chain per block, branchy clamps, byte loops the
// compiler cannot vectorize for char aliasing) cost ~3 ns per value on an
// Emerald Rapids core (docs/lab/performance-history.md "an Intel host —
// AVX-VNNI on AVX2") — 45 % of a 128×4096 Q8_0 product at q = 1 in cache,
// ~1–3 % of a ~1 B model's forward.
//
// Each operation mirrors the reference literally:
//   amax: lane-wise "a > m ? a : m" from 0 (a NaN never enters: the same as
//         std::max(amax, |x|) skipping it), then the max of the lanes (exact);
//   code: (x·inv + 1.5·2^23) − 1.5·2^23 (two roundings, no contraction: the
//         pragma below), then "−127 < r ? r : −127" and "r < 127 ? r : 127"
//         (std::max / std::min with a NaN mapping to −127), then to int8.
#include <cstdint>

#include "kernels/quant_dot.h"

#pragma GCC optimize("fp-contract=off")

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/quant_act.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace mtp::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Codes and scales of `n_blocks` blocks of `ab` values (ab a multiple of the
// vector length: 32 or 256): q[i] (int8), d[b] = amax/127.
void QuantizeBlocks(const float* HWY_RESTRICT x, size_t n_blocks, size_t ab, int8_t* HWY_RESTRICT q,
                    float* HWY_RESTRICT d) {
  const hn::CappedTag<float, 16> df;
  const hn::Rebind<int32_t, decltype(df)> di;
  const hn::Rebind<int8_t, decltype(df)> d8;
  const size_t N = hn::Lanes(df);
  const auto magic = hn::Set(df, 12582912.f);  // 1.5 · 2^23
  const auto lo = hn::Set(df, -127.f), hi = hn::Set(df, 127.f);
  for (size_t b = 0; b < n_blocks; ++b) {
    const float* xb = x + b * ab;
    auto m = hn::Zero(df);
    for (size_t i = 0; i < ab; i += N) {
      const auto a = hn::Abs(hn::LoadU(df, xb + i));
      m = hn::IfThenElse(hn::Gt(a, m), a, m);
    }
    const float amax = hn::GetLane(hn::MaxOfLanes(df, m));  // m holds no NaN
    const float inv = amax > 0 ? 127.f / amax : 0.f;
    d[b] = amax / 127.f;
    const auto vinv = hn::Set(df, inv);
    for (size_t i = 0; i < ab; i += N) {
      auto r = hn::Sub(hn::Add(hn::Mul(hn::LoadU(df, xb + i), vinv), magic), magic);
      r = hn::IfThenElse(hn::Lt(lo, r), r, lo);
      r = hn::IfThenElse(hn::Lt(r, hi), r, hi);
      hn::StoreU(hn::DemoteTo(d8, hn::ConvertTo(di, r)), d8, q + b * ab + i);
    }
  }
}

}  // namespace mtp::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace mtp::kernels::detail {
HWY_EXPORT(QuantizeBlocks);

void quantize_act(GgmlType t, const float* x, size_t x_stride, size_t rows, size_t cols,
                  QuantAct& out) {
  act_prepare(t, rows, cols, out);
  const auto blocks = HWY_DYNAMIC_DISPATCH(QuantizeBlocks);
  for (size_t r = 0; r < rows; ++r) {
    blocks(x + r * x_stride, cols / out.ab, out.ab, out.q.data() + r * cols, out.d.data() + r * (cols / out.ab));
    act_sums(t, r, out);  // integer sums of the codes: shared with the reference
  }
}

}  // namespace mtp::kernels::detail
#endif  // HWY_ONCE
