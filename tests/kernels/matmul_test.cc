// Tests of the packed weight kernels: packing round trips, batch invariance
// (the bits of Y[r][o] never depend on q, on the other rows, on the thread count
// or on the row order), and accuracy against fp32/double references — on every
// SIMD target the host executes (kernels/simd.h) — plus the cross-target
// contract: avx3 == avx2 and sse4 == scalar bit for bit.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/matmul.h"
#include "kernels/simd.h"
#include "test_util.h"

namespace mtp::kernels {
namespace {

using test::randn;
using test::float_bits;

// Rows of y ([q, y_stride]) must equal `want` ([q, rows]) bit for bit.
void expect_bitwise(const float* y, size_t y_stride, const float* want, size_t q, size_t rows,
                    const char* what) {
  for (size_t r = 0; r < q; ++r)
    for (size_t o = 0; o < rows; ++o)
      ASSERT_EQ(float_bits(y[r * y_stride + o]), float_bits(want[r * rows + o]))
          << what << ": row " << r << " out " << o << " got " << y[r * y_stride + o]
          << " want " << want[r * rows + o];
}

// One-row-at-a-time, single-threaded results: the ground truth for invariance.
std::vector<float> one_by_one(const PackedMatrix& w, const float* x, size_t x_stride, size_t q) {
  std::vector<float> y(q * w.rows());
  for (size_t r = 0; r < q; ++r) matmul(w, x + r * x_stride, x_stride, 1, y.data() + r * w.rows(),
                                        w.rows(), nullptr);
  return y;
}

// Pins the kernels to a SIMD target for one test (restores automatic after).
// Products of any size use the pool's threads here (see BatchInvariance).
class Matmul : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    set_simd_target(GetParam());
    prev_ = detail::set_parallel_min_work(0);
  }
  void TearDown() override {
    set_simd_target("");
    detail::set_parallel_min_work(prev_);
  }
  size_t prev_ = 0;
};
INSTANTIATE_TEST_SUITE_P(Simd, Matmul, ::testing::ValuesIn(available_simd_targets()),
                         [](const auto& info) { return info.param; });

TEST(Pack, RoundTripsHeldValues) {
  std::mt19937 rng(1);
  std::vector<std::pair<size_t, size_t>> shapes;
  for (size_t rows : {1, 3, 4, 9})
    for (size_t cols : {1, 5, 16, 31, 32, 33, 70}) shapes.emplace_back(rows, cols);
  // Rows past 2048 cols are packed chunk-major by panels of 64 rows
  // (matmul.cc): a full and a partial panel, a full and a partial chunk, a
  // partial superchunk; 2048 itself stays block after block.
  for (auto [rows, cols] : {std::pair<size_t, size_t>{70, 2048}, {70, 2049}, {130, 3001}, {9, 4096}})
    shapes.emplace_back(rows, cols);
  for (auto [rows, cols] : shapes) {
    {
      auto f = randn(rows * cols, rng);
      f[0] = -0.f;
      if (f.size() > 2) f[1] = 1e-40f;  // subnormal survives fp32 packing
      std::vector<uint16_t> b(f.size()), h(f.size());
      for (size_t i = 0; i < f.size(); ++i) {
        b[i] = f32_to_bf16(f[i]);
        h[i] = f32_to_f16(f[i]);
      }
      std::vector<float> row(cols);
      auto check = [&](const PackedMatrix& m, auto want_fn, const char* what) {
        ASSERT_EQ(m.rows(), rows);
        ASSERT_EQ(m.cols(), cols);
        for (size_t r = 0; r < rows; ++r) {
          m.row_f32(r, row.data());
          for (size_t i = 0; i < cols; ++i)
            ASSERT_EQ(float_bits(row[i]), float_bits(want_fn(r * cols + i))) << what << " " << r << "," << i;
        }
      };
      using WT = WeightType;
      check(PackedMatrix::pack(f.data(), DType::F32, rows, cols, WT::F32),
            [&](size_t k) { return f[k]; }, "f32->f32");
      check(PackedMatrix::pack(b.data(), DType::BF16, rows, cols, WT::BF16),
            [&](size_t k) { return bf16_to_f32(b[k]); }, "bf16->bf16");
      check(PackedMatrix::pack(f.data(), DType::F32, rows, cols, WT::BF16),
            [&](size_t k) { return bf16_to_f32(f32_to_bf16(f[k])); }, "f32->bf16 (RNE)");
      check(PackedMatrix::pack(h.data(), DType::F16, rows, cols, WT::BF16),
            [&](size_t k) { return round_bf16(f16_to_f32(h[k])); }, "f16->bf16 (RNE)");
      check(PackedMatrix::pack(h.data(), DType::F16, rows, cols, WT::F32),
            [&](size_t k) { return f16_to_f32(h[k]); }, "f16->f32");
      check(PackedMatrix::pack(b.data(), DType::BF16, rows, cols, WT::F32),
            [&](size_t k) { return bf16_to_f32(b[k]); }, "bf16->f32");
    }
  }
}

// The q = 1 software prefetch (on by CPU vendor, matmul.h) only moves data
// into cache early: forced on and off, a q = 1 product gives the same bits.
TEST(Matmul, SingleRowPrefetchChangesNoBits) {
  std::mt19937 rng(41);
  for (WeightType hold : {WeightType::F32, WeightType::BF16, WeightType::Q8_0, WeightType::Q4_0,
                          WeightType::Q4_1, WeightType::Q5_0, WeightType::Q5_1, WeightType::Q4_K,
                          WeightType::Q5_K, WeightType::Q6_K}) {
    const size_t rows = 70, cols = weight_type_quantized(hold) ? 512 : 300;
    const auto w = randn(rows * cols, rng), x = randn(cols, rng);
    const PackedMatrix m = PackedMatrix::pack(w.data(), DType::F32, rows, cols, hold);
    std::vector<float> y0(rows), y1(rows);
    const int prev = detail::set_prefetch_single_row(0);
    matmul(m, x.data(), 1, y0.data(), nullptr);
    detail::set_prefetch_single_row(1);
    EXPECT_TRUE(detail::prefetch_single_row());
    matmul(m, x.data(), 1, y1.data(), nullptr);
    detail::set_prefetch_single_row(prev);
    for (size_t o = 0; o < rows; ++o) ASSERT_EQ(float_bits(y0[o]), float_bits(y1[o])) << "row " << o;
  }
}

TEST(Pack, Bf16RoundsToNearestEven) {
  // 1 + 2^-8 is exactly halfway between bf16 1 and 1 + 2^-7: ties go to even (1).
  float vals[4] = {1.f + 0x1p-8f, 1.f + 3 * 0x1p-8f, -(1.f + 0x1p-8f), 1.f + 0x1p-8f + 0x1p-20f};
  float want[4] = {1.f, 1.f + 0x1p-6f, -1.f, 1.f + 0x1p-7f};
  auto m = PackedMatrix::pack(vals, DType::F32, 1, 4, WeightType::BF16);
  float row[4];
  m.row_f32(0, row);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(row[i], want[i]) << i;
  EXPECT_GE(m.bytes(), 4u * 2);
}

struct Shape {
  size_t rows, cols;
};

// Also splits every product over the pool's threads, however small (the
// default threshold would run these test shapes on one thread).
class BatchInvariance
    : public ::testing::TestWithParam<std::tuple<std::string, WeightType>> {
 protected:
  void SetUp() override {
    set_simd_target(std::get<0>(GetParam()));
    prev_ = detail::set_parallel_min_work(0);
  }
  void TearDown() override {
    set_simd_target("");
    detail::set_parallel_min_work(prev_);
  }
  size_t prev_ = 0;
};

TEST_P(BatchInvariance, RowsNeverDependOnBatchThreadsOrOrder) {
  const WeightType hold = std::get<1>(GetParam());
  std::mt19937 rng(42);
  ThreadPool pool2(2), pool3(3);
  const Shape shapes[] = {{1, 1},   {3, 7},    {4, 16},  {5, 17},  {9, 31},  {13, 32},
                          {17, 33}, {64, 100}, {67, 257}, {30, 512}, {130, 95},
                          {9, 8200},  // blocks > L2 group: several groups for q > 16
                          // x past L1 (the grouped chunk-major order, matmul.cc
                          // kGroupBlocks): more blocks than a group and a partial
                          // group, a partial block and superchunk; 2048 = a 4 KiB
                          // stride in the shuffled subsets (the aliasing copy).
                          {75, 1100}, {70, 2048},
                          // rows past 2048 cols: the chunk-major layout
                          // (matmul.cc sc_index), partial panel and chunk.
                          {70, 2100}};
  for (auto [rows, cols] : shapes) {
    auto wf = randn(rows * cols, rng);
    auto w = PackedMatrix::pack(wf.data(), DType::F32, rows, cols, hold);
    const size_t qmax = 37, xs = cols + 3, ys = rows + 5;
    // Padding past `cols` is NaN: the kernel must never read it.
    std::vector<float> x(qmax * xs, std::nanf(""));
    for (size_t r = 0; r < qmax; ++r) {
      auto v = randn(cols, rng);
      std::copy(v.begin(), v.end(), x.begin() + r * xs);
    }
    const auto want = one_by_one(w, x.data(), xs, qmax);
    for (size_t q = 1; q <= qmax; q = q < 16 ? q + 1 : q + 21) {
      // q = 2 both as the 2-row tile and as the padded 3-row one (AVX3, bf16;
      // by default only for matrices over 1 MiB, larger than these).
      for (size_t pad_min : q == 2 ? std::vector<size_t>{0, SIZE_MAX} : std::vector<size_t>{SIZE_MAX})
        for (ThreadPool* pool : {(ThreadPool*)nullptr, &pool2, &pool3}) {
          const size_t prev_pad = detail::set_pad_pair_min_bytes(pad_min);
          std::vector<float> y((q + 1) * ys, -1.f);  // one row past q
          matmul(w, x.data(), xs, q, y.data(), ys, pool);
          detail::set_pad_pair_min_bytes(prev_pad);
          SCOPED_TRACE(::testing::Message() << rows << "x" << cols << " q=" << q << " threads="
                                            << (pool ? pool->size() : 1) << " pad_min=" << pad_min);
          expect_bitwise(y.data(), ys, want.data(), q, rows, "prefix batch");
          for (size_t r = 0; r <= q; ++r)  // padding of y and the row past q untouched
            for (size_t o = r < q ? rows : 0; o < ys; ++o) ASSERT_EQ(y[r * ys + o], -1.f);
        }
    }
    // Random subsets in random order, sharing the call with different rows.
    for (int trial = 0; trial < 6; ++trial) {
      std::vector<size_t> idx(qmax);
      std::iota(idx.begin(), idx.end(), 0);
      std::shuffle(idx.begin(), idx.end(), rng);
      const size_t q = 1 + rng() % qmax;
      std::vector<float> xq(q * cols), wq(q * rows), y(q * rows);
      for (size_t r = 0; r < q; ++r) {
        std::copy_n(x.begin() + idx[r] * xs, cols, xq.begin() + r * cols);
        std::copy_n(want.begin() + idx[r] * rows, rows, wq.begin() + r * rows);
      }
      matmul(w, xq.data(), q, y.data(), trial % 2 ? &pool2 : nullptr);
      expect_bitwise(y.data(), rows, wq.data(), q, rows, "shuffled subset");
    }
  }
}

// Verify rows over a block-after-block layout (<= 2048 cols) on AVX3 read each
// block's row whole where x fits whole_row_x_bytes(), else in equal chunks
// (matmul.cc group_chunk): both orders, at widths whose rows split unevenly
// into 32-superchunk chunks (1100, 1152, 1280 cols), give the one-row bits.
TEST_P(BatchInvariance, WholeRowAndEqualChunkOrdersGiveTheSameBits) {
  const WeightType hold = std::get<1>(GetParam());
  std::mt19937 rng(11);
  ThreadPool pool2(2);
  for (auto [rows, cols] : {Shape{70, 1100}, Shape{36, 1152}, Shape{40, 1280}}) {
    auto wf = randn(rows * cols, rng);
    auto w = PackedMatrix::pack(wf.data(), DType::F32, rows, cols, hold);
    const size_t qmax = 16;
    auto x = randn(qmax * cols, rng);
    const auto want = one_by_one(w, x.data(), cols, qmax);
    for (size_t budget : {size_t(0), size_t(16) << 10, SIZE_MAX}) {
      const size_t prev = detail::set_whole_row_x_bytes(budget);
      for (size_t q = 2; q <= qmax; ++q)
        for (ThreadPool* pool : {(ThreadPool*)nullptr, &pool2}) {
          std::vector<float> y(q * rows);
          matmul(w, x.data(), q, y.data(), pool);
          SCOPED_TRACE(::testing::Message() << rows << "x" << cols << " q=" << q
                                            << " whole_row_x_bytes=" << budget);
          expect_bitwise(y.data(), rows, want.data(), q, rows, "verify rows");
        }
      detail::set_whole_row_x_bytes(prev);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    SimdHolds, BatchInvariance,
    ::testing::Combine(::testing::ValuesIn(available_simd_targets()),
                       ::testing::Values(WeightType::F32, WeightType::BF16, WeightType::F16)),
    [](const auto& info) {
      return std::get<0>(info.param) + "_" + weight_type_name(std::get<1>(info.param));
    });

TEST_P(Matmul, Bf16AndF16HeldEqualF32HeldOfSameValues) {
  // The reduction order is a function of cols only, not of the held type.
  // fp16 values include subnormals, -0 and the largest finite half (the
  // widening must be exact for every one of them); 2100 cols: the chunked
  // layout of 2-byte holds.
  std::mt19937 rng(7);
  const float specials[] = {-0.0f, 5.96e-8f, -3.1e-5f, 6.1e-5f, 65504.f, -65504.f, 1e-7f};
  for (WeightType hold : {WeightType::BF16, WeightType::F16}) {
    for (auto [rows, cols] : {Shape{5, 45}, Shape{12, 128}, Shape{33, 300}, Shape{9, 2100}}) {
      auto wf = randn(rows * cols, rng);
      for (size_t i = 0; i < wf.size(); i += 7) wf[i] = specials[(i / 7) % 7] * (hold == WeightType::F16 ? 1.f : 1e-3f);
      for (auto& v : wf) v = hold == WeightType::BF16 ? round_bf16(v) : f16_to_f32(f32_to_f16(v));
      auto x = randn(6 * cols, rng, 1e-3f);
      auto a = PackedMatrix::pack(wf.data(), DType::F32, rows, cols, WeightType::F32);
      auto b = PackedMatrix::pack(wf.data(), DType::F32, rows, cols, hold);
      std::vector<float> ya(6 * rows), yb(6 * rows), row(cols);
      for (size_t o = 0; o < rows; ++o) {  // the held values are exactly wf
        b.row_f32(o, row.data());
        ASSERT_EQ(std::memcmp(row.data(), wf.data() + o * cols, cols * 4), 0) << o;
      }
      matmul(a, x.data(), 6, ya.data(), nullptr);
      matmul(b, x.data(), 6, yb.data(), nullptr);
      expect_bitwise(yb.data(), rows, ya.data(), 6, rows,
                     weight_type_name(hold));
    }
  }
}

TEST(Pack, F16HoldRefusesValuesOutsideItsRange) {
  const float w[4] = {1.f, 2.f, 70000.f, 3.f};
  EXPECT_THROW(PackedMatrix::pack(w, DType::F32, 2, 2, WeightType::F16), InputError);
  const float ok[4] = {1.f, 2.f, 65504.f, 3.f};
  EXPECT_NO_THROW(PackedMatrix::pack(ok, DType::F32, 2, 2, WeightType::F16));
}

TEST_P(Matmul, MatchesReferencesWithinRoundingBound) {
  std::mt19937 rng(3);
  for (WeightType hold : {WeightType::F32, WeightType::BF16, WeightType::F16}) {
    for (auto [rows, cols] : {Shape{7, 3}, Shape{33, 129}, Shape{64, 1000}, Shape{9, 4133}}) {
      auto wf = randn(rows * cols, rng, 0.05f);
      auto w = PackedMatrix::pack(wf.data(), DType::F32, rows, cols, hold);
      const size_t q = 5;
      auto x = randn(q * cols, rng);
      std::vector<float> y(q * rows), yr(q * rows), row(cols);
      matmul(w, x.data(), q, y.data(), nullptr);
      matmul_ref(w, x.data(), q, yr.data());
      const double eps = std::numeric_limits<float>::epsilon() / 2;
      for (size_t o = 0; o < rows; ++o) {
        w.row_f32(o, row.data());
        for (size_t r = 0; r < q; ++r) {
          double exact = 0, mag = 0;
          for (size_t i = 0; i < cols; ++i) {
            exact += double(row[i]) * x[r * cols + i];
            mag += std::fabs(double(row[i]) * x[r * cols + i]);
          }
          // Standard forward bound of a length-n fp32 sum: n·u·Σ|w·x|.
          const double bound = double(cols + 1) * eps * mag + 1e-30;
          EXPECT_LE(std::fabs(y[r * rows + o] - exact), bound) << "simd " << o << "," << r;
          EXPECT_LE(std::fabs(yr[r * rows + o] - exact), bound) << "ref " << o << "," << r;
          EXPECT_LE(std::fabs(double(y[r * rows + o]) - yr[r * rows + o]), 2 * bound);
        }
      }
    }
  }
}

// Y of every q = 1..16 (and a prefill-sized q), both holds, 1 and 2 threads,
// shapes with partial blocks and superchunks, on SIMD target `name`.
std::vector<float> cross_target_outputs(const std::string& name) {
  set_simd_target(name);
  const size_t prev = detail::set_parallel_min_work(0);
  std::mt19937 rng(11);
  ThreadPool pool2(2);
  std::vector<float> all;
  for (auto [rows, cols] : {Shape{21, 203}, Shape{8, 64}, Shape{67, 1000}}) {
    auto wf = randn(rows * cols, rng);
    const size_t qmax = 19;
    auto x = randn(qmax * cols, rng);
    for (WeightType hold : {WeightType::F32, WeightType::BF16, WeightType::F16}) {
      auto w = PackedMatrix::pack(wf.data(), DType::F32, rows, cols, hold);
      for (size_t q = 1; q <= qmax; ++q)
        for (ThreadPool* pool : {(ThreadPool*)nullptr, &pool2}) {
          std::vector<float> y(q * rows);
          matmul(w, x.data(), q, y.data(), pool);
          all.insert(all.end(), y.begin(), y.end());
        }
    }
  }
  set_simd_target("");
  detail::set_parallel_min_work(prev);
  return all;
}

bool available(const char* name) {
  const auto v = available_simd_targets();
  return std::find(v.begin(), v.end(), name) != v.end();
}

// Index of the first differing bit pattern, or -1.
long first_difference(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (float_bits(a[i]) != float_bits(b[i])) return long(i);
  return -1;
}

// The 16-lane order is shared by all targets (see matmul.cc): the FMA targets
// (AVX2, AVX3) give identical bits, and so do the ones without FMA.
TEST(CrossTarget, Avx2AndAvx3GiveIdenticalBits) {
  if (!available("avx3") || !available("avx2")) GTEST_SKIP() << "needs avx3 and avx2";
  EXPECT_EQ(first_difference(cross_target_outputs("avx3"), cross_target_outputs("avx2")), -1);
}

TEST(CrossTarget, Sse4AndScalarGiveIdenticalBits) {
  if (!available("sse4")) GTEST_SKIP() << "needs sse4";
  EXPECT_EQ(first_difference(cross_target_outputs("sse4"), cross_target_outputs("scalar")), -1);
}

// Fused and separately rounded multiply-adds are different arithmetic: the
// two groups must not agree by accident (this is what the tests above would
// miss if the override silently ran one target for every name).
TEST(CrossTarget, FmaAndNonFmaTargetsDiffer) {
  if (!available("avx2") || !available("sse4")) GTEST_SKIP() << "needs avx2 and sse4";
  EXPECT_NE(first_difference(cross_target_outputs("avx2"), cross_target_outputs("sse4")), -1);
}

TEST(SimdOverride, NamesTheTargetItRuns) {
  const std::pair<const char*, const char*> want[] = {
      {"avx3", "AVX3"}, {"avx2", "AVX2"}, {"sse4", "SSE4"}, {"scalar", ""}};
  for (auto [name, hwy_name] : want) {
    if (!available(name)) continue;
    set_simd_target(name);
    // AVX3_DL is an AVX3 too; scalar is SCALAR or EMU128 (whichever is compiled).
    const std::string ran = simd_target();
    if (*hwy_name) EXPECT_EQ(ran.rfind(hwy_name, 0), 0u) << name << " ran " << ran;
    else EXPECT_TRUE(ran == "SCALAR" || ran == "EMU128") << name << " ran " << ran;
    EXPECT_EQ(simd_target_request(), name);
    EXPECT_EQ(simd_target_has_fma(), std::string(name) == "avx3" || std::string(name) == "avx2");
  }
  set_simd_target("");
  EXPECT_EQ(simd_target_request(), "");
  EXPECT_EQ(available_simd_targets().back(), "scalar");
}

TEST(SimdOverride, RefusesUnknownNames) {
  try {
    set_simd_target("avx9");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("'avx9'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("avx3, avx2, sse4, scalar"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(simd_target_request(), "");  // unchanged
}

TEST(SimdOverride, RefusesTargetsTheHostCannotRun) {
  std::string missing;
  for (const auto& n : simd_target_names())
    if (!available(n.c_str())) missing = n;
  if (missing.empty()) GTEST_SKIP() << "this host runs every target";
  EXPECT_THROW(set_simd_target(missing), ConfigError);
}

// MTPSPEC_SIMD is read at the first kernel call; a bad value throws at every
// call (never a silent fallback), a good one pins the target.
TEST(SimdOverride, ReadsTheEnvironmentOnce) {
  const std::string before = simd_target();
  ::setenv("MTPSPEC_SIMD", "bogus", 1);
  detail::g_simd_chosen.store(false);
  EXPECT_THROW(simd_target(), InputError);
  float wv[2] = {2.f, 3.f}, x[2] = {5.f, 7.f}, y[1] = {0.f};
  auto w = PackedMatrix::pack(wv, DType::F32, 1, 2, WeightType::F32);
  EXPECT_THROW(matmul(w, x, 1, y, nullptr), InputError);
  ::setenv("MTPSPEC_SIMD", "sse4", 1);
  if (available("sse4")) {
    EXPECT_STREQ(simd_target(), "SSE4");
    ::setenv("MTPSPEC_SIMD", "avx2", 1);  // read once: no effect now
    EXPECT_STREQ(simd_target(), "SSE4");
  }
  ::unsetenv("MTPSPEC_SIMD");
  set_simd_target("");
  EXPECT_EQ(simd_target(), before);
}

TEST_P(Matmul, BitsDoNotDependOnActivationAlignment) {
  // matmul() copies rows that do not start on a 64-byte line into an aligned
  // buffer (a speed matter only): every offset and stride, aligned or not, and
  // a copy buffer grown or reused across calls, must give the same bits.
  std::mt19937 rng(5);
  ThreadPool pool2(2);
  for (auto [rows, cols] : {Shape{13, 48}, Shape{9, 70}, Shape{6, 1030}}) {
    auto wf = randn(rows * cols, rng);
    for (WeightType hold : {WeightType::F32, WeightType::BF16}) {
      auto w = PackedMatrix::pack(wf.data(), DType::F32, rows, cols, hold);
      const size_t q = 5;
      auto xv = randn(q * cols, rng);
      std::vector<float> want(q * rows);
      matmul(w, xv.data(), q, want.data(), nullptr);
      for (size_t stride : {cols, cols + 1, (cols + 15) / 16 * 16 + 16}) {
        for (size_t off = 0; off < 16; ++off) {
          // 64-byte-aligned storage, x at `off` floats past the line.
          std::vector<float> store(q * stride + off + 16, std::nanf(""));
          float* base = store.data();
          while (reinterpret_cast<uintptr_t>(base) % 64) ++base;
          float* x = base + off;
          for (size_t r = 0; r < q; ++r) std::copy_n(xv.begin() + r * cols, cols, x + r * stride);
          for (size_t qq : {q, size_t(1), size_t(3)}) {
            std::vector<float> y(qq * rows, -1.f);
            matmul(w, x, stride, qq, y.data(), rows, off % 2 ? &pool2 : nullptr);
            SCOPED_TRACE(::testing::Message() << rows << "x" << cols << " " << weight_type_name(hold)
                                              << " stride " << stride << " offset " << off
                                              << " q " << qq);
            expect_bitwise(y.data(), rows, want.data(), qq, rows, "aligned vs offset rows");
          }
        }
      }
    }
  }
}

TEST_P(Matmul, EmptyAndTinyCalls) {
  float wv[2] = {2.f, 3.f}, x[2] = {5.f, 7.f}, y[1] = {0.f};
  auto w = PackedMatrix::pack(wv, DType::F32, 1, 2, WeightType::F32);
  matmul(w, x, 0, y, nullptr);  // q = 0: no-op
  EXPECT_EQ(y[0], 0.f);
  matmul(w, x, 1, y, nullptr);
  EXPECT_EQ(y[0], 31.f);
  EXPECT_TRUE(PackedMatrix().empty());
  EXPECT_STRNE(simd_target(), "");
}

TEST_P(Matmul, TargetIsThePinnedOne) { EXPECT_EQ(simd_target_request(), GetParam()); }

}  // namespace
}  // namespace mtp::kernels
