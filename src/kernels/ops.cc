// Row-wise transformer operations: Highway SIMD versions (runtime dispatch)
// plus the scalar references (namespace ref, see ops_ref.h).
//
// Batch invariance: every function's result for an element depends only on its
// own row (or, for elementwise maps, on that element) and on the sizes, never on
// how many rows a call holds. Reductions (sum of squares, dot products, softmax
// sums) run in a fixed order that depends on n and the SIMD target only.
// Elementwise maps (activations, soft-capping) may be called on [q, n] buffers
// at once, so the tail of a call goes through the very same vector code via a
// padded buffer: an element's bits never depend on its position in the call.
//
// exp/tanh use Highway's polynomials (≤ 1 and ≤ 4 ULP); exp keeps NaN and
// saturates to inf like std::exp.

// Keep every multiply and add as written (g++ contracts a*b+c into FMA by default
// in C++ wherever the target has FMA): explicit MulAdd is the only FMA here, so
// an element's operation sequence is exactly the one in the source.
#pragma GCC optimize("fp-contract=off")

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/ops.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
#include <hwy/contrib/math/math-inl.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/ops.h"
#include "kernels/ops_ref.h"
#include "kernels/simd.h"

HWY_BEFORE_NAMESPACE();
namespace mtp::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using D = hn::ScalableTag<float>;
using V = hn::Vec<D>;

// e^x; NaN stays NaN, x > 88.7 gives inf (Highway's Exp is valid to x = 104).
HWY_INLINE V exp_v(D d, V x) {
  const V y = hn::Exp(d, hn::Min(x, hn::Set(d, 100.f)));
  return hn::IfThenElse(hn::IsNaN(x), x, y);
}

// Applies f (V -> V) to a[0, n) (and b[0, n) when given), writing out. The last
// partial vector is computed from a zero-padded copy so every element sees the
// same lane operations.
template <class F>
HWY_INLINE void map(const float* a, const float* b, size_t n, float* out, F f) {
  const D d;
  const size_t N = hn::Lanes(d);
  size_t i = 0;
  for (; i + N <= n; i += N) {
    const V vb = b ? hn::LoadU(d, b + i) : hn::Zero(d);
    hn::StoreU(f(hn::LoadU(d, a + i), vb), d, out + i);
  }
  if (i == n) return;
  HWY_ALIGN float ta[hn::MaxLanes(D())] = {}, tb[hn::MaxLanes(D())] = {};
  std::memcpy(ta, a + i, (n - i) * 4);
  if (b) std::memcpy(tb, b + i, (n - i) * 4);
  hn::Store(f(hn::Load(d, ta), hn::Load(d, tb)), d, ta);
  std::memcpy(out + i, ta, (n - i) * 4);
}

void SiluMul(const float* gate, const float* up, size_t n, float* out) {
  const D d;
  const V one = hn::Set(d, 1.f);
  // g / (1 + e^-g) * up, in the reference's operation order.
  map(gate, up, n, out, [&](V g, V u) {
    return hn::Mul(hn::Div(g, hn::Add(one, exp_v(d, hn::Neg(g)))), u);
  });
}

void GeluTanhMul(const float* gate, const float* up, size_t n, float* out) {
  const D d;
  const V half = hn::Set(d, 0.5f), one = hn::Set(d, 1.f), c = hn::Set(d, 0.7978845608028654f),
          k = hn::Set(d, 0.044715f);
  map(gate, up, n, out, [&](V g, V u) {
    const V inner = hn::Mul(c, hn::Add(g, hn::Mul(hn::Mul(hn::Mul(k, g), g), g)));
    return hn::Mul(hn::Mul(hn::Mul(half, g), hn::Add(one, hn::Tanh(d, inner))), u);
  });
}

void Softcap(float* y, size_t n, float cap) {
  const D d;
  const V vc = hn::Set(d, cap);
  map(y, nullptr, n, y, [&](V v, V) { return hn::Mul(vc, hn::Tanh(d, hn::Div(v, vc))); });
}

// Σ x[i]·x[i]: 4 vector accumulators over full 4-vector groups, a fixed-order
// combine, then the remaining elements one at a time.
HWY_INLINE float sum_squares(const float* x, size_t n) {
  const D d;
  const size_t N = hn::Lanes(d);
  V a0 = hn::Zero(d), a1 = a0, a2 = a0, a3 = a0;
  size_t i = 0;
  for (; i + 4 * N <= n; i += 4 * N) {
    const V x0 = hn::LoadU(d, x + i), x1 = hn::LoadU(d, x + i + N);
    const V x2 = hn::LoadU(d, x + i + 2 * N), x3 = hn::LoadU(d, x + i + 3 * N);
    a0 = hn::MulAdd(x0, x0, a0);
    a1 = hn::MulAdd(x1, x1, a1);
    a2 = hn::MulAdd(x2, x2, a2);
    a3 = hn::MulAdd(x3, x3, a3);
  }
  float s = hn::GetLane(hn::SumOfLanes(d, hn::Add(hn::Add(a0, a1), hn::Add(a2, a3))));
  for (; i < n; ++i) s = std::fma(x[i], x[i], s);
  return s;
}

void RmsNorm(const float* x, const float* w, size_t n, float eps, float* out) {
  const D d;
  const float inv = 1.0f / std::sqrt(sum_squares(x, n) / float(n) + eps);
  const V vi = hn::Set(d, inv);
  map(x, w, n, out, [&](V v, V wv) { return hn::Mul(hn::Mul(v, vi), wv); });
}

// Max-subtracted softmax in place. NaN inputs are ignored by the max (as
// std::fmax does) and propagate through exp.
void Softmax(float* x, size_t n) {
  const D d;
  const size_t N = hn::Lanes(d);
  const V ninf = hn::Set(d, -std::numeric_limits<float>::infinity());
  V vm = ninf;
  size_t i = 0;
  for (; i + N <= n; i += N) {
    const V v = hn::LoadU(d, x + i);
    vm = hn::Max(vm, hn::IfThenElse(hn::IsNaN(v), ninf, v));
  }
  float m = hn::GetLane(hn::MaxOfLanes(d, vm));
  for (; i < n; ++i) m = std::fmax(m, x[i]);
  const V vmax = hn::Set(d, m);
  V vs = hn::Zero(d);
  for (i = 0; i + N <= n; i += N) {
    const V e = exp_v(d, hn::Sub(hn::LoadU(d, x + i), vmax));
    hn::StoreU(e, d, x + i);
    vs = hn::Add(vs, e);
  }
  if (i < n) {  // padded with -inf: exp gives +0 and the sum is unchanged
    HWY_ALIGN float t[hn::MaxLanes(D())];
    std::fill(t, t + N, -std::numeric_limits<float>::infinity());
    std::memcpy(t, x + i, (n - i) * 4);
    const V e = exp_v(d, hn::Sub(hn::Load(d, t), vmax));
    hn::Store(e, d, t);
    std::memcpy(x + i, t, (n - i) * 4);
    vs = hn::Add(vs, e);
  }
  const float inv = 1.0f / hn::GetLane(hn::SumOfLanes(d, vs));
  const V vi = hn::Set(d, inv);
  map(x, nullptr, n, x, [&](V v, V) { return hn::Mul(v, vi); });
}

size_t F32Lanes() { return hn::Lanes(D()); }

}  // namespace mtp::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace mtp::kernels {
HWY_EXPORT(RmsNorm);
HWY_EXPORT(Softmax);
HWY_EXPORT(Softcap);
HWY_EXPORT(SiluMul);
HWY_EXPORT(GeluTanhMul);
HWY_EXPORT(F32Lanes);

void rmsnorm(const float* x, const float* w, size_t n, float eps, float* out) {
  detail::ensure_simd_target();
  HWY_DYNAMIC_DISPATCH(RmsNorm)(x, w, n, eps, out);
}
void softmax(float* x, size_t n) {
  detail::ensure_simd_target();
  HWY_DYNAMIC_DISPATCH(Softmax)(x, n);
}
void softcap(float* y, size_t n, float cap) {
  detail::ensure_simd_target();
  HWY_DYNAMIC_DISPATCH(Softcap)(y, n, cap);
}
size_t simd_f32_lanes() {
  detail::ensure_simd_target();
  return HWY_DYNAMIC_DISPATCH(F32Lanes)();
}
void silu_mul(const float* gate, const float* up, size_t n, float* out) {
  detail::ensure_simd_target();
  HWY_DYNAMIC_DISPATCH(SiluMul)(gate, up, n, out);
}
void gelu_tanh_mul(const float* gate, const float* up, size_t n, float* out) {
  detail::ensure_simd_target();
  HWY_DYNAMIC_DISPATCH(GeluTanhMul)(gate, up, n, out);
}

void rope(float* x, const float* cos, const float* sin, size_t head_dim, bool interleaved) {
  size_t half = head_dim / 2;
  for (size_t i = 0; i < half; ++i) {
    size_t a = interleaved ? 2 * i : i;
    size_t b = interleaved ? 2 * i + 1 : i + half;
    float x0 = x[a], x1 = x[b];
    x[a] = x0 * cos[i] - x1 * sin[i];
    x[b] = x0 * sin[i] + x1 * cos[i];
  }
}

size_t argmax(const float* x, size_t n) {
  size_t best = 0;
  float bv = -std::numeric_limits<float>::infinity();
  bool found = false;
  for (size_t i = 0; i < n; ++i) {
    if (std::isnan(x[i])) continue;
    if (!found || x[i] > bv) {  // strict: ties keep the lowest index
      bv = x[i];
      best = i;
      found = true;
    }
  }
  return best;
}

namespace ref {

void rmsnorm(const float* x, const float* w, size_t n, float eps, float* out) {
  float ss = 0.f;
  for (size_t i = 0; i < n; ++i) ss += x[i] * x[i];
  float inv = 1.0f / std::sqrt(ss / float(n) + eps);
  for (size_t i = 0; i < n; ++i) out[i] = x[i] * inv * w[i];
}

void softmax(float* x, size_t n) {
  float m = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < n; ++i) m = std::fmax(m, x[i]);
  float s = 0.f;
  for (size_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - m);
    s += x[i];
  }
  float inv = 1.0f / s;
  for (size_t i = 0; i < n; ++i) x[i] *= inv;
}

void softcap(float* y, size_t n, float cap) {
  for (size_t i = 0; i < n; ++i) y[i] = cap * std::tanh(y[i] / cap);
}

void attend(const float* q, const float* k, const float* v, size_t stride, size_t n_slots,
            size_t lo, size_t hi, size_t head_dim, float scale, float cap, float* scores,
            float* out) {
  size_t n = hi - lo + 1;
  for (size_t j = 0; j < n; ++j) {
    const float* kj = k + ((lo + j) % n_slots) * stride;
    float s = 0.f;
    for (size_t d = 0; d < head_dim; ++d) s += q[d] * kj[d];
    s *= scale;
    if (cap > 0.f) s = cap * std::tanh(s / cap);
    scores[j] = s;
  }
  ref::softmax(scores, n);
  for (size_t d = 0; d < head_dim; ++d) out[d] = 0.f;
  for (size_t j = 0; j < n; ++j) {
    const float* vj = v + ((lo + j) % n_slots) * stride;
    float p = scores[j];
    for (size_t d = 0; d < head_dim; ++d) out[d] += p * vj[d];
  }
}

void silu_mul(const float* gate, const float* up, size_t n, float* out) {
  for (size_t i = 0; i < n; ++i) {
    float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void gelu_tanh_mul(const float* gate, const float* up, size_t n, float* out) {
  const float c = 0.7978845608028654f;  // sqrt(2/pi)
  for (size_t i = 0; i < n; ++i) {
    float g = gate[i];
    out[i] = 0.5f * g * (1.0f + std::tanh(c * (g + 0.044715f * g * g * g))) * up[i];
  }
}

}  // namespace ref
}  // namespace mtp::kernels
#endif  // HWY_ONCE
