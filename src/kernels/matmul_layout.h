// Internal to matmul.cc: the packed layout's constants and the arguments of
// one matmul call, shared by its Highway targets and its packing code
// (target-independent; the layout itself is described at the top of
// matmul.cc, the tiles in matmul_tiles-inl.h).
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>

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
// 2-8 KiB worse; 32 KiB is in the middle (docs/lab/performance-history.md
// "Huge pages and prefetch into L2").
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
// docs/lab/performance-history.md "a Zen 5 host — x chunks kept in L1 across
// blocks". 12 KiB rather than 24: with 24, 2048 cols at q = 2..3 go
// block-major, where the (unpadded) 3-row tile streamed at 1.53x q = 1
// (11264x2048 bf16; chunk-major 1.04-1.15x).
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
// one thread) to 7.2-7.6 ms at 128 or 32 KiB. (With a sleeping worker a
// hand-off would cost a wake-up, 20-50 µs, and pay only from ~1 MiB.)
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
