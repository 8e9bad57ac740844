// Qwen3.5 checkpoints: the config's layer kinds and Gated DeltaNet shape, the
// native MTP head's tensors, the multimodal layout (its tower never read), a
// GGUF as llama.cpp's converter writes it (value heads reordered, ssm_a,
// 1 + w norms, the head as block n_layers' nextn tensors) against the
// reference, bad configs and tensors refused naming the field, the
// mixture-of-experts variants refused, the recurrent state's memory.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include <nlohmann/json.hpp>

#include "checkpoint_util.h"
#include "core/error.h"
#include "core/ggml_type.h"
#include "gguf_util.h"
#include "model/forward.h"
#include "model/hf_config.h"
#include "model/loader.h"
#include "model_util.h"
#include "qwen35_reference.h"
#include "ref_compare.h"
#include "test_util.h"

using nlohmann::json;

namespace mtp::model {
namespace {

using test::RandomSpec;

RandomSpec qwen35() { return RandomSpec::for_arch(Arch::Qwen35); }

TEST(Qwen35Load, ConfigGivesEachLayerItsKind) {
  RandomSpec s = qwen35();
  s.mtp = true;
  const ModelConfig c = parse_hf_config(test::hf_config_json(s), nullptr);
  EXPECT_EQ(c.arch, Arch::Qwen35);
  ASSERT_EQ(c.layers.size(), 4u);
  for (int l = 0; l < 4; ++l) EXPECT_EQ(c.layers[size_t(l)].recurrent, l != 3) << l;
  EXPECT_EQ(c.linear, (LinearAttn{4, 2, 4, 8, 8, false}));
  EXPECT_EQ(c.rope_rotary_dim, 8);  // 0.25 of head_dim 32
  EXPECT_EQ(c.rope_theta, 1e7f);
  EXPECT_TRUE(c.attn_gate && c.qk_norm && c.norm_one_plus);
  EXPECT_EQ(c.mtp_layers, 1);
  // Without layer_types: every full_attention_interval-th layer is full;
  // the linear_* keys and partial_rotary_factor take Qwen3_5TextConfig's
  // defaults.
  s.n_layers = 6;
  s.config_patch = {{"layer_types", nullptr}, {"full_attention_interval", 3},
                    {"linear_num_value_heads", nullptr}, {"linear_key_head_dim", nullptr},
                    {"rope_parameters", {{"rope_theta", 1e6}}}};
  const ModelConfig d = parse_hf_config(test::hf_config_json(s), nullptr);
  for (int l = 0; l < 6; ++l) EXPECT_EQ(d.layers[size_t(l)].recurrent, (l + 1) % 3 != 0) << l;
  EXPECT_EQ(d.linear.v_heads, 32);
  EXPECT_EQ(d.linear.k_dim, 128);
  EXPECT_EQ(d.rope_rotary_dim, 8);
  EXPECT_EQ(d.rope_theta, 1e6f);
}

TEST(Qwen35Load, NativeHeadAndNestedLayout) {
  RandomSpec s = qwen35();
  s.mtp = true;
  s.nested_text_config = true;
  // The tower is never read: a NaN there changes nothing.
  s.edit = [](const std::string& name, std::vector<int64_t>&, std::vector<float>& v) {
    if (name.starts_with("model.visual.")) v[0] = NAN;
  };
  const LoadedModel lm = load_model(test::random_hf_checkpoint("q35-load-mm", s), {});
  EXPECT_TRUE(lm.weights.mtp.present());
  EXPECT_EQ(lm.weights.mtp.fc.rows(), size_t(s.d_model));
  EXPECT_EQ(lm.weights.mtp.fc.cols(), size_t(2 * s.d_model));
  // A checkpoint saved without the head (transformers drops mtp.*) loads without it.
  s.mtp = false;
  s.config_patch = {{"mtp_num_hidden_layers", 1}};
  EXPECT_FALSE(load_model(test::random_hf_checkpoint("q35-load-nohead", s), {}).weights.mtp.present());
}

// llama.cpp's GGUF of a checkpoint whose value heads outnumber its key heads
// (reordered to its tiled order, out_proj's columns too): the engine on the
// GGUF against the reference on the checkpoint, within the tolerance; the
// head as block n_layers.
TEST(Qwen35Load, GgufWithReorderedValueHeadsMatchesTheReference) {
  RandomSpec s = qwen35();
  s.mtp = true;
  const std::string dir = test::random_hf_checkpoint("q35-gguf", s);
  const std::string gguf = test::temp_dir("q35-gguf") + "/m.gguf";
  test::convert_hf_to_gguf(dir, gguf, {});
  const LoadedModel lm = load_model(gguf, {});
  EXPECT_TRUE(lm.config.linear.v_tiled);
  EXPECT_EQ(lm.config.n_layers, 4);
  EXPECT_EQ(lm.config.mtp_layers, 1);
  EXPECT_TRUE(lm.weights.mtp.present());
  std::mt19937 rng(3);
  const auto toks = test::random_tokens(rng, 12, lm.config.vocab);
  const std::vector<float> got = test::logits_of(lm, toks, {1, 4, 7});
  const test::Q35Out ref = test::q35_reference(dir, toks);
  test::RefComparison cmp;
  test::compare_ref_rows(got, ref.logits, 96, 4, "gguf logits", cmp);
  EXPECT_LE(cmp.worst_ratio, 1.0) << cmp.where;
  // Read as Hugging Face's order instead, the file computes something else.
  test::Q35Perturb tiled;
  tiled.tiled_heads = true;
  test::RefComparison wrong;
  test::compare_ref_rows(got, test::q35_reference(dir, toks, tiled).logits, 96, 4, "", wrong);
  EXPECT_GT(wrong.worst_ratio, 1.0);
}

// A layer pattern off the interval rule (layer_types, as `pretrain --arch
// qwen35` writes: the last layer full too) reaches the GGUF as
// attention.recurrent_layers, which the loader follows: the same kinds as
// the checkpoint, logits within the reference's tolerance; a flag list of
// another length is refused naming the key.
TEST(Qwen35Load, GgufRecurrentLayersOverTheInterval) {
  RandomSpec s = qwen35();
  s.mtp = true;
  s.layer_types = {"linear_attention", "full_attention", "linear_attention", "full_attention"};
  const std::string dir = test::random_hf_checkpoint("q35-gguf-kinds", s);
  const std::string gguf = test::temp_dir("q35-gguf-kinds") + "/m.gguf";
  test::convert_hf_to_gguf(dir, gguf, {});
  const LoadedModel lm = load_model(gguf, {});
  for (int l = 0; l < 4; ++l) EXPECT_EQ(lm.config.is_recurrent(l), l % 2 == 0) << l;
  std::mt19937 rng(5);
  const auto toks = test::random_tokens(rng, 12, lm.config.vocab);
  const test::Q35Out ref = test::q35_reference(dir, toks);
  test::RefComparison cmp;
  test::compare_ref_rows(test::logits_of(lm, toks, {1, 4, 7}), ref.logits, 96, 4, "gguf logits",
                         cmp);
  EXPECT_LE(cmp.worst_ratio, 1.0) << cmp.where;
  test::GgufConvert bad;
  bad.edit = [](io::GgufMetadata& kv, std::vector<io::GgufWriteTensor>&) {
    for (auto& [k, v] : kv) {
      if (k == "qwen35.attention.recurrent_layers") v.arr.pop_back();
    }
  };
  const std::string short_flags = test::temp_dir("q35-gguf-kinds-bad") + "/m.gguf";
  test::convert_hf_to_gguf(dir, short_flags, bad);
  test::expect_error<ConfigError>([&] { load_model(short_flags, {}); },
                                  {"qwen35.attention.recurrent_layers", "4 entries"});
}

// Quantized GGUF copies (every matrix Q8_0, or Q4_K; as many value heads
// as key heads so the converter keeps their order) compute what the HF
// checkpoint requantized at load computes, bit for bit, the head included.
TEST(Qwen35Load, QuantizedGgufEqualsTheRequantizedCheckpoint) {
  RandomSpec s = qwen35();  // widths of 256: the K types hold as themselves
  s.d_model = 256, s.ffn = 256, s.n_heads = 4, s.n_kv_heads = 2, s.head_dim = 64;
  s.lin_k_heads = s.lin_v_heads = 2, s.lin_k_dim = 64, s.lin_v_dim = 128;
  s.mtp = true;
  const std::string dir = test::random_hf_checkpoint("q35-gguf-q", s);
  std::mt19937 rng(4);
  for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_K}) {
    SCOPED_TRACE(ggml_type_name(uint32_t(t)));
    const std::string gguf = test::temp_dir("q35-gguf-q") + "/m.gguf";
    test::GgufConvert opt;
    opt.matrix_type = uint32_t(t);
    opt.type_of = [](const std::string& n) { return n.find("token_embd") != std::string::npos ? 0 : -1; };
    test::convert_hf_to_gguf(dir, gguf, opt);
    const Hold hold = t == GgmlType::Q8_0 ? kernels::WeightType::Q8_0 : kernels::WeightType::Q4_K;
    const LoadedModel g = load_model(gguf, {hold}), h = load_model(dir, {hold});
    EXPECT_EQ(g.weights.layers[0].w_lin_in.hold(), *hold);
    EXPECT_EQ(g.weights.mtp.fc.hold(), *hold);
    const auto toks = test::random_tokens(rng, 10, s.vocab);
    EXPECT_EQ(test::first_bit_difference(test::logits_of(g, toks, {3, 1, 6}),
                                         test::logits_of(h, toks, {3, 1, 6})), -1);
  }
}

// Config values the tensors contradict, and impossible values, name the field.
TEST(Qwen35Load, BadShapesAreRefusedNamingTheField) {
  auto refused = [](RandomSpec s, std::initializer_list<std::string> parts) {
    const std::string dir = test::random_hf_checkpoint("q35-bad", s);
    test::expect_error<ConfigError>([&] { load_model(dir, {}); }, parts);
  };
  RandomSpec s = qwen35();
  s.config_patch = {{"linear_conv_kernel_dim", 3}};
  refused(s, {"linear_conv_kernel_dim = 3", "conv1d.weight", "4 taps"});
  s.config_patch = {{"linear_num_value_heads", 2}};
  refused(s, {"linear_num_value_heads = 2", "A_log", "4 heads"});
  s.config_patch = {{"linear_value_head_dim", 4}};
  refused(s, {"linear_value_head_dim = 4", "norm.weight", "8"});
  s.config_patch = {{"linear_num_key_heads", 4}};
  refused(s, {"linear_num_key_heads 4", "in_proj_qkv", "which has 64"});
  s.config_patch = {{"head_dim", 16}};
  refused(s, {"head_dim = 16", "q_proj", "query and gate"});
  // Impossible on their own.
  auto bad_config = [](const json& patch, std::initializer_list<std::string> parts) {
    RandomSpec s = qwen35();
    s.config_patch = patch;
    test::expect_error<ConfigError>([&] { parse_hf_config(test::hf_config_json(s), nullptr); }, parts);
  };
  bad_config({{"linear_num_value_heads", 3}}, {"linear_num_value_heads 3", "not a multiple",
                                               "linear_num_key_heads 2"});
  bad_config({{"linear_conv_kernel_dim", 0}}, {"linear_conv_kernel_dim", "1..64", "0"});
  bad_config({{"linear_num_value_heads", 4096}, {"linear_key_head_dim", 4096},
              {"linear_value_head_dim", 4096}, {"linear_num_key_heads", 4096}},
             {"recurrent state of", "2^28"});
  bad_config({{"layer_types", {"linear_attention", "sliding_attention", "full_attention",
                               "full_attention"}}},
             {"unsupported layer type", "sliding_attention"});
  bad_config({{"num_experts", 256}}, {"num_experts = 256", "mixture-of-experts"});
}

// The same for a GGUF: an ssm.* key its tensors contradict names the key.
TEST(Qwen35Load, GgufKeysTheTensorsContradictAreRefusedNamingTheKey) {
  const std::string dir = test::random_hf_checkpoint("q35-gguf-bad", qwen35());
  auto refused = [&](const char* key, uint32_t value, std::initializer_list<std::string> parts) {
    const std::string gguf = test::temp_dir("q35-gguf-bad") + "/m.gguf";
    test::GgufConvert opt;
    opt.edit = [&](io::GgufMetadata& kv, std::vector<io::GgufWriteTensor>&) {
      for (auto& [k, v] : kv) {
        if (k == key) v = io::GgufValue::u32(value);
      }
    };
    test::convert_hf_to_gguf(dir, gguf, opt);
    test::expect_error<ConfigError>([&] { load_model(gguf, {}); }, parts);
  };
  refused("qwen35.ssm.conv_kernel", 3, {"qwen35.ssm.conv_kernel = 3", "ssm_conv1d", "4 taps"});
  refused("qwen35.ssm.time_step_rank", 2, {"qwen35.ssm.time_step_rank = 2", "ssm_a", "4 heads"});
  refused("qwen35.ssm.state_size", 4, {"qwen35.ssm.state_size 4", "attn_qkv", "which has 64"});
  // Several MTP layers (vLLM would run layer k mod n at draft step k): refused.
  const std::string gguf = test::temp_dir("q35-gguf-bad") + "/mtp2.gguf";
  test::GgufConvert opt;
  opt.edit = [&](io::GgufMetadata& kv, std::vector<io::GgufWriteTensor>&) {
    std::erase_if(kv, [](const auto& e) { return e.first == "qwen35.nextn_predict_layers"; });
    kv.push_back({"qwen35.nextn_predict_layers", io::GgufValue::u32(2)});
  };
  test::convert_hf_to_gguf(dir, gguf, opt);
  test::expect_error<ConfigError>([&] { load_model(gguf, {}); },
                                  {"qwen35.nextn_predict_layers = 2", "1 layer"});
}

TEST(Qwen35Load, MixtureOfExpertsVariantsAreRefused) {
  for (const char* arch : {"Qwen3_5MoeForCausalLM", "Qwen3_5MoeForConditionalGeneration"}) {
    json c = test::hf_config_json(qwen35());
    c["architectures"] = {arch};
    c["num_experts"] = 256;
    test::expect_error<ConfigError>([&] { parse_hf_config(c, nullptr); },
                                    {"num_experts = 256", arch, "not supported"});
  }
}

// The published Qwen/Qwen3.5-0.8B config.json (its text and top-level keys;
// the vision tower's config abridged) parses to the shapes docs/FORMATS.md
// lists.
TEST(Qwen35Load, PublishedConfigOfThe08BParses) {
  json layer_types = json::array();
  for (int i = 0; i < 24; ++i) layer_types.push_back(i % 4 == 3 ? "full_attention" : "linear_attention");
  const json config = {
      {"architectures", {"Qwen3_5ForConditionalGeneration"}},
      {"model_type", "qwen3_5"},
      {"tie_word_embeddings", true},
      {"image_token_id", 248056},
      {"text_config",
       {{"attention_bias", false}, {"attention_dropout", 0.0}, {"attn_output_gate", true},
        {"dtype", "bfloat16"}, {"eos_token_id", 248044}, {"full_attention_interval", 4},
        {"head_dim", 256}, {"hidden_act", "silu"}, {"hidden_size", 1024},
        {"initializer_range", 0.02}, {"intermediate_size", 3584}, {"layer_types", layer_types},
        {"linear_conv_kernel_dim", 4}, {"linear_key_head_dim", 128},
        {"linear_num_key_heads", 16}, {"linear_num_value_heads", 16},
        {"linear_value_head_dim", 128}, {"mamba_ssm_dtype", "float32"},
        {"max_position_embeddings", 262144}, {"mlp_only_layers", json::array()},
        {"model_type", "qwen3_5_text"}, {"mtp_num_hidden_layers", 1},
        {"mtp_use_dedicated_embeddings", false}, {"num_attention_heads", 8},
        {"num_hidden_layers", 24}, {"num_key_value_heads", 2}, {"rms_norm_eps", 1e-6},
        {"tie_word_embeddings", true}, {"vocab_size", 248320},
        {"rope_parameters",
         {{"mrope_interleaved", true}, {"mrope_section", {11, 11, 10}}, {"rope_type", "default"},
          {"rope_theta", 10000000}, {"partial_rotary_factor", 0.25}}}}},
      {"vision_config", {{"depth", 12}, {"hidden_size", 768}, {"model_type", "qwen3_5"},
                         {"out_hidden_size", 1024}}},
  };
  const ModelConfig c = parse_hf_config(config, nullptr);
  EXPECT_EQ(c.arch, Arch::Qwen35);
  EXPECT_EQ(c.d_model, 1024);
  EXPECT_EQ(c.n_layers, 24);
  EXPECT_EQ(c.n_heads, 8);
  EXPECT_EQ(c.n_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.ffn, 3584);
  EXPECT_EQ(c.vocab, 248320);
  EXPECT_TRUE(c.tie_embeddings);
  EXPECT_EQ(c.rope_rotary_dim, 64);
  EXPECT_EQ(c.rope_theta, 1e7f);
  EXPECT_EQ(c.linear, (LinearAttn{4, 16, 16, 128, 128, false}));
  EXPECT_EQ(c.mtp_layers, 1);
  int recurrent = 0;
  for (int l = 0; l < 24; ++l) recurrent += c.is_recurrent(l) ? 1 : 0;
  EXPECT_EQ(recurrent, 18);
}

// The state each sequence carries, for the published shapes (Qwen/Qwen3.5-0.8B
// and 4B config.json, docs/FORMATS.md): printed, and checked against the
// arithmetic of its parts.
TEST(Qwen35Load, RecurrentStateMemoryPerSequence) {
  struct Shape {
    const char* name;
    int d, layers, k_heads, v_heads;
  };
  for (const Shape& sh : {Shape{"0.8B", 1024, 24, 16, 16}, Shape{"4B", 2560, 32, 16, 32}}) {
    RandomSpec s = qwen35();
    s.config_patch = {{"hidden_size", sh.d}, {"num_hidden_layers", sh.layers},
                      {"layer_types", nullptr}, {"linear_num_key_heads", sh.k_heads},
                      {"linear_num_value_heads", sh.v_heads}, {"linear_key_head_dim", 128},
                      {"linear_value_head_dim", 128}, {"head_dim", 256}};
    const ModelConfig c = parse_hf_config(test::hf_config_json(s), nullptr);
    const int q_max = 16;
    const size_t bytes = KVCache::recurrent_bytes(c, q_max);
    const size_t rec = size_t(sh.layers) * 3 / 4, C = size_t(2 * sh.k_heads * 128 + sh.v_heads * 128);
    const size_t state = size_t(sh.v_heads) * 128 * 128 * 4;
    EXPECT_EQ(bytes, rec * (2 * state + size_t(q_max + 3) * (C + 2 * size_t(sh.v_heads)) * 4));
    std::printf("  Qwen3.5-%s: %zu recurrent layers, state %.1f MiB per sequence (+ snapshot "
                "%.1f MiB, conv/gate ring for %d rows %.1f MiB): %.1f MiB\n", sh.name, rec,
                double(rec * state) / (1 << 20), double(rec * state) / (1 << 20), q_max,
                double(bytes - 2 * rec * state) / (1 << 20), double(bytes) / (1 << 20));
  }
}

// The memory estimate (KVCache::bytes_for, what the default context and the
// scheduler's check use) of the published shapes: K/V only for the full
// attention layers (one in four), the recurrent storage for the others —
// the sum from the dims; and, for the 0.8B shape, what a cache allocates.
TEST(Qwen35Load, KvEstimateCountsKvOnlyForAttentionLayers) {
  struct Shape {
    const char* name;
    int d, layers, heads, kv_heads, k_heads, v_heads;
  };
  for (const Shape& sh : {Shape{"0.8B", 1024, 24, 8, 2, 16, 16}, Shape{"4B", 2560, 32, 16, 4, 16, 32}}) {
    RandomSpec s = qwen35();
    s.config_patch = {{"hidden_size", sh.d}, {"num_hidden_layers", sh.layers},
                      {"layer_types", nullptr}, {"num_attention_heads", sh.heads},
                      {"num_key_value_heads", sh.kv_heads}, {"linear_num_key_heads", sh.k_heads},
                      {"linear_num_value_heads", sh.v_heads}, {"linear_key_head_dim", 128},
                      {"linear_value_head_dim", 128}, {"head_dim", 256}};
    const ModelConfig c = parse_hf_config(test::hf_config_json(s), nullptr);
    const int ctx = 4096, q_max = 16, n_seq = 3;
    const size_t attn = size_t(sh.layers) / 4, rec = size_t(sh.layers) - attn;
    const size_t kv = attn * size_t(ctx + q_max) * size_t(sh.kv_heads) * 256 * 2 * 4;
    const size_t C = size_t(2 * sh.k_heads * 128 + sh.v_heads * 128);
    const size_t state = size_t(sh.v_heads) * 128 * 128 * 4;
    const size_t recurrent = rec * (2 * state + size_t(q_max + 3) * (C + 2 * size_t(sh.v_heads)) * 4);
    EXPECT_EQ(KVCache::bytes_for(c, n_seq, ctx, q_max), n_seq * (kv + recurrent)) << sh.name;
    // Counting K/V for every layer, as a plain transformer's, would be this much more.
    const size_t all_layers = size_t(sh.layers) * size_t(ctx + q_max) * size_t(sh.kv_heads) * 256 * 2 * 4;
    std::printf("  Qwen3.5-%s, %d positions: %.1f MiB per sequence (K/V %.1f, recurrent %.1f); "
                "K/V of every layer would be %.1f MiB\n", sh.name, ctx,
                double(kv + recurrent) / (1 << 20), double(kv) / (1 << 20),
                double(recurrent) / (1 << 20), double(all_layers) / (1 << 20));
    if (sh.d == 1024) EXPECT_EQ(KVCache(c, 1, 64, q_max).bytes(), KVCache::bytes_for(c, 1, 64, q_max));
  }
}

}  // namespace
}  // namespace mtp::model
