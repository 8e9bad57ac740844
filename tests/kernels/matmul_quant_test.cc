// Quantized weight kernels (kernels/matmul_grouped.cc): on every SIMD target the
// host runs (AVX-512 and AVX2 with and without VNNI where the CPU has it:
// "avx3-novnni", "avx2-novnni"), the kernel gives quant_dot_ref's bits (the contract of
// quant_dot.h), is batch-invariant (q = 1..16, 1 and 2 threads), and is within
// the activation-quantization bound of the fp32 product of the dequantized
// weights; pack_blocks keeps GGUF blocks bit for bit.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/grouped_blocks.h"
#include "kernels/matmul.h"
#include "kernels/quant_blocks.h"
#include "kernels/quant_dot.h"
#include "kernels/simd.h"
#include "test_util.h"

namespace mtp::kernels {
namespace {

constexpr WeightType kQuantTypes[] = {WeightType::Q8_0, WeightType::Q4_0, WeightType::Q4_1,
                                      WeightType::Q5_0, WeightType::Q5_1, WeightType::Q4_K,
                                      WeightType::Q5_K, WeightType::Q6_K};

using test::randn;
using test::float_bits;

// Every SIMD target the host runs, plus "<target>-novnni" (the target's
// kernels without their VNNI instantiations) where the CPU has its VNNI form.
std::vector<std::string> quant_targets() {
  std::vector<std::string> out;
  for (const std::string& t : available_simd_targets()) {
    out.push_back(t);
    const char* hwy_name = t == "avx3" ? "AVX3" : t == "avx2" ? "AVX2" : "";
    if (detail::cpu_has_quant_vnni(hwy_name)) out.push_back(t + "-novnni");
  }
  return out;
}
const std::string kNoVnni = "-novnni";

class QuantMatmul : public ::testing::TestWithParam<std::tuple<std::string, WeightType>> {
 protected:
  void SetUp() override {
    std::string name = std::get<0>(GetParam());
    const bool novnni = name.size() > kNoVnni.size() && name.ends_with(kNoVnni);
    if (novnni) name.resize(name.size() - kNoVnni.size());
    set_simd_target(name);
    detail::set_quant_vnni(!novnni);
    prev_ = detail::set_parallel_min_work(0);  // split every product over the threads
  }
  void TearDown() override {
    set_simd_target("");
    detail::set_quant_vnni(true);
    detail::set_parallel_min_work(prev_);
  }
  WeightType type() const { return std::get<1>(GetParam()); }
  size_t cols() const {  // several blocks, an odd count of 32-blocks
    return detail::act_block(weight_ggml_type(type())) == 256 ? 768 : 224;
  }
  size_t prev_ = 0;
};
INSTANTIATE_TEST_SUITE_P(
    Simd, QuantMatmul,
    ::testing::Combine(::testing::ValuesIn(quant_targets()), ::testing::ValuesIn(kQuantTypes)),
    [](const auto& info) {
      std::string name = std::get<0>(info.param) + "_" + weight_type_name(std::get<1>(info.param));
      std::replace(name.begin(), name.end(), '-', '_');
      return name;
    });

TEST_P(QuantMatmul, EqualsReferenceBitForBit) {
  std::mt19937 rng(11);
  const size_t rows = 37, c = cols(), q = 16;
  auto wf = randn(rows * c, rng);
  auto x = randn(q * c, rng);
  x[5] = 30.f;  // an activation outlier
  const PackedMatrix w = PackedMatrix::pack(wf.data(), DType::F32, rows, c, type());
  ASSERT_EQ(w.hold(), type());
  std::vector<float> y(q * rows);
  matmul(w, x.data(), q, y.data(), nullptr);
  detail::QuantAct act;
  detail::quantize_act(weight_ggml_type(type()), x.data(), c, q, c, act);
  const size_t rb = ggml_row_bytes(static_cast<uint32_t>(weight_ggml_type(type())), c);
  std::vector<uint8_t> wrow(rb);
  for (size_t r = 0; r < q; ++r)
    for (size_t o = 0; o < rows; ++o) {
      w.row_blocks(o, wrow.data());
      const float want = detail::quant_dot_ref(weight_ggml_type(type()), wrow.data(), act, r);
      ASSERT_EQ(float_bits(y[r * rows + o]), float_bits(want)) << "row " << r << " out " << o;
    }
}

// Sets the fp16 scales of every block of type t in `blocks` (d; the K types'
// dmin too) to next(), so that any other bytes make valid blocks.
template <class F>
void set_block_scales(GgmlType t, std::vector<uint8_t>& blocks, F&& next) {
  const size_t bb = ggml_type_info(static_cast<uint32_t>(t)).block_bytes;
  auto put = [&](uint8_t* p) {
    const uint16_t h = f32_to_f16(next());
    std::memcpy(p, &h, 2);
  };
  for (size_t off = 0; off < blocks.size(); off += bb) {
    if (t == GgmlType::Q6_K) {
      put(&blocks[off + 208]);
    } else {
      put(&blocks[off]);
      if (t == GgmlType::Q4_K || t == GgmlType::Q5_K || t == GgmlType::Q4_1 || t == GgmlType::Q5_1)
        put(&blocks[off + 2]);  // dmin / m
    }
  }
}

// matmul of the held `blocks` (w) against q rows x equals quant_dot_ref on the
// GGUF bytes, bit for bit.
void expect_reference_bits(GgmlType t, const PackedMatrix& w, const std::vector<uint8_t>& blocks,
                           const std::vector<float>& x, size_t q) {
  const size_t rows = w.rows(), c = w.cols(), rb = ggml_row_bytes(static_cast<uint32_t>(t), c);
  std::vector<float> y(q * rows);
  matmul(w, x.data(), q, y.data(), nullptr);
  detail::QuantAct act;
  detail::quantize_act(t, x.data(), c, q, c, act);
  for (size_t r = 0; r < q; ++r)
    for (size_t o = 0; o < rows; ++o) {
      const float want = detail::quant_dot_ref(t, blocks.data() + o * rb, act, r);
      ASSERT_EQ(float_bits(y[r * rows + o]), float_bits(want)) << "row " << r << " out " << o;
    }
}

// Random bytes are valid blocks of every type once the fp16 scales are finite:
// every code pattern (Q8_0's −128 too, every 6-bit K scale and min, Q6_K's
// negative scales) against activations at ±127, the extremes of the integer
// ranges the kernels rely on (no saturation, no overflow).
TEST_P(QuantMatmul, RandomBlockBytesEqualReference) {
  std::mt19937 rng(15);
  const GgmlType t = weight_ggml_type(type());
  const size_t rows = 23, c = cols(), q = 7, rb = ggml_row_bytes(static_cast<uint32_t>(t), c);
  std::vector<uint8_t> blocks(rows * rb);
  for (auto& b : blocks) b = static_cast<uint8_t>(rng());
  std::uniform_real_distribution<float> scale(-0.05f, 0.05f);
  set_block_scales(t, blocks, [&] { return scale(rng); });
  const PackedMatrix w = PackedMatrix::pack_blocks(blocks.data(), t, rows, c);
  std::vector<uint8_t> back(rb);  // the held layout gives every bit back
  for (size_t o = 0; o < rows; ++o) {
    w.row_blocks(o, back.data());
    ASSERT_EQ(std::memcmp(back.data(), blocks.data() + o * rb, rb), 0) << "row " << o;
  }
  auto x = randn(q * c, rng);
  for (size_t i = 0; i < x.size(); i += 3) x[i] = x[i] > 0 ? 100.f : -100.f;  // codes ±127
  expect_reference_bits(t, w, blocks, x, q);
}

// Saturated blocks: every code byte one pattern (0xFF: the largest code of
// every type, every scale and min at its largest) against constant
// activations (all codes 127 or all -127) — the integer sums at their bounds,
// where an int16 partial sum that is too long would wrap.
TEST_P(QuantMatmul, SaturatedBlocksEqualReference) {
  const GgmlType t = weight_ggml_type(type());
  const size_t rows = 19, c = cols(), rb = ggml_row_bytes(static_cast<uint32_t>(t), c);
  for (const uint8_t pattern : {uint8_t{0xFF}, uint8_t{0x80}, uint8_t{0x7F}}) {
    std::vector<uint8_t> blocks(rows * rb, pattern);
    set_block_scales(t, blocks, [] { return 0.01f; });
    const PackedMatrix w = PackedMatrix::pack_blocks(blocks.data(), t, rows, c);
    for (const float v : {1.f, -1.f}) {
      SCOPED_TRACE(testing::Message() << "pattern " << int(pattern) << " x " << v);
      expect_reference_bits(t, w, blocks, std::vector<float>(3 * c, v), 3);
    }
  }
}

// quant_dot.h's activation codes, literally: nearbyint(x · 127/amax) per
// block, ties to even (x = amax · (k + 0.5)/127 lands on ties), dx = amax/127.
TEST(QuantAct, CodesAreNearestEvenOfTheScaledValues) {
  std::mt19937 rng(16);
  for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_K}) {
    const size_t c = 512, ab = detail::act_block(t);
    auto x = randn(3 * c, rng);
    for (size_t i = 0; i < x.size(); i += 5) x[i] = (static_cast<float>(rng() % 254) - 126.5f) / 127.f;
    for (size_t b = 0; b < x.size(); b += ab) x[b] = 1.f;  // amax 1 where no larger |x|
    detail::QuantAct act;
    detail::quantize_act(t, x.data(), c, 3, c, act);
    for (size_t r = 0; r < 3; ++r)
      for (size_t b = 0; b < c / ab; ++b) {
        float amax = 0;
        for (size_t i = 0; i < ab; ++i) amax = std::max(amax, std::fabs(x[r * c + b * ab + i]));
        ASSERT_EQ(float_bits(act.drow(r)[b]), float_bits(amax / 127.f));
        for (size_t i = 0; i < ab; ++i) {
          const float v = std::nearbyint(x[r * c + b * ab + i] * (127.f / amax));
          ASSERT_EQ(act.qrow(r)[b * ab + i], static_cast<int8_t>(std::clamp(v, -127.f, 127.f)))
              << "row " << r << " element " << b * ab + i;
        }
      }
  }
}

// The vectorized activation quantization (quant_act.cc) against the scalar
// statement of the contract, every field bit for bit:
// random rows plus blocks of zeros, ties, ±127-code values, negative zero,
// denormals, huge values, an infinity and a NaN (its block's codes follow the
// reference's std::max/std::min: NaN is skipped by amax and coded −127).
TEST_P(QuantMatmul, ActivationQuantizationEqualsReference) {
  std::mt19937 rng(17);
  const GgmlType t = weight_ggml_type(type());
  const size_t c = 1024, ab = detail::act_block(t), q = 5;
  auto x = randn(q * c, rng);
  for (size_t i = 0; i < x.size(); i += 7) x[i] = (static_cast<float>(rng() % 254) - 126.5f) / 127.f;
  for (size_t i = 0; i < ab; ++i) x[i] = 0.f;                        // an all-zero block
  for (size_t i = ab; i < 2 * ab; ++i) x[i] = i % 2 ? -0.f : 1e-40f;  // denormals, −0
  x[2 * ab + 3] = 3e38f;
  x[3 * ab + 1] = std::numeric_limits<float>::infinity();
  x[4 * ab + 5] = x[5 * ab - 1] = std::numeric_limits<float>::quiet_NaN();  // also last in a block
  x[c + 2] = -1e-30f;
  detail::QuantAct got, want;
  detail::quantize_act(t, x.data(), c, q, c, got);
  detail::quantize_act_ref(t, x.data(), c, q, c, want);
  ASSERT_EQ(got.q, want.q);
  ASSERT_EQ(got.xcorr, want.xcorr);
  ASSERT_EQ(got.bsum, want.bsum);
  ASSERT_EQ(got.d.size(), want.d.size());
  for (size_t i = 0; i < got.d.size(); ++i) ASSERT_EQ(float_bits(got.d[i]), float_bits(want.d[i])) << i;
  ASSERT_EQ(got.bsum32, want.bsum32);
}

TEST_P(QuantMatmul, BatchInvariant) {
  std::mt19937 rng(12);
  const size_t rows = 29, c = cols();
  auto wf = randn(rows * c, rng, 0.1f);
  auto x = randn(16 * c, rng);
  const PackedMatrix w = PackedMatrix::pack(wf.data(), DType::F32, rows, c, type());
  std::vector<float> one(16 * rows);
  for (size_t r = 0; r < 16; ++r) matmul(w, x.data() + r * c, 1, one.data() + r * rows, nullptr);
  ThreadPool pool2(2);
  for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2})
    for (size_t q = 1; q <= 16; ++q)
      for (size_t r0 : {size_t(0), 16 - q}) {  // which rows share the call
        std::vector<float> y(q * (rows + 3));
        matmul(w, x.data() + r0 * c, c, q, y.data(), rows + 3, pool);
        for (size_t r = 0; r < q; ++r)
          for (size_t o = 0; o < rows; ++o)
            ASSERT_EQ(float_bits(y[r * (rows + 3) + o]), float_bits(one[(r0 + r) * rows + o]))
                << "q " << q << " r0 " << r0 << " row " << r << " out " << o
                << (pool ? " 2 threads" : " 1 thread");
      }
}

// |y − Σ w·x| <= Σ_blocks dx/2 · Σ|w| (activation rounding) + fp32 rounding
// of both sums ((cols + 64)·2^-23 · Σ|w·x|), w the dequantized weights.
TEST_P(QuantMatmul, WithinActivationBoundOfFp32) {
  std::mt19937 rng(13);
  const size_t rows = 17, c = cols(), q = 3;
  auto wf = randn(rows * c, rng);
  auto x = randn(q * c, rng);
  const PackedMatrix w = PackedMatrix::pack(wf.data(), DType::F32, rows, c, type());
  std::vector<float> y(q * rows), ref(q * rows), wr(c);
  matmul(w, x.data(), q, y.data(), nullptr);
  matmul_ref(w, x.data(), q, ref.data());
  const size_t ab = detail::act_block(weight_ggml_type(type()));
  for (size_t o = 0; o < rows; ++o) {
    w.row_f32(o, wr.data());
    for (size_t r = 0; r < q; ++r) {
      double act = 0, mag = 0;
      for (size_t b = 0; b < c / ab; ++b) {
        double amax = 0, wsum = 0;
        for (size_t i = b * ab; i < (b + 1) * ab; ++i) {
          amax = std::max(amax, std::fabs(double(x[r * c + i])));
          wsum += std::fabs(wr[i]);
          mag += std::fabs(double(wr[i]) * x[r * c + i]);
        }
        act += amax / 127 / 2 * wsum;
      }
      const double tol = act + double(c + 64) * 0x1p-23 * mag;
      EXPECT_LE(std::fabs(double(y[r * rows + o]) - ref[r * rows + o]), tol) << o << "," << r;
    }
  }
}

// Every row's GGUF bytes come back exactly (row_blocks: Q8_0 is held
// rearranged by groups of 16 rows, Q4_0 too, the others as they are), row_f32
// dequantizes them, and pack() with the hold quantizes identically. 37 rows:
// two whole Q8_0 groups and a partial one.
TEST(QuantPack, PackBlocksKeepsBitsAndRowF32Dequantizes) {
  std::mt19937 rng(14);
  for (WeightType wt : kQuantTypes) {
    const GgmlType t = weight_ggml_type(wt);
    const size_t rows = 37, c = 512, rb = ggml_row_bytes(static_cast<uint32_t>(t), c);
    auto wf = randn(rows * c, rng);
    std::vector<uint8_t> blocks(rows * rb);
    for (size_t r = 0; r < rows; ++r) quantize_row(t, wf.data() + r * c, c, blocks.data() + r * rb);
    const PackedMatrix m = PackedMatrix::pack_blocks(blocks.data(), t, rows, c);
    EXPECT_EQ(m.hold(), wt);
    // Held by whole groups of 16 rows (kernels/grouped_blocks.h): Q8_0, Q4_0
    // and Q6_K in their GGUF bytes, Q4_K and Q5_K with their 12 scale bytes
    // unpacked to 16.
    const size_t held_rb = t == GgmlType::Q4_K || t == GgmlType::Q5_K ? rb + 4 * (c / 256) : rb;
    EXPECT_EQ(m.bytes(), 48 * held_rb);
    const PackedMatrix p = PackedMatrix::pack(wf.data(), DType::F32, rows, c, wt);
    std::vector<uint8_t> got_b(rb), got_p(rb);
    std::vector<float> got(c), want(c);
    for (size_t r = 0; r < rows; ++r) {
      m.row_blocks(r, got_b.data());
      ASSERT_EQ(std::memcmp(got_b.data(), blocks.data() + r * rb, rb), 0) << "row " << r;
      p.row_blocks(r, got_p.data());
      ASSERT_EQ(std::memcmp(got_p.data(), blocks.data() + r * rb, rb), 0) << "row " << r;
      m.row_f32(r, got.data());
      dequantize_row(t, blocks.data() + r * rb, c, want.data());
      for (size_t i = 0; i < c; ++i) ASSERT_EQ(float_bits(got[i]), float_bits(want[i]));
    }
  }
  std::vector<float> f(64 * 4, 1.f);
  EXPECT_THROW(PackedMatrix::pack(f.data(), DType::F32, 4, 64, WeightType::BF16).row_blocks(0, nullptr),
               ShapeError);
}

TEST(QuantPack, FallbackHoldsForShortRows) {
  std::mt19937 rng(15);
  auto wf = randn(4 * 96, rng);
  EXPECT_EQ(PackedMatrix::pack(wf.data(), DType::F32, 4, 96, WeightType::Q4_K).hold(), WeightType::Q5_0);
  EXPECT_EQ(PackedMatrix::pack(wf.data(), DType::F32, 4, 96, WeightType::Q6_K).hold(), WeightType::Q8_0);
  EXPECT_EQ(PackedMatrix::pack(wf.data(), DType::F32, 4, 96, WeightType::Q8_0).hold(), WeightType::Q8_0);
  EXPECT_EQ(PackedMatrix::pack(wf.data(), DType::F32, 8, 48, WeightType::Q4_0).hold(), WeightType::BF16);
  std::vector<uint8_t> b(1024);
  EXPECT_THROW(PackedMatrix::pack_blocks(b.data(), GgmlType::Q4_K, 1, 96), ShapeError);
  EXPECT_THROW(PackedMatrix::pack_blocks(b.data(), GgmlType::Q2_K, 1, 256), ShapeError);
  // F16 blocks are held exactly (fp32), F32 and BF16 as they are.
  const uint16_t h[2] = {0x3C01, 0xC000};
  float row[2];
  PackedMatrix::pack_blocks(h, GgmlType::F16, 1, 2).row_f32(0, row);
  EXPECT_EQ(row[0], 1.f + 0x1p-10f);
  EXPECT_EQ(row[1], -2.f);
}

// Q5_0/Q5_1's held fifth bits (grouped_blocks.h): bit j < 4 of byte e is
// element 4j + e's, bit 4 + j element 16 + 4j + e's (worked out from the
// layout comment, element by element), and the permutation is undone.
TEST(QuantPack, FifthBitsHeldByQuad) {
  for (uint32_t i = 0; i < 32; ++i) {  // one element's bit at a time
    const uint32_t w = detail::qh_hold(1u << i);
    const uint32_t e = i % 4, j = i < 16 ? i / 4 : 4 + (i - 16) / 4;
    EXPECT_EQ(w, 1u << (8 * e + j)) << "element " << i;
    EXPECT_EQ(detail::qh_gguf(w), 1u << i) << "element " << i;
  }
  std::mt19937 rng(3);
  for (int r = 0; r < 100; ++r) {
    const uint32_t qh = static_cast<uint32_t>(rng());
    ASSERT_EQ(detail::qh_gguf(detail::qh_hold(qh)), qh);
  }
}

TEST(QuantPack, WeightTypeNamesRoundTrip) {
  for (WeightType t : kQuantTypes) EXPECT_EQ(parse_weight_type(weight_type_name(t)), t);
  EXPECT_EQ(parse_weight_type("bf16"), WeightType::BF16);
  EXPECT_THROW(parse_weight_type("q3_k"), InputError);
  EXPECT_DOUBLE_EQ(weight_type_bytes_per_elem(WeightType::Q4_K), 144.0 / 256);
}

}  // namespace
}  // namespace mtp::kernels

namespace mtp::kernels {
namespace {

// concat_rows: each output row is exactly what its part alone computes
// (so a fused Q4_K/Q6_K wqkv keeps every part's bits and batch invariance).
TEST(ConcatRows, EachPartsRowsAreThePartsOwnBits) {
  const size_t cols = 256;
  std::mt19937 rng(11);
  const std::vector<float> a = test::randn(40 * cols, rng), b = test::randn(24 * cols, rng),
                           x = test::randn(5 * cols, rng);
  PackedMatrix pa = PackedMatrix::pack(a.data(), DType::F32, 40, cols, WeightType::Q4_K);
  PackedMatrix pb = PackedMatrix::pack(b.data(), DType::F32, 24, cols, WeightType::Q6_K);
  std::vector<float> ya(5 * 40), yb(5 * 24), y(5 * 64);
  matmul(pa, x.data(), 5, ya.data(), nullptr);
  matmul(pb, x.data(), 5, yb.data(), nullptr);
  const PackedMatrix c = PackedMatrix::concat_rows({pa, pb});
  ASSERT_TRUE(c.is_composite());
  EXPECT_EQ(c.rows(), 64u);
  EXPECT_EQ(c.bytes(), pa.bytes() + pb.bytes());
  ThreadPool pool(2);
  matmul(c, x.data(), 5, y.data(), &pool);
  for (size_t r = 0; r < 5; ++r) {
    for (size_t o = 0; o < 40; ++o) ASSERT_EQ(test::float_bits(y[r * 64 + o]), test::float_bits(ya[r * 40 + o]));
    for (size_t o = 0; o < 24; ++o) ASSERT_EQ(test::float_bits(y[r * 64 + 40 + o]), test::float_bits(yb[r * 24 + o]));
  }
  std::vector<float> row(cols), want(cols);
  c.row_f32(45, row.data());
  pb.row_f32(5, want.data());
  EXPECT_EQ(row, want);
}

}  // namespace
}  // namespace mtp::kernels
