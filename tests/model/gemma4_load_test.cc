// Gemma 4 checkpoints: the config's layer kinds, the KV cache of the owner
// layers only, the multimodal layout (its towers never read), bad configs
// refused naming the field and both values, and GGUF copies — ours, and one
// written with the `gguf` package's own name tables — computing the HF bits.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "checkpoint_util.h"
#include "core/error.h"
#include "core/ggml_type.h"
#include "core/mapped_file.h"
#include "gguf_util.h"
#include "io/safetensors.h"
#include "model/forward.h"
#include "model/hf_config.h"
#include "model/loader.h"
#include "model_util.h"
#include "python_util.h"
#include "test_util.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace mtp::model {
namespace {

using test::RandomSpec;

RandomSpec gemma4() { return RandomSpec::for_arch(Arch::Gemma4); }

// Logits of 24 random tokens in calls of 1, 5 and 3 rows.
std::vector<float> g4_logits(const LoadedModel& lm, uint32_t seed = 9) {
  Model m(lm);
  KVCache kv = m.make_cache(1, 64);
  std::mt19937 rng(seed);
  return test::run_chunks(m, kv, 0, test::random_tokens(rng, 24, lm.config.vocab), {1, 5, 3},
                          nullptr).logits;
}

TEST(Gemma4Load, ConfigGivesEachLayerItsKind) {
  const ModelConfig c = parse_hf_config(test::hf_config_json(gemma4()), nullptr);
  EXPECT_EQ(c.arch, Arch::Gemma4);
  ASSERT_EQ(c.layers.size(), 6u);
  // layer_types S S F S S F; the last two read layers 3 (sliding) and 2 (full).
  const std::vector<int> sliding = {1, 1, 0, 1, 1, 0}, source = {-1, -1, -1, -1, 3, 2};
  for (int l = 0; l < 6; ++l) {
    SCOPED_TRACE(l);
    const LayerKind k = c.layers[size_t(l)];
    EXPECT_EQ(k.sliding, sliding[size_t(l)] == 1);
    EXPECT_EQ(k.head_dim, k.sliding ? 16 : 32);
    EXPECT_EQ(k.n_kv_heads, 2);
    EXPECT_EQ(k.kv_source, source[size_t(l)]);
    EXPECT_EQ(k.ffn, l >= 4 ? 192 : 96);  // double-wide on the shared layers
    EXPECT_FALSE(k.k_eq_v);
  }
  EXPECT_EQ(c.ple_dim, 8);
  EXPECT_EQ(c.rope_partial, 0.25f);
  EXPECT_EQ(c.rope_theta, 1e6f);
  EXPECT_EQ(c.rope_local_theta, 1e4f);
  EXPECT_EQ(c.query_scale, 1.0f);
  EXPECT_TRUE(c.v_norm && c.layer_scalar && c.qk_norm && c.sandwich_norms);
  EXPECT_FALSE(c.norm_one_plus);
  EXPECT_EQ(c.final_softcap, 30.f);
  EXPECT_EQ(c.sliding_window, 6);

  // K = V with its own kv heads on full layers; the last layer is full
  // whatever layer_types says; the defaults of an absent rope_parameters.
  RandomSpec s = gemma4();
  s.k_eq_v = true;
  s.n_global_kv_heads = 1;
  s.layer_types.back() = "sliding_attention";
  s.config_patch = {{"rope_parameters", nullptr}, {"num_kv_shared_layers", 0}};
  const ModelConfig k = parse_hf_config(test::hf_config_json(s), nullptr);
  EXPECT_FALSE(k.layers[5].sliding);
  EXPECT_TRUE(k.layers[5].k_eq_v && k.layers[2].k_eq_v);
  EXPECT_EQ(k.layers[2].n_kv_heads, 1);
  EXPECT_EQ(k.layers[0].n_kv_heads, 2);
  EXPECT_EQ(k.rope_partial, 0.25f);
  EXPECT_EQ(k.rope_theta, 1e6f);
}

// The KV cache holds the layers that own K/V, each at its own width.
TEST(Gemma4Load, KvCacheHoldsOnlyTheOwnerLayers) {
  const ModelConfig c = parse_hf_config(test::hf_config_json(gemma4()), nullptr);
  const KVCache kv(c, 1, 40, 8);
  EXPECT_EQ(kv.stored_layers(), 4);
  EXPECT_EQ(kv.kv_dim(0), 2 * 16);
  EXPECT_EQ(kv.kv_dim(2), 2 * 32);
  EXPECT_EQ(kv.slots(0), 6 + 8);  // a sliding ring of window + q_max
  EXPECT_EQ(kv.slots(2), 40);
  // Shared layers address their owner's storage.
  KVCache& m = const_cast<KVCache&>(kv);
  EXPECT_EQ(m.k(0, 4), m.k(0, 3));
  EXPECT_EQ(m.v(0, 5), m.v(0, 2));
  // K and V of (ring + tree) slots × width: three sliding owners of 2 × 16,
  // one full owner of 2 × 32 over the whole context.
  const size_t want = 2 * sizeof(float) * (3 * size_t(14 + 8) * 32 + size_t(40 + 8) * 64);
  EXPECT_EQ(kv.bytes(), want);
}

// The multimodal checkpoint loads the same model, never opening or reading
// its towers: a tower tensor whose header promises more bytes than it has
// does not matter, and neither does a shard holding only tower tensors that
// is cut short. Real checkpoints keep k/v projections in shared layers: not
// read either.
TEST(Gemma4Load, MultimodalLayoutNeverReadsTheTowers) {
  const std::vector<float> text = g4_logits(load_model(test::random_hf_checkpoint("g4-text", gemma4()), {}));
  RandomSpec s = gemma4();
  s.nested_text_config = true;
  s.extra_tensors = {{"model.language_model.layers.4.self_attn.k_proj.weight", {32, 64}},
                     {"model.language_model.layers.5.self_attn.v_proj.weight", {64, 64}}};
  const std::string dir = test::random_hf_checkpoint("g4-mm", s);
  EXPECT_EQ(test::first_bit_difference(g4_logits(load_model(dir, {})), text), -1);

  // A tower tensor whose shape needs more bytes than its data_offsets span.
  std::string bytes = read_file(dir + "/model.safetensors");
  const std::string from = "\"shape\":[8,4]", to = "\"shape\":[9,9]";
  const size_t at = bytes.find(from);
  ASSERT_NE(at, std::string::npos);
  bytes.replace(at, from.size(), to);
  fs::remove(dir + "/model.safetensors");
  std::ofstream(dir + "/model.safetensors", std::ios::binary) << bytes;
  EXPECT_EQ(test::first_bit_difference(g4_logits(load_model(dir, {})), text), -1);
  // The same file is refused by a reader that reads every tensor.
  test::expect_error<FormatError>([&] { io::TensorSet::open_dir(dir); }, {"needs"});

  // Sharded one tensor per file: the vision tower's shard cut short.
  s.shards = 200;
  const std::string sharded = test::random_hf_checkpoint("g4-mm-shards", s);
  const json index = json::parse(read_file(sharded + "/model.safetensors.index.json"));
  const std::string tower =
      index["weight_map"]["model.vision_tower.encoder.layers.0.mlp.up_proj.linear.weight"];
  for (auto& [t, f] : index["weight_map"].items()) {
    if (f == tower) ASSERT_TRUE(t.starts_with("model.vision_tower.")) << t;
  }
  fs::resize_file(sharded + "/" + tower, 16);
  EXPECT_EQ(test::first_bit_difference(g4_logits(load_model(sharded, {})), text), -1);
}

// A config the tensors contradict is refused before any weight is read,
// naming the field and both values.
TEST(Gemma4Load, ConfigsTheTensorsContradictAreRefused) {
  const std::string dir = test::random_hf_checkpoint("g4-bad", gemma4());
  const json good = json::parse(read_file(dir + "/config.json"));
  auto refused = [&](const json& patch, std::initializer_list<std::string> says) {
    json j = good;
    j.merge_patch(patch);
    std::ofstream(dir + "/config.json") << j.dump();
    test::expect_error<ConfigError>([&] { load_model(dir, {}); }, says);
  };
  refused({{"hidden_size_per_layer_input", 16}}, {"hidden_size_per_layer_input = 16", "8 wide"});
  refused({{"num_kv_shared_layers", 1}}, {"num_kv_shared_layers = 1", "layer 4", "no k_proj",
                                          "num_kv_shared_layers = 2"});
  refused({{"num_kv_shared_layers", 3}}, {"num_kv_shared_layers = 3", "double-wide",
                                          "layer 4", "num_kv_shared_layers = 2"});
  refused({{"global_head_dim", 16}}, {"global_head_dim = 16", "layer 2", "4 x 32"});
  refused({{"head_dim", 32}}, {"head_dim = 32", "layer 0", "4 x 16"});
  refused({{"enable_moe_block", true}}, {"enable_moe_block", "26B-A4B", "not supported"});
  refused({{"num_kv_shared_layers", 6}}, {"num_kv_shared_layers", "0..5", "6"});
  std::ofstream(dir + "/config.json") << good.dump();
  EXPECT_NO_THROW(load_model(dir, {}));
}

// A GGUF of the mixture-of-experts 26B-A4B carries llama.cpp's expert_count
// (its shared-expert MLP has the dense names, so it would load without its
// experts): refused, naming the key and its value.
TEST(Gemma4Gguf, MixtureOfExpertsIsRefused) {
  const std::string dir = test::random_hf_checkpoint("g4-gguf-moe", gemma4());
  const std::string gguf = test::temp_dir("g4-gguf-moe") + "/moe.gguf";
  test::GgufConvert opt;
  opt.edit = [](io::GgufMetadata& kv, std::vector<io::GgufWriteTensor>&) {
    kv.push_back({"gemma4.expert_count", io::GgufValue::u32(128)});
  };
  test::convert_hf_to_gguf(dir, gguf, opt);
  test::expect_error<ConfigError>([&] { load_model(gguf, {}); },
                                  {"gemma4.expert_count = 128", "mixture-of-experts", "26B-A4B"});
  opt.edit = [](io::GgufMetadata& kv, std::vector<io::GgufWriteTensor>&) {
    kv.push_back({"gemma4.expert_count", io::GgufValue::u32(0)});
  };
  test::convert_hf_to_gguf(dir, gguf, opt);
  EXPECT_NO_THROW(load_model(gguf, {}));
}

// Most layers sharing K/V, all beyond the eighth (E2B: 35 layers, the last 20
// shared): the file holds no attn_k/attn_v/attn_k_norm for those, as
// llama.cpp's converter writes it, and the count of tensors the metadata
// implies must see the shared layers' smaller count.
TEST(Gemma4Gguf, SharedLayersBeyondTheEighthLoad) {
  RandomSpec s = gemma4();
  s.n_layers = 20, s.kv_shared = 12, s.layer_types.clear();
  for (int i = 0; i < 20; ++i) {  // E2B's 4 sliding : 1 full, the last full
    s.layer_types.push_back(i % 5 == 4 || i == 19 ? "full_attention" : "sliding_attention");
  }
  const std::string dir = test::random_hf_checkpoint("g4-gguf-deep", s);
  const std::string gguf = test::temp_dir("g4-gguf-deep") + "/m.gguf";
  test::convert_hf_to_gguf(dir, gguf, {});
  const LoadedModel hf = load_model(dir, {}), gg = load_model(gguf, {});
  ASSERT_EQ(gg.config.n_layers, 20);
  EXPECT_FALSE(gg.config.layer_kind(19).owns_kv());
  EXPECT_EQ(test::first_bit_difference(g4_logits(hf), g4_logits(gg)), -1);
}

// GGUF copies converted as llama.cpp does (ours: every matrix in one type,
// our quantizer) compute what the HF checkpoint requantized at load computes.
TEST(Gemma4Gguf, QuantizedCopiesEqualTheRequantizedCheckpoint) {
  RandomSpec s = gemma4();  // widths of 256: the K types hold as themselves
  s.d_model = 256, s.ffn = 256, s.ple_dim = 256, s.head_dim = 64, s.global_head_dim = 128;
  const std::string dir = test::random_hf_checkpoint("g4-gguf-q", s);
  for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_K}) {
    SCOPED_TRACE(ggml_type_name(uint32_t(t)));
    const std::string gguf = test::temp_dir("g4-gguf-q") + "/m.gguf";
    test::GgufConvert opt;
    opt.matrix_type = uint32_t(t);
    // Token tables stay F32, as the checkpoint's are looked up (and its tied
    // head quantized from them) at load.
    opt.type_of = [](const std::string& n) { return n.find("token_embd") != std::string::npos ? 0 : -1; };
    test::convert_hf_to_gguf(dir, gguf, opt);
    const Hold hold = t == GgmlType::Q8_0 ? kernels::WeightType::Q8_0 : kernels::WeightType::Q4_K;
    const LoadedModel g = load_model(gguf, {hold});
    EXPECT_EQ(g.weights.layers[4].w_gate_up.hold(), *hold);
    EXPECT_EQ(g.weights.layers[0].w_ple_gate.hold(), *hold);
    EXPECT_EQ(test::first_bit_difference(g4_logits(g), g4_logits(load_model(dir, {hold}))), -1);
  }
  // A quantized per-layer table (as downloads have it) is looked up as stored.
  const std::string gguf = test::temp_dir("g4-gguf-q") + "/q8table.gguf";
  test::GgufConvert opt;
  opt.matrix_type = uint32_t(GgmlType::Q8_0);
  test::convert_hf_to_gguf(dir, gguf, opt);
  const LoadedModel g = load_model(gguf, {});
  EXPECT_EQ(g.weights.ple_embed.blocks, GgmlType::Q8_0);
  EXPECT_EQ(g.weights.embed.blocks, GgmlType::Q8_0);
  EXPECT_FALSE(g4_logits(g).empty());
  // Q4_K_M's mix (llama-quantize): Q6_K for attn_v, ffn_down and the tables,
  // Q4_K for the rest; each part held as stored.
  const std::string km = test::temp_dir("g4-gguf-q") + "/q4km.gguf";
  opt.matrix_type = uint32_t(GgmlType::Q4_K);
  opt.type_of = [](const std::string& n) {
    const bool six = n.find("attn_v") != std::string::npos || n.find("ffn_down") != std::string::npos ||
                     n.find("token_embd") != std::string::npos;
    return six ? int(GgmlType::Q6_K) : -1;
  };
  test::convert_hf_to_gguf(dir, km, opt);
  const LoadedModel q = load_model(km, {});
  EXPECT_TRUE(q.weights.layers[0].wqkv.is_composite());  // Q4_K q, k + Q6_K v
  EXPECT_EQ(q.weights.layers[0].w_down.hold(), kernels::WeightType::Q6_K);
  EXPECT_EQ(q.weights.ple_embed.blocks, GgmlType::Q6_K);
  for (float v : g4_logits(q)) ASSERT_TRUE(std::isfinite(v));
}

// The GGUF written by the `gguf` package (its gemma4 tensor names and keys,
// tests/model/gemma4_gguf_writer.py) loads and computes the HF checkpoint's
// bits; needs the reference Python with gguf and numpy (MTPSPEC_REF_PYTHON).
TEST(Gemma4Gguf, WrittenWithTheGgufPackageEqualsHf) {
  std::string why;
  const std::string py = test::ref_python({"gguf", "numpy"}, &why);
  if (py.empty()) GTEST_SKIP() << why;
  const std::string script = std::string(MTPSPEC_SOURCE_DIR) + "/tests/model/gemma4_gguf_writer.py";
  for (const char* type : {"f32", "bf16"}) {
    SCOPED_TRACE(type);
    RandomSpec s = gemma4();
    s.nested_text_config = true;
    s.dtype = std::string(type) == "bf16" ? DType::BF16 : DType::F32;
    const std::string dir = test::random_hf_checkpoint("g4-pygguf", s);
    const std::string gguf = test::temp_dir("g4-pygguf") + "/m.gguf";
    std::string log;
    ASSERT_EQ(test::run_python(py, script, {dir, gguf, type}, &log), 0) << log;
    const LoadedModel hf = load_model(dir, {}), gg = load_model(gguf, {});
    EXPECT_EQ(gg.config.source, "gguf");
    ModelConfig a = hf.config, b = gg.config;
    a.source = b.source = "";
    a.eos_ids = b.eos_ids = {};
    a.bos_id = b.bos_id = -1;
    EXPECT_EQ(a.to_json().dump(), b.to_json().dump());
    EXPECT_EQ(test::first_bit_difference(g4_logits(hf), g4_logits(gg)), -1);
  }
}

}  // namespace
}  // namespace mtp::model
