// SIMD weight-matrix kernels (Highway, runtime dispatch): Y[q, rows] = X[q, cols]·Wᵀ.
//
// Packed layout (target-independent, fixed at pack time):
//   rows are grouped in blocks of kBlockRows = 4 (zero rows pad the last block);
//   cols are grouped in superchunks of kSuper = 32 (zero cols pad the last one).
//   A superchunk of a block (4 rows × 32 cols) is 128 consecutive elements,
//   row k of the block at element 32·k. Superchunks are ordered by panels of
//   kGroupBlocks = 16 blocks; within a panel by column chunks of C
//   superchunks; within a chunk block after block (sc_index, matmul_layout.h). C is
//   kLayoutChunk = 32 for bf16 rows longer than kChunkedMinSuper superchunks
//   and the whole row otherwise, where the order is simply block after block.
//   The loops read the weights in this order (one linear stream, what a
//   memory-bound decode wants): for each chunk every block of the panel, so a
//   chunk of x (C·32 cols) stays in L1 across the panel while its blocks'
//   accumulators wait in memory between chunks. Measured with
//   bench/micro/stream_order.cc (docs/lab/performance-history.md "one-row
//   bf16 products stream slower as rows grow"): a one-row bf16
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

#include <unistd.h>

#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/matmul.h"
#include "kernels/matmul_blas.h"
#include "kernels/matmul_layout.h"
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

// The fixed 16-lane tree sum (reduce16).
#include "kernels/reduce16-inl.h"

// The register tiles (pass, run_tile, run_any_tile).
#include "kernels/matmul_tiles-inl.h"

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
// bf16 weights).
// Chunked layout (a block-chunk must lie in one layout chunk, so it is one
// run of memory): up to 2 tiles (q <= 8) on AVX3, the largest power of two
// whose x rows (all q) fit kChunkXBytes (a power of two measured faster than
// the exact fit: q = 3, 5..7 at 4096 cols ran ~15 % slower with odd chunks);
// for more rows, and on AVX2 (several passes per tile), the layout's chunk.
// Measured on Zen 4, 1 thread, from DRAM, ms (docs/lab/performance-history.md
// "long bf16 rows packed chunk-major"): AVX2 bf16 4096x4096 q = 8 3.75 ->
// 3.34, q = 16 8.28 -> 6.65; AVX3 q = 16 6.36 -> 5.29, 11264x2048 q = 16
// 9.07 -> 7.29; but AVX3 fp32 4096x4096 q = 5 3.72 -> 4.96 with the larger
// chunk (x and a block-chunk of fp32 weights past L1).
// Block-after-block layout (rows of <= 2048 cols; only AVX3 reads it
// chunk-major): the group reads its blocks' chunks as g1 - g0 separate
// streams, so every split costs. Whole rows where all q rows of x fit
// whole_row_x_bytes() (5/8 of L1D); else the rule above in equal chunks: a
// remainder chunk (1280 cols = 32 + 8 superchunks, 1152 = 32 + 4) left the
// weight stream behind. Measured on a Zen 5 VM (48 KiB L1D), bf16 4096xC
// from DRAM, 1 thread, time vs q = 1 (docs/lab/performance-history.md "verify
// rows of 896–2048 cols"): C = 1280 q = 3 1.7-1.9 -> 1.1-1.2, q = 4 1.7-2.1
// -> 1.1-1.3; C = 1152 q = 3, 4 2.2-2.5 -> 1.1-1.3; C = 1536 q = 4 1.6-1.8
// -> 1.2-1.3; C = 1280 q = 5..6 1.5-1.8 -> 1.4-1.5. Whole rows of more x
// (32 KiB and up: 2048 cols at q = 4, 1536 at q = 6) ran slower than chunks
// there.
inline size_t group_chunk(const detail::MatmulArgs& a) {
  const size_t x_bytes = a.q * a.n_super * kSuper * sizeof(float);  // all q rows, whole rows
  if (!a.chunked && x_bytes <= detail::whole_row_x_bytes()) return a.n_super;
  size_t c = detail::kLayoutChunk;
  if (kOnePassTiles && a.q <= 2 * kTileQ) {
    const size_t fit = std::max<size_t>(1, kChunkXBytes / (a.q * kSuper * sizeof(float)));
    c = 1;
    while (c * 2 <= fit && c < detail::kLayoutChunk) c *= 2;
  }
  if (a.chunked || a.n_super <= c) return std::min(c, a.n_super);
  const size_t n = (a.n_super + c - 1) / c;  // equal chunks of at most c
  return (a.n_super + n - 1) / n;
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
// chunks. The first tile prefetches each block's next chunk. Measured:
// docs/lab/performance-history.md "long bf16 rows packed chunk-major".
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
// 5/8 of L1D (sysconf reads CPUID): x that may be one chunk while the
// weights stream through the rest; at least 16 KiB (kChunkXBytes). Measured
// on a 48 KiB L1D (Zen 5; group_chunk): whole rows of up to 30 KiB of x beat
// chunks (1280 cols q = 5..6 1.75-1.86 -> 1.40-1.50, 896 cols q = 7..8
// 1.89-2.10 -> 1.47-1.52), of 32 KiB and more lost (2048 cols q = 4).
size_t default_whole_row_x_bytes() {
  const long l1 = sysconf(_SC_LEVEL1_DCACHE_SIZE);
  const size_t part = l1 > 0 ? std::min<size_t>(size_t(l1) * 5 / 8, 80 << 10) : 0;
  return std::max<size_t>(16 << 10, part);
}
std::atomic<size_t> g_whole_row_x_bytes{default_whole_row_x_bytes()};
}  // namespace
size_t whole_row_x_bytes() { return g_whole_row_x_bytes.load(std::memory_order_relaxed); }
size_t set_whole_row_x_bytes(size_t bytes) { return g_whole_row_x_bytes.exchange(bytes); }
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
}  // namespace

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
  if (weight_type_quantized(w.hold()) || w.is_view()) {
    if (x_stride < w.cols() || y_stride < w.rows())
      fail<ShapeError>("matmul: x_stride {} < cols {} or y_stride {} < rows {}", x_stride,
                       w.cols(), y_stride, w.rows());
    if (w.is_view()) return detail::matmul_view(w, x, x_stride, q, y, y_stride, pool);
    return detail::matmul_grouped(w, x, x_stride, q, y, y_stride, pool);
  }
  // Diagnostic only (drift --verify-kernels blas): not batch-invariant.
  if (q > 1 && backend() == Backend::BlasForBatches) {
    return matmul_blas(w, x, x_stride, q, y, y_stride);
  }
  const size_t cols = w.cols(), ns = detail::n_super_of(cols), nfull = cols / kSuper;
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
                             detail::elem_of(w.hold()),
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
