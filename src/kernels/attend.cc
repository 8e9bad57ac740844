// Attention of query heads over cached keys/values (ops.h attend, attend_slots,
// attend_group): Highway SIMD versions, runtime dispatch. The scalar
// reference is ref::attend (ops.cc).
//
// Fixed order per query (ops.h): the score of key j is one chain over the
// head's dims (wide heads: vector accumulator + lane sum + tail fmas; narrow
// heads: s = fma(q[t], k[t], s) from +0), then scale, soft-cap, softmax, and
// out[i] = the chain acc = fma(p_j, v_j[i], acc) over the keys in position
// order from +0. Which path, block or lane a key lands in never changes its
// bits, so attend_group (several queries sharing keys, each over its own
// range) gives every query attend's bits.

// Keep every multiply and add as written (g++ contracts a*b+c into FMA by default
// in C++ wherever the target has FMA): explicit MulAdd is the only FMA here.
#pragma GCC optimize("fp-contract=off")

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/attend.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "kernels/ops.h"
#include "kernels/simd.h"

HWY_BEFORE_NAMESPACE();
namespace mtp::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using D = hn::ScalableTag<float>;
using V = hn::Vec<D>;

// Defined in ops.cc (same target).
void Softmax(float* x, size_t n);
void Softcap(float* y, size_t n, float cap);

// --- attention ---------------------------------------------------------------
// Keys/values are read in position order lo, lo + 1, ..., hi. Position lo + j
// sits in slot (lo + j) % n_slots; the slot is advanced incrementally (one
// compare per key, no division).
HWY_INLINE size_t next_slot(size_t slot, size_t n_slots) {
  return slot + 1 == n_slots ? 0 : slot + 1;
}

// The slots of an attention call's keys, in key order: a ring (key j in slot
// (s0 + j) % n_slots) or an explicit list (key j in slot list[j]: a draft
// tree's keys, attend_slots). Every pass below takes a cursor by value, so
// it starts from key 0; both kinds run the same arithmetic per key.
struct RingCursor {
  size_t slot, n_slots;
  HWY_INLINE size_t take() {
    const size_t s = slot;
    slot = next_slot(slot, n_slots);
    return s;
  }
};
struct ListCursor {
  const uint32_t* list;
  HWY_INLINE size_t take() { return *list++; }
};

// Wide heads (hd >= lanes), q·k for kP keys at once (independent chains hide
// FMA latency). Per key: one vector accumulator over full vectors, SumOfLanes,
// then the remaining dims one fma at a time — the same sequence for every kP.
template <size_t kP>
HWY_INLINE void dots(const float* q, const float* const* ks, size_t hd, float* out) {
  const D d;
  const size_t N = hn::Lanes(d);
  V acc[kP];
#pragma GCC unroll 4
  for (size_t p = 0; p < kP; ++p) acc[p] = hn::Zero(d);
  size_t i = 0;
  for (; i + N <= hd; i += N) {
    const V qv = hn::LoadU(d, q + i);
#pragma GCC unroll 4
    for (size_t p = 0; p < kP; ++p) acc[p] = hn::MulAdd(qv, hn::LoadU(d, ks[p] + i), acc[p]);
  }
  for (size_t p = 0; p < kP; ++p) {
    float s = hn::GetLane(hn::SumOfLanes(d, acc[p]));
    for (size_t t = i; t < hd; ++t) s = std::fma(q[t], ks[p][t], s);
    out[p] = s;
  }
}

template <class C>
void wide_scores(const float* q, const float* k, size_t stride, C c, size_t n,
                 size_t hd, float* scores) {
  size_t j = 0;
  for (; j + 4 <= n; j += 4) {
    const float* ks[4];
    for (size_t p = 0; p < 4; ++p) ks[p] = k + c.take() * stride;
    dots<4>(q, ks, hd, scores + j);
  }
  for (; j < n; ++j) {
    const float* ks[1] = {k + c.take() * stride};
    dots<1>(q, ks, hd, scores + j);
  }
}

// Narrow heads (hd < lanes): no full vector per key, so q·k is the scalar chain
// s = fma(q[t], k[t], s), t = 0, 1, ..., hd - 1, from s = +0 — exactly dots()'s
// sequence for hd < lanes (SumOfLanes of no vectors is +0). Every narrow path
// below computes this chain per key, so a score's bits do not depend on the
// path, the block or the lane its key lands in.
template <size_t kP>
HWY_INLINE void narrow_dots(const float* q, const float* const* ks, size_t hd, float* out) {
  float s[kP] = {};
  for (size_t t = 0; t < hd; ++t) {
    const float qt = q[t];
#pragma GCC unroll 8
    for (size_t p = 0; p < kP; ++p) s[p] = std::fma(qt, ks[p][t], s[p]);
  }
  for (size_t p = 0; p < kP; ++p) out[p] = s[p];
}

#if HWY_TARGET != HWY_SCALAR
// hd == kL (4 or 8) on kL-lane vectors: the rows of kL keys are transposed in
// registers (kL × kL) so that col[t] holds dim t of the kL keys; then
// acc = fma(q[t], col[t], acc) runs the per-key chain in every lane
// (dot_cols). One transpose serves every query that reads these keys.
template <size_t kL>
using DL = hn::CappedTag<float, kL>;
template <size_t kL>
HWY_INLINE void transpose_keys(const float* const* ks, hn::Vec<DL<kL>>* col) {
  static_assert(kL == 4 || kL == 8);
  const DL<kL> dl;
  const hn::Repartition<double, DL<kL>> dd;
  using VL = hn::Vec<DL<kL>>;
  auto lo64 = [&](VL a, VL b) {
    return hn::BitCast(dl, hn::InterleaveLower(dd, hn::BitCast(dd, a), hn::BitCast(dd, b)));
  };
  auto hi64 = [&](VL a, VL b) {
    return hn::BitCast(dl, hn::InterleaveUpper(dd, hn::BitCast(dd, a), hn::BitCast(dd, b)));
  };
  VL r[kL], t[kL], u[kL];
#pragma GCC unroll 8
  for (size_t p = 0; p < kL; ++p) r[p] = hn::LoadU(dl, ks[p]);
  // 4 × 4 transposes within each 128-bit block: keys g..g+3, u[g + i] = dim i
  // (and dim i + 4 in the upper block when kL == 8).
#pragma GCC unroll 8
  for (size_t p = 0; p < kL; p += 2) {
    t[p] = hn::InterleaveLower(dl, r[p], r[p + 1]);
    t[p + 1] = hn::InterleaveUpper(dl, r[p], r[p + 1]);
  }
#pragma GCC unroll 8
  for (size_t g = 0; g < kL; g += 4) {
    u[g] = lo64(t[g], t[g + 2]);
    u[g + 1] = hi64(t[g], t[g + 2]);
    u[g + 2] = lo64(t[g + 1], t[g + 3]);
    u[g + 3] = hi64(t[g + 1], t[g + 3]);
  }
  if constexpr (kL == 4) {
#pragma GCC unroll 8
    for (size_t i = 0; i < 4; ++i) col[i] = u[i];
  } else {  // join the 128-bit halves: keys 0-3 from u[i], keys 4-7 from u[i + 4]
#pragma GCC unroll 8
    for (size_t i = 0; i < 4; ++i) {
      col[i] = hn::ConcatLowerLower(dl, u[i + 4], u[i]);
      col[i + 4] = hn::ConcatUpperUpper(dl, u[i + 4], u[i]);
    }
  }
}
template <size_t kL>
HWY_INLINE void dot_cols(const float* q, const hn::Vec<DL<kL>>* col, float* out) {
  const DL<kL> dl;
  hn::Vec<DL<kL>> acc = hn::Zero(dl);
#pragma GCC unroll 8
  for (size_t i = 0; i < kL; ++i) acc = hn::MulAdd(hn::Set(dl, q[i]), col[i], acc);
  hn::StoreU(acc, dl, out);
}
template <size_t kL>
HWY_INLINE void transposed_dots(const float* q, const float* const* ks, float* out) {
  hn::Vec<DL<kL>> col[kL];
  transpose_keys<kL>(ks, col);
  dot_cols<kL>(q, col, out);
}
// Whether narrow heads of hd dims take the transposed path on this target.
HWY_INLINE bool transposable(size_t hd) {
  return (hd == 8 && hn::Lanes(DL<8>()) == 8) || (hd == 4 && hn::Lanes(DL<4>()) == 4);
}
#endif

template <class C>
void narrow_scores(const float* q, const float* k, size_t stride, C c, size_t n,
                   size_t hd, float* scores) {
  const float* ks[8];
  // ks[0, kb) = the rows of the next kb keys, in position order.
  auto next_keys = [&](size_t kb) {
    for (size_t p = 0; p < kb; ++p) ks[p] = k + c.take() * stride;
  };
  size_t j = 0;
#if HWY_TARGET != HWY_SCALAR
  if (hd == 8 && transposable(hd)) {
    for (; j + 8 <= n; j += 8) {
      next_keys(8);
      transposed_dots<8>(q, ks, scores + j);
    }
  } else if (hd == 4 && transposable(hd)) {
    for (; j + 4 <= n; j += 4) {
      next_keys(4);
      transposed_dots<4>(q, ks, scores + j);
    }
  }
#endif
  for (; j + 8 <= n; j += 8) {
    next_keys(8);
    narrow_dots<8>(q, ks, hd, scores + j);
  }
  for (; j < n; ++j) {
    next_keys(1);
    narrow_dots<1>(q, ks, hd, scores + j);
  }
}

// out[i0, i0 + kC·L) = Σ_j p_j · v_j[i0, ...) over the n positions from the one
// in `slot`, L = lanes of DC. Each output lane is the chain
// acc = fma(p_j, v_j[i], acc), j = 0, 1, ..., from +0: the bits of a dim do not
// depend on the vector width or chunk it is computed in.
template <class DC, size_t kC, class C>
HWY_INLINE void weighted_sum(DC dc, const float* p, const float* v, C c, size_t n,
                             size_t stride, size_t i0, float* out) {
  const size_t L = hn::Lanes(dc);
  hn::Vec<DC> acc[kC];
#pragma GCC unroll 8
  for (size_t c = 0; c < kC; ++c) acc[c] = hn::Zero(dc);
  for (size_t j = 0; j < n; ++j) {
    const float* vj = v + c.take() * stride + i0;
    const auto pj = hn::Set(dc, p[j]);
#pragma GCC unroll 8
    for (size_t c = 0; c < kC; ++c) acc[c] = hn::MulAdd(pj, hn::LoadU(dc, vj + c * L), acc[c]);
  }
#pragma GCC unroll 8
  for (size_t c = 0; c < kC; ++c) hn::StoreU(acc[c], dc, out + i0 + c * L);
}

// The dims [i, hd) left after full vectors (fewer than the lanes of D), in
// vectors of halving width kCap, 2^k lanes each (hd = 12 on AVX3: 8 + 4 lanes).
template <size_t kCap, class C>
HWY_INLINE void weighted_sum_rest(const float* p, const float* v, C c, size_t n,
                                  size_t stride, size_t i, size_t hd, float* out) {
  const hn::CappedTag<float, kCap> dc;
  for (; hd - i >= hn::Lanes(dc); i += hn::Lanes(dc)) {
    weighted_sum<decltype(dc), 1, C>(dc, p, v, c, n, stride, i, out);
  }
  if constexpr (kCap > 1) weighted_sum_rest<kCap / 2, C>(p, v, c, n, stride, i, hd, out);
}

// The attention of one head over the n keys of cursor c (ops.h attend).
template <class C>
void attend_keys(const float* q, const float* k, const float* v, size_t stride, C c,
                 size_t n, size_t hd, float scale, float cap, float* scores, float* out) {
  const D d;
  const size_t N = hn::Lanes(d);
  if (hd < N) narrow_scores(q, k, stride, c, n, hd, scores);
  else wide_scores(q, k, stride, c, n, hd, scores);
  for (size_t j = 0; j < n; ++j) scores[j] *= scale;
  if (cap > 0.f) Softcap(scores, n, cap);
  Softmax(scores, n);
  // out[i] = fma(p_j, v_j[i], out[i]) over j in key order, for every dim;
  // full vectors in register chunks of 8, 4, then 1, the rest in narrower ones.
  const float* p = scores;
  size_t i = 0;
  for (; i + 8 * N <= hd; i += 8 * N) weighted_sum<D, 8, C>(d, p, v, c, n, stride, i, out);
  for (; i + 4 * N <= hd; i += 4 * N) weighted_sum<D, 4, C>(d, p, v, c, n, stride, i, out);
  for (; i + N <= hd; i += N) weighted_sum<D, 1, C>(d, p, v, c, n, stride, i, out);
  weighted_sum_rest<32, C>(p, v, c, n, stride, i, hd, out);
}

void Attend(const float* q, const float* k, const float* v, size_t stride, size_t n_slots,
            size_t lo, size_t hi, size_t hd, float scale, float cap, float* scores,
            float* out) {
  attend_keys(q, k, v, stride, RingCursor{lo % n_slots, n_slots}, hi - lo + 1, hd, scale,
              cap, scores, out);
}

void AttendSlots(const float* q, const float* k, const float* v, size_t stride,
                 const uint32_t* slots, size_t n, size_t hd, float scale, float cap,
                 float* scores, float* out) {
  attend_keys(q, k, v, stride, ListCursor{slots}, n, hd, scale, cap, scores, out);
}

// --- several queries over shared keys (attend_group) -------------------------
// Queries are (pointer, key range) with ranges inside the union [lo, lo + U).
// Key u of the union is position lo + u, read through the ring cursor from
// slot lo % n_slots. Query i's keys are u in [off_i, off_i + n_i).
struct GroupRange {
  size_t off, n;
  HWY_INLINE bool has(size_t u) const { return u - off < n; }  // unsigned: u < off fails
};

// Scores of every query over its own keys, each key's row loaded once for all:
// narrow transposable heads transpose each block of kL union keys once; a
// query whose range covers only part of a block keeps the scores of its keys.
template <class C>
void group_narrow_scores(const AttendQuery* qs, const GroupRange* rg, size_t nq,
                         const float* k, size_t stride, C c, size_t U, size_t hd) {
  const float* ks[8];
  size_t u = 0;
#if HWY_TARGET != HWY_SCALAR
  auto blocks = [&](auto kl) {
    constexpr size_t kL = decltype(kl)::value;
    hn::Vec<DL<kL>> col[kL];
    HWY_ALIGN float tmp[kL];
    for (; u + kL <= U; u += kL) {
      for (size_t p = 0; p < kL; ++p) ks[p] = k + c.take() * stride;
      transpose_keys<kL>(ks, col);
      for (size_t i = 0; i < nq; ++i) {
        const size_t a = std::max(u, rg[i].off), b = std::min(u + kL, rg[i].off + rg[i].n);
        if (a >= b) continue;
        if (a == u && b == u + kL) {
          dot_cols<kL>(qs[i].q, col, qs[i].scores + (u - rg[i].off));
        } else {
          dot_cols<kL>(qs[i].q, col, tmp);
          std::memcpy(qs[i].scores + (a - rg[i].off), tmp + (a - u), (b - a) * sizeof(float));
        }
      }
    }
  };
  if (hd == 8 && transposable(hd)) blocks(std::integral_constant<size_t, 8>());
  else if (hd == 4 && transposable(hd)) blocks(std::integral_constant<size_t, 4>());
#endif
  for (; u < U; ++u) {  // the rest one key at a time (any narrow hd)
    ks[0] = k + c.take() * stride;
    for (size_t i = 0; i < nq; ++i)
      if (rg[i].has(u)) narrow_dots<1>(qs[i].q, ks, hd, qs[i].scores + (u - rg[i].off));
  }
}

// out_i[i0, i0 + kC·L) += p_i[u] · v_u over the union keys, for kQ queries at
// once (L = lanes of DC): each v row is loaded once for all of them, and their
// accumulators are independent chains (one head's weighted sum alone is a
// single chain of dependent fmas for narrow heads). Query i's chain runs over
// its own keys in order from +0: exactly weighted_sum's.
template <class DC, size_t kC, size_t kQ, class C>
HWY_INLINE void group_weighted_sum(DC dc, const AttendQuery* qs, const GroupRange* rg,
                                   const float* v, C c, size_t u0, size_t u1, size_t stride,
                                   size_t i0) {
  const size_t L = hn::Lanes(dc);
  using VC = hn::Vec<DC>;
  VC acc[kQ][kC];
#pragma GCC unroll 8
  for (size_t i = 0; i < kQ; ++i)
#pragma GCC unroll 8
    for (size_t ch = 0; ch < kC; ++ch) acc[i][ch] = hn::Zero(dc);
  for (size_t u = u0; u < u1; ++u) {
    const float* vu = v + c.take() * stride + i0;
    VC vv[kC];
#pragma GCC unroll 8
    for (size_t ch = 0; ch < kC; ++ch) vv[ch] = hn::LoadU(dc, vu + ch * L);
#pragma GCC unroll 8
    for (size_t i = 0; i < kQ; ++i) {
      if (!rg[i].has(u)) continue;
      const VC pu = hn::Set(dc, qs[i].scores[u - rg[i].off]);
#pragma GCC unroll 8
      for (size_t ch = 0; ch < kC; ++ch) acc[i][ch] = hn::MulAdd(pu, vv[ch], acc[i][ch]);
    }
  }
#pragma GCC unroll 8
  for (size_t i = 0; i < kQ; ++i)
#pragma GCC unroll 8
    for (size_t ch = 0; ch < kC; ++ch) hn::StoreU(acc[i][ch], dc, qs[i].out + i0 + ch * L);
}

// Queries [0, nq) in groups of kQ (the remainder one at a time), keys of the
// union that the group's queries read. Accumulators: kQ·kC <= 8 vectors.
template <class DC, size_t kC, class C>
HWY_INLINE void group_sums(DC dc, const AttendQuery* qs, const GroupRange* rg, size_t nq,
                           const float* v, C c0, size_t stride, size_t i0) {
  constexpr size_t kQ = kC >= 8 ? 1 : 8 / kC;
  auto run = [&](auto kq, size_t i) {
    constexpr size_t kN = decltype(kq)::value;
    size_t u0 = rg[i].off, u1 = rg[i].off + rg[i].n;
    for (size_t t = 1; t < kN; ++t) {
      u0 = std::min(u0, rg[i + t].off);
      u1 = std::max(u1, rg[i + t].off + rg[i + t].n);
    }
    C c = c0;
    for (size_t s = 0; s < u0; ++s) c.take();
    group_weighted_sum<DC, kC, kN>(dc, qs + i, rg + i, v, c, u0, u1, stride, i0);
  };
  size_t i = 0;
  for (; i + kQ <= nq; i += kQ) run(std::integral_constant<size_t, kQ>(), i);
  for (; i < nq; ++i) run(std::integral_constant<size_t, 1>(), i);
}

template <size_t kCap, class C>
HWY_INLINE void group_sums_rest(const AttendQuery* qs, const GroupRange* rg, size_t nq,
                                const float* v, C c, size_t stride, size_t i, size_t hd) {
  const hn::CappedTag<float, kCap> dc;
  for (; hd - i >= hn::Lanes(dc); i += hn::Lanes(dc)) {
    group_sums<decltype(dc), 1, C>(dc, qs, rg, nq, v, c, stride, i);
  }
  if constexpr (kCap > 1) group_sums_rest<kCap / 2, C>(qs, rg, nq, v, c, stride, i, hd);
}

void AttendGroup(const AttendQuery* qs, size_t nq, const float* k, const float* v,
                 size_t stride, size_t n_slots, size_t hd, float scale, float cap) {
  if (nq == 0) return;
  size_t lo = qs[0].lo, hi = qs[0].hi;
  for (size_t i = 1; i < nq; ++i) {
    lo = std::min(lo, qs[i].lo);
    hi = std::max(hi, qs[i].hi);
  }
  const size_t U = hi - lo + 1;
  HWY_ALIGN GroupRange rg[kAttendGroupMax];
  for (size_t i = 0; i < nq; ++i) rg[i] = {qs[i].lo - lo, qs[i].hi - qs[i].lo + 1};
  const RingCursor c0{lo % n_slots, n_slots};
  const D d;
  const size_t N = hn::Lanes(d);
  if (hd < N) {
    group_narrow_scores(qs, rg, nq, k, stride, c0, U, hd);
  } else {  // wide heads: per query (its keys stay in L1 for the next)
    for (size_t i = 0; i < nq; ++i)
      wide_scores(qs[i].q, k, stride, RingCursor{qs[i].lo % n_slots, n_slots}, rg[i].n, hd,
                  qs[i].scores);
  }
  for (size_t i = 0; i < nq; ++i) {
    float* s = qs[i].scores;
    for (size_t j = 0; j < rg[i].n; ++j) s[j] *= scale;
    if (cap > 0.f) Softcap(s, rg[i].n, cap);
    Softmax(s, rg[i].n);
  }
  // attend_keys' dims split (8, 4, 1 full vectors, then narrower), each piece
  // for all queries.
  size_t i = 0;
  for (; i + 8 * N <= hd; i += 8 * N) group_sums<D, 8>(d, qs, rg, nq, v, c0, stride, i);
  for (; i + 4 * N <= hd; i += 4 * N) group_sums<D, 4>(d, qs, rg, nq, v, c0, stride, i);
  for (; i + N <= hd; i += N) group_sums<D, 1>(d, qs, rg, nq, v, c0, stride, i);
  group_sums_rest<32>(qs, rg, nq, v, c0, stride, i, hd);
}

}  // namespace mtp::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace mtp::kernels {
HWY_EXPORT(Attend);
HWY_EXPORT(AttendSlots);
HWY_EXPORT(AttendGroup);

void attend(const float* q, const float* k, const float* v, size_t stride, size_t n_slots,
            size_t lo, size_t hi, size_t head_dim, float scale, float cap, float* scores,
            float* out) {
  detail::ensure_simd_target();
  HWY_DYNAMIC_DISPATCH(Attend)(q, k, v, stride, n_slots, lo, hi, head_dim, scale, cap, scores,
                               out);
}
void attend_slots(const float* q, const float* k, const float* v, size_t stride,
                  const uint32_t* slots, size_t n, size_t head_dim, float scale, float cap,
                  float* scores, float* out) {
  detail::ensure_simd_target();
  HWY_DYNAMIC_DISPATCH(AttendSlots)(q, k, v, stride, slots, n, head_dim, scale, cap, scores, out);
}
void attend_group(std::span<const AttendQuery> qs, const float* k, const float* v, size_t stride,
                  size_t n_slots, size_t head_dim, float scale, float cap) {
  if (qs.size() > kAttendGroupMax)
    fail<ShapeError>("attend_group: {} queries (at most {})", qs.size(), kAttendGroupMax);
  size_t lo = qs.empty() ? 0 : qs[0].lo, hi = lo;
  for (const auto& q : qs) {
    if (q.hi < q.lo) fail<ShapeError>("attend_group: empty key range [{}, {}]", q.lo, q.hi);
    lo = std::min(lo, q.lo);
    hi = std::max(hi, q.hi);
  }
  if (!qs.empty() && hi - lo >= n_slots)
    fail<ShapeError>("attend_group: positions [{}, {}] do not fit {} slots", lo, hi, n_slots);
  detail::ensure_simd_target();
  HWY_DYNAMIC_DISPATCH(AttendGroup)(qs.data(), qs.size(), k, v, stride, n_slots, head_dim, scale,
                                    cap);
}

}  // namespace mtp::kernels
#endif  // HWY_ONCE
