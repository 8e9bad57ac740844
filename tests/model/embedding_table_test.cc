// model::EmbeddingTable over a table stored as ggml blocks (GGUF token_embd is
// often Q4_K / Q6_K): lookup dequantizes one row (the format's values times
// the scale), a tied head packs the blocks as they are, ids outside the
// vocabulary are refused.
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
    const kernels::PackedMatrix head = e.pack(kernels::WeightType::BF16);  // hold ignored: as stored
    EXPECT_EQ(kernels::weight_ggml_type(head.hold()), t);
    std::vector<uint8_t> row(rb);
    for (size_t r = 0; r < vocab; ++r) {
      head.row_blocks(r, row.data());
      ASSERT_EQ(std::memcmp(row.data(), blocks.data() + r * rb, rb), 0) << ggml_type_name(uint32_t(t));
    }
  }
}

TEST(EmbeddingTable, PlainStoragePacksToTheHold) {
  std::mt19937 rng(22);
  const auto f = test::randn(4 * 64, rng);
  EmbeddingTable e{f.data(), DType::F32, 4, 64};
  EXPECT_EQ(e.pack(kernels::WeightType::Q8_0).hold(), kernels::WeightType::Q8_0);
  EXPECT_EQ(e.pack(kernels::WeightType::F32).hold(), kernels::WeightType::F32);
  std::vector<float> got(64);
  e.lookup(2, 1.f, got.data());
  for (size_t i = 0; i < 64; ++i) ASSERT_EQ(got[i], f[2 * 64 + i]);
}

}  // namespace
}  // namespace mtp::model
