// Matrices read in place (PackedMatrix::view, kernels/matmul_rows.cc): on
// every SIMD target the host runs, a view gives the bits of a packed copy of
// the same stored values (float types and every ggml block type), for any
// number of activation rows, thread count and row order (batch invariance);
// its rows read back as stored; a view's storage is shared, never copied.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/ggml_type.h"
#include "core/thread_pool.h"
#include "kernels/matmul.h"
#include "kernels/quant_blocks.h"
#include "kernels/simd.h"
#include "test_util.h"

namespace mtp::kernels {
namespace {

using test::float_bits;
using test::randn;

// [rows, cols] stored as `type`: float elements, or ggml blocks our quantizer writes.
std::vector<uint8_t> stored(GgmlType type, size_t rows, size_t cols, std::mt19937& rng) {
  const auto f = randn(rows * cols, rng);
  std::vector<uint8_t> out(rows * ggml_row_bytes(static_cast<uint32_t>(type), cols));
  const size_t rb = out.size() / std::max<size_t>(rows, 1);
  for (size_t r = 0; r < rows; ++r) {
    const float* src = f.data() + r * cols;
    uint8_t* dst = out.data() + r * rb;
    for (size_t i = 0; i < cols; ++i) {
      if (type == GgmlType::F32) {
        std::memcpy(dst + 4 * i, src + i, 4);
      } else if (type == GgmlType::BF16 || type == GgmlType::F16) {
        const uint16_t h = type == GgmlType::BF16 ? f32_to_bf16(src[i]) : f32_to_f16(src[i]);
        std::memcpy(dst + 2 * i, &h, 2);
      }
    }
    if (ggml_type_info(static_cast<uint32_t>(type)).block_elems > 1) quantize_row(type, src, cols, dst);
  }
  return out;
}

void expect_same_bits(const std::vector<float>& got, const std::vector<float>& want, size_t q,
                      size_t rows, size_t ys, const char* what) {
  for (size_t r = 0; r < q; ++r)
    for (size_t o = 0; o < rows; ++o)
      ASSERT_EQ(float_bits(got[r * ys + o]), float_bits(want[r * ys + o]))
          << what << ": row " << r << " out " << o << " view " << got[r * ys + o] << " packed "
          << want[r * ys + o];
}

class MatmulView : public ::testing::TestWithParam<std::tuple<std::string, GgmlType>> {
 protected:
  void SetUp() override {
    set_simd_target(std::get<0>(GetParam()));
    prev_ = detail::set_parallel_min_work(0);  // split every product over the threads
  }
  void TearDown() override {
    set_simd_target("");
    detail::set_parallel_min_work(prev_);
  }
  GgmlType type() const { return std::get<1>(GetParam()); }
  size_t prev_ = 0;
};

constexpr GgmlType kTypes[] = {GgmlType::F32,  GgmlType::BF16, GgmlType::F16,  GgmlType::Q8_0,
                               GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,
                               GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};

INSTANTIATE_TEST_SUITE_P(Simd, MatmulView,
                         ::testing::Combine(::testing::ValuesIn(available_simd_targets()),
                                            ::testing::ValuesIn(kTypes)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" +
                                  ggml_type_name(static_cast<uint32_t>(std::get<1>(info.param)));
                         });

// The view's Y equals the packed copy's bit for bit, at every q, with 1-3
// threads, in any row order; rows of x past cols (NaN) are never read.
TEST_P(MatmulView, GivesThePackedCopysBitsForEveryBatch) {
  const GgmlType t = type();
  const bool blocks = ggml_type_info(static_cast<uint32_t>(t)).block_elems > 1;
  const size_t be = ggml_type_info(static_cast<uint32_t>(t)).block_elems;
  // Float rows: partial superchunks, a single col, rows not a multiple of 4.
  const std::vector<std::pair<size_t, size_t>> shapes =
      blocks ? std::vector<std::pair<size_t, size_t>>{{1, be}, {7, 3 * be}, {37, 2 * be}}
             : std::vector<std::pair<size_t, size_t>>{{1, 1},   {3, 7},    {5, 17},
                                                      {13, 32}, {17, 33},  {67, 257},
                                                      {9, 1100}, {70, 2100}};
  std::mt19937 rng(5);
  ThreadPool pool2(2), pool3(3);
  for (auto [rows, cols] : shapes) {
    const auto data = stored(t, rows, cols, rng);
    const PackedMatrix packed = PackedMatrix::pack_blocks(data.data(), t, rows, cols);
    const PackedMatrix view = PackedMatrix::view(data.data(), t, rows, cols, nullptr);
    ASSERT_TRUE(view.is_view());
    ASSERT_EQ(view.bytes(), data.size());
    const size_t qmax = 19, xs = cols + 3, ys = rows + 2;
    std::vector<float> x(qmax * xs, std::nanf(""));
    for (size_t r = 0; r < qmax; ++r) {
      const auto v = randn(cols, rng);
      std::copy(v.begin(), v.end(), x.begin() + r * xs);
    }
    std::vector<float> want(qmax * ys, -1.f);
    matmul(packed, x.data(), xs, qmax, want.data(), ys, nullptr);
    for (size_t q = 1; q <= qmax; q += q < 9 ? 1 : 5)
      for (ThreadPool* pool : {(ThreadPool*)nullptr, &pool2, &pool3}) {
        SCOPED_TRACE(::testing::Message() << rows << "x" << cols << " q=" << q
                                          << " threads=" << (pool ? pool->size() : 1));
        std::vector<float> y(qmax * ys, -1.f);
        matmul(view, x.data(), xs, q, y.data(), ys, pool);
        expect_same_bits(y, want, q, rows, ys, "prefix batch");
        for (size_t r = 0; r < qmax; ++r)  // y's padding and rows past q untouched
          for (size_t o = r < q ? rows : 0; o < ys; ++o) ASSERT_EQ(y[r * ys + o], -1.f);
      }
    // One row at a time, from the last row back: the same bits.
    std::vector<float> y(qmax * ys, -1.f);
    for (size_t r = qmax; r-- > 0;)
      matmul(view, x.data() + r * xs, xs, 1, y.data() + r * ys, ys, &pool2);
    expect_same_bits(y, want, qmax, rows, ys, "one row at a time");
  }
}

// row_f32 / row_blocks give the stored values back (what draft vocabularies
// and the BLAS diagnostic read), as the packed copy does.
TEST_P(MatmulView, RowsReadBackAsStored) {
  const GgmlType t = type();
  const bool blocks = ggml_type_info(static_cast<uint32_t>(t)).block_elems > 1;
  const size_t rows = 9, cols = blocks ? 2 * ggml_type_info(static_cast<uint32_t>(t)).block_elems : 45;
  std::mt19937 rng(8);
  const auto data = stored(t, rows, cols, rng);
  const PackedMatrix packed = PackedMatrix::pack_blocks(data.data(), t, rows, cols);
  const PackedMatrix view = PackedMatrix::view(data.data(), t, rows, cols, nullptr);
  std::vector<float> a(cols), b(cols);
  for (size_t r = 0; r < rows; ++r) {
    view.row_f32(r, a.data());
    packed.row_f32(r, b.data());
    for (size_t i = 0; i < cols; ++i) ASSERT_EQ(float_bits(a[i]), float_bits(b[i])) << r << "," << i;
    if (!blocks) continue;
    const size_t rb = ggml_row_bytes(static_cast<uint32_t>(t), cols);
    std::vector<uint8_t> got(rb);
    view.row_blocks(r, got.data());
    EXPECT_EQ(0, std::memcmp(got.data(), data.data() + r * rb, rb)) << "row " << r;
  }
}

TEST(MatmulViewStorage, SharesTheOwnersStorageAndKeepsItAlive) {
  auto owner = std::make_shared<std::vector<uint16_t>>(8 * 32, f32_to_bf16(0.5f));
  const void* at = owner->data();
  const PackedMatrix view = PackedMatrix::view(at, GgmlType::BF16, 8, 32, owner);
  EXPECT_EQ(view.data(), static_cast<const uint8_t*>(at));  // no copy
  EXPECT_EQ(view.hold(), WeightType::BF16);
  std::weak_ptr<std::vector<uint16_t>> alive = owner;
  owner.reset();
  EXPECT_FALSE(alive.expired());  // the view holds it
  std::vector<float> x(32, 1.f), y(8);
  matmul(view, x.data(), 1, y.data(), nullptr);
  for (float v : y) EXPECT_EQ(v, 16.f);
}

TEST(MatmulViewStorage, RefusesTypesAndWidthsItCannotRead) {
  std::vector<uint8_t> buf(1024);
  EXPECT_THROW(PackedMatrix::view(buf.data(), GgmlType::Q4_K, 2, 128, nullptr), ShapeError);
  EXPECT_THROW(PackedMatrix::view(buf.data(), static_cast<GgmlType>(4), 2, 32, nullptr),
               ShapeError);  // ggml type 4 (Q4_2) was removed: unsupported
}

}  // namespace
}  // namespace mtp::kernels
