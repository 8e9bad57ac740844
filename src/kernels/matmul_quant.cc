// The kernel of the row-major 32-element types Q5_0, Q4_1 and Q5_1 (Highway
// runtime dispatch): Y[q, rows] = X[q, cols]·Wᵀ for W stored as rows of ggml
// blocks — the fallback holds of Q4_K (Q5_0) and Q5_K (Q5_1: llama-quantize's
// choice; mtpspec's own quantizer falls back to Q5_0) rows whose length is
// not a multiple of 256, and Q4_1 files. Q8_0, Q4_0 and the K types are held
// by groups of 16 rows and have their own kernel, matmul_grouped.cc, which
// matmul_quant hands them to.
//
// Arithmetic: exactly the contract of quant_dot.h (activations quantized per
// row to int8, exact integer block sums, a fixed sequence of fp32 operations
// per output), so every target gives quant_dot_ref's bits and Y[r][o] depends
// only on X[r], W[o] and cols — never on q, the other rows, the thread count or
// the split (threads split output rows only).
//
// AVX2 and AVX3 use integer intrinsics (maddubs/madd; 256-bit on AVX2,
// 512-bit block pairs on AVX3) inside the Highway target; where the CPU has
// VNNI for the target (AVX512_VNNI for AVX3; AVX-VNNI, the VEX-encoded 256-bit
// form of Intel's Alder Lake and later, for AVX2) the kernels fuse them
// (vpdpbusd: (xq + 128)·code started at −128·Σcode) — the same exact
// integers, so the same bits; the other targets (SSE4, scalar) run the
// reference itself (quant_dot_ref_rows).
// Layout and loop order: weight rows are stored as in the GGUF file, one
// after another (one linear stream). For each output row, q is processed in
// tiles of <= 4 (AVX2) or 8 (AVX-512) activation rows; a weight block is
// loaded and unpacked once per tile and used by all its rows (the tile's
// accumulators stay in registers). Every loop over a tile's rows carries
// `#pragma GCC unroll`: only fully unrolled do the per-row accumulator arrays
// stay in registers.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/matmul.h"
#include "kernels/grouped_blocks.h"
#include "kernels/packed_access.h"
#include "kernels/quant_dot.h"
#include "kernels/simd.h"

#pragma GCC optimize("fp-contract=off")

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/matmul_quant.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#ifndef MTP_KERNELS_MATMUL_QUANT_ONCE
#define MTP_KERNELS_MATMUL_QUANT_ONCE
#include <immintrin.h>
namespace mtp::kernels::detail {
struct QuantArgs {
  GgmlType t;
  const uint8_t* w;
  size_t row_bytes, rows, cols;
  const QuantAct* a;
  size_t q;
  float* y;
  size_t y_stride;
  bool vnni;  // simd_quant_vnni(): the AVX3/AVX2 target runs its VNNI instantiations
  // Software prefetch of the weight stream (by the first tile of each output
  // row): q >= 2 always, q = 1 as the fp32/bf16 kernels (prefetch_single_row:
  // by CPU vendor; docs/PERFORMANCE.md Session 14).
  bool prefetch;
};
// Activation rows per register tile: 4 on AVX2 (16 vector registers), 8 on
// AVX-512 (32). Trees and chains of K >= 4 verify 5..8 rows; one pass over
// each weight block for all of them pays the block's unpacking once.
constexpr size_t kQuantTile = 4;
constexpr size_t kQuantTile512 = 8;
constexpr size_t kQuantPrefetch = 2048;  // bytes ahead in the weight stream
}  // namespace mtp::kernels::detail
#endif

HWY_BEFORE_NAMESPACE();
namespace mtp::kernels::HWY_NAMESPACE {

#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
using detail::kQuantPrefetch;

HWY_INLINE __m256i ld256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
HWY_INLINE float f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}
// t[l] += t[l + 4], += t[l + 2], t[0] + t[1] (quant_dot.h's tree).
HWY_INLINE float reduce8(__m256 v) {
  __m128 t = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  t = _mm_add_ps(t, _mm_movehl_ps(t, t));
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_shuffle_ps(t, t, 1)));
}
// AVX-VNNI (VEX, 256-bit) as inline assembly, for the AVX2 target's kVnni
// instantiations (run only where the CPU has AVX-VNNI; Highway's AVX2 target
// does not enable it). Same products and sums as the AVX-512 forms below.
HWY_INLINE __m256i dpbusd256(__m256i acc, __m256i u, __m256i s) {
  asm("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(u), "xm"(s));
  return acc;
}

// The row-major 32-element types (kT). Q5_0: d | qh | qs, x = d·(q − 16);
// Q4_1: d | m | qs and Q5_1: d | m | qh | qs, x = d·q + m (quant_blocks.h).
enum Rows32 : int { kQ5_0, kQ4_1, kQ5_1 };
template <int kT> inline constexpr bool kMin = kT != kQ5_0;  // a min m (offset 2)
template <int kT> inline constexpr size_t kQsAt = kT == kQ5_0 ? 6 : kT == kQ4_1 ? 4 : 8;
template <int kT> inline constexpr size_t kQhAt = kT == kQ5_0 ? 2 : 4;  // not Q4_1

// The codes of a block as 32 bytes: the unsigned q (Q5_0's offset 16 is
// taken off through QuantAct::sum4, see lanes32).
template <int kT>
HWY_INLINE __m256i codes32(const uint8_t* b) {
  const __m128i qs = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + kQsAt<kT>));
  const __m128i m4 = _mm_set1_epi8(0x0F);
  __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_and_si128(qs, m4)),
                                      _mm_and_si128(_mm_srli_epi16(qs, 4), m4), 1);
  if constexpr (kT == kQ4_1) return v;
  uint32_t qh;
  std::memcpy(&qh, b + kQhAt<kT>, 4);
  // Byte i gets bit i of qh: broadcast, byte i/8 to position i, test bit i % 8.
  const __m256i idx = _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202,
                                         0x0303030303030303);
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  __m256i h = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(qh)), idx);
  h = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(h, bit), bit), _mm256_set1_epi8(0x10));
  return _mm256_or_si256(v, h);
}

// The contract's integer lanes P[l] of one block for one row: Q5_0 Σ (q −
// 16)·xq = sum4 + Σ q·xq (xn: the row's QuantAct::sum4 of this block); Q4_1,
// Q5_1 Σ q·xq.
template <int kT>
HWY_INLINE __m256i lanes32(__m256i wv, const int8_t* x, const int32_t* xn) {
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(wv, ld256(x)), ones);
  if constexpr (kMin<kT>) return p;
  return _mm256_add_epi32(p, ld256(xn));
}

// Q5_0 tiles of 1-2 rows with VNNI: P = dpbusd(sum4, q, xq) — the stored
// unsigned codes q against the signed xq, started at the row's
// QuantAct::sum4 (−16·Σ of 4 xq) — which spares the weight side the signed
// codes and −128·Σc (3 operations per block pair: Q5_0 q1 −10 % on Zen 5).
// It reads one int32 per 4 activations more per row, so larger tiles keep the
// weight-side start (8 rows of 4096 columns would outgrow L1: measured 3.4x
// slower for Q8_0, when Q8_0 was held as rows).
template <int kT, size_t kQ>
inline constexpr bool kXneg = kT == kQ5_0 && kQ <= 2;

// kQ activation rows against one weight row of a 32-element type.
// kVnni (AVX-VNNI): Q5_0 P = dpbusd(−128·Σc, xq + 128, c) with c the signed
// codes, one instruction per block and row (xu: the rows' QuantAct::qu);
// kXneg above. Q4_1/Q5_1: P = dpbusd(0, q, xq) (unsigned codes), and the min
// term S·(m_w·dx) from the rows' QuantAct::sum4 (xn).
template <int kT, size_t kQ, bool kVnni>
HWY_INLINE void tile32(const uint8_t* w, size_t bb, size_t nb, const int8_t* const* xq,
                       const uint8_t* const* xu, const float* const* xd,
                       const int32_t* const* xn, const float* /*dpt: AVX-512 only*/, bool pf,
                       float* out) {
  __m256 acc[kQ][2];
#pragma GCC unroll 8
  for (size_t j = 0; j < kQ; ++j) acc[j][0] = acc[j][1] = _mm256_setzero_ps();
  auto block = [&](size_t b, size_t par) __attribute__((always_inline)) {
    const uint8_t* blk = w + b * bb;
    const __m256i wv = codes32<kT>(blk);
    __m256i ws = wv, ncorr = _mm256_setzero_si256();
    if constexpr (kVnni && kT == kQ5_0 && !kXneg<kT, kQ>) {
      ws = _mm256_sub_epi8(wv, _mm256_set1_epi8(16));
      ncorr = _mm256_sub_epi32(ncorr, dpbusd256(ncorr, _mm256_set1_epi8(-128), ws));
    }
    const __m256 dw = _mm256_set1_ps(f16(blk));
    const __m256 mw = _mm256_set1_ps(kMin<kT> ? f16(blk + 2) : 0.f);
#pragma GCC unroll 8
    for (size_t j = 0; j < kQ; ++j) {
      __m256i p;
      if constexpr (kVnni && kMin<kT>)
        p = dpbusd256(_mm256_setzero_si256(), wv, ld256(xq[j] + 32 * b));
      else if constexpr (kVnni && kXneg<kT, kQ>)
        p = dpbusd256(ld256(xn[j] + 8 * b), wv, ld256(xq[j] + 32 * b));
      else if constexpr (kVnni)
        p = dpbusd256(ncorr, ld256(xu[j] + 32 * b), ws);
      else
        p = lanes32<kT>(wv, xq[j] + 32 * b, xn[j] + 8 * b);
      const __m256 dx = _mm256_broadcast_ss(xd[j] + b);
      acc[j][par] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_mul_ps(dw, dx), acc[j][par]);
      if constexpr (kMin<kT>)  // + S·(m_w·dx)
        acc[j][par] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ld256(xn[j] + 8 * b)), _mm256_mul_ps(mw, dx),
                                      acc[j][par]);
    }
  };
  size_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    if (pf) _mm_prefetch(reinterpret_cast<const char*>(w + b * bb + kQuantPrefetch), _MM_HINT_T0);
    block(b, 0);
    block(b + 1, 1);
  }
  if (b < nb) block(b, 0);
#pragma GCC unroll 8
  for (size_t j = 0; j < kQ; ++j) out[j] = reduce8(_mm256_add_ps(acc[j][0], acc[j][1])) - 0.f;
}

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
// AVX512_VNNI as inline assembly: Highway's AVX3 target does not enable VNNI
// (and a target attribute would stop the helpers above from inlining); only
// the kVnni instantiations execute them, and only where the CPU has VNNI.
// dpbusd: acc[i] += Σ_{k<4} u8(u[4i+k])·s8(s[4i+k]), exact (no saturation)
// for our ranges.
HWY_INLINE __m512i dpbusd(__m512i acc, __m512i u, __m512i s) {
  asm("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u), "vm"(s));
  return acc;
}

// AVX-512: the same integer lanes and fp32 operations, two 32-element chunks
// per 512-bit vector. 32-element types: lanes 0..7 hold block b, 8..15 block
// b + 1 — the contract's even/odd accumulator lanes.
HWY_INLINE __m512i pair512(__m256i lo, __m256i hi) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

// The scales of blocks b and b + 1 of one activation row in lanes 0..7 and
// 8..15 (one 8-byte load and a permute).
alignas(64) static constexpr int32_t kHalf[16] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1};
HWY_INLINE __m512 dx_pair(const float* xd) {
  const __m128 two = _mm_castsi128_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(xd)));
  return _mm512_permutexvar_ps(_mm512_load_si512(kHalf), _mm512_castps128_ps512(two));
}
// The fp16 scales of the blocks at b0 and b0 + bb in lanes 0 and 1 (exact;
// b0 + 2: their mins).
HWY_INLINE __m128 dw_two(const uint8_t* b0, size_t bb) {
  uint16_t h0, h1;
  std::memcpy(&h0, b0, 2);
  std::memcpy(&h1, b0 + bb, 2);
  return _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(h0 | uint32_t{h1} << 16)));
}
// Those two as dx_pair lays them out (lanes 0..7, 8..15).
HWY_INLINE __m512 dw_pair(const uint8_t* b0, size_t bb) {
  return _mm512_permutexvar_ps(_mm512_load_si512(kHalf), _mm512_castps128_ps512(dw_two(b0, bb)));
}
// Those two alternating in all 16 lanes (a0 a1 a0 a1 ...: QuantAct::dpair's layout).
HWY_INLINE __m512 dw_pairs(const uint8_t* b0, size_t bb) { return _mm512_broadcast_f32x2(dw_two(b0, bb)); }
// The pair's scale products with the tile's dx, for kSel (dpt: the pair's
// QuantAct::dpair) or else as dx_pair lays them out (row j multiplies).
template <bool kSel>
HWY_INLINE __m512 pair_scales(const uint8_t* b0, size_t bb, const float* dpt) {
  if constexpr (kSel) return _mm512_mul_ps(dw_pairs(b0, bb), _mm512_loadu_ps(dpt));
  return dw_pair(b0, bb);
}
// (xu: the rows' QuantAct::qu, used by the VNNI instantiation only.)
template <int kT, size_t kQ, bool kVnni>
HWY_INLINE void tile32_512(const uint8_t* w, size_t bb, size_t nb, const int8_t* const* xq,
                           const uint8_t* const* xu, const float* const* xd,
                           const int32_t* const* xn, const float* dpt, bool pf, float* out) {
  __m512 acc[kQ];
  __m512i sel[kQ];  // row j's two products of a pair's 16: lanes 2j (x8), 2j + 1 (x8)
#pragma GCC unroll 8
  for (size_t j = 0; j < kQ; ++j)
    acc[j] = _mm512_setzero_ps(),
    sel[j] = _mm512_add_epi32(_mm512_load_si512(kHalf), _mm512_set1_epi32(static_cast<int>(2 * j)));
  const __m512i ones = _mm512_set1_epi16(1), zero = _mm512_setzero_si512();
  size_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    const uint8_t* b0 = w + b * bb;
    if (pf) _mm_prefetch(reinterpret_cast<const char*>(b0 + kQuantPrefetch), _MM_HINT_T0);
    const __m512i wv = pair512(codes32<kT>(b0), codes32<kT>(b0 + bb));
    // VNNI (Q5_0): the signed codes c against xq + 128, started at −128·Σc.
    __m512i ws = wv, ncorr = zero;
    if constexpr (kVnni && kT == kQ5_0 && !kXneg<kT, kQ>) {
      ws = _mm512_sub_epi8(wv, _mm512_set1_epi8(16));
      ncorr = _mm512_sub_epi32(zero, dpbusd(zero, _mm512_set1_epi8(-128), ws));
    }
    // The scales s = d_w·dx. From 3 rows on, one multiply forms the pair's
    // products for all 8 rows of the tile (QuantAct::dpair) and each row
    // takes its two by a permute (4 vector operations per row and pair
    // instead of 5: Q5_0 (and Q4_0, then held as rows) q8 -18 % on Zen 5); 1-2
    // rows multiply their own. The same single fp32 products either way.
    // Q4_1/Q5_1: the mins' products m_w·dx likewise (smw).
    constexpr bool kSel = kQ >= 3;
    const __m512 sw = pair_scales<kSel>(b0, bb, dpt + 8 * b);
    const __m512 smw = kMin<kT> ? pair_scales<kSel>(b0 + 2, bb, dpt + 8 * b) : sw;
#pragma GCC unroll 8
    for (size_t j = 0; j < kQ; ++j) {
      __m512i p;
      if constexpr (kMin<kT>) {  // unsigned codes, no offset
        const __m512i xv = _mm512_loadu_si512(xq[j] + 32 * b);
        p = kVnni ? dpbusd(zero, wv, xv) : _mm512_madd_epi16(_mm512_maddubs_epi16(wv, xv), ones);
      } else if constexpr (kVnni && kXneg<kT, kQ>) {
        p = dpbusd(_mm512_loadu_si512(xn[j] + 8 * b), wv, _mm512_loadu_si512(xq[j] + 32 * b));
      } else if constexpr (kVnni) {
        p = dpbusd(ncorr, _mm512_loadu_si512(xu[j] + 32 * b), ws);
      } else {  // unsigned codes, plus sum4 = −16 · Σ xq (see lanes32)
        const __m512i xv = _mm512_loadu_si512(xq[j] + 32 * b);
        p = _mm512_add_epi32(_mm512_madd_epi16(_mm512_maddubs_epi16(wv, xv), ones),
                             _mm512_loadu_si512(xn[j] + 8 * b));
      }
      __m512 sj, smj;  // row j's d_w·dx and m_w·dx (the latter unused for Q5_0)
      if constexpr (kSel) {
        sj = _mm512_permutexvar_ps(sel[j], sw), smj = _mm512_permutexvar_ps(sel[j], smw);
      } else {
        const __m512 dxj = dx_pair(xd[j] + b);
        sj = _mm512_mul_ps(sw, dxj), smj = _mm512_mul_ps(smw, dxj);
      }
      acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), sj, acc[j]);
      if constexpr (kMin<kT>)  // + S·(m_w·dx)
        acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_loadu_si512(xn[j] + 8 * b)), smj, acc[j]);
    }
  }
  if (b < nb) {  // a last, even block: lanes 0..7 only
    const uint8_t* b0 = w + b * bb;
    const __m256i wv = codes32<kT>(b0);
    const __m256 dw = _mm256_set1_ps(f16(b0));
    const __m256 mw = _mm256_set1_ps(kMin<kT> ? f16(b0 + 2) : 0.f);
#pragma GCC unroll 8
    for (size_t j = 0; j < kQ; ++j) {
      const __m256i p = lanes32<kT>(wv, xq[j] + 32 * b, xn[j] + 8 * b);
      const __m256 dx = _mm256_broadcast_ss(xd[j] + b);
      acc[j] = _mm512_mask3_fmadd_ps(_mm512_castps256_ps512(_mm256_cvtepi32_ps(p)),
                                     _mm512_castps256_ps512(_mm256_mul_ps(dw, dx)), acc[j], 0x00FF);
      if constexpr (kMin<kT>)
        acc[j] = _mm512_mask3_fmadd_ps(_mm512_castps256_ps512(_mm256_cvtepi32_ps(ld256(xn[j] + 8 * b))),
                                       _mm512_castps256_ps512(_mm256_mul_ps(mw, dx)), acc[j], 0x00FF);
    }
  }
#pragma GCC unroll 8
  for (size_t j = 0; j < kQ; ++j)
    out[j] = reduce8(_mm256_add_ps(_mm512_castps512_ps256(acc[j]),
                                   _mm512_extractf32x8_ps(acc[j], 1))) - 0.f;
}

#define MTP_QUANT_TILE32 tile32_512
constexpr size_t kTile = detail::kQuantTile512;
#else
#define MTP_QUANT_TILE32 tile32
constexpr size_t kTile = detail::kQuantTile;
#endif

template <int kT, size_t kQ, bool kVnni>
HWY_INLINE void run_tile(const detail::QuantArgs& a, const uint8_t* w, size_t j0, bool pf, float* out) {
  const int8_t* xq[kQ];
  const uint8_t* xu[kQ];
  const int32_t* xn[kQ];
  const float* xd[kQ];
#pragma GCC unroll 8
  for (size_t j = 0; j < kQ; ++j) {
    xq[j] = a.a->qrow(j0 + j);
    xu[j] = kVnni ? a.a->urow(j0 + j) : nullptr;  // qu is filled for VNNI only
    xn[j] = a.a->s4row(j0 + j);
    xd[j] = a.a->drow(j0 + j);
  }
  MTP_QUANT_TILE32<kT, kQ, kVnni>(w, a.row_bytes / (a.cols / 32), a.cols / 32, xq, xu, xd, xn,
                                  a.a->pair_tile(j0), pf, out);
}

template <int kT, bool kVnni>
void rows_impl(const detail::QuantArgs& a, size_t o0, size_t o1) {
  float out[kTile];
  for (size_t o = o0; o < o1; ++o) {
    const uint8_t* w = a.w + o * a.row_bytes;
    for (size_t j0 = 0; j0 < a.q; j0 += kTile) {
      const size_t n = std::min(kTile, a.q - j0);
      const bool pf = a.prefetch && j0 == 0;  // the first tile streams the row in
      switch (n) {
        case 1: run_tile<kT, 1, kVnni>(a, w, j0, pf, out); break;
        case 2: run_tile<kT, 2, kVnni>(a, w, j0, pf, out); break;
        case 3: run_tile<kT, 3, kVnni>(a, w, j0, pf, out); break;
        case 4: run_tile<kT, 4, kVnni>(a, w, j0, pf, out); break;
        default:
          if constexpr (kTile == 8) {
            switch (n) {
              case 5: run_tile<kT, 5, kVnni>(a, w, j0, pf, out); break;
              case 6: run_tile<kT, 6, kVnni>(a, w, j0, pf, out); break;
              case 7: run_tile<kT, 7, kVnni>(a, w, j0, pf, out); break;
              default: run_tile<kT, 8, kVnni>(a, w, j0, pf, out); break;
            }
          }
          break;
      }
      for (size_t j = 0; j < n; ++j) a.y[(j0 + j) * a.y_stride + o] = out[j];
    }
  }
}
static_assert(detail::kQuantTile == 4 && detail::kQuantTile512 == 8,
              "rows_impl handles tiles of 1..4 rows (AVX2) or 1..8 (AVX-512)");
static_assert(detail::QuantAct::kPairTileRows == detail::kQuantTile512,
              "QuantAct::dpair holds the AVX-512 tiles' rows");

template <int kT>
void rows_any(const detail::QuantArgs& a, size_t o0, size_t o1) {
  if (a.vnni) return rows_impl<kT, true>(a, o0, o1);  // AVX512_VNNI or AVX-VNNI
  rows_impl<kT, false>(a, o0, o1);
}
void QuantRows(const detail::QuantArgs& a, size_t o0, size_t o1) {
  switch (a.t) {
    case GgmlType::Q4_1: return rows_any<kQ4_1>(a, o0, o1);
    case GgmlType::Q5_1: return rows_any<kQ5_1>(a, o0, o1);
    default: return rows_any<kQ5_0>(a, o0, o1);
  }
}
#undef MTP_QUANT_TILE32
#else
// Targets without the integer kernels: the reference, output by output.
void QuantRows(const detail::QuantArgs& a, size_t o0, size_t o1) {
  thread_local std::vector<float> out;
  out.resize(a.q);
  for (size_t o = o0; o < o1; ++o) {
    detail::quant_dot_ref_rows(a.t, a.w + o * a.row_bytes, *a.a, 0, a.q, out.data());
    for (size_t r = 0; r < a.q; ++r) a.y[r * a.y_stride + o] = out[r];
  }
}
#endif

}  // namespace mtp::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace mtp::kernels {
HWY_EXPORT(QuantRows);

namespace detail {
namespace {
std::atomic<bool> g_vnni_allowed{true};
}  // namespace

bool cpu_has_quant_vnni(std::string_view target) {
  static const bool avx512 = __builtin_cpu_supports("avx512vnni");
  static const bool avx = __builtin_cpu_supports("avxvnni");
  if (target.starts_with("AVX3")) return avx512;
  if (target == "AVX2") return avx;
  return false;
}
bool quant_vnni_allowed() { return g_vnni_allowed.load(std::memory_order_relaxed); }
void set_quant_vnni(bool allowed) { g_vnni_allowed.store(allowed, std::memory_order_relaxed); }

void matmul_quant(const PackedMatrix& w, const float* x, size_t x_stride, size_t q, float* y,
                  size_t y_stride, ThreadPool* pool) {
  const GgmlType t = weight_ggml_type(w.hold());
  if (held_grouped(t)) return matmul_grouped(w, x, x_stride, q, y, y_stride, pool);
  const bool vnni = simd_quant_vnni();  // one decision for the inputs and the kernel
  thread_local QuantAct act;
  quantize_act(t, x, x_stride, q, w.cols(), act, vnni);
  const size_t row_bytes = ggml_row_bytes(static_cast<uint32_t>(t), w.cols());
  const QuantArgs a{t,    w.data(), row_bytes, w.rows(), w.cols(), &act,
                    q,    y,        y_stride,  vnni,     q > 1 || prefetch_single_row()};
  auto fn = HWY_DYNAMIC_DISPATCH(QuantRows);
  // As matmul(): threads only for enough work; they split output rows.
  if (pool && pool->size() > 1 && w.bytes() * q > g_parallel_min_work.load(std::memory_order_relaxed)) {
    pool->parallel_for(w.rows(), [&](size_t o0, size_t o1, size_t) { fn(a, o0, o1); }, 16);
  } else {
    fn(a, 0, w.rows());
  }
}
}  // namespace detail
}  // namespace mtp::kernels
#endif  // HWY_ONCE
