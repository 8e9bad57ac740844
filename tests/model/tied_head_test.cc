// A tied head read in place from the checkpoint's memory map
// (model::TiedHead, kernels::PackedMatrix::view): `mapped` reads a float table
// the hold keeps exactly without a copy (a GGUF block table stays packed
// unless `mapped-blocks`); in place or packed, every logit of decode and
// verify chunks has the same bits — the property that lets the engine use
// either. A hold that would change the values is refused for `mapped` and
// packed by the default (`auto`).
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "checkpoint_util.h"
#include "core/error.h"
#include "core/ggml_type.h"
#include "gguf_util.h"
#include "kernels/matmul.h"
#include "model/forward.h"
#include "model/loader.h"
#include "model/random_model.h"
#include "model_util.h"
#include "test_util.h"

namespace mtp::model {
namespace {

using kernels::WeightType;
using test::RandomSpec;

LoadedModel load(const std::string& path, Hold hold, TiedHead mode) {
  LoadOptions o;
  o.weights = hold;
  o.tied_head = mode;
  return load_model(path, o);
}

// Decode (chunks of 1) and verify-sized chunks of the same tokens.
void expect_same_logits(const LoadedModel& a, const LoadedModel& b, const std::string& what) {
  std::mt19937 rng(4);
  const auto tokens = test::random_tokens(rng, 20, a.config.vocab);
  const auto decode = test::logits_of(a, tokens, {1});
  EXPECT_EQ(test::first_bit_difference(decode, test::logits_of(b, tokens, {1})), -1)
      << what << ": decode";
  EXPECT_EQ(test::first_bit_difference(decode, test::logits_of(b, tokens, {3, 5, 4})), -1)
      << what << ": verify chunks against decode";
  EXPECT_EQ(test::first_bit_difference(decode, test::logits_of(a, tokens, {7, 2})), -1)
      << what << ": in place, chunks against decode";
}

// Hugging Face checkpoints with tied embeddings in each float dtype: `mapped`
// reads the table in place under every hold that keeps its values.
TEST(TiedHead, HfFloatTableIsReadInPlaceWithThePackedCopysBits) {
  for (auto [arch, dt] : {std::pair{Arch::Gemma4, DType::BF16}, std::pair{Arch::Qwen3, DType::F16},
                          std::pair{Arch::Gemma3, DType::F32}}) {
    RandomSpec s = RandomSpec::for_arch(arch);
    s.tie = true;
    s.dtype = dt;
    const std::string dir = test::random_hf_checkpoint("tied-head", s);
    const std::string what = std::string(arch_name(arch)) + "/" + std::string(dtype_name(dt));
    const LoadedModel packed = load(dir, {}, TiedHead::Packed);
    EXPECT_FALSE(packed.weights.lm_head.is_view()) << what;
    for (Hold hold : {Hold{}, Hold{WeightType::F32}}) {
      const LoadedModel mapped = load(dir, hold, TiedHead::Mapped);
      ASSERT_TRUE(mapped.weights.lm_head.is_view()) << what;
      EXPECT_EQ(mapped.weights.lm_head.data(), mapped.weights.embed.data) << what << ": a copy";
      expect_same_logits(mapped, packed, what);
    }
    // The default (auto) reads it in place too.
    const LoadedModel dflt = load_model(dir, {});
    EXPECT_TRUE(dflt.weights.lm_head.is_view()) << what << ": the default";
    EXPECT_EQ(dflt.weights.lm_head.data(), dflt.weights.embed.data) << what << ": the default";
    // A rounding or requantizing hold is refused in place, and packed by the
    // default.
    const Hold changes = dt == DType::BF16 ? Hold{WeightType::Q8_0} : Hold{WeightType::BF16};
    test::expect_error<ConfigError>([&] { load(dir, changes, TiedHead::Mapped); },
                                    {"tied head", "held as"});
    const LoadedModel rounded = load(dir, changes, TiedHead::Auto);
    EXPECT_FALSE(rounded.weights.lm_head.is_view()) << what << ": auto, held as it changes";
    EXPECT_EQ(rounded.weights.lm_head.hold(), *changes) << what;
  }
}

// GGUF token_embd in block types: packed (mapped too), in place with
// mapped-blocks, the same bits either way.
TEST(TiedHead, GgufBlockTableInPlaceWhenMapped) {
  RandomSpec s = RandomSpec::for_arch(Arch::Llama);
  s.tie = true;
  s.d_model = 256;  // one K-type block per row
  s.head_dim = 64;
  const std::string dir = test::random_hf_checkpoint("tied-head-gguf", s);
  for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q6_K, GgmlType::Q4_K}) {
    const std::string name = ggml_type_name(static_cast<uint32_t>(t));
    const std::string gguf = test::temp_dir("tied-head-gguf") + "/" + name + ".gguf";
    test::GgufConvert opt;
    opt.type_of = [t](const std::string& n) { return n == "token_embd.weight" ? int(t) : -1; };
    test::convert_hf_to_gguf(dir, gguf, opt);
    const LoadedModel packed = load(gguf, {}, TiedHead::Mapped);
    EXPECT_FALSE(packed.weights.lm_head.is_view()) << name;
    EXPECT_FALSE(load_model(gguf, {}).weights.lm_head.is_view()) << name << ": the default";
    const LoadedModel mapped = load(gguf, {}, TiedHead::MappedBlocks);
    ASSERT_TRUE(mapped.weights.lm_head.is_view()) << name;
    EXPECT_EQ(kernels::weight_ggml_type(mapped.weights.lm_head.hold()), t) << name;
    expect_same_logits(mapped, packed, name);
  }
}

// The random targets bench-decode measures (gemma4-e2b's shape, scaled
// down): a bf16 table under an fp32 hold.
TEST(TiedHead, RandomTargetReadsItsTableInPlace) {
  RandomModelSpec spec = random_model_preset("gemma4-e2b");
  spec.d_model = 64, spec.n_layers = 5, spec.n_heads = 2, spec.ffn = 96, spec.vocab = 300;
  spec.max_position = 256, spec.head_dim = 16, spec.global_head_dim = 32, spec.ple_dim = 8;
  spec.kv_shared = 2, spec.window = 8;
  LoadedModel a = random_model(spec, WeightType::F32, 3, TiedHead::Mapped);
  ASSERT_TRUE(a.config.tie_embeddings);
  EXPECT_TRUE(a.weights.lm_head.is_view());
  LoadedModel b = random_model(spec, WeightType::F32, 3, TiedHead::Packed);
  EXPECT_FALSE(b.weights.lm_head.is_view());
  expect_same_logits(a, b, "random gemma4");
  EXPECT_TRUE(random_model(spec, WeightType::F32, 3).weights.lm_head.is_view()) << "the default";
  EXPECT_FALSE(random_model(spec, WeightType::F16, 3).weights.lm_head.is_view())
      << "the default, a hold that rounds the bf16 table";
}

TEST(TiedHead, ModeNames) {
  EXPECT_EQ(LoadOptions{}.tied_head, TiedHead::Auto);
  EXPECT_EQ(parse_tied_head("auto"), TiedHead::Auto);
  EXPECT_EQ(parse_tied_head("packed"), TiedHead::Packed);
  EXPECT_EQ(parse_tied_head("mapped"), TiedHead::Mapped);
  EXPECT_EQ(parse_tied_head("mapped-blocks"), TiedHead::MappedBlocks);
  test::expect_error<InputError>([] { parse_tied_head("copy"); },
                                 {"'copy'", "auto, packed, mapped or mapped-blocks"});
}

}  // namespace
}  // namespace mtp::model
