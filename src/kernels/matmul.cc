// SIMD weight-matrix kernels (Highway, runtime dispatch): Y[q, rows] = X[q, cols]·Wᵀ.
//
// Packed layout (target-independent, fixed at pack time):
//   rows are grouped in blocks of kBlockRows = 4 (zero rows pad the last block);
//   cols are grouped in superchunks of kSuper = 32 (zero cols pad the last one).
//   A superchunk of a block (4 rows × 32 cols) is 128 consecutive elements,
//   row k of the block at element 32·k. Superchunks are ordered by panels of
//   kGroupBlocks = 16 blocks; within a panel by column chunks of C
//   superchunks; within a chunk block after block (sc_index below). C is
//   kLayoutChunk = 32 for bf16 rows longer than kChunkedMinSuper superchunks
//   and the whole row otherwise, where the order is simply block after block.
//   The loops read the weights in this order (one linear stream, what a
//   memory-bound decode wants): for each chunk every block of the panel, so a
//   chunk of x (C·32 cols) stays in L1 across the panel while its blocks'
//   accumulators wait in memory between chunks. Measured with
//   bench/micro/stream_order.cc (docs/PERFORMANCE.md, issue 14, "Session 21:
//   one-row bf16 products stream slower as rows grow"): a one-row bf16
//   product over 4096-8192 cols streams 19-23 GB/s block after block and
//   28-31 GB/s chunk-major; up to 2048 cols block after block is as fast.
//   fp32 and fp16: the 32 elements are cols 32s+0..31 in order (fp16 widens
//         with one conversion per vector, F16C's vcvtph2ps on x86).
//   bf16: u16 element 2l holds col 32s+l and 2l+1 holds col 32s+16+l (l < 16), so a
//         u32 load yields the low 16 cols by `<< 16` and the high 16 by masking
//         the low half off — no widening shuffle needed.
//
// Reduction order (the batch-invariance contract): for output (o, r) there are 16
// "semantic lanes"; lane l accumulates w[o][i]·x[r][i] for i ≡ l (mod 16) in
// increasing i with one fused multiply-add per term, starting from +0. The lanes
// are then summed by the fixed tree t[l] += t[l + h] for h = 8, 4, 2, 1. A target
// with N-lane vectors holds the 16 lanes in 16/N vectors, so every FMA target
// (AVX2, AVX3) gives the same bits; targets without FMA (SSE4, scalar) round
// the product separately and so differ, but are equally batch-invariant. The
// sequence depends on nothing but cols: q is processed in tiles of up to 4 rows
// by one template whose per-element operations do not depend on the tile size,
// and threads split only the output blocks.
//
// Performance: a pass keeps a register tile of accumulators (output rows ×
// activation rows × vectors; the shape is chosen per target so that it does
// not spill much: 4×4 on AVX3, 8-16 accumulators on AVX2, see pass_shape), so
// one weight load and bf16 widening serves every activation row of the tile.
// For q <= 16 every pass runs on a block back to back (the block stays in
// L1/L2) while software prefetch keeps DRAM busy; where a tile takes several
// passes (AVX2) they run column chunk by column chunk so their x rows stay in
// L1; on a chunked layout, and on AVX3 where x outgrows L1, chunk-major over
// a panel (group_chunks). For larger q (prefill) the tiles sweep a group of
// blocks (<= kGroupBytes) that stays in L2, or on a chunked layout a
// panel-chunk (panel_tiles). Weights stream once per call (prefill on a
// chunked layout: once per 64 rows).
// Activation rows are read from 64-byte-aligned storage (matmul() copies rows
// that are not; see there): at q = 4 the 8 activation loads per superchunk
// otherwise each split a cache line, and the tile falls behind DRAM.

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/matmul.h"
#include "kernels/matmul_blas.h"
#include "kernels/packed_access.h"
#include "kernels/quant_blocks.h"
#include "kernels/quant_dot.h"

// Keep every multiply and add as written (g++ contracts a*b+c into FMA by default
// in C++ wherever the target has FMA): explicit MulAdd is the only FMA here, so
// an element's operation sequence is exactly the one in the source.
#pragma GCC optimize("fp-contract=off")

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/matmul.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/cache_control.h>
#include <hwy/highway.h>

#ifndef MTP_KERNELS_MATMUL_CONSTANTS
#define MTP_KERNELS_MATMUL_CONSTANTS
namespace mtp::kernels::detail {
constexpr size_t kBlockRows = 4;   // output rows per packed block
constexpr size_t kSuper = 32;      // cols per superchunk
constexpr size_t kLanes = 16;      // semantic accumulator lanes per (o, r)
constexpr size_t kTileQ = 4;       // activation rows per register tile
constexpr size_t kGroupBytes = 256 << 10;  // weight bytes revisited per q-tile pass
// Software prefetch distance in the weight stream, for q >= 2 (and q = 1 where
// detail::prefetch_single_row(): on Intel; the Zen 4 measurements below). With
// compute per byte (q >= 2) the hardware prefetcher alone falls behind
// (measured: q = 4 cost 1.9x q = 1 without, ~1.1x with); at q = 1 it keeps
// up by itself, and on huge pages software prefetches only slow it (a
// 16384x1024 bf16 product: 1.33-1.49 ms without, 1.71-1.86 ms with 8 KiB
// ahead). Distances of 16-64 KiB measured alike for q = 2..4 on huge pages,
// 2-8 KiB worse; 32 KiB is in the middle (docs/PERFORMANCE.md "Huge pages
// and prefetch into L2").
constexpr size_t kPrefetchBytes = 32 << 10;
constexpr size_t kMaxStreamTiles = 4;      // q <= 16: the decode / verify orders
// Decode/verify products whose q activation rows exceed kL1XBytes (x no longer
// stays in L1 while the weights stream past: 4096 cols at q >= 2) run
// chunk-major over groups of kGroupBlocks blocks where a 4-row tile is one
// pass (AVX3): each column chunk of x (<= kChunkXBytes, all q rows) is read
// from L2 once per group instead of once per block. Measured on a 2-core
// Zen 5 VM (48 GB/s per core), AVX3 bf16 4096x4096 from DRAM: q = 4 1.69 ->
// 1.24 ms, q = 8 2.48 -> 2.0 ms, q = 16 4.96 -> 3.5 ms (q = 1 0.97 ms);
// groups of 8..32 blocks measured alike, 16 in the middle. On AVX2 (several
// passes per tile, already chunked within a block) it made q = 2..3 slower
// (compute-bound there), so those targets keep the block-major order.
// docs/PERFORMANCE.md "Session 12". 12 KiB rather than 24 since session 26:
// 2048 cols at q = 2..3 went block-major with 24, where the (unpadded) 3-row
// tile streamed at 1.53x q = 1 (11264x2048 bf16; chunk-major 1.04-1.15x).
constexpr size_t kL1XBytes = 12 << 10;
constexpr size_t kGroupBlocks = 16;  // also the packed layout's panel (see top)
// The packed layout's column chunk (superchunks) for rows of more than
// kChunkedMinSuper superchunks (1024 cols: 4 KiB of x, 8 KiB of a bf16 block).
constexpr size_t kLayoutChunk = 32;
constexpr size_t kChunkedMinSuper = 64;
// 2-byte holds only (bf16, fp16: the measurements were bf16): fp32 rows of
// 4096-8192 cols measured 14-23 % slower at q = 1 chunk-major on AVX3
// (neutral on AVX2), so fp32 stays block after block.
inline bool layout_chunked(size_t n_super, bool two_byte) { return two_byte && n_super > kChunkedMinSuper; }

// The element type of a float hold: a kernel template parameter.
enum class Elem : uint8_t { F32, BF16, F16 };
constexpr size_t elem_bytes(Elem e) { return e == Elem::F32 ? 4 : 2; }
// Index of block b's superchunk s in the packed storage (in superchunks).
// Chunked: panel g0 (its first block) holds n_super·gn superchunks, chunk
// after chunk, each chunk the blocks of the panel back to back. Otherwise
// block after block. (Constant divisors: the kernels call this per pass.)
inline size_t sc_index(size_t b, size_t s, size_t n_blocks, size_t n_super, bool chunked) {
  if (!chunked) return b * n_super + s;
  const size_t g0 = b / kGroupBlocks * kGroupBlocks, gn = std::min(kGroupBlocks, n_blocks - g0);
  const size_t c0 = s / kLayoutChunk * kLayoutChunk, cn = std::min(kLayoutChunk, n_super - c0);
  return g0 * n_super + c0 * gn + (b - g0) * cn + (s - c0);
}
// The grouped order's accumulators, one buffer per thread for all targets:
// kGroupBlocks × kMaxStreamTiles tiles × [4 rows][kBlockRows][16 lanes] floats.
inline float* group_state() {
  alignas(64) static thread_local float buf[16 * 4 * 4 * 4 * 16];
  return buf;
}
// matmul() splits only products with more packed weight bytes × q than this
// over the pool's threads; the calling thread does the others (see matmul()).
// The workers poll between jobs (core/thread_pool.h), so handing one half of a
// product costs ~0.3 µs in cache and ~1.5 µs from DRAM (bench-kernels at 1 vs
// 2 threads with no threshold, q = 1, Zen 4 2-core VM): from DRAM two threads
// first win at ~128 KiB of weights (bf16 256x256 even, 256x512 9.2 vs 12.0 µs),
// in cache already at ~36 KiB. On a 24-layer 896-wide Q4_K_M model the 2-thread
// decode went from 8.2 ms (threshold 1 MiB: the attention projections ran on
// one thread) to 7.2-7.6 ms at 128 or 32 KiB. (Before the workers polled, a
// wake-up cost 20-50 µs and the threshold was 1 MiB.)
constexpr size_t kParallelMinWork = size_t(1) << 17;
// A 2-row product of a larger matrix (packed bytes) runs as a padded 3-row
// tile where that is one pass (see kOnePassTiles): the L2 size of the Zen 4
// it was measured on; smaller matrices are likely read from cache.
constexpr size_t kPadPairMinBytes = size_t(1) << 20;

// Arguments of one matmul call, shared by all targets. x rows are read through
// xs (full superchunks) and the zero-padded copies in xtail ([q, 32]) for the
// last, partial superchunk.
struct MatmulArgs {
  const uint8_t* w;
  size_t rows, cols, n_super, n_full;  // n_full: superchunks fully inside cols
  Elem elem;
  const float* x;
  size_t x_stride;
  const float* xtail;  // [q, kSuper], valid when n_full < n_super
  float* y;
  size_t y_stride;
  size_t q;
  bool prefetch;  // software prefetch of the weight stream (see prefetch_single_row)
  size_t n_blocks;  // packed blocks of the whole matrix (prefetches stay inside)
  bool chunked;     // the layout: layout_chunked(n_super, elem != F32)
  bool pad_pair;    // q == 2 of a 2-byte hold over kPadPairMinBytes: runs as a
                    // 3-row tile where that is one pass (kOnePassTiles); never
                    // a 2-row tile of a larger q (6 = 4 + 3 would add FMAs to
                    // a product already FMA-bound)

  // Superchunk s of block b.
  const uint8_t* sc(size_t b, size_t s) const {
    const size_t sc_bytes = kBlockRows * kSuper * elem_bytes(elem);
    return w + sc_index(b, s, n_blocks, n_super, chunked) * sc_bytes;
  }
};

}  // namespace mtp::kernels::detail
#endif

HWY_BEFORE_NAMESPACE();
namespace mtp::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using detail::Elem;
using detail::elem_bytes;
using detail::kBlockRows;
using detail::kGroupBlocks;
using detail::kLanes;
using detail::kPrefetchBytes;
using detail::kSuper;
using detail::kTileQ;

using DF = hn::CappedTag<float, kLanes>;
using DU = hn::RebindToUnsigned<DF>;
constexpr size_t kN = hn::MaxLanes(DF());  // lanes per vector
constexpr size_t kV = kLanes / kN;         // vectors per semantic 16-lane accumulator
static_assert(kN * kV == kLanes, "vector width must divide 16");

// The fixed 16-lane tree sum of one accumulator held as kV vectors of kN
// lanes: t[l] += t[l + h] for h = 8, 4, 2, 1 (the same bits for every
// vector width; tests compare AVX2 with AVX3).
template <class D>
HWY_INLINE float reduce_vec(D d, hn::Vec<D> v) {
#if HWY_TARGET == HWY_SCALAR
  (void)d;
  return hn::GetLane(v);  // one lane: all halving steps were across vectors
#else
  constexpr size_t n = hn::MaxLanes(D());
  static_assert(n >= 4, "unsupported vector width");
  if constexpr (n > 4) {
    const hn::Half<D> dh;
    return reduce_vec(dh, hn::Add(hn::LowerHalf(dh, v), hn::UpperHalf(dh, v)));
  } else {
    (void)d;
    v = hn::Add(v, hn::Shuffle1032(v));                  // lanes 0,1: t0+t2, t1+t3
    return hn::GetLane(hn::Add(v, hn::Shuffle2301(v)));  // lane 0: (t0+t2)+(t1+t3)
  }
#endif
}

HWY_INLINE float reduce16(const hn::Vec<DF>* acc) {
  hn::Vec<DF> a[kV];
  for (size_t v = 0; v < kV; ++v) a[v] = acc[v];
  // Halves that span vectors first (h >= kN), then within one vector.
  for (size_t w = kV / 2; w >= 1; w /= 2)
    for (size_t v = 0; v < w; ++v) a[v] = hn::Add(a[v], a[v + w]);
  return reduce_vec(DF(), a[0]);
}

// Register tiles. A pass computes kR rows (k0..k0+kR-1) of one block, for a
// tile of kQ activation rows, in kVs of the kV vectors that hold a 16-lane
// accumulator (lanes [v0·N, (v0 + kVs)·N)), over a range of superchunks:
// kR·kQ·kVs accumulators stay in registers, and each weight vector is loaded
// (bf16: widened) once per pass and used by all kQ rows. The shape is chosen
// per target from a budget of accumulators (whole accumulators, kVs = kV,
// when they fit, else one vector of each), trading register pressure against
// independent FMA chains (each accumulator is a chain of 2 dependent FMAs per
// superchunk, so ~8+ chains are needed to cover the FMA latency):
//   AVX3 (32 registers, kV = 1): budget 16: kR = 4 for every kQ <= 4;
//   AVX2 (16 registers, kV = 2): budget 16 for kQ <= 3, 8 for kQ = 4:
//        kQ = 1: kR = 4; kQ = 2: kR = 4 (x and weights then partly come
//        from L1 as memory operands); tiles of 3 and 4 rows run as tiles of
//        2 + 1 and 2 + 2 rows there (kPairTiles).
// Measured in cache (temporary harness, AVX2 bf16 64x4096, time vs q = 1):
// q = 2 took 1.65x with kR = 4 and 2.3x with kR = 2 (8 accumulators); q = 4
// 3.8x with kR = 1 and the same with kR = 2 (16 accumulators, spilling).
// The pass shape changes which accumulators are live together, never the
// operations of one (o, r): every lane sees the same FMA sequence.
constexpr size_t acc_budget(size_t kq) {
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  (void)kq;
  return 16;
#else
  return kq <= 3 ? 16 : 8;
#endif
}
struct PassShape {
  size_t rows, vecs;  // kR, kVs
};
constexpr PassShape pass_shape(size_t kq) {
  for (size_t vs : {kV, size_t(1)})
    for (size_t r : {size_t(4), size_t(2), size_t(1)})
      if (r * kq * vs <= acc_budget(kq)) return {r, vs};
  return {1, 1};
}

// On AVX2 a tile of 3 rows runs as tiles of 2 and 1, a tile of 4 as two of 2:
// the 2-row tile (16 accumulators, 8 weight rows widened per pass, x as FMA
// memory operands) is the one that runs nearest the FMA peak. Measured on
// Zen 4 (session 20, docs/PERFORMANCE.md "Session 20"), against the earlier
// 3-row tile (kR = 4, one vector per pass: 12 chains) and 4 = 3 + 1: in L2
// (bench-kernels --in-cache 96x4096, bf16) q = 3 0.034 -> 0.030 ms, q = 4
// 0.043 -> 0.038 (q = 2 0.019); from DRAM bf16 4096² q = 3 1.77 -> 1.34 ms,
// q = 4 1.92 -> 1.66, 11264x2048 q = 3 2.61 -> 1.85, q = 4 2.67 -> 2.29;
// fp32 4096² q = 3 4.67 -> 3.28, q = 4 3.78 -> 2.62. (Session 16 had found
// the 3-row tile with 12 chains faster than one of kR = 2 with both vectors on
// Zen 5; it never compared splitting.) Each output keeps its operations.
constexpr bool kPairTiles = kV == 2 && acc_budget(4) == 8;

// Passes one tile of kq activation rows takes over a block (chunk).
constexpr size_t shape_passes(size_t kq) {
  return kBlockRows / pass_shape(kq).rows * (kV / pass_shape(kq).vecs);
}
constexpr size_t passes_of(size_t kq) {
  if (kPairTiles && (kq == 3 || kq == 4)) return shape_passes(2) + shape_passes(kq - 2);
  return shape_passes(kq);
}

// Software prefetch into L2, not L1 (prefetcht2; __builtin_prefetch locality 1).
// Measured on a 2-core Zen 4 VM with the weights on huge pages (docs/
// PERFORMANCE.md "Huge pages and prefetch"): with L1 prefetches (prefetcht0)
// a 4096x4096 bf16 product of q = 4 rows cost 1.8x q = 1 on AVX3; into L2 it
// costs 1.0-1.1x, and q = 1 is no slower. Lines prefetched into L1 ahead of
// use hold L1 miss buffers and evict the tile's activation rows; from L2 the
// core's own L1 prefetcher and the loads fetch them in time.
HWY_INLINE void prefetch_l2(const uint8_t* p) { __builtin_prefetch(p, 0, 1); }

// Software prefetch of one pass: at its i-th superchunk, the cache lines of
// [base + i·step, base + (i+1)·step). step 0 = none.
struct Prefetch {
  const uint8_t* base;
  size_t step;
};

// Column chunks. Where one tile takes several passes over a block (AVX2 and
// the other 16-register targets: row groups, on SSE4 also vector parts), each
// pass re-reads the tile's activation rows; over all cols those are kQ·cols·4 bytes (64 KiB
// at kQ = 4, cols = 4096), more than L1, so every pass would stream x from L2
// again (measured on AVX2 with vector-half passes, in cache: q = 4 cost 5.5x
// q = 1 unchunked, 3.7x chunked). Instead all passes of a block run chunk
// by chunk (superchunks [s0, s1)), so the chunk's x rows and weights stay in
// L1, and a pass's accumulators wait in `state` between chunks: a store and a
// reload of fp32 values, which changes no bits. The weights are then consumed
// in one linear stream (block after block, chunk after chunk).
constexpr size_t kChunkXBytes = 16 << 10;  // x bytes of one chunk (all its rows)
constexpr size_t kStateLanes = kLanes;      // floats per (o, r) accumulator in state

// Rows k0..k0+kR-1 of block b × one tile of kQ activation rows, superchunks
// [s0, s1), which must lie in one layout chunk where the layout is chunked
// (the grouped and panel orders never cross one; the block order runs only
// on block-after-block layouts), so they are one run of memory; xr[j]: activation row j; xt[j]: its
// padded tail (superchunk n_full). state: [kQ][kBlockRows][16] floats of the
// tile (row j, block row k at (j·kBlockRows + k)·16), read unless s0 == 0 and
// written unless the pass ends the accumulators; when `last` (s1 == n_super)
// and this pass holds the last vectors, out[k][j] = Y[j][row k0 + k].
template <size_t kR, size_t kQ, size_t kVs, Elem kE>
HWY_INLINE void pass(size_t b, size_t k0, size_t v0,
                     const detail::MatmulArgs& a,
                     const float* const* xr, const float* const* xt, size_t s0, size_t s1,
                     bool last, Prefetch pf, float* HWY_RESTRICT state, float out[kR][kQ]) {
  const DF d;
  const DU du;
  using V = hn::Vec<DF>;
  auto slot = [&](size_t k, size_t j) { return state + (j * kBlockRows + k0 + k) * kStateLanes; };
  V acc[kR][kQ][kVs];  // acc[k][j][v]: lanes [(v0 + v)·N, (v0 + v + 1)·N)
#pragma GCC unroll 16
  for (size_t k = 0; k < kR; ++k)
#pragma GCC unroll 16
    for (size_t j = 0; j < kQ; ++j)
#pragma GCC unroll 16
      for (size_t v = 0; v < kVs; ++v)
        acc[k][j][v] = s0 == 0 ? hn::Zero(d) : hn::Load(d, slot(k, j) + (v0 + v) * kN);

  // One superchunk: 32 cols at offset c of the activation rows in xp. Forced
  // inline: an out-of-line call (g++ declines to inline it at two call sites)
  // would keep the accumulators in memory.
  auto step = [&](const uint8_t* HWY_RESTRICT ws, const float* const* xp,
                  size_t c) __attribute__((always_inline)) {
#pragma GCC unroll 16
    for (size_t v = 0; v < kVs; ++v) {
      const size_t lane0 = (v0 + v) * kN;
      V xlo[kQ], xhi[kQ];
#pragma GCC unroll 16
      for (size_t j = 0; j < kQ; ++j) {
        xlo[j] = hn::LoadU(d, xp[j] + c + lane0);
        xhi[j] = hn::LoadU(d, xp[j] + c + kLanes + lane0);
      }
#pragma GCC unroll 16
      for (size_t k = 0; k < kR; ++k) {
        V wlo, whi;
        if constexpr (kE == Elem::BF16) {
          const auto* p = reinterpret_cast<const uint32_t*>(ws) + (k0 + k) * kLanes + lane0;
          const auto raw = hn::Load(du, p);
          wlo = hn::BitCast(d, hn::ShiftLeft<16>(raw));
          whi = hn::BitCast(d, hn::And(raw, hn::Set(du, 0xFFFF0000u)));
        } else if constexpr (kE == Elem::F16) {  // exact: every half is an fp32 value
          const hn::Rebind<hwy::float16_t, DF> dh;
          const auto* p = reinterpret_cast<const hwy::float16_t*>(ws) + (k0 + k) * kSuper + lane0;
          wlo = hn::PromoteTo(d, hn::LoadU(dh, p));
          whi = hn::PromoteTo(d, hn::LoadU(dh, p + kLanes));
        } else {
          const auto* p = reinterpret_cast<const float*>(ws) + (k0 + k) * kSuper + lane0;
          wlo = hn::Load(d, p);
          whi = hn::Load(d, p + kLanes);
        }
        // Lane order: cols c+lane0+l, then c+16+lane0+l (increasing i per lane).
#pragma GCC unroll 16
        for (size_t j = 0; j < kQ; ++j) acc[k][j][v] = hn::MulAdd(wlo, xlo[j], acc[k][j][v]);
#pragma GCC unroll 16
        for (size_t j = 0; j < kQ; ++j) acc[k][j][v] = hn::MulAdd(whi, xhi[j], acc[k][j][v]);
      }
    }
  };

  const size_t sc_bytes = kBlockRows * kSuper * elem_bytes(kE);  // one superchunk
  const uint8_t* ws = a.sc(b, s0);  // [s0, s1) is one run of memory (see above)
  const uint8_t* pp = pf.base;
  const size_t s_full = std::min(s1, a.n_full);
  size_t s = s0;
  for (; s < s_full; ++s, ws += sc_bytes, pp += pf.step) {
    for (size_t l = 0; l < pf.step; l += 64) prefetch_l2(pp + l);
    step(ws, xr, s * kSuper);
  }
  if (s < s1) step(ws, xt, 0);  // the partial last superchunk

  if (last && kVs == kV) {  // the whole accumulator is here
#pragma GCC unroll 16
    for (size_t k = 0; k < kR; ++k)
#pragma GCC unroll 16
      for (size_t j = 0; j < kQ; ++j) out[k][j] = reduce16(acc[k][j]);
    return;
  }
#pragma GCC unroll 16
  for (size_t k = 0; k < kR; ++k)
#pragma GCC unroll 16
    for (size_t j = 0; j < kQ; ++j)
#pragma GCC unroll 16
      for (size_t v = 0; v < kVs; ++v) hn::Store(acc[k][j][v], d, slot(k, j) + (v0 + v) * kN);
  if (last && v0 + kVs == kV) {  // the last vector's pass sums the lanes
    for (size_t k = 0; k < kR; ++k)
      for (size_t j = 0; j < kQ; ++j) {
        V all[kV];
        for (size_t v = 0; v < kV; ++v) all[v] = hn::Load(d, slot(k, j) + v * kN);
        out[k][j] = reduce16(all);
      }
  }
}

// Prefetch plan of the passes of one chunk: `n` passes in all; pass p covers
// the p-th n-th of [base, base + len), spread over the chunk's `n_sc`
// superchunks. n == 0: none.
struct ChunkPrefetch {
  const uint8_t* base;
  size_t len, n, n_sc;
  Prefetch of(size_t p) const {
    if (n == 0) return {base, 0};
    return {base + p * len / n, std::max<size_t>(1, len / n / n_sc)};
  }
};

// Rows j0..j0+kQ-1 of X against block b, superchunks [s0, s1), all row groups;
// the last chunk writes the valid rows of Y. Its passes are p0, p0 + 1, ...
// of the chunk's plan. state: [kQ][kBlockRows][16], the tile's accumulators.
template <size_t kQ, Elem kE>
//
// nq <= kQ: the tile's real rows; rows nq..kQ-1 repeat row j0 and are not
// written (a padded tile, see run_any_tile). Each output's operations are the
// same in any tile, so padding changes no bits.
HWY_INLINE void run_tile(const detail::MatmulArgs& a, size_t b, size_t j0, size_t s0, size_t s1,
                         const ChunkPrefetch& pf, size_t p0, float* state, size_t nq = kQ) {
  constexpr size_t kR = pass_shape(kQ).rows, kVs = pass_shape(kQ).vecs;
  const float* xr[kQ];
  const float* xt[kQ];
  for (size_t j = 0; j < kQ; ++j) {
    const size_t row = j0 + (j < nq ? j : 0);
    xr[j] = a.x + row * a.x_stride;
    xt[j] = a.xtail ? a.xtail + row * kSuper : nullptr;  // read only if cols % 32
  }
  const size_t o0 = b * kBlockRows, nk = std::min(kBlockRows, a.rows - o0);
  const bool last = s1 == a.n_super;
  for (size_t k0 = 0, p = p0; k0 < nk; k0 += kR) {  // padding-only row groups skipped
    float out[kR][kQ];
    for (size_t v0 = 0; v0 < kV; v0 += kVs, ++p)
      pass<kR, kQ, kVs, kE>(b, k0, v0, a, xr, xt, s0, s1, last, pf.of(p), state, out);
    if (!last) continue;
    for (size_t k = 0; k < kR && k0 + k < nk; ++k)
      for (size_t j = 0; j < nq; ++j) a.y[(j0 + j) * a.y_stride + o0 + k0 + k] = out[k][j];
  }
}

// Where a 4-row tile is one pass (AVX3: kOnePassTiles), a product of
// exactly 2 rows whose weights stream from DRAM runs as a 3-row tile with row
// j0 repeated (MatmulArgs::pad_pair): on Zen 4 the 2-row tile streams from
// DRAM erratically (bf16 1024x1024 median 1.57x q = 1 with a best of 0.88x,
// 8192x1024 1.36-1.59x), the 3-row tile steadily (0.96-1.10x at 1024-8192
// cols). Not the 4-row tile: it needs 32 FMAs (one 512-bit FMA per cycle on
// Zen 4) per 128 bf16 weights, FMA-bound at ~4 weights per cycle, about the
// rate one core streams them: q = 4 costs 1.3-1.4x q = 1 from DRAM, the 3-row
// tile (24 FMAs) 1.02-1.15x; so products of 3 rows, which ran padded to 4
// until session 26, run unpadded (docs/PERFORMANCE.md "Session 26: 3-row
// tiles": q = 3 1.20-1.30 -> 1.02-1.11x, q = 2 1.20-1.30 -> 0.96-1.10x, 1
// thread, 1024-8192 cols). Matrices of at most kPadPairMinBytes keep the
// 2-row tile: such a matrix is usually read from cache (a small model, a
// drafter module), where the 2-row tile costs 1.37x q = 1 against the 3-row
// tile's 1.80x (in L2, 320-4096 cols), and from DRAM the two measured alike.
// 2-byte holds only (fp32 has twice the bytes per FMA; fp16 measured as bf16,
// session 26). Padding changes no bits:
// every output's operations are the same in any tile.
constexpr bool kOnePassTiles = passes_of(4) == 1;

// Tile of rows [j0, j0 + min(4, q - j0)).
template <Elem kE>
HWY_INLINE void run_any_tile(const detail::MatmulArgs& a, size_t b, size_t j0, size_t s0,
                             size_t s1, const ChunkPrefetch& pf, size_t p0, float* state) {
  const size_t n = std::min(kTileQ, a.q - j0);
  if constexpr (kPairTiles) {  // rows j0, j0 + 1, then the rest (their state after)
    if (n == 3 || n == 4) {
      run_tile<2, kE>(a, b, j0, s0, s1, pf, p0, state);
      float* rest = state + 2 * kBlockRows * kStateLanes;
      if (n == 3) return run_tile<1, kE>(a, b, j0 + 2, s0, s1, pf, p0 + passes_of(2), rest);
      return run_tile<2, kE>(a, b, j0 + 2, s0, s1, pf, p0 + passes_of(2), rest);
    }
  }
  switch (n) {
    case 4: return run_tile<4, kE>(a, b, j0, s0, s1, pf, p0, state);
    case 3: return run_tile<3, kE>(a, b, j0, s0, s1, pf, p0, state);
    case 2:
      if (kOnePassTiles && a.pad_pair) return run_tile<3, kE>(a, b, j0, s0, s1, pf, p0, state, 2);
      return run_tile<2, kE>(a, b, j0, s0, s1, pf, p0, state);
    default: return run_tile<1, kE>(a, b, j0, s0, s1, pf, p0, state);
  }
}

static_assert(kGroupBlocks * detail::kMaxStreamTiles * kTileQ * kBlockRows * kStateLanes ==
                  16 * 4 * 4 * 4 * 16,
              "group_state() holds the grouped order's accumulators");

// Passes that tiles [t0, t1) of activation rows take over one chunk of a block.
HWY_INLINE size_t tile_passes(const detail::MatmulArgs& a, size_t t0, size_t t1) {
  size_t n = 0;
  for (size_t t = t0; t < t1; ++t) n += passes_of(std::min(kTileQ, a.q - t * kTileQ));
  return n;
}

// Tiles [t0, t1) against block b over superchunks [s0, s1), with the chunk's
// prefetch plan. state: [(t1 - t0)·4][kBlockRows][16] floats.
template <Elem kE>
HWY_INLINE void chunk_tiles(const detail::MatmulArgs& a, size_t b, size_t t0, size_t t1,
                            size_t s0, size_t s1, const ChunkPrefetch& pf, float* state) {
  for (size_t t = t0, p = 0; t < t1; ++t) {
    float* ts = state + (t - t0) * kTileQ * kBlockRows * kStateLanes;  // tile's rows
    run_any_tile<kE>(a, b, t * kTileQ, s0, s1, pf, p, ts);
    p += passes_of(std::min(kTileQ, a.q - t * kTileQ));
  }
}

// Tiles [t0, t1) against block b, chunk by chunk. `stream`: these passes are
// the first to read the block, so they prefetch ahead in the weight stream
// (one chunk's bytes per chunk, shared out among the passes).
// state: [(t1 - t0)·4][kBlockRows][16] floats.
template <Elem kE>
void block_tiles(const detail::MatmulArgs& a, size_t b, size_t t0, size_t t1, bool stream,
                 float* state) {
  const size_t sc_bytes = kBlockRows * kSuper * elem_bytes(kE);
  const size_t n_passes = tile_passes(a, t0, t1);
  const size_t x_rows = std::min(a.q, t1 * kTileQ) - t0 * kTileQ;
  // Chunks of <= kChunkXBytes of x where a tile takes several passes; else
  // whole rows (one pass per tile reads its x once per block; measured on
  // AVX3, chunking there only adds the state traffic).
  const size_t chunk =
      passes_of(kTileQ) == 1 || n_passes == 1 ? a.n_super
                    : std::max<size_t>(1, kChunkXBytes / (x_rows * kSuper * sizeof(float)));
  for (size_t s0 = 0; s0 < a.n_super; s0 += chunk) {
    const size_t s1 = std::min(a.n_super, s0 + chunk);
    // One pass streams kPrefetchBytes ahead of itself. Several passes share
    // out the prefetch of the next chunk (the next block when unchunked: the
    // passes read all over this one), at least kPrefetchBytes ahead.
    const uint8_t* at = a.sc(b, s0);
    const size_t len = (s1 - s0) * sc_bytes;
    const size_t ahead = n_passes == 1 ? kPrefetchBytes : std::max(len, kPrefetchBytes);
    const ChunkPrefetch pf{at + ahead, len, stream && a.prefetch ? n_passes : 0, s1 - s0};
    chunk_tiles<kE>(a, b, t0, t1, s0, s1, pf, state);
  }
}

// Chunk size of the grouped order (superchunks). Two costs pull apart: x
// rows that outgrow L1 are re-read from L2, and every block-chunk loads and
// stores its accumulators (q·256 bytes per block against chunk·256 bytes of
// bf16 weights). Up to 2 tiles (q <= 8) on AVX3, the largest power of two
// whose x rows (all q) fit kChunkXBytes (a power of two measured faster than
// the exact fit: q = 3, 5..7 at 4096 cols ran ~15 % slower with odd chunks);
// for more rows, and on AVX2 (several passes per tile), the layout's chunk
// (kLayoutChunk; within one chunk where the layout is chunked, so each
// block-chunk is one run of memory). Measured on Zen 4, 1 thread, from
// DRAM, ms (docs/PERFORMANCE.md, issue 14, "Session 22"): AVX2 bf16
// 4096x4096 q = 8 3.75 -> 3.34, q = 16 8.28 -> 6.65; AVX3 q = 16 6.36 ->
// 5.29, 11264x2048 q = 16 9.07 -> 7.29; but AVX3 fp32 4096x4096 q = 5 3.72
// -> 4.96 with the larger chunk (x and a block-chunk of fp32 weights past L1).
inline size_t group_chunk(const detail::MatmulArgs& a) {
  const size_t whole = a.chunked ? detail::kLayoutChunk : std::min(detail::kLayoutChunk, a.n_super);
  if (!kOnePassTiles || a.q > 2 * kTileQ) return whole;
  const size_t fit = std::max<size_t>(1, kChunkXBytes / (a.q * kSuper * sizeof(float)));
  size_t c = 1;
  while (c * 2 <= fit) c *= 2;
  return a.chunked ? std::min(c, detail::kLayoutChunk) : c;
}

// The prefetch plan of block b's chunk [s0, s0 + chunk) in a group of
// n_group blocks read chunk-major: the segment the group reads n_group
// segments later (b's next chunk; after the last chunk, the next group's
// block), shared out among n_passes passes. Off when !on or past the matrix.
inline ChunkPrefetch next_chunk_prefetch(const detail::MatmulArgs& a, size_t b, size_t s0,
                                         size_t chunk, size_t n_group, size_t n_passes, bool on) {
  const size_t sc_bytes = kBlockRows * kSuper * elem_bytes(a.elem);
  const size_t s1 = std::min(a.n_super, s0 + chunk);
  const bool more = s1 < a.n_super;
  const size_t nb = more ? b : b + n_group, ns0 = more ? s1 : 0;
  const size_t ns1 = std::min(a.n_super, ns0 + chunk);
  const bool ok = on && a.prefetch && nb < a.n_blocks;
  return {ok ? a.sc(nb, ns0) : a.w, (ns1 - ns0) * sc_bytes, ok ? n_passes : 0, s1 - s0};
}

// The end of the panel (group of kGroupBlocks) that holds block g0, within b1.
inline size_t panel_end(size_t g0, size_t b1) {
  return std::min(b1, (g0 / kGroupBlocks + 1) * kGroupBlocks);
}

// Blocks [g0, g1), all tiles, chunk-major (see kGroupBlocks): for each column
// chunk, every block of the group, so the chunk's activation rows stay in L1
// across the group. Each block's accumulators wait in its state between
// chunks (a store and reload of fp32 values: no bits change). On a chunked
// layout the weights are one linear stream (a group is a panel); otherwise
// g1 - g0 interleaved streams of one chunk each. Every block-chunk
// prefetches the segment the group reads g1 - g0 segments later (its own next
// chunk; after the last chunk, the next group's block).
// state: [g1 - g0][n_tiles·4][kBlockRows][16] floats.
template <Elem kE>
void group_chunks(const detail::MatmulArgs& a, size_t g0, size_t g1, size_t n_tiles,
                  float* state) {
  const size_t n_passes = tile_passes(a, 0, n_tiles);
  const size_t per_block = n_tiles * kTileQ * kBlockRows * kStateLanes;
  const size_t chunk = group_chunk(a), n_group = g1 - g0;
  for (size_t s0 = 0; s0 < a.n_super; s0 += chunk) {
    const size_t s1 = std::min(a.n_super, s0 + chunk);
    for (size_t b = g0; b < g1; ++b) {
      const ChunkPrefetch pf = next_chunk_prefetch(a, b, s0, chunk, n_group, n_passes, true);
      chunk_tiles<kE>(a, b, 0, n_tiles, s0, s1, pf, state + (b - g0) * per_block);
    }
  }
}

// Prefill (q > 16) on a chunked layout: blocks [g0, g1) of one panel, tiles
// [t0, t1). For each layout chunk, tile after tile, every block of the
// panel: the panel's chunk (16 blocks × 8 KiB bf16, contiguous) stays in L2
// across the tiles and the tile's x chunk (4 rows × 4 KiB) in L1 across the
// blocks; each (block, tile) keeps its accumulators in its own state between
// chunks. The first tile prefetches each block's next chunk. Measured
// (docs/PERFORMANCE.md, issue 14, "Session 22").
constexpr size_t kPrefillTiles = 16;  // 64 rows: 256 KiB of state per panel
template <Elem kE>
void panel_tiles(const detail::MatmulArgs& a, size_t g0, size_t g1, size_t t0, size_t t1) {
  constexpr size_t kTileState = kTileQ * kBlockRows * kStateLanes;  // floats
  thread_local std::vector<float> buf;
  buf.resize(kGroupBlocks * kPrefillTiles * kTileState + 16);
  float* state = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(buf.data()) + 63) & ~uintptr_t(63));
  const size_t n_group = g1 - g0;
  for (size_t s0 = 0; s0 < a.n_super; s0 += detail::kLayoutChunk) {
    const size_t s1 = std::min(a.n_super, s0 + detail::kLayoutChunk);
    for (size_t t = t0; t < t1; ++t)
      for (size_t b = g0; b < g1; ++b) {
        const ChunkPrefetch pf = next_chunk_prefetch(a, b, s0, detail::kLayoutChunk, n_group,
                                                     tile_passes(a, t, t + 1), t == t0);
        chunk_tiles<kE>(a, b, t, t + 1, s0, s1, pf,
                           state + ((b - g0) * (t1 - t0) + (t - t0)) * kTileState);
      }
  }
}

// Output blocks [b0, b1), all q rows. The loop order only changes which
// (block, chunk, tile, row group) runs when, never the arithmetic of an output.
template <Elem kE>
void blocks_impl(const detail::MatmulArgs& a, size_t b0, size_t b1) {
  const size_t block_bytes = a.n_super * kBlockRows * kSuper * elem_bytes(kE);
  const size_t n_tiles = (a.q + kTileQ - 1) / kTileQ;
  HWY_ALIGN float state[detail::kMaxStreamTiles * kTileQ * kBlockRows * kStateLanes];
  if (n_tiles <= detail::kMaxStreamTiles) {
    const size_t x_bytes = a.q * a.n_super * kSuper * sizeof(float);
    // Chunk-major over each panel where the layout is (on every target: read
    // block after block, a chunked layout is a strided stream — measured on
    // AVX2 bf16 4096x4096 q = 2..4 1.3-1.9x slower), and on AVX3 where x
    // outgrows L1 (see kGroupBlocks).
    if (a.chunked || (kOnePassTiles && a.q > 1 && x_bytes > detail::kL1XBytes)) {
      // Groups are the layout's panels (or the part of one in [b0, b1)).
      for (size_t g0 = b0; g0 < b1; g0 = panel_end(g0, b1))
        group_chunks<kE>(a, g0, panel_end(g0, b1), n_tiles, detail::group_state());
      return;
    }
    // Decode / verify: all tiles of a block, chunk by chunk (the chunk stays
    // in L1) while the prefetch keeps DRAM busy.
    for (size_t b = b0; b < b1; ++b) block_tiles<kE>(a, b, 0, n_tiles, true, state);
    return;
  }
  // Prefill on a chunked layout: panel by panel, tiles in batches of
  // kPrefillTiles (see panel_tiles). The order below would read a block's
  // chunks, 8 KiB each at a stride of a panel-chunk (128 KiB at 4096 cols,
  // one L2 set period on Zen 4), and they would evict each other from L2.
  if (a.chunked) {
    for (size_t g0 = b0; g0 < b1; g0 = panel_end(g0, b1))
      for (size_t t0 = 0; t0 < n_tiles; t0 += kPrefillTiles)
        panel_tiles<kE>(a, g0, panel_end(g0, b1), t0, std::min(n_tiles, t0 + kPrefillTiles));
    return;
  }
  // Prefill: groups of blocks that fit in L2; the first tile streams them in,
  // the others re-read them from cache, so X is re-read once per group.
  const size_t group = std::max<size_t>(1, detail::kGroupBytes / block_bytes);
  for (size_t g0 = b0; g0 < b1; g0 += group) {
    const size_t g1 = std::min(b1, g0 + group);
    for (size_t t = 0; t < n_tiles; ++t)
      for (size_t b = g0; b < g1; ++b)
        block_tiles<kE>(a, b, t, t + 1, t == 0, state);
  }
}
static_assert(kTileQ == 4, "run_any_tile handles tiles of 1..4 rows");

// Computes output blocks [b0, b1) for all q rows.
void MatmulBlocks(const detail::MatmulArgs& a, size_t b0, size_t b1) {
  switch (a.elem) {
    case Elem::BF16: return blocks_impl<Elem::BF16>(a, b0, b1);
    case Elem::F16: return blocks_impl<Elem::F16>(a, b0, b1);
    case Elem::F32: return blocks_impl<Elem::F32>(a, b0, b1);
  }
}

}  // namespace mtp::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace mtp::kernels {
HWY_EXPORT(MatmulBlocks);

using detail::kBlockRows;
using detail::kSuper;

namespace detail {
std::atomic<size_t> g_parallel_min_work{kParallelMinWork};
size_t set_parallel_min_work(size_t bytes_times_q) {
  return g_parallel_min_work.exchange(bytes_times_q);
}
namespace {
std::atomic<size_t> g_pad_pair_min_bytes{kPadPairMinBytes};
}  // namespace
size_t set_pad_pair_min_bytes(size_t bytes) { return g_pad_pair_min_bytes.exchange(bytes); }
namespace {
std::atomic<int> g_prefetch_q1{-1};  // -1: by CPU vendor
}  // namespace
bool prefetch_single_row() {
  const int v = g_prefetch_q1.load(std::memory_order_relaxed);
  if (v >= 0) return v != 0;
  static const bool intel = __builtin_cpu_is("intel");  // see matmul.h
  return intel;
}
int set_prefetch_single_row(int mode) { return g_prefetch_q1.exchange(mode); }
}  // namespace detail

namespace {
size_t n_super_of(size_t cols) { return (cols + kSuper - 1) / kSuper; }

// A growable 64-byte-aligned float buffer (one per thread, reused by calls).
class AlignedRows {
 public:
  float* get(size_t n) {
    if (n > cap_) {
      const size_t bytes = (n * sizeof(float) + 63) / 64 * 64;
      auto* p = static_cast<float*>(std::aligned_alloc(64, bytes));
      if (!p) throw std::bad_alloc();
      buf_.reset(p);
      cap_ = n;
    }
    return buf_.get();
  }

 private:
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  std::unique_ptr<float[], Free> buf_;
  size_t cap_ = 0;
};

// fp16 bits of a finite fp32 value; InputError where it is beyond fp16's
// range (it would become infinite: --weights fp16 of an fp32 checkpoint).
uint16_t to_f16_checked(float v, size_t r, size_t c) {
  const uint16_t h = f32_to_f16(v);
  if ((h & 0x7C00) == 0x7C00) {
    fail<InputError>("weight {} at row {}, col {} is outside fp16's range (|x| <= 65504): "
                     "hold this matrix as fp32 or bf16", v, r, c);
  }
  return h;
}

// The kernel element type of a float hold.
detail::Elem elem_of(WeightType hold) {
  return hold == WeightType::BF16 ? detail::Elem::BF16
         : hold == WeightType::F16 ? detail::Elem::F16
                                   : detail::Elem::F32;
}
// Element offset (in held elements) of row r's 32 elements of superchunk s.
size_t piece_index(size_t r, size_t s, size_t n_blocks, size_t n_super, detail::Elem e) {
  const size_t sc = detail::sc_index(r / kBlockRows, s, n_blocks, n_super,
                                     detail::layout_chunked(n_super, e != detail::Elem::F32));
  return (sc * kBlockRows + r % kBlockRows) * kSuper;
}
// Position of col 32s + t within its piece: fp32 and fp16 in order, bf16
// interleaved (the low 16 cols at even u16 slots, the high 16 at odd ones; see top).
size_t piece_slot(size_t t, detail::Elem e) {
  if (e != detail::Elem::BF16) return t;
  return t < 16 ? 2 * t : 2 * (t - 16) + 1;
}
}  // namespace

PackedMatrix PackedMatrix::pack(const void* src, DType st, size_t rows, size_t cols,
                                WeightType hold) {
  if (st != DType::F32 && st != DType::BF16 && st != DType::F16)
    fail<ShapeError>("cannot pack a {} matrix (want F32, BF16 or F16)", dtype_name(st));
  if (weight_type_quantized(hold)) return detail::pack_quantized(src, st, rows, cols, hold);
  PackedMatrix m;
  const detail::Elem e = elem_of(hold);
  const size_t ns = n_super_of(cols), nb = (rows + kBlockRows - 1) / kBlockRows;
  PackedMatrixAccess::set(m, rows, cols, hold, nb * ns * kBlockRows * kSuper * detail::elem_bytes(e));
  uint8_t* dst = PackedMatrixAccess::mut(m);
  std::vector<float> tmp(cols);
  const size_t es = dtype_size(st);
  // An exact copy of the stored bits where the hold is the stored type.
  const bool copy = (e == detail::Elem::BF16 && st == DType::BF16) ||
                    (e == detail::Elem::F16 && st == DType::F16);
  for (size_t r = 0; r < rows; ++r) {
    const uint8_t* s = static_cast<const uint8_t*>(src) + r * cols * es;
    if (!copy) to_f32(s, st, cols, tmp.data());
    for (size_t sc = 0; sc < ns; ++sc) {
      const size_t base = piece_index(r, sc, nb, ns, e), i0 = sc * kSuper;
      const size_t n = std::min(kSuper, cols - i0);
      if (e == detail::Elem::F32) {  // fp32 pieces are cols in order
        std::memcpy(reinterpret_cast<float*>(dst) + base, tmp.data() + i0, n * 4);
        continue;
      }
      auto* d = reinterpret_cast<uint16_t*>(dst) + base;
      for (size_t t = 0; t < n; ++t) {
        uint16_t h;
        if (copy) std::memcpy(&h, s + 2 * (i0 + t), 2);
        else h = e == detail::Elem::BF16 ? f32_to_bf16(tmp[i0 + t]) : to_f16_checked(tmp[i0 + t], r, i0 + t);
        d[piece_slot(t, e)] = h;
      }
    }
  }
  return m;
}

PackedMatrix PackedMatrix::concat_rows(std::vector<PackedMatrix> parts) {
  if (parts.empty()) fail<ShapeError>("concat_rows: no parts");
  if (parts.size() == 1) return std::move(parts[0]);
  PackedMatrix m;
  m.cols_ = parts[0].cols();
  m.hold_ = parts[0].hold();
  for (const auto& p : parts) {
    if (p.cols() != m.cols_)
      fail<ShapeError>("concat_rows: a part has {} columns, the first {}", p.cols(), m.cols_);
    m.rows_ += p.rows();
    m.bytes_ += p.bytes();
  }
  m.parts_ = std::make_shared<const std::vector<PackedMatrix>>(std::move(parts));
  return m;
}

void PackedMatrix::row_f32(size_t r, float* out) const {
  if (parts_) {
    for (const auto& p : *parts_) {
      if (r < p.rows()) return p.row_f32(r, out);
      r -= p.rows();
    }
    fail<ShapeError>("row_f32: row out of range");
  }
  if (weight_type_quantized(hold_)) {
    const GgmlType t = weight_ggml_type(hold_);
    thread_local std::vector<uint8_t> blocks;  // row_f32 runs once per row of a matrix
    blocks.resize(ggml_row_bytes(static_cast<uint32_t>(t), cols_));
    row_blocks(r, blocks.data());
    return dequantize_row(t, blocks.data(), cols_, out);
  }
  const size_t ns = n_super_of(cols_), nb = (rows_ + kBlockRows - 1) / kBlockRows;
  const detail::Elem e = elem_of(hold_);
  for (size_t sc = 0; sc < ns; ++sc) {
    const size_t base = piece_index(r, sc, nb, ns, e), i0 = sc * kSuper;
    for (size_t t = 0; t < std::min(kSuper, cols_ - i0); ++t) {
      const size_t at = base + piece_slot(t, e);
      const auto* h = reinterpret_cast<const uint16_t*>(data_.get());
      out[i0 + t] = e == detail::Elem::BF16  ? bf16_to_f32(h[at])
                    : e == detail::Elem::F16 ? f16_to_f32(h[at])
                                             : reinterpret_cast<const float*>(data_.get())[at];
    }
  }
}

void matmul(const PackedMatrix& w, const float* x, size_t x_stride, size_t q, float* y,
            size_t y_stride, ThreadPool* pool) {
  if (q == 0 || w.rows() == 0) return;
  if (w.is_composite()) {  // each part on its own output rows
    size_t off = 0;
    for (const auto& p : w.parts()) {
      matmul(p, x, x_stride, q, y + off, y_stride, pool);
      off += p.rows();
    }
    return;
  }
  detail::ensure_simd_target();
  if (weight_type_quantized(w.hold())) {
    if (x_stride < w.cols() || y_stride < w.rows())
      fail<ShapeError>("matmul: x_stride {} < cols {} or y_stride {} < rows {}", x_stride,
                       w.cols(), y_stride, w.rows());
    return detail::matmul_grouped(w, x, x_stride, q, y, y_stride, pool);
  }
  // Diagnostic only (drift --verify-kernels blas): not batch-invariant.
  if (q > 1 && backend() == Backend::BlasForBatches) {
    return matmul_blas(w, x, x_stride, q, y, y_stride);
  }
  const size_t cols = w.cols(), ns = n_super_of(cols), nfull = cols / kSuper;
  if (x_stride < cols || y_stride < w.rows())
    fail<ShapeError>("matmul: x_stride {} < cols {} or y_stride {} < rows {}", x_stride, cols,
                     y_stride, w.rows());
  // Activation rows must start on a cache line: every superchunk reads 128
  // bytes of each row, and a row 16 bytes off a line turns each vector load
  // into two (measured on the 1 B target's 11264x2048 bf16 matrix from DRAM,
  // q = 4: 1.45x the q = 1 time with x at a 16-byte offset, 0.95-1.0x
  // aligned). std::vector gives 16-byte alignment only, so such rows are
  // copied (q·cols·4 bytes, small next to the weights) into a 64-byte-aligned
  // buffer with a stride of a multiple of 16 floats. Only addresses change:
  // the values, and so the bits of Y, are the same.
  // Rows whose stride is a multiple of 4 KiB are copied too (q >= 2): their
  // vectors at the same column fall in one L1 set, and q of them plus the
  // weight lines exceed its ways (measured: AVX3 bf16 4096x4096, q = 9..16,
  // 5-10 % faster with the stride padded by one cache line).
  thread_local AlignedRows xcopy;
  const bool aliased = q > 1 && x_stride % 1024 == 0;
  if (reinterpret_cast<uintptr_t>(x) % 64 != 0 || x_stride % 16 != 0 || aliased) {
    size_t stride = (cols + 15) / 16 * 16;
    if (stride % 1024 == 0) stride += 16;
    float* dst = xcopy.get(q * stride);
    for (size_t j = 0; j < q; ++j) std::memcpy(dst + j * stride, x + j * x_stride, cols * 4);
    x = dst;
    x_stride = stride;
  }
  // Zero-padded copies of each row's last partial superchunk: [q, 32]. Reading
  // x past `cols` is never done, so x needs no padding.
  thread_local std::vector<float> xtail;
  const float* tail = nullptr;
  if (nfull < ns) {
    xtail.assign(q * kSuper, 0.f);
    for (size_t j = 0; j < q; ++j)
      std::memcpy(xtail.data() + j * kSuper, x + j * x_stride + nfull * kSuper,
                  (cols - nfull * kSuper) * 4);
    tail = xtail.data();
  }
  const detail::MatmulArgs a{w.data(), w.rows(), cols, ns, nfull,
                             elem_of(w.hold()),
                             x, x_stride, tail, y, y_stride, q,
                             q > 1 || detail::prefetch_single_row(),
                             (w.rows() + kBlockRows - 1) / kBlockRows, detail::layout_chunked(ns, w.hold() != WeightType::F32),
                             q == 2 && w.hold() != WeightType::F32 &&
                                 w.bytes() > detail::g_pad_pair_min_bytes.load(std::memory_order_relaxed)};
  const size_t nb = a.n_blocks;
  auto fn = HWY_DYNAMIC_DISPATCH(MatmulBlocks);
  // Threads only for enough work: kParallelMinWork (128 KiB, measured there);
  // smaller products stay on the calling thread. Which thread computes a
  // block never changes its bits.
  if (pool && pool->size() > 1 &&
      w.bytes() * q > detail::g_parallel_min_work.load(std::memory_order_relaxed)) {
    pool->parallel_for(nb, [&](size_t b0, size_t b1, size_t) { fn(a, b0, b1); }, 1);
  } else {
    fn(a, 0, nb);
  }
}

}  // namespace mtp::kernels
#endif  // HWY_ONCE
