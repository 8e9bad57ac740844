// Products of every ggml block type (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K,
// Q5_K, Q6_K) on the grouped layout (grouped_blocks.h), Highway runtime
// dispatch: Y[q, rows] = X[q, cols]·Wᵀ with quant_dot.h's one-lane contract
// (exact int32 sums per block, fused multiply-adds by d_w·dx (Q4_K/Q5_K: and
// (−dmin)·dx; Q4_1/Q5_1: and m_w·dx) per block, blocks in order), so every target
// gives quant_dot_ref's bits
// and Y[r][o] depends only on X[r], W[o] and cols (threads split whole
// groups).
//
// Why interleaved: held as GGUF rows, each verify row paid per 64 weights one
// vpdpbusd plus the scale step (conversion, permute, fused multiply-add) —
// 4 vector operations where the multiply is 1 (bench-kernels 4096² Q8_0 on
// Zen 5: q4/q1 1.5-1.8, m(4) of the ~1 B target 1.4-1.5). Held by groups of
// 16 rows, one vpdpbusd multiplies 16 outputs by 4 elements of an activation
// row (its 4 bytes broadcast from memory) and the scale step is paid once
// per block for 16 outputs: per row and 512 weights 8 multiplies and 3
// operations instead of 8 and 24.
//
// Q4_0 unpacks a 64-byte line of stored qs bytes into two quads' codes
// (low nibbles: quad k, high: quad k + 4; 2 operations shared by the tile's
// rows) and multiplies the unsigned codes q, its lanes started at
// −8·Σ xq (Σ (q − 8)·xq exactly). Q5_0 adds each code's fifth bit from the
// block's qh line (a shift and a mask per quad, shared by the tile's rows),
// lanes started at −16·Σ xq; Q4_1 and Q5_1 start at 0 and add the min term
// float(Σ xq)·(m_w·dx) per block, once for 16 outputs. (Held as GGUF rows
// these three ran at 35-55 % of the one-core limit with m(4) ≈ 2: docs/lab/
// performance-history.md "Q5_0, Q4_1, Q5_1 held grouped".)
//
// Q4_K: per sub-block j of 32, the same vpdpbusd of the unpacked nibbles give
// 16 outputs' exact Σ q·xq, multiplied by the 16 rows' scales sc_j (vpmulld;
// without VNNI the int16 pair sums meet sc_j in one vpmaddwd) into P; the
// mins M = Σ_j m_j·bsum32_j take 4 vpdpwssd (vpmaddwd) per block; then two
// fused multiply-adds per block for 16 outputs. Per row and 256 weights: 64
// multiplies and ~26 other operations (held as GGUF rows: ~64 and ~60).
// Q5_K adds each code's fifth bit from its qh line (one shift and mask per
// line, shared by the tile's rows); Q6_K builds its codes from two ql lines
// and a qh line, its lanes started at −32·bsum16 (the code offset) and
// meeting the 16 sub-block scales by vpmulld. Tiles: grouped_tiles_k-inl.h.
//
// Targets: AVX-512 with VNNI (zmm: a group is one vector; tiles of <= 8
// rows), AVX2 with AVX-VNNI (ymm: a group is two vectors; tiles of <= 4
// rows), AVX2 and AVX-512 without VNNI (ymm: maddubs and madd; Q8_0 by the
// sign trick, |c| against x·sign(c), exact: pairs <= 2·128·127), others the
// reference on gathered rows.
#include <cpuid.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/matmul.h"
#include "kernels/packed_access.h"
#include "kernels/grouped_blocks.h"
#include "kernels/quant_dot.h"
#include "kernels/simd.h"

#pragma GCC optimize("fp-contract=off")

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/matmul_grouped.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#ifndef MTP_KERNELS_MATMUL_GROUPED_ONCE
#define MTP_KERNELS_MATMUL_GROUPED_ONCE
#include <immintrin.h>
namespace mtp::kernels::detail {
// The held types, as a template parameter.
enum GroupedKind : int { kQ8_0 = 0, kQ4_0 = 1, kQ4_K = 2, kQ6_K = 3, kQ5_K = 4, kQ5_0 = 5, kQ4_1 = 6, kQ5_1 = 7 };
// The ggml type of each kind (indexed by GroupedKind).
inline constexpr GgmlType kKindType[] = {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_K, GgmlType::Q6_K,
                                         GgmlType::Q5_K, GgmlType::Q5_0, GgmlType::Q4_1, GgmlType::Q5_1};
struct GroupedArgs {
  GroupedKind kind;
  const uint8_t* codes;    // grouped_blocks.h
  const uint8_t* meta;     // [G, nb, group_meta_bytes]
  size_t rows, cols, nb;   // nb: blocks per row
  const QuantAct* a;
  size_t q;
  float* y;
  size_t y_stride;
  bool vnni;      // simd_quant_vnni()
  // Software prefetch of the codes: whether, how far ahead, into which
  // level (prefetch_policy).
  bool prefetch;
  size_t pf_ahead;
  bool pf_l2;
};
constexpr size_t kGroupedTile = 4;     // activation rows per ymm tile (16 registers)
constexpr size_t kGroupedTile512 = 8;  // per zmm tile (32 registers)
}  // namespace mtp::kernels::detail
#endif

HWY_BEFORE_NAMESPACE();
namespace mtp::kernels::HWY_NAMESPACE {

#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
using detail::GroupedArgs;
using detail::kGroupRows;

typedef int32_t __attribute__((may_alias, aligned(1))) i32u;
HWY_INLINE int32_t ld32(const int8_t* p) { return *reinterpret_cast<const i32u*>(p); }

// AVX-VNNI (VEX, 256-bit) as inline assembly (Highway's AVX2 target does not
// enable it; only the kVnni instantiations run it, where the CPU has it).
HWY_INLINE __m256i dpbusd_y(__m256i acc, __m256i u, __m256i s) {
  asm("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(u), "xm"(s));
  return acc;
}

// Stores the first n <= 8 lanes of v at y.
HWY_INLINE void store8(float* y, __m256 v, size_t n) {
  if (n >= 8) return _mm256_storeu_ps(y, v);
  alignas(32) float t[8];
  _mm256_store_ps(t, v);
  for (size_t i = 0; i < n; ++i) y[i] = t[i];
}

// Stores a 256-bit tile's results: row j0 + j's outputs of group g (the
// group's last rows may be past a.rows).
template <size_t kQ>
HWY_INLINE void store_tile_y(const GroupedArgs& a, size_t g, size_t j0, const __m256 (&acc)[kQ][2]) {
  const size_t o = g * kGroupRows, n = std::min(kGroupRows, a.rows - o);
#pragma GCC unroll 8
  for (size_t j = 0; j < kQ; ++j) {
    float* y = a.y + (j0 + j) * a.y_stride + o;
    store8(y, acc[j][0], n);
    if (n > 8) store8(y + 8, acc[j][1], n - 8);
  }
}

// Software prefetch of one (group, block)'s codes, a.pf_ahead bytes ahead.
template <size_t kBytes>
HWY_INLINE void prefetch_codes(const GroupedArgs& a, const uint8_t* cb) {
  for (size_t l = 0; l < kBytes; l += 64) {
    const char* p = reinterpret_cast<const char*>(cb + a.pf_ahead + l);
    if (a.pf_l2) _mm_prefetch(p, _MM_HINT_T1);
    else _mm_prefetch(p, _MM_HINT_T0);
  }
}

// The 32-element kinds (K): codes from nibbles (Q4_0, Q4_1; Q5_0, Q5_1
// with a fifth bit) or bytes (Q8_0); a min term (Q4_1, Q5_1); lanes started
// at QuantAct::xcorr (Q8_0, Q4_0, Q5_0: −u·Σ xq for the offset u of the
// held unsigned codes) or at 0 (Q4_1, Q5_1, whose xcorr is the min term's S).
template <int K> inline constexpr bool kNib = K != detail::kQ8_0;
template <int K> inline constexpr bool kFifth = K == detail::kQ5_0 || K == detail::kQ5_1;
template <int K> inline constexpr bool kMinK = K == detail::kQ4_1 || K == detail::kQ5_1;

// The byte operations of for_quads at 256 and (AVX-512) 512 bits.
template <class V> HWY_INLINE V vline(const uint8_t* p);  // one aligned load
template <class V> HWY_INLINE V vbytes(char c);           // c in every byte
template <> HWY_INLINE __m256i vline<__m256i>(const uint8_t* p) {
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(p));
}
template <> HWY_INLINE __m256i vbytes<__m256i>(char c) { return _mm256_set1_epi8(c); }
HWY_INLINE __m256i vand(__m256i a, __m256i b) { return _mm256_and_si256(a, b); }
HWY_INLINE __m256i vor(__m256i a, __m256i b) { return _mm256_or_si256(a, b); }
HWY_INLINE __m256i vsrl16(__m256i a, int n) { return _mm256_srli_epi16(a, n); }
HWY_INLINE __m256i vsll16(__m256i a, int n) { return _mm256_slli_epi16(a, n); }
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
template <> HWY_INLINE __m512i vline<__m512i>(const uint8_t* p) { return _mm512_load_si512(p); }
template <> HWY_INLINE __m512i vbytes<__m512i>(char c) { return _mm512_set1_epi8(c); }
HWY_INLINE __m512i vand(__m512i a, __m512i b) { return _mm512_and_si512(a, b); }
HWY_INLINE __m512i vor(__m512i a, __m512i b) { return _mm512_or_si512(a, b); }
HWY_INLINE __m512i vsrl16(__m512i a, int n) { return _mm512_srli_epi16(a, n); }
HWY_INLINE __m512i vsll16(__m512i a, int n) { return _mm512_slli_epi16(a, n); }
#endif

// Calls f(k, w) for the 8 quads k of one (group, block) at cb, w the codes of
// 16 rows (V = __m512i) or of 8 rows, half h of each line (V = __m256i).
// Nibble kinds: line k holds quad k (low nibbles) and k + 4 (high); the
// fifth bits (line 4, grouped_blocks.h) are moved to bit 4 of each code
// byte by one 16-bit shift (left 4 − k, right k: a byte's bit j lands on its
// own bit 4) and a mask, shared by the tile's rows.
template <int K, class V, class F>
HWY_INLINE void for_quads(const uint8_t* cb, size_t h, F&& f) {
  const uint8_t* at = cb + (sizeof(V) == 64 ? 0 : 32 * h);
  if constexpr (kNib<K>) {
    const V m4 = vbytes<V>(0x0F), m16 = vbytes<V>(0x10);
    const V qh = kFifth<K> ? vline<V>(at + 256) : m4;
#pragma GCC unroll 4
    for (size_t k = 0; k < 4; ++k) {
      const V v = vline<V>(at + 64 * k);
      V lo = vand(v, m4), hi = vand(vsrl16(v, 4), m4);
      if constexpr (kFifth<K>) {
        lo = vor(lo, vand(vsll16(qh, int(4 - k)), m16));
        hi = vor(hi, vand(vsrl16(qh, int(k)), m16));
      }
      f(k, lo);
      f(k + 4, hi);
    }
  } else {
#pragma GCC unroll 8
    for (size_t k = 0; k < 8; ++k) f(k, vline<V>(at + 64 * k));
  }
}

// TileIn's members by name, as references: not a structured binding, which
// clang < 16 cannot capture in a lambda (the fuzz build uses clang 14).
#ifndef MTP_TILE_IN_NAMES
#define MTP_TILE_IN_NAMES(in)                                                     \
  const auto& cg = (in).cg;                                                       \
  const auto& sg = (in).sg;                                                       \
  const auto& xq = (in).xq;                                                       \
  const auto& xd = (in).xd;                                                       \
  const auto& xc = (in).xc
#endif

// What a tile of kQ activation rows (from j0) reads of group g: the group's
// codes and scales (d fp16 [16] per block; min kinds then m fp16 [16]), and
// each row's codes, scales and xcorr.
template <int K, size_t kQ>
struct TileIn {
  static constexpr size_t kCode = detail::group_code_bytes(detail::kKindType[K]);  // code bytes per block
  static constexpr size_t kMetaH = detail::group_meta_bytes(detail::kKindType[K]) / 2;  // fp16 per block
  const uint8_t* cg;
  const uint16_t* sg;
  const int8_t* xq[kQ];
  const float* xd[kQ];
  const int32_t* xc[kQ];
  HWY_INLINE TileIn(const GroupedArgs& a, size_t g, size_t j0)
      : cg(a.codes + g * a.nb * kCode), sg(reinterpret_cast<const uint16_t*>(a.meta) + g * a.nb * kMetaH) {
#pragma GCC unroll 8
    for (size_t j = 0; j < kQ; ++j)
      xq[j] = a.a->qrow(j0 + j), xd[j] = a.a->drow(j0 + j), xc[j] = a.a->crow(j0 + j);
  }
};

// kQ activation rows (from j0) against group g, 256-bit: outputs 0..7 of the
// group in the low halves of each 64-byte line, 8..15 in the high.
template <int K, size_t kQ, bool kVnni>
HWY_INLINE void tile_y(const GroupedArgs& a, size_t g, size_t j0, bool pf) {
  const TileIn<K, kQ> in(a, g, j0);
  MTP_TILE_IN_NAMES(in);
  constexpr size_t kCode = TileIn<K, kQ>::kCode, kMetaH = TileIn<K, kQ>::kMetaH;
  __m256 acc[kQ][2];
#pragma GCC unroll 8
  for (size_t j = 0; j < kQ; ++j) acc[j][0] = acc[j][1] = _mm256_setzero_ps();
  // Q8_0 without VNNI multiplies the signed codes directly (from 0).
  constexpr bool kSign = !kNib<K> && !kVnni;
  // Nibble codes without VNNI sum int16 pairs first (from 0, see below).
  constexpr bool kPairs16 = kNib<K> && !kVnni;
  // Where the lanes start: xcorr, or 0 (kSign; kPairs16 adds xcorr after
  // its pair sums; the min kinds use xcorr for their min term).
  constexpr bool kStart = !kSign && !kPairs16 && !kMinK<K>;
  const __m256i ones = _mm256_set1_epi16(1), flip = _mm256_set1_epi8(static_cast<char>(0x80));
  // 0, opaque to the optimizer: from 2 rows on, the second half's
  // broadcasts of an activation quad read at + hz, so g++ 12 cannot take
  // them for the first half's — it otherwise keeps a block's 8 quads × kQ
  // rows of broadcasts live across both halves and spills them to the stack
  // (measured on Zen 4, AVX2 without VNNI: in cache, 4 rows of 4096 cols, Q5_0
  // 0.080 -> 0.065 ms, Q4_0 0.078 -> 0.060; the ~1 B target's Q4_0 m(4)
  // 3.35 -> 2.50). One row keeps the shared broadcasts: re-reading them
  // there made the Q8_0 decode 22 % slower (38.7 -> 47 ms).
  size_t hz;
  asm("" : "=r"(hz) : "0"(size_t{0}));
  for (size_t b = 0; b < a.nb; ++b) {
    const uint8_t* cb = cg + b * kCode;
    if (pf) prefetch_codes<kCode>(a, cb);
#pragma GCC unroll 2
    for (size_t h = 0; h < 2; ++h) {
      __m256i p[kQ], p2[kQ];  // p2: 5-bit codes' int16 sums of quads 4..7
#pragma GCC unroll 8
      for (size_t j = 0; j < kQ; ++j)
        p[j] = kStart ? _mm256_set1_epi32(xc[j][b]) : _mm256_setzero_si256(), p2[j] = _mm256_setzero_si256();
      for_quads<K, __m256i>(cb, h, [&](size_t k, __m256i w) __attribute__((always_inline)) {
#pragma GCC unroll 8
        for (size_t j = 0; j < kQ; ++j) {
          const __m256i xb = _mm256_set1_epi32(ld32(xq[j] + 32 * b + 4 * k + (kQ > 1 ? h * hz : 0)));
          if constexpr (kVnni) {
            p[j] = dpbusd_y(p[j], w, xb);
          } else if constexpr (kPairs16) {
            // Codes 0..15: a pair is at most 2·15·127 = 3810 in magnitude, so
            // the 8 quads' pairs sum exactly in int16 (<= 30480); one madd
            // per block below. Codes 0..31: a pair <= 7874, so 4 quads' sum
            // (<= 31496) per int16 sum, two of them (against an int32 add
            // per quad, in cache, AVX2, q = 4: Q5_0 0.070 -> 0.065 ms, Q5_1
            // 0.074 -> 0.069).
            __m256i& s16 = kFifth<K> && k >= 4 ? p2[j] : p[j];
            s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(w, xb));
          } else {
            const __m256i c = _mm256_xor_si256(w, flip);  // the signed codes
            const __m256i xs = _mm256_sign_epi8(xb, c);   // |c| (128 for −128) against x·sign(c)
            p[j] = _mm256_add_epi32(p[j], _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(c), xs), ones));
          }
        }
      });
      const __m256 dw = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(sg + kMetaH * b + 8 * h)));
      __m256 mw = dw;
      if constexpr (kMinK<K>)
        mw = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(sg + kMetaH * b + 16 + 8 * h)));
#pragma GCC unroll 8
      for (size_t j = 0; j < kQ; ++j) {
        if constexpr (kPairs16) {
          p[j] = _mm256_madd_epi16(p[j], ones);
          if constexpr (kFifth<K>) p[j] = _mm256_add_epi32(p[j], _mm256_madd_epi16(p2[j], ones));
          if constexpr (!kMinK<K>) p[j] = _mm256_add_epi32(_mm256_set1_epi32(xc[j][b]), p[j]);
        }
        const __m256 dx = _mm256_broadcast_ss(xd[j] + b);
        acc[j][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p[j]), _mm256_mul_ps(dw, dx), acc[j][h]);
        if constexpr (kMinK<K>)  // + S·(m_w·dx)
          acc[j][h] = _mm256_fmadd_ps(_mm256_set1_ps(static_cast<float>(xc[j][b])), _mm256_mul_ps(mw, dx),
                                      acc[j][h]);
      }
    }
  }
  store_tile_y<kQ>(a, g, j0, acc);
}

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
// acc[i] += Σ_{e<4} u8(u[4i+e])·s8(x[e]): the 4 activation bytes at x
// broadcast by the instruction itself (AVX512_VNNI as inline assembly: the
// AVX3 target does not enable it; only run where the CPU has it).
HWY_INLINE __m512i dpbusd_bcast(__m512i acc, __m512i u, const int8_t* x) {
  asm("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(u), "m"(*reinterpret_cast<const i32u*>(x)));
  return acc;
}

// kQ activation rows against group g, 512-bit (VNNI): a group is one vector.
template <int K, size_t kQ>
HWY_INLINE void tile_z(const GroupedArgs& a, size_t g, size_t j0, bool pf) {
  const TileIn<K, kQ> in(a, g, j0);
  MTP_TILE_IN_NAMES(in);
  constexpr size_t kCode = TileIn<K, kQ>::kCode, kMetaH = TileIn<K, kQ>::kMetaH;
  __m512 acc[kQ];
#pragma GCC unroll 8
  for (size_t j = 0; j < kQ; ++j) acc[j] = _mm512_setzero_ps();
  // Integer chains per row (quads k mod kC; exact sums, added at the end):
  // a block's 8 vpdpbusd of one row would otherwise wait on each other's
  // latency (~5 cycles) — 8 rows of one chain each keep the pipe busy, fewer
  // rows need more (measured on Zen 4: q4 at one chain was slower than q6).
  constexpr size_t kC = kQ <= 2 ? 4 : kQ <= 5 ? 2 : 1;
  for (size_t b = 0; b < a.nb; ++b) {
    const uint8_t* cb = cg + b * kCode;
    if (pf) prefetch_codes<kCode>(a, cb);
    __m512i p[kQ][kC];
#pragma GCC unroll 8
    for (size_t j = 0; j < kQ; ++j) {
      p[j][0] = kMinK<K> ? _mm512_setzero_si512() : _mm512_set1_epi32(xc[j][b]);
#pragma GCC unroll 4
      for (size_t c = 1; c < kC; ++c) p[j][c] = _mm512_setzero_si512();
    }
    for_quads<K, __m512i>(cb, 0, [&](size_t k, __m512i w) __attribute__((always_inline)) {
#pragma GCC unroll 8
      for (size_t j = 0; j < kQ; ++j) p[j][k % kC] = dpbusd_bcast(p[j][k % kC], w, xq[j] + 32 * b + 4 * k);
    });
    const __m512 dw = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(sg + kMetaH * b)));
    __m512 mw = dw;
    if constexpr (kMinK<K>)
      mw = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(sg + kMetaH * b + 16)));
#pragma GCC unroll 8
    for (size_t j = 0; j < kQ; ++j) {
      __m512i pj = p[j][0];
#pragma GCC unroll 4
      for (size_t c = 1; c < kC; ++c) pj = _mm512_add_epi32(pj, p[j][c]);
      const __m512 dx = _mm512_set1_ps(xd[j][b]);
      acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(pj), _mm512_mul_ps(dw, dx), acc[j]);
      if constexpr (kMinK<K>)  // + S·(m_w·dx)
        acc[j] = _mm512_fmadd_ps(_mm512_set1_ps(static_cast<float>(xc[j][b])), _mm512_mul_ps(mw, dx), acc[j]);
    }
  }
  const size_t o = g * kGroupRows, n = std::min(kGroupRows, a.rows - o);
  const __mmask16 m = static_cast<__mmask16>((1u << n) - 1);
#pragma GCC unroll 8
  for (size_t j = 0; j < kQ; ++j) _mm512_mask_storeu_ps(a.y + (j0 + j) * a.y_stride + o, m, acc[j]);
}
#endif

// The K types' tiles (tile_ky, tile_6y; with AVX-512 VNNI tile_kz, tile_6z).
#include "kernels/grouped_tiles_k-inl.h"

// One tile of kQ rows of kind K (512-bit: VNNI only).
template <int kK, size_t kQ, bool kZmm, bool kVnni>
HWY_INLINE void tile(const GroupedArgs& a, size_t g, size_t j0, bool pf) {
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  if constexpr (kZmm) {
    if constexpr (kK == detail::kQ4_K) return tile_kz<kQ>(a, g, j0, pf);
    else if constexpr (kK == detail::kQ5_K) return tile_kz<kQ, true>(a, g, j0, pf);
    else if constexpr (kK == detail::kQ6_K) return tile_6z<kQ>(a, g, j0, pf);
    else return tile_z<kK, kQ>(a, g, j0, pf);
  }
#endif
  if constexpr (!kZmm) {
    if constexpr (kK == detail::kQ4_K) tile_ky<kQ, kVnni>(a, g, j0, pf);
    else if constexpr (kK == detail::kQ5_K) tile_ky<kQ, kVnni, true>(a, g, j0, pf);
    else if constexpr (kK == detail::kQ6_K) tile_6y<kQ, kVnni>(a, g, j0, pf);
    else tile_y<kK, kQ, kVnni>(a, g, j0, pf);
  }
}

// Groups [g0, g1): each group's codes are streamed once by its first tile.
template <int kK, bool kZmm, bool kVnni>
void groups_impl(const GroupedArgs& a, size_t g0, size_t g1) {
  constexpr size_t kT = kZmm ? detail::kGroupedTile512 : detail::kGroupedTile;
  for (size_t g = g0; g < g1; ++g) {
    for (size_t j0 = 0; j0 < a.q; j0 += kT) {
      const size_t n = std::min(kT, a.q - j0);
      const bool pf = a.prefetch && j0 == 0;
      switch (n) {
        case 1: tile<kK, 1, kZmm, kVnni>(a, g, j0, pf); break;
        case 2: tile<kK, 2, kZmm, kVnni>(a, g, j0, pf); break;
        case 3: tile<kK, 3, kZmm, kVnni>(a, g, j0, pf); break;
        case 4: tile<kK, 4, kZmm, kVnni>(a, g, j0, pf); break;
        case 5: tile<kK, kZmm ? 5 : 4, kZmm, kVnni>(a, g, j0, pf); break;
        case 6: tile<kK, kZmm ? 6 : 4, kZmm, kVnni>(a, g, j0, pf); break;
        case 7: tile<kK, kZmm ? 7 : 4, kZmm, kVnni>(a, g, j0, pf); break;
        default: tile<kK, kZmm ? 8 : 4, kZmm, kVnni>(a, g, j0, pf); break;
      }
    }
  }
}
static_assert(detail::kGroupedTile == 4 && detail::kGroupedTile512 == 8, "groups_impl's tile switch");

template <int kK>
void groups_of_kind(const GroupedArgs& a, size_t g0, size_t g1) {
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  if (a.vnni) return groups_impl<kK, true, true>(a, g0, g1);  // AVX512_VNNI
#else
  if (a.vnni) return groups_impl<kK, false, true>(a, g0, g1);  // AVX-VNNI
#endif
  groups_impl<kK, false, false>(a, g0, g1);
}

void GroupedRows(const GroupedArgs& a, size_t g0, size_t g1) {
  switch (a.kind) {
    case detail::kQ8_0: return groups_of_kind<detail::kQ8_0>(a, g0, g1);
    case detail::kQ4_0: return groups_of_kind<detail::kQ4_0>(a, g0, g1);
    case detail::kQ4_K: return groups_of_kind<detail::kQ4_K>(a, g0, g1);
    case detail::kQ6_K: return groups_of_kind<detail::kQ6_K>(a, g0, g1);
    case detail::kQ5_K: return groups_of_kind<detail::kQ5_K>(a, g0, g1);
    case detail::kQ5_0: return groups_of_kind<detail::kQ5_0>(a, g0, g1);
    case detail::kQ4_1: return groups_of_kind<detail::kQ4_1>(a, g0, g1);
    case detail::kQ5_1: return groups_of_kind<detail::kQ5_1>(a, g0, g1);
  }
}
#else
// Targets without the integer kernels: the reference on gathered GGUF rows.
void GroupedRows(const detail::GroupedArgs& a, size_t g0, size_t g1) {
  const GgmlType t = detail::kKindType[a.kind];
  thread_local std::vector<uint8_t> row;
  thread_local std::vector<float> out;
  row.resize(ggml_row_bytes(static_cast<uint32_t>(t), a.cols));
  out.resize(a.q);
  const size_t o1 = std::min(a.rows, g1 * detail::kGroupRows);
  for (size_t o = g0 * detail::kGroupRows; o < o1; ++o) {
    detail::grouped_gather_row(t, a.codes, a.rows, a.cols, o, row.data());
    detail::quant_dot_ref_rows(t, row.data(), *a.a, 0, a.q, out.data());
    for (size_t r = 0; r < a.q; ++r) a.y[r * a.y_stride + o] = out[r];
  }
}
#endif

}  // namespace mtp::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace mtp::kernels {
HWY_EXPORT(GroupedRows);

namespace detail {
namespace {
std::atomic<bool> g_vnni_allowed{true};
}  // namespace

// AVX-VNNI is CPUID.(EAX=7, ECX=1):EAX[4], read directly: clang 14's
// __builtin_cpu_supports does not know "avxvnni" (the fuzz build uses it).
// Asked only for the AVX2 target, which Highway picks only where the OS keeps
// the YMM state.
static bool cpuid_avx_vnni() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid_count(7, 1, &a, &b, &c, &d) != 0 && ((a >> 4) & 1u) != 0;
}

bool cpu_has_quant_vnni(std::string_view target) {
  static const bool avx512 = __builtin_cpu_supports("avx512vnni");
  static const bool avx = cpuid_avx_vnni();
  if (target.starts_with("AVX3")) return avx512;
  if (target == "AVX2") return avx;
  return false;
}
bool quant_vnni_allowed() { return g_vnni_allowed.load(std::memory_order_relaxed); }
void set_quant_vnni(bool allowed) { g_vnni_allowed.store(allowed, std::memory_order_relaxed); }

namespace {
// Whether, how far ahead and into which level the kernels prefetch codes
// (measured on Zen 4, docs/lab/performance-history.md "Q8_0 and Q4_0 held by
// groups of 16 rows", "the K types held by groups of 16 rows", "Q8_0 with
// VNNI at q = 2 without software prefetch").
// Whether: at q >= 3 always; at q <= 2 where the loop is slow next to its
// stream — Q4_0 and the K types (fewer bytes per multiply than Q8_0) and the
// kernels without VNNI (~1 B target: Q4_0 decode 28.7-29.4 -> 27.6-28.4 ms
// with it, AVX2 Q8_0 without VNNI 52.3-54.2 -> 45.0-47.9 ms) — and otherwise
// by prefetch_single_row() (vendor): the AVX-512 VNNI Q8_0 q = 1 product ran
// 0.57 -> 0.68 ms with it, the widened 1 B target's Q8_0 m(2) 1.33-1.38
// with it against 1.13-1.17 without.
// Where: Q8_0 and Q4_0 q <= 2 8 KiB into L1, q >= 3 32 KiB into L2 (with L1
// prefetches 2-8 KiB ahead a 4096² Q8_0 product at q = 4..8 took 0.88-1.47
// ms against 0.58 at q = 1; into L2 0.61-0.87 ms, the ~1 B target's m(4)
// 1.48 -> 1.31; at q <= 2 the L2 form was slower). Q4_K: q = 1 2 KiB into L1
// (decode of the ~1 B target 30-33 -> 25-27.5 ms against 8 KiB into L1 or 32
// KiB into L2), q >= 2 32 KiB into L2 (q = 2 1.7 -> 1.17 decodes). Q5_K and
// Q6_K: 32 KiB into L2 at every q (at q = 1 equal to 2 KiB into L1 with VNNI;
// without, Q5_K 49.5 -> 37.8-39.4 ms, Q6_K 57.8 -> 54.3). Q5_0, Q4_1, Q5_1
// as Q4_0 (bench-kernels 4096² and 11264x2048, AVX-512 VNNI:
// at q = 1 32 KiB into L2 was slower, 0.38-0.44 -> 0.42-0.52 ms), except
// Q5_0 at q = 2 with VNNI: 0.59-0.78 -> 0.46-0.60 ms into L2 (Q5_1 and Q4_1
// there and every type without VNNI: equal within noise).
struct Prefetch {
  bool on;
  size_t ahead;
  bool l2;
};
Prefetch prefetch_policy(GgmlType t, size_t q, bool vnni) {
  const bool on = q >= 3 || t != GgmlType::Q8_0 || !vnni || prefetch_single_row();
  const bool l2 = q >= 3 || t == GgmlType::Q5_K || t == GgmlType::Q6_K ||
                  (q == 2 && (t == GgmlType::Q4_K || (t == GgmlType::Q5_0 && vnni)));
  if (l2) return {on, 32768, true};
  return {on, t == GgmlType::Q4_K ? size_t{2048} : size_t{8192}, false};
}
}  // namespace

void matmul_grouped(const PackedMatrix& w, const float* x, size_t x_stride, size_t q, float* y,
                    size_t y_stride, ThreadPool* pool) {
  const GgmlType t = weight_ggml_type(w.hold());
  const bool vnni = simd_quant_vnni();  // one decision for the inputs and the kernel
  thread_local QuantAct act;
  quantize_act(t, x, x_stride, q, w.cols(), act);
  const size_t rows = w.rows(), cols = w.cols();
  const Prefetch pf = prefetch_policy(t, q, vnni);
  const auto* at = std::find(std::begin(kKindType), std::end(kKindType), t);
  MTP_CHECK(at != std::end(kKindType), "matmul_grouped: {} is not a block type", weight_type_name(w.hold()));
  const auto kind = static_cast<GroupedKind>(at - std::begin(kKindType));
  const GroupedArgs a{kind,
                      w.data(),
                      w.data() + grouped_meta_offset(t, rows, cols),
                      rows, cols, cols / group_block_elems(t), &act, q, y, y_stride, vnni,
                      pf.on, pf.ahead, pf.l2};
  auto fn = HWY_DYNAMIC_DISPATCH(GroupedRows);
  const size_t G = row_groups(rows);
  // As matmul(): threads only for enough work; they split whole groups.
  if (pool && pool->size() > 1 && w.bytes() * q > g_parallel_min_work.load(std::memory_order_relaxed)) {
    pool->parallel_for(G, [&](size_t g0, size_t g1, size_t) { fn(a, g0, g1); }, 1);
  } else {
    fn(a, 0, G);
  }
}
}  // namespace detail
}  // namespace mtp::kernels
#endif  // HWY_ONCE
