// Quantized weight kernels (Highway runtime dispatch): Y[q, rows] = X[q, cols]·Wᵀ
// for W stored as rows of ggml blocks (Q5_0, Q5_K; Q8_0, Q4_0, Q4_K and Q6_K
// are held by groups of 16 rows and have their own kernel, matmul_grouped.cc,
// which matmul_quant hands them to).
//
// Arithmetic: exactly the contract of quant_dot.h (activations quantized per
// row to int8, exact integer block sums, a fixed sequence of fp32 operations
// per output), so every target gives quant_dot_ref's bits and Y[r][o] depends
// only on X[r], W[o] and cols — never on q, the other rows, the thread count or
// the split (threads split output rows only).
//
// AVX2 and AVX3 use integer intrinsics (maddubs/madd; 256-bit on AVX2,
// 512-bit chunk pairs on AVX3) inside the Highway target; where the CPU has
// VNNI for the target (AVX512_VNNI for AVX3; AVX-VNNI, the VEX-encoded 256-bit
// form of Intel's Alder Lake and later, for AVX2) the kernels fuse them
// (vpdpbusd for the 32-element types: (xq + 128)·code started at −128·Σcode;
// vpdpwssd for the K types' scale step) — the same exact integers, so the
// same bits; the other targets
// (SSE4, scalar) run the reference itself (quant_dot_ref_rows). Measured on
// the Zen 4 host, AVX3 and AVX2 run these kernels at the same speed (its
// 512-bit integer ops are double-pumped): docs/PERFORMANCE.md.
// Layout and loop order: weight rows are stored as in the GGUF file, one
// after another (one linear stream). For each output row, q is processed in
// tiles of <= 4 (AVX2) or 8 (AVX-512) activation rows; a weight block is
// loaded and unpacked once per tile and used by all its rows (the tile's
// accumulators stay in registers), so verify rows cost integer work, not
// memory traffic. Every
// loop over a tile's rows carries `#pragma GCC unroll`: only fully unrolled
// do the per-row accumulator arrays stay in registers (GCC 12 kept the K
// types' on the stack: Q4_K q4/q1 3.2 -> 1.9 on Zen 5 once unrolled).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/matmul.h"
#include "kernels/grouped_blocks.h"
#include "kernels/packed_access.h"
#include "kernels/quant_blocks.h"
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
  // by CPU vendor). On Zen 5 a q = 1 K-type product ran 5-15 % faster
  // without (Q4_K 4096² 0.32 -> 0.29 ms; docs/PERFORMANCE.md Session 14).
  bool prefetch;
};
// Activation rows per register tile: 4 on AVX2 (16 vector registers), 8 on
// AVX-512 (32: a K-type row keeps three accumulators). Trees and chains of
// K >= 4 verify 5..8 rows; one pass over each weight block for all of them
// pays the block's unpacking once (bench-kernels 4096², Zen 5: Q4_K q5/q1
// 2.6-3.0 -> 2.0-2.1, Q8_0 q8/q1 3.2-4.0 -> 2.35-2.5; K types at 7-8 rows run
// short of registers and gain little).
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
HWY_INLINE __m256i dpwssd256(__m256i acc, __m256i a, __m256i b) {
  asm("%{vex%} vpdpwssd %2, %1, %0" : "+x"(acc) : "x"(a), "xm"(b));
  return acc;
}

// The 8 mins m_j as int16 pairs (m0, m0, m1, m1, ...): madd against the 16
// sums of 16 gives m_j · bsum32_j in lane j.
// The 16 weight-side min factors of quant_dot.h as int32 (before the fp32
// conversion and the product with dmin): Q5_K's m_{g/2}.
HWY_INLINE __m128i min_factors_i8(const uint8_t* mn) {  // m0 m0 m1 m1 ... m7 m7
  const __m128i m8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(mn));
  return _mm_unpacklo_epi8(m8, m8);
}

// The codes of a Q5_0 block (kT 2; Q8_0 and Q4_0 are held grouped,
// matmul_grouped.cc) as 32 bytes: the unsigned q (the offset 16 is taken off
// through QuantAct::xneg, see lanes32).
template <int kT>
HWY_INLINE __m256i codes32(const uint8_t* b) {
  static_assert(kT == 2, "the row-major 32-element kernels hold Q5_0 only");
  const __m128i qs = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 6));
  const __m128i m4 = _mm_set1_epi8(0x0F);
  __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_and_si128(qs, m4)),
                                      _mm_and_si128(_mm_srli_epi16(qs, 4), m4), 1);
  uint32_t qh;
  std::memcpy(&qh, b + 2, 4);
  // Byte i gets bit i of qh: broadcast, byte i/8 to position i, test bit i % 8.
  const __m256i idx = _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202,
                                         0x0303030303030303);
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  __m256i h = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(qh)), idx);
  h = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(h, bit), bit), _mm256_set1_epi8(0x10));
  return _mm256_or_si256(v, h);
}

// The contract's integer lanes P[l] = Σ (signed code)·xq of one block for one
// row: xneg + Σ q·xq (xn: the row's QuantAct::xneg of this block).
HWY_INLINE __m256i lanes32(__m256i wv, const int8_t* x, const int32_t* xn) {
  const __m256i ones = _mm256_set1_epi16(1);
  return _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(wv, ld256(x)), ones), ld256(xn));
}

// Q5_0 tiles of 1-2 rows with VNNI: P = dpbusd(xneg, q, xq) — the stored
// unsigned codes q against the signed xq, started at the row's
// QuantAct::xneg (−16·Σ of 4 xq) — which spares the weight side the signed
// codes and −128·Σc (3 operations per block pair: Q5_0 q1 −10 % on Zen 5).
// It reads one int32 per 4 activations more per row, so larger tiles keep the
// weight-side start (8 rows of 4096 columns would outgrow L1: measured 3.4x
// slower for Q8_0, when Q8_0 was held as rows).
template <int kT, size_t kQ>
inline constexpr bool kXneg = kT == 2 && kQ <= 2;

// kQ activation rows against one weight row of a 32-element type.
// kVnni (AVX-VNNI): P = dpbusd(−128·Σc, xq + 128, c) with c the signed codes,
// one instruction per block and row (xu: the rows' QuantAct::qu); kXneg above.
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
    if constexpr (kVnni && !kXneg<kT, kQ>) {
      ws = _mm256_sub_epi8(wv, _mm256_set1_epi8(16));
      ncorr = _mm256_sub_epi32(ncorr, dpbusd256(ncorr, _mm256_set1_epi8(-128), ws));
    }
    const __m256 dw = _mm256_set1_ps(f16(blk));
#pragma GCC unroll 8
    for (size_t j = 0; j < kQ; ++j) {
      __m256i p;
      if constexpr (kVnni && kXneg<kT, kQ>)
        p = dpbusd256(ld256(xn[j] + 8 * b), wv, ld256(xq[j] + 32 * b));
      else if constexpr (kVnni)
        p = dpbusd256(ncorr, ld256(xu[j] + 32 * b), ws);
      else
        p = lanes32(wv, xq[j] + 32 * b, xn[j] + 8 * b);
      const __m256 s = _mm256_mul_ps(dw, _mm256_broadcast_ss(xd[j] + b));
      acc[j][par] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), s, acc[j][par]);
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

// Q5_K codes of sub-blocks 2c (lo) and 2c + 1 (hi): the low nibbles and the
// fifth bits, bit 2c and 2c + 1 of qh[l]; qh is shifted by 2 for the next c.
HWY_INLINE void k5_codes(const uint8_t* qs, size_t c, __m256i& qh, __m256i& lo, __m256i& hi) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), m10 = _mm256_set1_epi8(0x10);
  const __m256i qv = ld256(qs + 32 * c);
  lo = _mm256_and_si256(qv, m4);
  hi = _mm256_and_si256(_mm256_srli_epi16(qv, 4), m4);
  lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi16(qh, 4), m10));
  hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_slli_epi16(qh, 3), m10));
  qh = _mm256_srli_epi16(qh, 2);
}

// Software prefetch of one K block, kQuantPrefetch ahead in the weight stream.
HWY_INLINE void prefetch_block(const uint8_t* blk, size_t bb) {
  for (size_t l = 0; l < bb; l += 64)
    _mm_prefetch(reinterpret_cast<const char*>(blk + kQuantPrefetch + l), _MM_HINT_T0);
}

// kQ activation rows against one weight row of Q5_K (kT 4; Q4_K and Q6_K are
// held grouped).
template <int kT, size_t kQ, bool kVnni>
HWY_INLINE void tilek(const uint8_t* w, size_t bb, size_t nsb, const int8_t* const* xq,
                      const float* const* xd, const float* const* bs, bool pf, float* out) {
  __m256 acc[kQ];
  __m256 macc[kQ][2];
#pragma GCC unroll 8
  for (size_t j = 0; j < kQ; ++j) acc[j] = macc[j][0] = macc[j][1] = _mm256_setzero_ps();
  for (size_t sb = 0; sb < nsb; ++sb) {
    const uint8_t* blk = w + sb * bb;
    if (pf) prefetch_block(blk, bb);
    // kVnni: two integer accumulators per row (even and odd chunks; exact
    // sums), so vpdpwssd's latency does not chain the eight chunks of a row.
    __m256i P[kQ], P1[kQ];
#pragma GCC unroll 8
    for (size_t j = 0; j < kQ; ++j) P[j] = P1[j] = _mm256_setzero_si256();
    auto chunk = [&](__m256i qv, __m256i scv, size_t c) __attribute__((always_inline)) {
#pragma GCC unroll 8
      for (size_t j = 0; j < kQ; ++j) {
        const __m256i t = _mm256_maddubs_epi16(qv, ld256(xq[j] + 256 * sb + 32 * c));
        if constexpr (kVnni) {
          __m256i& acc_c = c % 2 ? P1[j] : P[j];
          acc_c = dpwssd256(acc_c, t, scv);
        } else {
          P[j] = _mm256_add_epi32(P[j], _mm256_madd_epi16(t, scv));
        }
      }
    };
    float s;
    __m256 wmin[2];
    uint8_t sc[8], mn[8];
    unpack_scales_k4(blk + 4, sc, mn);
    const uint8_t* qs = blk + 48;
    __m256i qh = ld256(blk + 16);
#pragma GCC unroll 8
    for (size_t c = 0; c < 4; ++c) {
      __m256i lo, hi;
      k5_codes(qs, c, qh, lo, hi);
      chunk(lo, _mm256_set1_epi16(sc[2 * c]), 2 * c);
      chunk(hi, _mm256_set1_epi16(sc[2 * c + 1]), 2 * c + 1);
    }
    s = f16(blk);
    const __m256 dmv = _mm256_set1_ps(f16(blk + 2));
    const __m128i mf = min_factors_i8(mn);
    wmin[0] = _mm256_mul_ps(dmv, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(mf)));
    wmin[1] = _mm256_mul_ps(dmv, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(mf, 8))));
#pragma GCC unroll 8
    for (size_t j = 0; j < kQ; ++j) {
      const float sj = s * xd[j][sb];
      const __m256i pj = kVnni ? _mm256_add_epi32(P[j], P1[j]) : P[j];
      acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(pj), _mm256_set1_ps(sj), acc[j]);
      const float* bf = bs[j] + 16 * sb;
      macc[j][0] = _mm256_fmadd_ps(wmin[0], _mm256_loadu_ps(bf), macc[j][0]);
      macc[j][1] = _mm256_fmadd_ps(wmin[1], _mm256_loadu_ps(bf + 8), macc[j][1]);
    }
  }
#pragma GCC unroll 8
  for (size_t j = 0; j < kQ; ++j)
    out[j] = reduce8(acc[j]) - reduce8(_mm256_add_ps(macc[j][0], macc[j][1]));
}

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
// AVX512_VNNI as inline assembly: Highway's AVX3 target does not enable VNNI
// (and a target attribute would stop the helpers above from inlining); only
// the kVnni instantiations execute them, and only where the CPU has VNNI.
// dpbusd: acc[i] += Σ_{k<4} u8(u[4i+k])·s8(s[4i+k]); dpwssd: acc[i] +=
// Σ_{k<2} s16(a[2i+k])·s16(b[2i+k]); both exact (no saturation) for our ranges.
HWY_INLINE __m512i dpbusd(__m512i acc, __m512i u, __m512i s) {
  asm("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u), "vm"(s));
  return acc;
}
HWY_INLINE __m512i dpwssd(__m512i acc, __m512i a, __m512i b) {
  asm("vpdpwssd %2, %1, %0" : "+v"(acc) : "v"(a), "vm"(b));
  return acc;
}

// AVX-512: the same integer lanes and fp32 operations, two 32-element chunks
// per 512-bit vector. 32-element types: lanes 0..7 hold block b, 8..15 block
// b + 1 — the contract's even/odd accumulator lanes. K types: the 16 int32
// lanes of a chunk pair are folded to the contract's 8 (exact integer adds).
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
// The fp16 scales of the blocks at b0 and b0 + bb in lanes 0 and 1 (exact).
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
    // VNNI: the signed codes c against xq + 128, started at −128·Σc.
    __m512i ws = wv, ncorr = zero;
    if constexpr (kVnni && !kXneg<kT, kQ>) {
      ws = _mm512_sub_epi8(wv, _mm512_set1_epi8(16));
      ncorr = _mm512_sub_epi32(zero, dpbusd(zero, _mm512_set1_epi8(-128), ws));
    }
    // The scales s = d_w·dx. From 3 rows on, one multiply forms the pair's
    // products for all 8 rows of the tile (QuantAct::dpair) and each row
    // takes its two by a permute (4 vector operations per row and pair
    // instead of 5: Q5_0 (and Q4_0, then held as rows) q8 -18 % on Zen 5); 1-2
    // rows multiply their own. The same single fp32 products either way.
    constexpr bool kSel = kQ >= 3;
    const __m512 sw = kSel ? _mm512_mul_ps(dw_pairs(b0, bb), _mm512_loadu_ps(dpt + 8 * b)) : dw_pair(b0, bb);
#pragma GCC unroll 8
    for (size_t j = 0; j < kQ; ++j) {
      __m512i p;
      if constexpr (kVnni && kXneg<kT, kQ>) {
        p = dpbusd(_mm512_loadu_si512(xn[j] + 8 * b), wv, _mm512_loadu_si512(xq[j] + 32 * b));
      } else if constexpr (kVnni) {
        p = dpbusd(ncorr, _mm512_loadu_si512(xu[j] + 32 * b), ws);
      } else {  // unsigned codes, plus xneg = −16 · Σ xq (see lanes32)
        const __m512i xv = _mm512_loadu_si512(xq[j] + 32 * b);
        p = _mm512_add_epi32(_mm512_madd_epi16(_mm512_maddubs_epi16(wv, xv), ones),
                             _mm512_loadu_si512(xn[j] + 8 * b));
      }
      const __m512 sj = kSel ? _mm512_permutexvar_ps(sel[j], sw) : _mm512_mul_ps(sw, dx_pair(xd[j] + b));
      acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), sj, acc[j]);
    }
  }
  if (b < nb) {  // a last, even block: lanes 0..7 only
    const uint8_t* b0 = w + b * bb;
    const __m256i wv = codes32<kT>(b0);
    const __m256 dw = _mm256_set1_ps(f16(b0));
#pragma GCC unroll 8
    for (size_t j = 0; j < kQ; ++j) {
      const __m256i p = lanes32(wv, xq[j] + 32 * b, xn[j] + 8 * b);
      const __m256 s = _mm256_mul_ps(dw, _mm256_broadcast_ss(xd[j] + b));
      acc[j] = _mm512_mask3_fmadd_ps(_mm512_castps256_ps512(_mm256_cvtepi32_ps(p)),
                                     _mm512_castps256_ps512(s), acc[j], 0x00FF);
    }
  }
#pragma GCC unroll 8
  for (size_t j = 0; j < kQ; ++j)
    out[j] = reduce8(_mm256_add_ps(_mm512_castps512_ps256(acc[j]),
                                   _mm512_extractf32x8_ps(acc[j], 1))) - 0.f;
}

template <int kT, size_t kQ, bool kVnni>
HWY_INLINE void tilek_512(const uint8_t* w, size_t bb, size_t nsb, const int8_t* const* xq,
                          const float* const* xd, const float* const* bs, bool pf, float* out) {
  __m256 acc[kQ];
  __m512 maccz[kQ];
#pragma GCC unroll 8
  for (size_t j = 0; j < kQ; ++j) acc[j] = _mm256_setzero_ps(), maccz[j] = _mm512_setzero_ps();
  alignas(64) static constexpr int16_t kLaneOver8[32] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                                         2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3};
  for (size_t sb = 0; sb < nsb; ++sb) {
    const uint8_t* blk = w + sb * bb;
    if (pf) prefetch_block(blk, bb);
    // Two integer accumulators per row (pairs 0, 2 and 1, 3; exact sums):
    // vpdpwssd's latency would otherwise chain the four pairs of a row. Tiles
    // of more than 4 rows have independent chains enough and keep one (the
    // registers go to the rows).
    constexpr bool kTwo = kQ <= 4;
    __m512i P[kQ], P1[kQ];
#pragma GCC unroll 8
    for (size_t j = 0; j < kQ; ++j) P[j] = P1[j] = _mm512_setzero_si512();
    // Elements [64·p, 64·p + 64) of the block: codes qv, int16 scales scv.
    auto pair = [&](__m512i qv, __m512i scv, size_t p) __attribute__((always_inline)) {
#pragma GCC unroll 8
      for (size_t j = 0; j < kQ; ++j) {
        const __m512i t = _mm512_maddubs_epi16(qv, _mm512_loadu_si512(xq[j] + 256 * sb + 64 * p));
        __m512i& acc_p = kTwo && p % 2 ? P1[j] : P[j];
        acc_p = kVnni ? dpwssd(acc_p, t, scv) : _mm512_add_epi32(acc_p, _mm512_madd_epi16(t, scv));
      }
    };
    float s;
    __m512 wminz;
    uint8_t sc[8], mn[8];
    unpack_scales_k4(blk + 4, sc, mn);
    const uint8_t* qs = blk + 48;
    const __m512i sc16 = _mm512_castsi128_si512(
        _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc))));
    const __m512i half = _mm512_srli_epi16(_mm512_load_si512(kLaneOver8), 1);  // 0 x16, 1 x16
    // Sub-blocks 2c (low 256 bits) and 2c + 1 (high) of the codes: the 32
    // qs bytes of chunk c in both halves, the high half shifted right by 4
    // (one per-word shift), then the low nibbles — 2 operations per pair
    // instead of k45_codes' 3 and the insert. Q5_K: the fifth bits (bit 2c
    // of qh[l] low, 2c + 1 high) shifted to bit 4 the same way.
    const __m512i m4 = _mm512_set1_epi8(0x0F), m10 = _mm512_set1_epi8(0x10);
    const __m512i hi4 = _mm512_set_epi64(0x0004000400040004, 0x0004000400040004, 0x0004000400040004,
                                         0x0004000400040004, 0, 0, 0, 0);
    __m512i qh = _mm512_broadcast_i64x4(ld256(blk + 16));
    const __m512i qh_shift = _mm512_set_epi64(0x0003000300030003, 0x0003000300030003, 0x0003000300030003,
                                              0x0003000300030003, 0x0004000400040004, 0x0004000400040004,
                                              0x0004000400040004, 0x0004000400040004);
#pragma GCC unroll 8
    for (size_t c = 0; c < 4; ++c) {
      __m512i qv = _mm512_and_si512(_mm512_srlv_epi16(_mm512_broadcast_i64x4(ld256(qs + 32 * c)), hi4), m4);
      qv = _mm512_or_si512(qv, _mm512_and_si512(_mm512_sllv_epi16(qh, qh_shift), m10));
      qh = _mm512_srli_epi16(qh, 2);
      // lanes 0..15: sc_2c, 16..31: sc_2c+1
      const __m512i idx = _mm512_add_epi16(half, _mm512_set1_epi16(static_cast<int16_t>(2 * c)));
      pair(qv, _mm512_permutexvar_epi16(idx, sc16), c);
    }
    s = f16(blk);
    wminz = _mm512_mul_ps(_mm512_set1_ps(f16(blk + 2)),
                          _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(min_factors_i8(mn))));
#pragma GCC unroll 8
    for (size_t j = 0; j < kQ; ++j) {
      const __m512i pj = kTwo ? _mm512_add_epi32(P[j], P1[j]) : P[j];
      const __m256i p8 = _mm256_add_epi32(_mm512_castsi512_si256(pj), _mm512_extracti64x4_epi64(pj, 1));
      const float sj = s * xd[j][sb];
      acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p8), _mm256_set1_ps(sj), acc[j]);
      maccz[j] = _mm512_fmadd_ps(wminz, _mm512_loadu_ps(bs[j] + 16 * sb), maccz[j]);
    }
  }
#pragma GCC unroll 8
  for (size_t j = 0; j < kQ; ++j)
    out[j] = reduce8(acc[j]) - reduce8(_mm256_add_ps(_mm512_castps512_ps256(maccz[j]),
                                                     _mm512_extractf32x8_ps(maccz[j], 1)));
}
#define MTP_QUANT_TILE32 tile32_512
#define MTP_QUANT_TILEK tilek_512
constexpr size_t kTile = detail::kQuantTile512;
#else
#define MTP_QUANT_TILE32 tile32
#define MTP_QUANT_TILEK tilek
constexpr size_t kTile = detail::kQuantTile;
#endif

template <int kT, size_t kQ, bool kVnni>
HWY_INLINE void run_tile(const detail::QuantArgs& a, const uint8_t* w, size_t j0, bool pf, float* out) {
  const int8_t* xq[kQ];
  const uint8_t* xu[kQ];
  const int32_t* xn[kQ];
  const float* xd[kQ];
  const float* bs[kQ];
#pragma GCC unroll 8
  for (size_t j = 0; j < kQ; ++j) {
    xq[j] = a.a->qrow(j0 + j);
    xu[j] = kVnni && kT < 3 ? a.a->urow(j0 + j) : nullptr;  // qu is filled for VNNI only
    xn[j] = kT == 2 ? a.a->nrow(j0 + j) : nullptr;
    xd[j] = a.a->drow(j0 + j);
    bs[j] = kT >= 3 ? a.a->bfrow(j0 + j) : nullptr;
  }
  if constexpr (kT < 3)
    MTP_QUANT_TILE32<kT, kQ, kVnni>(w, a.row_bytes / (a.cols / 32), a.cols / 32, xq, xu, xd, xn,
                                    a.a->pair_tile(j0), pf, out);
  else
    MTP_QUANT_TILEK<kT, kQ, kVnni>(w, a.row_bytes / (a.cols / 256), a.cols / 256, xq, xd, bs, pf, out);
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

template <bool kVnni>
void rows_of_type(const detail::QuantArgs& a, size_t o0, size_t o1) {
  switch (a.t) {
    case GgmlType::Q5_0: return rows_impl<2, kVnni>(a, o0, o1);
    default: return rows_impl<4, kVnni>(a, o0, o1);  // Q5_K
  }
}

void QuantRows(const detail::QuantArgs& a, size_t o0, size_t o1) {
  if (a.vnni) return rows_of_type<true>(a, o0, o1);  // AVX512_VNNI or AVX-VNNI
  rows_of_type<false>(a, o0, o1);
}
#undef MTP_QUANT_TILE32
#undef MTP_QUANT_TILEK
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
