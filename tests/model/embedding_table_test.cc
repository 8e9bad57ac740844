// model::EmbeddingTable over a table stored as ggml blocks (GGUF token_embd is
// often Q4_K / Q6_K): lookup dequantizes one row (the format's values times
// the scale), a tied head packs the blocks as they are, ids outside the
// vocabulary are refused; a tied head over it is a packed copy or the table
// read in place as model::TiedHead says.
#include <fmt/core.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "core/error.h"
#include "kernels/matmul.h"
#include "kernels/quant_blocks.h"
#include "model/weights.h"
#include "test_util.h"

namespace mtp::model {
namespace {

using kernels::WeightType;

TEST(EmbeddingTable, QuantizedRowsLookUpAndPackAsStored) {
  std::mt19937 rng(21);
  const size_t vocab = 7, d = 256;
  for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0,
                     GgmlType::Q5_1, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K}) {
    const size_t rb = ggml_row_bytes(static_cast<uint32_t>(t), d);
    const auto f = test::randn(vocab * d, rng);
    std::vector<uint8_t> blocks(vocab * rb);
    for (size_t r = 0; r < vocab; ++r) kernels::quantize_row(t, f.data() + r * d, d, blocks.data() + r * rb);
    EmbeddingTable e{blocks.data(), DType::F32, vocab, d, t};
    std::vector<float> got(d), want(d);
    for (int32_t id : {0, 3, 6}) {
      e.lookup(id, 2.f, got.data());
      kernels::dequantize_row(t, blocks.data() + size_t(id) * rb, d, want.data());
      for (size_t i = 0; i < d; ++i) ASSERT_EQ(got[i], want[i] * 2.f) << ggml_type_name(uint32_t(t));
    }
    EXPECT_THROW(e.lookup(7, 1.f, got.data()), InputError);
    // The hold is ignored: as stored, packed (auto, packed, mapped) or in
    // place (mapped-blocks).
    for (TiedHead mode : {TiedHead::Auto, TiedHead::Packed, TiedHead::Mapped, TiedHead::MappedBlocks}) {
      const kernels::PackedMatrix head = e.head(kernels::WeightType::BF16, mode, "table");
      EXPECT_EQ(kernels::weight_ggml_type(head.hold()), t);
      EXPECT_EQ(head.is_view(), mode == TiedHead::MappedBlocks);
      std::vector<uint8_t> row(rb);
      for (size_t r = 0; r < vocab; ++r) {
        head.row_blocks(r, row.data());
        ASSERT_EQ(std::memcmp(row.data(), blocks.data() + r * rb, rb), 0) << ggml_type_name(uint32_t(t));
      }
    }
  }
}

TEST(EmbeddingTable, PlainStorageIsReadInPlaceWhereTheHoldKeepsItsValues) {
  std::mt19937 rng(22);
  const auto f = test::randn(4 * 64, rng);
  EmbeddingTable e{f.data(), DType::F32, 4, 64};
  const auto head = [&](WeightType h, TiedHead m) { return e.head(h, m, "table"); };
  EXPECT_EQ(head(WeightType::Q8_0, TiedHead::Packed).hold(), WeightType::Q8_0);
  EXPECT_FALSE(head(WeightType::F32, TiedHead::Packed).is_view());
  EXPECT_TRUE(head(WeightType::F32, TiedHead::Mapped).is_view());
  EXPECT_EQ(head(WeightType::F32, TiedHead::Mapped).data(), e.data);
  EXPECT_THROW(head(WeightType::BF16, TiedHead::Mapped), ConfigError);  // would round
  EXPECT_THROW(head(WeightType::Q8_0, TiedHead::MappedBlocks), ConfigError);
  std::vector<uint16_t> h(4 * 64);
  for (size_t i = 0; i < h.size(); ++i) h[i] = f32_to_bf16(f[i]);
  const EmbeddingTable b{h.data(), DType::BF16, 4, 64};
  EXPECT_TRUE(b.head(WeightType::F32, TiedHead::Mapped, "t").is_view());
  EXPECT_EQ(b.head(WeightType::BF16, TiedHead::Mapped, "t").hold(), WeightType::BF16);
  EXPECT_TRUE(b.head(WeightType::BF16, TiedHead::Mapped, "t").is_view());
  std::vector<float> got(64);
  e.lookup(2, 1.f, got.data());
  for (size_t i = 0; i < 64; ++i) ASSERT_EQ(got[i], f[2 * 64 + i]);
}

// TiedHead::Auto, each branch: in place (a view of the table's own bytes)
// where the hold keeps the stored values, a packed copy (not refused) where
// it changes them.
TEST(EmbeddingTable, AutoReadsInPlaceOnlyWhereTheHoldKeepsTheValues) {
  std::mt19937 rng(23);
  const size_t rows = 4, cols = 256;  // one K-type block per row
  const auto f = test::randn(rows * cols, rng);
  std::vector<uint16_t> bf(rows * cols), hf(rows * cols);
  for (size_t i = 0; i < f.size(); ++i) bf[i] = f32_to_bf16(f[i]), hf[i] = f32_to_f16(f[i]);
  const EmbeddingTable f32{f.data(), DType::F32, rows, cols};
  const EmbeddingTable b16{bf.data(), DType::BF16, rows, cols};
  const EmbeddingTable f16{hf.data(), DType::F16, rows, cols};
  struct Case {
    const EmbeddingTable* table;
    Hold hold;
    bool in_place;
    WeightType held;
  };
  const Case cases[] = {
      {&b16, Hold{}, true, WeightType::BF16},  // as stored
      {&b16, WeightType::BF16, true, WeightType::BF16},
      {&b16, WeightType::F32, true, WeightType::BF16},  // in place: the stored type
      {&b16, WeightType::F16, false, WeightType::F16},  // rounds
      {&b16, WeightType::Q4_K, false, WeightType::Q4_K},
      {&b16, WeightType::Q8_0, false, WeightType::Q8_0},
      {&f16, Hold{}, true, WeightType::F16},
      {&f16, WeightType::F32, true, WeightType::F16},
      {&f16, WeightType::BF16, false, WeightType::BF16},
      {&f32, Hold{}, true, WeightType::F32},
      {&f32, WeightType::BF16, false, WeightType::BF16},
  };
  for (const Case& c : cases) {
    const std::string what = fmt::format("{} held as {}", dtype_name(c.table->dtype),
                                         c.hold ? kernels::weight_type_name(*c.hold) : "stored");
    const kernels::PackedMatrix h = c.table->head(c.hold, TiedHead::Auto, "table");
    EXPECT_EQ(h.is_view(), c.in_place) << what;
    EXPECT_EQ(h.hold(), c.held) << what;
    if (c.in_place) EXPECT_EQ(h.data(), c.table->data) << what;
    if (!c.in_place) {  // the explicit mode still refuses it
      EXPECT_THROW(c.table->head(c.hold, TiedHead::Mapped, "table"), ConfigError) << what;
      EXPECT_FALSE(c.table->head(c.hold, TiedHead::Packed, "table").is_view()) << what;
    }
  }
}

}  // namespace
}  // namespace mtp::model
