// Internal to matmul.cc: the register tiles of the float-weight products
// (pass shapes per target, software prefetch, one pass, a tile of 1..4
// activation rows). Included by matmul.cc inside its per-target namespace, once
// per Highway target (foreach_target re-includes the .cc), after the helpers it
// uses (DF, kN, kV, reduce16, the detail constants of matmul_layout.h) — so it
// has no include guard, by design, and is not a header for anyone else.
// NOLINT(build/header_guard)

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
// Zen 4 (docs/lab/performance-history.md "AVX2 tiles of 3 and 4 rows as 2 + 1
// and 2 + 2"), against a 3-row tile (kR = 4, one vector per pass: 12 chains)
// and 4 = 3 + 1: in L2
// (bench-kernels --in-cache 96x4096, bf16) q = 3 0.034 -> 0.030 ms, q = 4
// 0.043 -> 0.038 (q = 2 0.019); from DRAM bf16 4096² q = 3 1.77 -> 1.34 ms,
// q = 4 1.92 -> 1.66, 11264x2048 q = 3 2.61 -> 1.85, q = 4 2.67 -> 2.29;
// fp32 4096² q = 3 4.67 -> 3.28, q = 4 3.78 -> 2.62. (On Zen 5 the 3-row
// tile with 12 chains measured faster than one of kR = 2 with both vectors;
// splitting was not compared there.) Each output keeps its operations.
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
// Measured on a 2-core Zen 4 VM with the weights on huge pages (docs/lab/
// performance-history.md "Huge pages and prefetch into L2"): with L1 prefetches (prefetcht0)
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
// tile (24 FMAs) 1.02-1.15x; so products of 3 rows run unpadded (measured
// against the padded 4-row tile, docs/lab/performance-history.md "3-row
// tiles for q = 2 and 3": q = 3 1.20-1.30 -> 1.02-1.11x, q = 2 1.20-1.30 ->
// 0.96-1.10x, 1 thread, 1024-8192 cols). Matrices of at most kPadPairMinBytes keep the
// 2-row tile: such a matrix is usually read from cache (a small model, a
// drafter module), where the 2-row tile costs 1.37x q = 1 against the 3-row
// tile's 1.80x (in L2, 320-4096 cols), and from DRAM the two measured alike.
// 2-byte holds only (fp32 has twice the bytes per FMA; fp16 measured as
// bf16). Padding changes no bits:
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
