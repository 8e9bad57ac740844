// Products over a matrix read in place, row-major as stored (PackedMatrix::view:
// a tied head over the memory-mapped token table): Y[q, rows] = X[q, cols]·Wᵀ.
//
// Same bits as the packed kernels (matmul.h): the float holds follow
// matmul.cc's reduction order to the operation — output (o, r) keeps 16
// semantic lanes, lane l accumulates w[o][i]·x[r][i] for i ≡ l (mod 16) in
// increasing i with one hn::MulAdd per term from +0, the partial last
// superchunk (cols % 32) as two 16-col steps over zero-padded w and x, then
// the fixed tree sum (reduce16). The packed layout only moves the elements
// that form a lane; the lane's operations are these. So a view and a packed
// copy of the same values give identical Y on every target (tests check it),
// and a head may be either without changing what decode or verify compute.
// Block types compute quant_dot.h's contract with its reference
// (quant_dot_ref_rows), which is what the grouped kernels are checked
// against bit for bit: identical bits again, at the reference's speed.
//
// Batch invariance: an output's operations depend only on cols and the
// target; tiles of activation rows and threads (whole groups of 4 output
// rows) change which outputs run together, never an output's sequence.
//
// Performance: a tile holds kR output rows × kQ activation rows of 16-lane
// accumulators; the kR rows are adjacent in memory (one linear stream of
// kR·row bytes), re-read from L1 by the other tiles of a verify. The first
// tile prefetches that stream into L2 kPrefetchBytes ahead at every q, q = 1
// included (matmul.cc leaves q = 1 to the hardware on AMD): read as kR
// interleaved short streams (a 1536-col bf16 row is 3 KiB) the hardware
// prefetcher falls behind — measured on a 262144x1536 bf16 head (Zen 4
// 2-core VM, 1 thread, bench-kernels --in-place, the rows on 4 KiB pages):
// q = 1 88 ms without, 45 ms with (the packed copy, on huge pages, 35-51 ms
// in the same runs). On huge pages too it still runs ~13 % behind the packed
// copy at q = 1 on one thread and level with it on two (docs/perf/gemma4.md;
// 8 rows per tile measured no better); model::TiedHead::Auto reads in place
// all the same, for the table's bytes it saves.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/matmul.h"
#include "kernels/matmul_layout.h"
#include "kernels/packed_access.h"
#include "kernels/quant_blocks.h"
#include "kernels/quant_dot.h"

#pragma GCC optimize("fp-contract=off")  // hn::MulAdd is the only FMA (as matmul.cc)

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/matmul_rows.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#ifndef MTP_KERNELS_MATMUL_ROWS_ONCE
#define MTP_KERNELS_MATMUL_ROWS_ONCE
namespace mtp::kernels::detail {
// Arguments of one product over a row-major float matrix.
struct RowsArgs {
  const uint8_t* w;  // [rows, cols] elements of `elem`, row after row
  size_t rows, cols, n_full, n_super;  // n_full: whole superchunks (cols / 32)
  Elem elem;
  const float* x;
  size_t x_stride;
  const float* xtail;  // [q, 32]: each row's partial last superchunk, zero-padded
  float* y;
  size_t y_stride, q;
  bool prefetch;  // software prefetch of the weight stream (always, see the top)
};
constexpr size_t kRowsGroup = 4;  // output rows per thread-split unit
}  // namespace mtp::kernels::detail
#endif

HWY_BEFORE_NAMESPACE();
namespace mtp::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using detail::Elem;
using detail::kLanes;
using detail::kSuper;

using DF = hn::CappedTag<float, kLanes>;
using DU = hn::RebindToUnsigned<DF>;
constexpr size_t kN = hn::MaxLanes(DF());
constexpr size_t kV = kLanes / kN;  // vectors per 16-lane accumulator

// matmul.cc's tree sum of one 16-lane accumulator (reduce16).
#include "kernels/reduce16-inl.h"

// kN weights of element type kE from element i of a row, as fp32 (exact).
template <Elem kE>
HWY_INLINE hn::Vec<DF> load_w(const uint8_t* HWY_RESTRICT row, size_t i) {
  const DF d;
  if constexpr (kE == Elem::F32) {
    return hn::LoadU(d, reinterpret_cast<const float*>(row) + i);
  } else if constexpr (kE == Elem::F16) {
    const hn::Rebind<hwy::float16_t, DF> dh;
    return hn::PromoteTo(d, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(row) + i));
  } else {
    const DU du;
    const hn::Rebind<uint16_t, DF> d16;
    const auto u = hn::PromoteTo(du, hn::LoadU(d16, reinterpret_cast<const uint16_t*>(row) + i));
    return hn::BitCast(d, hn::ShiftLeft<16>(u));
  }
}

// Element i as fp32, scalar (the tail: a vector load could pass the end).
template <Elem kE>
HWY_INLINE float elem_f32(const uint8_t* row, size_t i) {
  if constexpr (kE == Elem::F32) {
    float f;
    std::memcpy(&f, row + 4 * i, 4);
    return f;
  } else {
    uint16_t h;
    std::memcpy(&h, row + 2 * i, 2);
    return kE == Elem::BF16 ? bf16_to_f32(h) : f16_to_f32(h);
  }
}

// Rows o0..o0+kR-1 (row k read from wr[k]) × activation rows j0..j0+kQ-1
// (rows past nq repeat j0 and are not written); rows past a.rows are
// not written either. pf: the prefetch cursor (null: none), advanced by
// pf_step bytes per 16-col step.
template <size_t kR, size_t kQ, Elem kE>
HWY_INLINE void tile(const detail::RowsArgs& a, size_t o0, const uint8_t* const* wr, size_t j0,
                     size_t nq, const uint8_t* pf, size_t pf_step) {
  const DF d;
  using V = hn::Vec<DF>;
  const float* xr[kQ];
  const float* xt[kQ];
  for (size_t j = 0; j < kQ; ++j) {
    const size_t r = j0 + (j < nq ? j : 0);
    xr[j] = a.x + r * a.x_stride;
    xt[j] = a.xtail ? a.xtail + r * kSuper : nullptr;
  }
  V acc[kR][kQ][kV];
  for (size_t k = 0; k < kR; ++k)
    for (size_t j = 0; j < kQ; ++j)
      for (size_t v = 0; v < kV; ++v) acc[k][j][v] = hn::Zero(d);
  // One 16-col step at col c: lane l gets col c + l.
  auto step = [&](auto load, const float* const* xp, size_t c) __attribute__((always_inline)) {
    V xv[kQ][kV];
#pragma GCC unroll 16
    for (size_t j = 0; j < kQ; ++j)
#pragma GCC unroll 16
      for (size_t v = 0; v < kV; ++v) xv[j][v] = hn::LoadU(d, xp[j] + c + v * kN);
#pragma GCC unroll 16
    for (size_t k = 0; k < kR; ++k)
#pragma GCC unroll 16
      for (size_t v = 0; v < kV; ++v) {
        const V w = load(k, v);
#pragma GCC unroll 16
        for (size_t j = 0; j < kQ; ++j) acc[k][j][v] = hn::MulAdd(w, xv[j][v], acc[k][j][v]);
      }
  };
  const size_t n_steps = 2 * a.n_full;
  for (size_t s = 0; s < n_steps; ++s) {
    if (pf) {
      for (size_t l = 0; l < pf_step; l += 64) __builtin_prefetch(pf + l, 0, 1);
      pf += pf_step;
    }
    const size_t c = s * kLanes;
    step([&](size_t k, size_t v) { return load_w<kE>(wr[k], c + v * kN); }, xr, c);
  }
  if (a.n_full < a.n_super) {  // the partial superchunk: zero-padded w and x
    const size_t c0 = a.n_full * kSuper, n = a.cols - c0;
    HWY_ALIGN float wt[kR][kSuper];
    for (size_t k = 0; k < kR; ++k) {
      for (size_t i = 0; i < kSuper; ++i) wt[k][i] = 0.f;
      for (size_t i = 0; i < n; ++i) wt[k][i] = elem_f32<kE>(wr[k], c0 + i);
    }
    for (size_t c = 0; c < kSuper; c += kLanes)
      step([&](size_t k, size_t v) { return hn::Load(d, wt[k] + c + v * kN); }, xt, c);
  }
  for (size_t k = 0; k < kR; ++k) {
    if (o0 + k >= a.rows) break;
    for (size_t j = 0; j < nq; ++j) a.y[(j0 + j) * a.y_stride + o0 + k] = reduce16(acc[k][j]);
  }
}

// Tiles of activation rows (at most 4 on 16-lane vectors, else 2: the
// accumulators stay in registers) and output rows per tile.
constexpr size_t kMaxQ = kN >= 16 ? 4 : 2;
constexpr size_t rows_of(size_t kq) { return kq == 1 || kN >= 16 ? 4 : 2; }

template <size_t kQ, Elem kE>
HWY_INLINE void group_tile(const detail::RowsArgs& a, size_t g, size_t j0, size_t nq,
                           bool first) {
  constexpr size_t kR = rows_of(kQ);
  const size_t rb = a.cols * detail::elem_bytes(kE);
  const size_t n_steps = 2 * a.n_full;
  for (size_t o0 = g * detail::kRowsGroup; o0 < (g + 1) * detail::kRowsGroup; o0 += kR) {
    if (o0 >= a.rows) return;
    const uint8_t* wr[kR];
    for (size_t k = 0; k < kR; ++k) wr[k] = a.w + std::min(o0 + k, a.rows - 1) * rb;
    // The stream of these kR rows, kPrefetchBytes ahead, inside the matrix.
    const uint8_t* pf = nullptr;
    const size_t step_bytes = n_steps ? (kR * rb + n_steps - 1) / n_steps : 0;
    if (first && a.prefetch && n_steps &&
        (o0 + kR) * rb + detail::kPrefetchBytes < a.rows * rb)
      pf = a.w + o0 * rb + detail::kPrefetchBytes;
    tile<kR, kQ, kE>(a, o0, wr, j0, nq, pf, step_bytes);
  }
}

template <Elem kE>
void rows_impl(const detail::RowsArgs& a, size_t g0, size_t g1) {
  for (size_t g = g0; g < g1; ++g)
    for (size_t j0 = 0; j0 < a.q; j0 += kMaxQ) {
      const size_t nq = std::min(kMaxQ, a.q - j0);
      const bool first = j0 == 0;
      if (nq == 1) {
        group_tile<1, kE>(a, g, j0, 1, first);
      } else if constexpr (kMaxQ == 4) {
        if (nq == 2) group_tile<2, kE>(a, g, j0, 2, first);
        else group_tile<4, kE>(a, g, j0, nq, first);  // 3 rows: padded (no bits change)
      } else {
        group_tile<2, kE>(a, g, j0, nq, first);
      }
    }
}

// Output row groups [g0, g1) (detail::kRowsGroup rows each), all q rows.
void MatmulRowsGroups(const detail::RowsArgs& a, size_t g0, size_t g1) {
  switch (a.elem) {
    case Elem::BF16: return rows_impl<Elem::BF16>(a, g0, g1);
    case Elem::F16: return rows_impl<Elem::F16>(a, g0, g1);
    case Elem::F32: return rows_impl<Elem::F32>(a, g0, g1);
  }
}

}  // namespace mtp::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace mtp::kernels {
HWY_EXPORT(MatmulRowsGroups);

namespace detail {
namespace {
// Block rows: quant_dot.h's contract through its reference, row by row.
void matmul_view_blocks(const PackedMatrix& w, const float* x, size_t x_stride, size_t q,
                        float* y, size_t y_stride, ThreadPool* pool) {
  const GgmlType t = weight_ggml_type(w.hold());
  thread_local QuantAct act_buf;  // the calling thread's; workers read it through `act`
  quantize_act(t, x, x_stride, q, w.cols(), act_buf);
  const QuantAct& act = act_buf;
  const size_t rb = ggml_row_bytes(static_cast<uint32_t>(t), w.cols());
  auto run = [&](size_t g0, size_t g1, size_t) {
    thread_local std::vector<float> out;
    out.resize(q);
    for (size_t o = g0 * kRowsGroup; o < std::min(w.rows(), g1 * kRowsGroup); ++o) {
      quant_dot_ref_rows(t, w.data() + o * rb, act, 0, q, out.data());
      for (size_t r = 0; r < q; ++r) y[r * y_stride + o] = out[r];
    }
  };
  const size_t G = (w.rows() + kRowsGroup - 1) / kRowsGroup;
  if (pool && pool->size() > 1 && w.bytes() * q > g_parallel_min_work.load(std::memory_order_relaxed))
    pool->parallel_for(G, run, 1);
  else
    run(0, G, 0);
}
}  // namespace

void matmul_view(const PackedMatrix& w, const float* x, size_t x_stride, size_t q, float* y,
                 size_t y_stride, ThreadPool* pool) {
  if (weight_type_quantized(w.hold())) return matmul_view_blocks(w, x, x_stride, q, y, y_stride, pool);
  const size_t cols = w.cols(), ns = n_super_of(cols), nfull = cols / kSuper;
  // Each row's partial last superchunk, zero-padded: [q, 32] (as matmul()).
  thread_local std::vector<float> xtail;
  const float* tail = nullptr;
  if (nfull < ns) {
    xtail.assign(q * kSuper, 0.f);
    for (size_t j = 0; j < q; ++j)
      std::memcpy(xtail.data() + j * kSuper, x + j * x_stride + nfull * kSuper,
                  (cols - nfull * kSuper) * sizeof(float));
    tail = xtail.data();
  }
  const RowsArgs a{w.data(), w.rows(), cols, nfull, ns, elem_of(w.hold()), x, x_stride, tail,
                   y, y_stride, q, true};
  auto fn = HWY_DYNAMIC_DISPATCH(MatmulRowsGroups);
  const size_t G = (w.rows() + kRowsGroup - 1) / kRowsGroup;
  if (pool && pool->size() > 1 && w.bytes() * q > g_parallel_min_work.load(std::memory_order_relaxed))
    pool->parallel_for(G, [&](size_t g0, size_t g1, size_t) { fn(a, g0, g1); }, 1);
  else
    fn(a, 0, G);
}
}  // namespace detail
}  // namespace mtp::kernels
#endif  // HWY_ONCE
