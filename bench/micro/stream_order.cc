// A design experiment, not part of the build: does a one-row bf16 product
// (decode, q = 1) stream at the DRAM rate when rows are long, and would a
// chunk-major packing fix it? (docs/lab/performance-history.md, "Session 21:
// one-row bf16 products stream slower as rows grow".)
//
// The matrix: 32 MiB of bf16 in blocks of 4 rows × cols, each block a run of
// superchunks of 4 rows × 32 cols (256 B), as src/kernels/matmul.cc packs
// them. x: one fp32 row of cols values. Two loop orders over the same bytes:
//   block-major: block after block, each over all its superchunks — today's
//     q = 1 order; x (cols · 4 B) is re-read once per block;
//   chunk-major: groups of G blocks, column chunks of C superchunks, every
//     block of the group per chunk, with the bytes laid out in exactly that
//     order (one linear stream) — the x chunk (C · 128 B) stays in L1 across
//     the group; the accumulators wait in memory between chunks.
// Prints the best of 30 runs of each as GB/s (weights only).
//
// Build and run (one thread; AVX-512 runs where the CPU has it):
//   g++ -O2 -o /tmp/stream_order bench/micro/stream_order.cc
//   for c in 2048 4096 8192; do /tmp/stream_order $c 16 32; done
// A fourth argument `avx2` uses the 256-bit loop on an AVX-512 host.
#include <immintrin.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {
constexpr size_t kScBytes = 256;  // one superchunk: 4 rows × 32 bf16

// acc[r][0..15] += w[r][32 cols] · x[32]: bf16 pairs widened by shift / mask.
__attribute__((target("avx512f"))) void sc512(const uint8_t* w, const float* x, float* acc) {
  const __m512 a = _mm512_load_ps(x), b = _mm512_load_ps(x + 16);
  for (int r = 0; r < 4; ++r) {
    const __m512i v = _mm512_load_si512(w + 64 * r);
    __m512 s = _mm512_load_ps(acc + 16 * r);
    s = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_slli_epi32(v, 16)), a, s);
    s = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32(int(0xFFFF0000)))), b, s);
    _mm512_store_ps(acc + 16 * r, s);
  }
}
__attribute__((target("avx2,fma"))) void sc256(const uint8_t* w, const float* x, float* acc) {
  for (int r = 0; r < 4; ++r) {
    for (int h = 0; h < 2; ++h) {
      const __m256i v = _mm256_load_si256(reinterpret_cast<const __m256i*>(w + 64 * r + 32 * h));
      __m256 s = _mm256_load_ps(acc + 16 * r + 8 * h);
      s = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_slli_epi32(v, 16)), _mm256_load_ps(x + 8 * h), s);
      s = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32(int(0xFFFF0000)))),
                          _mm256_load_ps(x + 16 + 8 * h), s);
      _mm256_store_ps(acc + 16 * r + 8 * h, s);
    }
  }
}

// Accumulators live in a small array the compiler keeps in registers within
// a block's run (both orders pay the same per-superchunk work).
template <class Sc>
double run(Sc sc, const uint8_t* w, const float* x, size_t nb, size_t ns, size_t G, size_t C,
           bool chunk_major, std::vector<float>& y) {
  alignas(64) static float state[64][64];  // [block in group][4 rows × 16 lanes]
  const auto t0 = std::chrono::steady_clock::now();
  if (!chunk_major) {
    for (size_t b = 0; b < nb; ++b) {
      alignas(64) float acc[64] = {};
      const uint8_t* p = w + b * ns * kScBytes;
      for (size_t s = 0; s < ns; ++s, p += kScBytes) sc(p, x + 32 * s, acc);
      for (int r = 0; r < 4; ++r) {
        float t = 0;
        for (int l = 0; l < 16; ++l) t += acc[16 * r + l];
        y[4 * b + r] = t;
      }
    }
  } else {
    const uint8_t* p = w;
    for (size_t g0 = 0; g0 < nb; g0 += G) {
      const size_t g1 = std::min(nb, g0 + G);
      for (size_t c0 = 0; c0 < ns; c0 += C) {
        const size_t c1 = std::min(ns, c0 + C);
        for (size_t b = g0; b < g1; ++b) {
          float* acc = state[b - g0];
          if (c0 == 0) std::fill(acc, acc + 64, 0.f);
          for (size_t s = c0; s < c1; ++s, p += kScBytes) sc(p, x + 32 * s, acc);
          if (c1 < ns) continue;
          for (int r = 0; r < 4; ++r) {
            float t = 0;
            for (int l = 0; l < 16; ++l) t += acc[16 * r + l];
            y[4 * b + r] = t;
          }
        }
      }
    }
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 4 && argc != 5) {
    std::fprintf(stderr, "usage: stream_order COLS G C [avx2] (COLS a multiple of 32; G blocks, C superchunks)\n");
    return 2;
  }
  const size_t cols = size_t(std::atoll(argv[1])), G = size_t(std::atoll(argv[2])),
               C = size_t(std::atoll(argv[3]));
  if (cols == 0 || cols % 32 || G == 0 || G > 64 || C == 0) {
    std::fprintf(stderr, "stream_order: need COLS > 0 a multiple of 32, 1 <= G <= 64, C >= 1\n");
    return 2;
  }
  const size_t ns = cols / 32, nb = (size_t(32) << 20) / (ns * kScBytes), bytes = nb * ns * kScBytes;
  auto* w = static_cast<uint8_t*>(std::aligned_alloc(2 << 20, (bytes + (2 << 20) - 1) / (2 << 20) * (2 << 20)));
  madvise(w, bytes, MADV_HUGEPAGE);
  for (size_t i = 0; i < bytes; ++i) w[i] = uint8_t(i * 7 + 3) & 0x3F;  // small positive bf16
  auto* x = static_cast<float*>(std::aligned_alloc(64, cols * 4));
  for (size_t i = 0; i < cols; ++i) x[i] = 0.001f * float(i % 17);
  std::vector<float> y(4 * nb);
  const bool z = __builtin_cpu_supports("avx512f") && argc == 4;
  double best[2] = {1e9, 1e9};
  for (int rep = 0; rep < 30; ++rep) {
    for (int o = 0; o < 2; ++o) {
      const double s = z ? run(sc512, w, x, nb, ns, G, C, o, y) : run(sc256, w, x, nb, ns, G, C, o, y);
      best[o] = std::min(best[o], s);
    }
  }
  std::printf("%s cols %zu, G %zu, C %zu: block-major %.1f GB/s, chunk-major %.1f GB/s (y[0] %g)\n",
              z ? "AVX-512" : "AVX2", cols, G, C, bytes / best[0] / 1e9, bytes / best[1] / 1e9, y[0]);
}
