// Hugging Face checkpoint loading: every family's config semantics, weight
// fusion/packing against the stored tensors, sharding, and every rejection.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "checkpoint_util.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "io/safetensors.h"
#include "model/hf_config.h"
#include "model/loader.h"
#include "test_util.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace mtp::model {
namespace {

using kernels::PackedMatrix;
using kernels::WeightType;
using test::RandomSpec;

using test::expect_error;

LoadedModel load(const std::string& dir, WeightType w = WeightType::F32) {
  return load_hf(dir, LoadOptions{w});
}

// A tensor as stored in the checkpoint, converted to fp32.
std::vector<float> stored(const std::string& dir, const std::string& name) {
  io::TensorSet ts = io::TensorSet::open_dir(dir);
  const io::TensorView& v = ts.get(name);
  std::vector<float> out(v.numel());
  to_f32(v.data, v.dtype, v.numel(), out.data());
  return out;
}

// Rows [row0, row0 + n) of m equal src (rounded to bf16 when m holds bf16), bitwise.
void expect_rows(const PackedMatrix& m, size_t row0, const std::vector<float>& src,
                 const std::string& what) {
  const size_t cols = m.cols(), n = src.size() / cols;
  std::vector<float> r(cols);
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i) {
    m.row_f32(row0 + i, r.data());
    for (size_t j = 0; j < cols; ++j) {
      float want = m.hold() == WeightType::BF16 ? round_bf16(src[i * cols + j]) : src[i * cols + j];
      if (std::memcmp(&want, &r[j], 4) != 0 && bad++ < 3) {
        ADD_FAILURE() << what << " row " << i << " col " << j << ": " << r[j] << " != " << want;
      }
    }
  }
  EXPECT_EQ(bad, 0u) << what;
}

std::vector<float> plus_one(std::vector<float> v) {
  for (auto& x : v) x = 1.0f + x;
  return v;
}

// ------------------------------------------------------------ every family loads

class LoadEachArch : public ::testing::TestWithParam<std::tuple<Arch, DType>> {};

TEST_P(LoadEachArch, ConfigAndWeightsMatchTheCheckpoint) {
  auto [arch, dtype] = GetParam();
  RandomSpec s = RandomSpec::for_arch(arch);
  s.dtype = dtype;
  std::string dir = test::random_hf_checkpoint("hf-arch", s);
  LoadedModel m = load(dir);
  const ModelConfig& c = m.config;
  const bool gemma = arch == Arch::Gemma2 || arch == Arch::Gemma3;

  EXPECT_EQ(c.arch, arch);
  EXPECT_EQ(c.source, "hf");
  EXPECT_EQ(m.path, dir);
  EXPECT_EQ(m.tokenizer, "");
  EXPECT_EQ(c.d_model, s.d_model);
  EXPECT_EQ(c.n_layers, s.n_layers);
  EXPECT_EQ(c.n_heads, s.n_heads);
  EXPECT_EQ(c.n_kv_heads, s.n_kv_heads);
  EXPECT_EQ(c.head_dim, s.head_dim);
  EXPECT_EQ(c.ffn, s.ffn);
  EXPECT_EQ(c.vocab, s.vocab);
  EXPECT_EQ(c.max_position, s.max_position);
  EXPECT_EQ(c.norm_eps, 1e-6f);
  EXPECT_EQ(c.rope_theta, s.rope_theta);
  EXPECT_FALSE(c.rope_interleaved);
  EXPECT_EQ(c.tie_embeddings, s.tie);
  EXPECT_EQ(c.qkv_bias, arch == Arch::Qwen2);
  EXPECT_EQ(c.qk_norm, arch == Arch::Qwen3 || arch == Arch::Gemma3);
  EXPECT_EQ(c.norm_one_plus, gemma);
  EXPECT_EQ(c.sandwich_norms, gemma);
  EXPECT_EQ(c.activation, gemma ? Activation::GeluTanh : Activation::SiLU);
  EXPECT_EQ(c.bos_id, s.bos_id);
  std::vector<int32_t> eos = s.eos_ids;
  for (int32_t e : s.gen_eos_ids) eos.push_back(e);
  std::sort(eos.begin(), eos.end());
  eos.erase(std::unique(eos.begin(), eos.end()), eos.end());
  EXPECT_EQ(c.eos_ids, eos);
  if (arch == Arch::Mistral) {  // every layer sliding
    EXPECT_EQ(test::sliding_of(c), std::vector<uint8_t>(size_t(s.n_layers), 1));
    EXPECT_EQ(c.sliding_window, s.sliding_window);
  } else if (!gemma) {
    EXPECT_TRUE(test::sliding_of(c).empty());
    EXPECT_EQ(c.sliding_window, 0);
    EXPECT_EQ(c.embed_scale, 1.0f);
    EXPECT_EQ(c.query_scale, 0.0f);
  }

  const ModelWeights& w = m.weights;
  const size_t d = s.d_model, hd = s.head_dim, q = s.n_heads * hd, kv = s.n_kv_heads * hd;
  ASSERT_EQ(w.layers.size(), size_t(s.n_layers));
  EXPECT_EQ(w.embed.rows, size_t(s.vocab));
  EXPECT_EQ(w.embed.cols, d);
  EXPECT_EQ(w.embed.dtype, dtype);  // in place, as stored
  const std::string emb = "model.embed_tokens.weight";
  std::vector<float> e = stored(dir, emb), row(d);
  w.embed.lookup(5, 1.0f, row.data());
  EXPECT_EQ(std::vector<float>(e.begin() + 5 * d, e.begin() + 6 * d), row);
  EXPECT_EQ(w.lm_head.rows(), size_t(s.vocab));
  expect_rows(w.lm_head, 0, s.tie ? e : stored(dir, "lm_head.weight"), "lm_head");
  auto norm_of = [&](const std::string& name) {
    auto v = stored(dir, name);
    return gemma ? plus_one(v) : v;
  };
  EXPECT_EQ(w.final_norm, norm_of("model.norm.weight"));

  for (int i = 0; i < s.n_layers; ++i) {
    SCOPED_TRACE("layer " + std::to_string(i));
    const std::string p = "model.layers." + std::to_string(i) + ".";
    const LayerWeights& L = w.layers[i];
    EXPECT_EQ(L.wqkv.rows(), q + 2 * kv);
    EXPECT_EQ(L.wqkv.cols(), d);
    EXPECT_EQ(L.wo.rows(), d);
    EXPECT_EQ(L.wo.cols(), q);
    EXPECT_EQ(L.w_gate_up.rows(), 2 * size_t(s.ffn));
    EXPECT_EQ(L.w_down.cols(), size_t(s.ffn));
    expect_rows(L.wqkv, 0, stored(dir, p + "self_attn.q_proj.weight"), "q");
    expect_rows(L.wqkv, q, stored(dir, p + "self_attn.k_proj.weight"), "k");
    expect_rows(L.wqkv, q + kv, stored(dir, p + "self_attn.v_proj.weight"), "v");
    expect_rows(L.wo, 0, stored(dir, p + "self_attn.o_proj.weight"), "o");
    expect_rows(L.w_gate_up, 0, stored(dir, p + "mlp.gate_proj.weight"), "gate");
    expect_rows(L.w_gate_up, s.ffn, stored(dir, p + "mlp.up_proj.weight"), "up");
    expect_rows(L.w_down, 0, stored(dir, p + "mlp.down_proj.weight"), "down");
    EXPECT_EQ(L.attn_norm, norm_of(p + "input_layernorm.weight"));
    if (gemma) {
      EXPECT_EQ(L.post_attn_norm, norm_of(p + "post_attention_layernorm.weight"));
      EXPECT_EQ(L.ffn_norm, norm_of(p + "pre_feedforward_layernorm.weight"));
      EXPECT_EQ(L.post_ffn_norm, norm_of(p + "post_feedforward_layernorm.weight"));
    } else {
      EXPECT_EQ(L.ffn_norm, norm_of(p + "post_attention_layernorm.weight"));
      EXPECT_TRUE(L.post_attn_norm.empty());
      EXPECT_TRUE(L.post_ffn_norm.empty());
    }
    if (c.qk_norm) {  // (1 + w) on Gemma 3, plain on Qwen3
      EXPECT_EQ(L.q_norm, norm_of(p + "self_attn.q_norm.weight"));
      EXPECT_EQ(L.k_norm, norm_of(p + "self_attn.k_norm.weight"));
    } else {
      EXPECT_TRUE(L.q_norm.empty());
    }
    if (c.qkv_bias) {
      std::vector<float> b = stored(dir, p + "self_attn.q_proj.bias");
      for (const char* x : {"k", "v"}) {
        auto part = stored(dir, p + "self_attn." + x + "_proj.bias");
        b.insert(b.end(), part.begin(), part.end());
      }
      EXPECT_EQ(L.qkv_bias, b);
    } else {
      EXPECT_TRUE(L.qkv_bias.empty());
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    All, LoadEachArch,
    // Gemma 4's layer kinds and per-layer embeddings: tests/model/gemma4_load_test.cc;
    // Qwen3.5's recurrent layers: tests/model/qwen35_load_test.cc.
    ::testing::Combine(::testing::ValuesIn([] {
                         auto a = test::every_arch();
                         std::erase(a, Arch::Gemma4);
                         std::erase(a, Arch::Qwen35);
                         return a;
                       }()),
                       ::testing::Values(DType::F32, DType::BF16, DType::F16)),
    [](const auto& info) {
      return std::string(arch_name(std::get<0>(info.param))) + "_" +
             std::string(dtype_name(std::get<1>(info.param)));
    });

// ------------------------------------------------------------ family semantics

ModelConfig parse(const RandomSpec& s, const json* gen = nullptr) {
  return parse_hf_config(test::hf_config_json(s), gen);
}

TEST(HfConfig, LlamaRopeScaling) {
  RandomSpec s = RandomSpec::for_arch(Arch::Llama);
  s.config_patch = {{"rope_scaling", {{"rope_type", "llama3"}, {"factor", 32.0}, {"low_freq_factor", 1.0},
                                      {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192}}},
                    {"rope_theta", 500000.0}};
  ModelConfig c = parse(s);
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::Llama3);
  EXPECT_EQ(c.rope_scaling.factor, 32.f);
  EXPECT_EQ(c.rope_scaling.low_freq_factor, 1.f);
  EXPECT_EQ(c.rope_scaling.high_freq_factor, 4.f);
  EXPECT_EQ(c.rope_scaling.original_max_position, 8192);
  EXPECT_EQ(c.rope_theta, 500000.f);

  s.config_patch = {{"rope_scaling", {{"type", "linear"}, {"factor", 2.0}}}};  // legacy key
  c = parse(s);
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::Linear);
  EXPECT_EQ(c.rope_scaling.factor, 2.f);

  s.config_patch = {{"rope_scaling", {{"rope_type", "default"}}}};
  EXPECT_EQ(parse(s).rope_scaling.type, RopeScaling::Type::None);

  s.config_patch = {{"rope_scaling", {{"rope_type", "yarn"}, {"factor", 4.0}}}};
  expect_error<ConfigError>([&] { parse(s); }, {"'yarn'", "rope_scaling"});
  s.config_patch = {{"rope_scaling", {{"rope_type", "llama3"}, {"factor", 8.0}, {"high_freq_factor", 4.0},
                                      {"original_max_position_embeddings", 8192}}}};
  expect_error<ConfigError>([&] { parse(s); }, {"'low_freq_factor'"});
}

TEST(HfConfig, LlamaDefaults) {
  RandomSpec s = RandomSpec::for_arch(Arch::Llama);
  s.config_patch = {{"num_key_value_heads", nullptr}, {"head_dim", nullptr}, {"rope_theta", nullptr},
                    {"tie_word_embeddings", nullptr}, {"max_position_embeddings", nullptr},
                    {"rms_norm_eps", nullptr}, {"eos_token_id", nullptr}, {"bos_token_id", nullptr}};
  ModelConfig c = parse(s);
  EXPECT_EQ(c.n_kv_heads, c.n_heads);
  EXPECT_EQ(c.head_dim, s.d_model / s.n_heads);
  EXPECT_EQ(c.rope_theta, 10000.f);
  EXPECT_FALSE(c.tie_embeddings);
  EXPECT_EQ(c.max_position, 2048);
  EXPECT_EQ(c.norm_eps, 1e-6f);
  EXPECT_EQ(c.eos_ids, std::vector<int32_t>{2});  // LlamaConfig defaults
  EXPECT_EQ(c.bos_id, 1);
}

TEST(HfConfig, EosUnion) {
  RandomSpec s = RandomSpec::for_arch(Arch::Llama);
  s.eos_ids = {9, 2};
  json gen = {{"eos_token_id", {2, 7}}};
  EXPECT_EQ(parse(s, &gen).eos_ids, (std::vector<int32_t>{2, 7, 9}));
  gen = {{"eos_token_id", 11}};
  EXPECT_EQ(parse(s, &gen).eos_ids, (std::vector<int32_t>{2, 9, 11}));
  gen = {{"eos_token_id", "x"}};
  expect_error<ConfigError>([&] { parse(s, &gen); }, {"eos_token_id"});
  RandomSpec q = RandomSpec::for_arch(Arch::Qwen2);  // Qwen: no default ids
  q.config_patch = {{"eos_token_id", nullptr}, {"bos_token_id", nullptr}};
  gen = {{"eos_token_id", {3}}};
  ModelConfig c = parse(q, &gen);
  EXPECT_EQ(c.eos_ids, std::vector<int32_t>{3});
  EXPECT_EQ(c.bos_id, -1);
}

// "architectures" given as one class name (not a list) selects that class,
// whatever model_type says; any other value is refused naming the field.
TEST(HfConfig, ArchitecturesAsOneName) {
  RandomSpec s = RandomSpec::for_arch(Arch::Qwen2);
  s.config_patch = {{"architectures", "Qwen2ForCausalLM"}, {"model_type", "llama"}};
  const ModelConfig c = parse(s);
  EXPECT_EQ(c.arch, Arch::Qwen2);
  EXPECT_TRUE(c.qkv_bias);
  s.config_patch = {{"architectures", 7}};
  expect_error<ConfigError>([&] { parse(s); }, {"'architectures'", "7"});
  s.config_patch = {{"architectures", json::array()}};
  expect_error<ConfigError>([&] { parse(s); }, {"'architectures'"});
}

// An EOS or BOS id outside the vocabulary is refused, from config.json, the
// multimodal text_config and generation_config.json alike (as the GGUF
// loader refuses its ids).
TEST(HfConfig, SpecialTokenOutsideTheVocabularyIsRefused) {
  RandomSpec s = RandomSpec::for_arch(Arch::Llama);  // vocab 320
  s.config_patch = {{"eos_token_id", {2, 320}}};
  expect_error<ConfigError>([&] { parse(s); }, {"eos_token_id", "320", "outside the vocabulary"});
  s.config_patch = {};
  json gen = {{"eos_token_id", {2, 1000}}};
  expect_error<ConfigError>([&] { parse(s, &gen); }, {"generation_config.json", "1000"});
  s.config_patch = {{"bos_token_id", 400}};
  expect_error<ConfigError>([&] { parse(s); }, {"bos_token_id", "400"});
  RandomSpec g = RandomSpec::for_arch(Arch::Gemma3);  // vocab 384
  g.nested_text_config = true;
  g.config_patch = {{"eos_token_id", 384}};
  expect_error<ConfigError>([&] { parse(g); }, {"text_config", "eos_token_id", "384"});
  g.config_patch = {};
  g.eos_ids = {383};
  EXPECT_EQ(parse(g).eos_ids, std::vector<int32_t>{383});  // the last id is inside
}

TEST(HfConfig, QwenSlidingWindowRefused) {
  RandomSpec s = RandomSpec::for_arch(Arch::Qwen2);
  EXPECT_TRUE(test::sliding_of(parse(s)).empty());  // sliding_window present but inert
  s.config_patch = {{"use_sliding_window", true}};
  expect_error<ConfigError>([&] { parse(s); }, {"use_sliding_window"});
  RandomSpec q3 = RandomSpec::for_arch(Arch::Qwen3);
  q3.config_patch = {{"head_dim", nullptr}};
  EXPECT_EQ(parse(q3).head_dim, 128);  // Qwen3Config's default, not hidden/heads
}

TEST(HfConfig, Gemma2) {
  RandomSpec s = RandomSpec::for_arch(Arch::Gemma2);
  s.n_layers = 4;
  s.d_model = 48;  // sqrt(48) is irrational: checks the fp32 computation
  ModelConfig c = parse(s);
  EXPECT_EQ(test::sliding_of(c), (std::vector<uint8_t>{1, 0, 1, 0}));  // even layers local
  EXPECT_EQ(c.sliding_window, 16);
  EXPECT_EQ(c.embed_scale, std::sqrt(48.0f));
  EXPECT_EQ(c.embed_scale, float(std::sqrt(48.0)));
  EXPECT_EQ(c.query_scale, float(std::pow(32.0, -0.5)));
  EXPECT_EQ(c.score_scale(), c.query_scale);
  EXPECT_EQ(c.attn_softcap, 50.f);
  EXPECT_EQ(c.final_softcap, 30.f);
  EXPECT_EQ(c.rope_local_theta, 0.f);
  EXPECT_EQ(c.eos_ids, (std::vector<int32_t>{1, 107}));

  s.query_pre_attn_scalar = 24;  // Gemma 2 27B style: not head_dim
  EXPECT_EQ(parse(s).query_scale, float(std::pow(24.0, -0.5)));
  s.config_patch = {{"attn_logit_softcapping", nullptr}, {"final_logit_softcapping", nullptr}};
  c = parse(s);  // absent -> Gemma2Config defaults
  EXPECT_EQ(c.attn_softcap, 50.f);
  EXPECT_EQ(c.final_softcap, 30.f);
  json j = test::hf_config_json(s);
  j["attn_logit_softcapping"] = nullptr;  // present null -> none
  j["final_logit_softcapping"] = nullptr;
  c = parse_hf_config(j, nullptr);
  EXPECT_EQ(c.attn_softcap, 0.f);
  EXPECT_EQ(c.final_softcap, 0.f);

  s.config_patch = {{"hidden_activation", "gelu"}};
  expect_error<ConfigError>([&] { parse(s); }, {"'gelu'"});
  s.config_patch = {{"rope_scaling", {{"rope_type", "linear"}, {"factor", 2.0}}}};
  expect_error<ConfigError>([&] { parse(s); }, {"rope_scaling", "gemma2"});
}

TEST(HfConfig, Gemma3) {
  RandomSpec s = RandomSpec::for_arch(Arch::Gemma3);
  ModelConfig c = parse(s);
  EXPECT_EQ(test::sliding_of(c), (std::vector<uint8_t>{1, 1, 1, 1, 1, 0}));  // (i+1) % 6 == 0 global
  EXPECT_EQ(c.sliding_window, 8);
  EXPECT_EQ(c.rope_theta, 1e6f);
  EXPECT_EQ(c.rope_local_theta, 10000.f);
  EXPECT_EQ(c.attn_softcap, 0.f);
  EXPECT_EQ(c.final_softcap, 0.f);
  EXPECT_EQ(c.query_scale, float(std::pow(32.0, -0.5)));
  EXPECT_EQ(c.embed_scale, 8.0f);
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::None);

  s.sliding_pattern = 2;
  EXPECT_EQ(test::sliding_of(parse(s)), (std::vector<uint8_t>{1, 0, 1, 0, 1, 0}));
  s.config_patch = {{"layer_types", {"full_attention", "sliding_attention", "sliding_attention",
                                     "full_attention", "sliding_attention", "sliding_attention"}},
                    {"rope_scaling", {{"rope_type", "linear"}, {"factor", 8.0}}}};
  c = parse(s);  // layer_types wins over the pattern
  EXPECT_EQ(test::sliding_of(c), (std::vector<uint8_t>{0, 1, 1, 0, 1, 1}));
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::Linear);
  EXPECT_EQ(c.rope_scaling.factor, 8.f);
  s.config_patch = {{"layer_types", {"full_attention", "chunked_attention", "full_attention",
                                     "full_attention", "full_attention", "full_attention"}}};
  expect_error<ConfigError>([&] { parse(s); }, {"'chunked_attention'"});
  s.config_patch = {{"layer_types", {"full_attention"}}};
  expect_error<ConfigError>([&] { parse(s); }, {"layer_types"});
  // transformers 5 style rope_parameters per layer type.
  s.config_patch = {{"rope_theta", nullptr}, {"rope_local_base_freq", nullptr},
                    {"rope_parameters", {{"full_attention", {{"rope_type", "linear"}, {"factor", 4.0},
                                                             {"rope_theta", 1e6}}},
                                         {"sliding_attention", {{"rope_type", "default"},
                                                                {"rope_theta", 12345.0}}}}}};
  c = parse(s);
  EXPECT_EQ(c.rope_theta, 1e6f);
  EXPECT_EQ(c.rope_local_theta, 12345.f);
  EXPECT_EQ(c.rope_scaling.factor, 4.f);
}

TEST(HfConfig, Gemma3MultimodalDefaults) {
  // The released 4B config.json omits head counts, head_dim and vocab_size in
  // text_config: Gemma3TextConfig's defaults apply.
  RandomSpec s = RandomSpec::for_arch(Arch::Gemma3);
  s.nested_text_config = true;
  s.config_patch = {{"num_attention_heads", nullptr}, {"num_key_value_heads", nullptr},
                    {"head_dim", nullptr}, {"vocab_size", nullptr}, {"sliding_window_pattern", nullptr},
                    {"rope_theta", nullptr}, {"max_position_embeddings", nullptr}};
  json gen = {{"eos_token_id", {1, 106}}};
  ModelConfig c = parse(s, &gen);
  EXPECT_EQ(c.n_heads, 8);
  EXPECT_EQ(c.n_kv_heads, 4);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.vocab, 262208);
  EXPECT_EQ(c.max_position, 131072);
  EXPECT_EQ(c.rope_theta, 1e6f);
  EXPECT_EQ(test::sliding_of(c), (std::vector<uint8_t>{1, 1, 1, 1, 1, 0}));
  EXPECT_EQ(c.eos_ids, (std::vector<int32_t>{1, 106}));
  EXPECT_EQ(c.bos_id, 2);
  EXPECT_TRUE(c.tie_embeddings);
  json j = test::hf_config_json(s);
  j.erase("text_config");
  expect_error<ConfigError>([&] { parse_hf_config(j, nullptr); }, {"text_config"});
}

TEST(HfConfig, Rejections) {
  RandomSpec s = RandomSpec::for_arch(Arch::Llama);
  s.config_patch = {{"architectures", {"PhiForCausalLM"}}};
  expect_error<ConfigError>([&] { parse(s); }, {"'PhiForCausalLM'"});
  s.config_patch = {{"architectures", nullptr}, {"model_type", "phi3"}};
  expect_error<ConfigError>([&] { parse(s); }, {"'phi3'"});
  s.config_patch = {{"architectures", nullptr}, {"model_type", nullptr}};
  expect_error<ConfigError>([&] { parse(s); }, {"architectures", "model_type"});
  for (const char* key : {"hidden_size", "intermediate_size", "num_hidden_layers",
                          "num_attention_heads", "vocab_size"}) {
    s.config_patch = {{key, nullptr}};
    expect_error<ConfigError>([&] { parse(s); }, {"missing required key", std::string("'") + key + "'"});
  }
  s.config_patch = {{"hidden_size", "64"}};
  expect_error<ConfigError>([&] { parse(s); }, {"'hidden_size'", "integer"});
  s.config_patch = {{"attention_bias", true}};
  expect_error<ConfigError>([&] { parse(s); }, {"attention_bias"});
  s.config_patch = {{"mlp_bias", true}};
  expect_error<ConfigError>([&] { parse(s); }, {"mlp_bias"});
  s.config_patch = {{"hidden_act", "gelu"}};
  expect_error<ConfigError>([&] { parse(s); }, {"'gelu'"});
  s.config_patch = {{"num_key_value_heads", 3}};  // 4 heads are not a multiple of 3
  expect_error<ConfigError>([&] { parse(s); }, {"num_key_value_heads"});
}

// ------------------------------------------------------------ files and weights

TEST(LoadHf, ShardedEqualsSingle) {
  RandomSpec s = RandomSpec::for_arch(Arch::Gemma2);
  s.dtype = DType::BF16;
  std::string one = test::random_hf_checkpoint("hf-one", s);
  s.shards = 3;
  std::string three = test::random_hf_checkpoint("hf-three", s);
  EXPECT_TRUE(fs::exists(three + "/model-00003-of-00003.safetensors"));
  EXPECT_FALSE(fs::exists(three + "/model.safetensors"));
  LoadedModel a = load(one), b = load(three);
  EXPECT_EQ(a.config.to_json(), b.config.to_json());
  for (int i = 0; i < s.n_layers; ++i) {
    const auto &x = a.weights.layers[i], &y = b.weights.layers[i];
    EXPECT_EQ(std::memcmp(x.wqkv.data(), y.wqkv.data(), x.wqkv.bytes()), 0);
    EXPECT_EQ(std::memcmp(x.w_down.data(), y.w_down.data(), x.w_down.bytes()), 0);
    EXPECT_EQ(x.post_ffn_norm, y.post_ffn_norm);
  }
  EXPECT_EQ(std::memcmp(a.weights.lm_head.data(), b.weights.lm_head.data(), a.weights.lm_head.bytes()), 0);
}

TEST(LoadHf, Gemma3NestedLayoutsLoadTheSameModel) {
  RandomSpec s = RandomSpec::for_arch(Arch::Gemma3);
  s.dtype = DType::BF16;
  LoadedModel flat = load(test::random_hf_checkpoint("hf-g3", s));
  s.nested_text_config = true;  // language_model.model.* (transformers < 4.52)
  std::string old_dir = test::random_hf_checkpoint("hf-g3-old", s);
  s.weight_prefix = "model.language_model.";  // later layout
  std::string new_dir = test::random_hf_checkpoint("hf-g3-new", s);
  for (const std::string& dir : {old_dir, new_dir}) {
    SCOPED_TRACE(dir);
    LoadedModel m = load(dir);
    EXPECT_EQ(m.config.to_json(), flat.config.to_json());
    // Same values (the seed is per name, so compare against the stored tensors).
    const std::string p = dir == old_dir ? "language_model.model." : "model.language_model.";
    expect_rows(m.weights.layers[5].wqkv, 0, stored(dir, p + "layers.5.self_attn.q_proj.weight"), "q");
    EXPECT_EQ(m.weights.layers[5].q_norm, plus_one(stored(dir, p + "layers.5.self_attn.q_norm.weight")));
  }
}

TEST(LoadHf, Bf16WeightsAreRoundedSource) {
  for (DType src : {DType::F32, DType::F16, DType::BF16}) {
    RandomSpec s = RandomSpec::for_arch(Arch::Qwen3);
    s.dtype = src;
    s.tie = false;
    std::string dir = test::random_hf_checkpoint("hf-bf16", s);
    LoadedModel m = load(dir, WeightType::BF16);
    const auto& L = m.weights.layers[1];
    for (const PackedMatrix* pm : std::initializer_list<const PackedMatrix*>{
             &L.wqkv, &L.wo, &L.w_gate_up, &L.w_down, &m.weights.lm_head}) {
      EXPECT_EQ(pm->hold(), WeightType::BF16);
    }
    const size_t q = s.n_heads * s.head_dim, kv = s.n_kv_heads * s.head_dim;
    const std::string p = "model.layers.1.";
    expect_rows(L.wqkv, 0, stored(dir, p + "self_attn.q_proj.weight"), "q");
    expect_rows(L.wqkv, q, stored(dir, p + "self_attn.k_proj.weight"), "k");
    expect_rows(L.wqkv, q + kv, stored(dir, p + "self_attn.v_proj.weight"), "v");
    expect_rows(L.w_gate_up, 0, stored(dir, p + "mlp.gate_proj.weight"), "gate");
    expect_rows(L.w_gate_up, s.ffn, stored(dir, p + "mlp.up_proj.weight"), "up");
    expect_rows(L.w_down, 0, stored(dir, p + "mlp.down_proj.weight"), "down");
    expect_rows(m.weights.lm_head, 0, stored(dir, "lm_head.weight"), "lm_head");
    // Norms and the embedding stay as stored (fp32 copies / in place).
    EXPECT_EQ(L.q_norm, stored(dir, p + "self_attn.q_norm.weight"));
    EXPECT_EQ(m.weights.embed.dtype, src);
  }
}

TEST(LoadHf, ShapeMismatchNamesTensorAndShapes) {
  RandomSpec s = RandomSpec::for_arch(Arch::Llama);
  s.edit = [](const std::string& name, std::vector<int64_t>& shape, std::vector<float>& v) {
    if (name == "model.layers.1.self_attn.k_proj.weight") {
      shape = {33, 64};
      v.resize(33 * 64, 0.f);
    }
  };
  std::string dir = test::random_hf_checkpoint("hf-shape", s);
  expect_error<ShapeError>([&] { load(dir); },
                           {"'model.layers.1.self_attn.k_proj.weight'", "[33, 64]", "[32, 64]"});
}

TEST(LoadHf, NonFiniteWeightIsAFormatError) {
  for (DType dt : {DType::F32, DType::BF16}) {
    for (const char* target : {"model.layers.1.mlp.down_proj.weight", "model.embed_tokens.weight",
                               "model.layers.0.post_attention_layernorm.weight"}) {
      RandomSpec s = RandomSpec::for_arch(Arch::Gemma2);
      s.dtype = dt;
      s.edit = [&](const std::string& name, std::vector<int64_t>&, std::vector<float>& v) {
        if (name == target) v[7] = name.find("embed") != std::string::npos
                                       ? std::numeric_limits<float>::infinity()
                                       : std::numeric_limits<float>::quiet_NaN();
      };
      std::string dir = test::random_hf_checkpoint("hf-nan", s);
      expect_error<FormatError>([&] { load(dir); }, {std::string("'") + target + "'", "non-finite"});
    }
  }
}

TEST(LoadHf, MissingAndUnexpectedTensors) {
  auto dir_with = [](RandomSpec s) { return test::random_hf_checkpoint("hf-tensors", s); };
  RandomSpec s = RandomSpec::for_arch(Arch::Llama);
  s.edit = [](const std::string& name, std::vector<int64_t>& shape, std::vector<float>&) {
    if (name == "lm_head.weight") shape.clear();  // dropped while untied
  };
  expect_error<FormatError>([&] { load(dir_with(s)); }, {"'lm_head.weight'", "tie_word_embeddings"});
  s.edit = [](const std::string& name, std::vector<int64_t>& shape, std::vector<float>&) {
    if (name == "model.layers.1.mlp.up_proj.weight") shape.clear();
  };
  expect_error<FormatError>([&] { load(dir_with(s)); }, {"'model.layers.1.mlp.up_proj.weight'", "not found"});
  s.edit = nullptr;
  s.extra_tensors = {{"model.layers.0.self_attn.o_proj.bias", {64}}};
  expect_error<FormatError>([&] { load(dir_with(s)); }, {"'model.layers.0.self_attn.o_proj.bias'"});
  s.extra_tensors = {{"model.layers.2.input_layernorm.weight", {64}}};  // a layer the config lacks
  expect_error<FormatError>([&] { load(dir_with(s)); }, {"'model.layers.2.input_layernorm.weight'"});
  s.extra_tensors = {{"model.layers.0.self_attn.rotary_emb.inv_freq", {8}}};  // ignorable
  EXPECT_NO_THROW(load(dir_with(s)));
  RandomSpec t = RandomSpec::for_arch(Arch::Qwen2);  // tied, but lm_head.weight stored anyway
  t.extra_tensors = {{"lm_head.weight", {t.vocab, t.d_model}}};
  EXPECT_NO_THROW(load(dir_with(t)));
}

TEST(LoadHf, UnsupportedTensorDtype) {
  RandomSpec s = RandomSpec::for_arch(Arch::Llama);
  std::string dir = test::random_hf_checkpoint("hf-i32", s);
  // Rewrite the file with one weight relabelled I32 (same byte size).
  std::vector<io::TensorView> views;
  std::vector<std::vector<uint8_t>> bufs;
  {
    io::SafetensorsFile f(dir + "/model.safetensors");
    bufs.reserve(f.num_tensors());
    for (auto& n : f.names()) {
      const io::TensorView& v = f.get(n);
      const auto* b = static_cast<const uint8_t*>(v.data);
      bufs.emplace_back(b, b + v.nbytes);
      views.push_back({n, n == "model.layers.0.mlp.gate_proj.weight" ? DType::I32 : v.dtype, v.shape,
                       bufs.back().data(), v.nbytes});
    }
  }
  io::write_safetensors(dir + "/model.safetensors", views);
  expect_error<ShapeError>([&] { load(dir); }, {"'model.layers.0.mlp.gate_proj.weight'", "I32"});
}

TEST(LoadHf, ConfigFileErrors) {
  std::string dir = test::temp_dir("hf-cfg");
  expect_error<IoError>([&] { load(dir); }, {"config.json"});
  write_file_atomic(dir + "/config.json", "{ not json");
  expect_error<FormatError>([&] { load(dir); }, {"config.json", "not valid JSON"});
  write_file_atomic(dir + "/config.json", test::hf_config_json(RandomSpec{}).dump());
  expect_error<IoError>([&] { load(dir); }, {"model.safetensors"});  // no weights
}

TEST(LoadHf, TokenizerBeside) {
  std::string dir = test::random_hf_checkpoint("hf-tok", RandomSpec{});
  EXPECT_EQ(load(dir).tokenizer, "");
  write_file_atomic(dir + "/tokenizer.model", "x");
  EXPECT_EQ(load(dir).tokenizer, dir + "/tokenizer.model");
  write_file_atomic(dir + "/tokenizer.json", "{}");
  EXPECT_EQ(load(dir).tokenizer, dir + "/tokenizer.json");
}

TEST(LoadModel, Dispatch) {
  std::string dir = test::random_hf_checkpoint("hf-dispatch", RandomSpec::for_arch(Arch::Qwen2));
  EXPECT_EQ(load_model(dir, {}).config.arch, Arch::Qwen2);
  EXPECT_EQ(load_model(dir + "/config.json", {}).config.source, "hf");
  EXPECT_EQ(load_model(dir + "/model.safetensors", {}).path, dir);
  expect_error<IoError>([&] { load_model(dir + "/nothing", {}); }, {"no model at"});
  std::string empty = test::temp_dir("hf-empty");
  expect_error<IoError>([&] { load_model(empty, {}); }, {"no model at", "config.json"});
}

TEST(LoadModel, DispatchesFilesToLlama2c) {
  MTP_REQUIRE_SHARED(bin, "models/stories260K/stories260K.bin");
  EXPECT_EQ(load_model(bin, {}).config.source, "llama2c");
}

// --weights fp16 of a checkpoint with a value beyond ±65504: refused, naming
// the tensor (it would become infinite); the fp32 and auto holds load it.
TEST(LoadHf, Fp16HoldRefusesAValueBeyondItsRangeNamingTheTensor) {
  RandomSpec s = RandomSpec::for_arch(Arch::Llama);
  s.edit = [](const std::string& name, std::vector<int64_t>&, std::vector<float>& v) {
    if (name == "model.layers.1.mlp.down_proj.weight") v[3] = 1e5f;
  };
  const std::string dir = test::random_hf_checkpoint("hf-f16-range", s);
  expect_error<InputError>([&] { load(dir, WeightType::F16); },
                           {"model.layers.1.mlp.down_proj.weight", "fp16", "100000"});
  EXPECT_NO_THROW(load(dir, WeightType::F32));
  EXPECT_NO_THROW(load_hf(dir, LoadOptions{}));
}

// A tied head is packed from the embedding: its range error names that tensor.
TEST(LoadHf, Fp16HoldOfATiedHeadNamesTheEmbedding) {
  RandomSpec s = RandomSpec::for_arch(Arch::Llama);
  s.tie = true;
  s.edit = [](const std::string& name, std::vector<int64_t>&, std::vector<float>& v) {
    if (name == "model.embed_tokens.weight") v[5] = -7e4f;
  };
  const std::string dir = test::random_hf_checkpoint("hf-f16-tied", s);
  expect_error<InputError>([&] { load(dir, WeightType::F16); },
                           {"model.embed_tokens.weight", "tied head", "fp16", "-70000"});
  EXPECT_NO_THROW(load(dir, WeightType::F32));
}

}  // namespace
}  // namespace mtp::model
