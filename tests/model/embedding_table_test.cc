// model::EmbeddingTable over a table stored as ggml blocks (GGUF token_embd is
// often Q4_K / Q6_K): lookup dequantizes one row (the format's values times
// the scale), a tied head packs the blocks as they are, ids outside the
// vocabulary are refused; a tied head over it is a packed copy or the table
// read in place as model::TiedHead says.
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
    // The hold is ignored: as stored, packed (packed, mapped) or in place
    // (mapped-blocks).
    for (TiedHead mode : {TiedHead::Packed, TiedHead::Mapped, TiedHead::MappedBlocks}) {
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

}  // namespace
}  // namespace mtp::model
