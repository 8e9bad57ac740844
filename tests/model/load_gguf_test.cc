// GGUF targets (model/loader.h load_gguf): the same random model of each
// family written as a Hugging Face checkpoint and converted to GGUF the way
// llama.cpp's converter does it (tests/gguf_util.h: Q/K permuted, Gemma norms
// + 1, llama3 scaling as rope_freqs.weight) gives bitwise-equal logits — so
// the loader's inverse of every convention is what is checked — and every
// inconsistent file is refused naming the tensor or key.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>

#include "checkpoint_util.h"
#include "core/error.h"
#include "core/ggml_type.h"
#include "core/mapped_file.h"
#include "gguf_util.h"
#include "io/gguf.h"
#include "kernels/quant_blocks.h"
#include "model/fingerprint.h"
#include "model/forward.h"
#include "model/loader.h"
#include "model_util.h"
#include "test_util.h"

namespace fs = std::filesystem;

namespace mtp::model {
namespace {

using kernels::WeightType;
using test::expect_error;
using test::GgufConvert;
using test::RandomSpec;

// Logits of `tokens` run through a fresh KV cache in chunks of 1, 3 and 5.
std::vector<float> logits(const LoadedModel& lm, const std::vector<int32_t>& tokens) {
  Model m(lm);
  KVCache kv(m.config(), 1, 64);
  ThreadPool pool(2);
  return test::run_chunks(m, kv, 0, tokens, {1, 3, 5}, &pool).logits;
}

RandomSpec spec_for(Arch a, DType dt) {
  RandomSpec s = RandomSpec::for_arch(a);
  s.dtype = dt;
  s.seed = 7;
  if (a == Arch::Llama) {
    // Llama 3.1-style scaling, which the GGUF carries as rope_freqs.weight.
    s.rope_theta = 500000.f;
    s.config_patch = {{"rope_scaling", {{"rope_type", "llama3"}, {"factor", 8.0},
                                        {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
                                        {"original_max_position_embeddings", 8192}}}};
  }
  return s;
}

uint32_t ggml_of(DType dt) {
  return dt == DType::F32 ? 0u : dt == DType::F16 ? 1u : uint32_t(GgmlType::BF16);
}

struct Case {
  Arch arch;
  DType dtype;  // stored dtype of the HF copy = GGUF matrix type
};
void PrintTo(const Case& c, std::ostream* os) { *os << arch_name(c.arch) << "/" << dtype_name(c.dtype); }

class GgufEqualsHf : public ::testing::TestWithParam<Case> {};

TEST_P(GgufEqualsHf, BitwiseEqualLogits) {
  const Case cs = GetParam();
  const RandomSpec s = spec_for(cs.arch, cs.dtype);
  const std::string dir = test::random_hf_checkpoint("gguf-hf", s);
  const std::string gguf = test::temp_dir("gguf-out") + "/" + std::string(arch_name(cs.arch)) + ".gguf";
  GgufConvert opt;
  opt.matrix_type = ggml_of(cs.dtype);
  test::convert_hf_to_gguf(dir, gguf, opt);

  // fp32, bf16, and auto (as stored: the fp32 hold's bits, bf16 / fp16 held
  // for a BF16 / F16 checkpoint — model::Hold).
  std::vector<float> fp32_logits;
  for (Hold hold : {Hold{WeightType::F32}, Hold{WeightType::BF16}, Hold{}}) {
    const LoadedModel hf = load_hf(dir, {hold});
    const LoadedModel gg = load_model(gguf, {hold});  // dispatch on the magic
    EXPECT_EQ(gg.config.source, "gguf");
    EXPECT_EQ(gg.tokenizer, gguf);
    // Every field the forward reads agrees with the HF config.
    ModelConfig a = hf.config, b = gg.config;
    a.source = b.source = "";
    a.eos_ids = b.eos_ids = {};
    a.bos_id = b.bos_id = -1;
    EXPECT_EQ(a.to_json().dump(), b.to_json().dump());
    std::mt19937 rng(3);
    const auto tokens = test::random_tokens(rng, 24, hf.config.vocab);
    const auto x = logits(hf, tokens), y = logits(gg, tokens);
    ASSERT_EQ(x.size(), y.size());
    const std::string name = hold ? kernels::weight_type_name(*hold) : "auto";
    EXPECT_EQ(test::first_bit_difference(x, y), -1) << "hold " << name;
    if (hold == WeightType::F32) fp32_logits = x;
    if (!hold) {
      const WeightType as_stored = cs.dtype == DType::BF16  ? WeightType::BF16
                                   : cs.dtype == DType::F16 ? WeightType::F16
                                                            : WeightType::F32;
      for (const LoadedModel* m : {&hf, &gg}) {
        EXPECT_EQ(m->weights.layers[0].wqkv.hold(), as_stored) << m->config.source;
        EXPECT_EQ(m->weights.layers.back().w_down.hold(), as_stored) << m->config.source;
        EXPECT_EQ(m->weights.lm_head.hold(), as_stored) << m->config.source;
      }
      EXPECT_EQ(test::first_bit_difference(x, fp32_logits), -1) << "auto differs from fp32";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Families, GgufEqualsHf,
    ::testing::Values(Case{Arch::Llama, DType::F32}, Case{Arch::Qwen2, DType::F32},
                      Case{Arch::Qwen3, DType::F32}, Case{Arch::Gemma2, DType::F32},
                      Case{Arch::Gemma3, DType::F32}, Case{Arch::Llama, DType::F16},
                      Case{Arch::Llama, DType::BF16}, Case{Arch::Gemma3, DType::BF16},
                      Case{Arch::Qwen2, DType::F16}, Case{Arch::Gemma2, DType::BF16},
                      Case{Arch::Qwen3, DType::BF16}),
    [](const auto& info) {
      return std::string(arch_name(info.param.arch)) + "_" + std::string(dtype_name(info.param.dtype));
    });

// Writes the Llama test model as GGUF with `edit` applied; returns its path.
std::string edited(const std::string& tag,
                   std::function<void(io::GgufMetadata&, std::vector<io::GgufWriteTensor>&)> edit,
                   Arch arch = Arch::Llama) {
  static std::map<Arch, std::string> dirs;
  if (!dirs.count(arch)) dirs[arch] = test::random_hf_checkpoint("gguf-err", spec_for(arch, DType::F32));
  GgufConvert opt;
  opt.edit = std::move(edit);
  const std::string p = test::temp_dir("gguf-err") + "/" + tag + ".gguf";
  test::convert_hf_to_gguf(dirs[arch], p, opt);
  return p;
}

io::GgufWriteTensor& find(std::vector<io::GgufWriteTensor>& ts, const std::string& name) {
  for (auto& t : ts) {
    if (t.name == name) return t;
  }
  throw std::runtime_error("no tensor " + name);
}
void set(io::GgufMetadata& kv, const std::string& key, io::GgufValue v) {
  for (auto& [k, x] : kv) {
    if (k == key) {
      x = std::move(v);
      return;
    }
  }
  kv.push_back({key, std::move(v)});
}
void erase_key(io::GgufMetadata& kv, const std::string& key) {
  std::erase_if(kv, [&](auto& e) { return e.first == key; });
}

// llama.cpp's converter adds Gemma's 1 in the checkpoint's dtype: from an
// F16 checkpoint the GGUF's norms are rounded sums, and the loader must use
// them as stored (so the logits differ from the HF checkpoint's).
TEST(LoadGguf, GemmaF16NormsAreUsedAsStored) {
  const std::string dir = test::random_hf_checkpoint("gguf-g16", spec_for(Arch::Gemma2, DType::F16));
  const std::string p = test::temp_dir("gguf-out") + "/g16.gguf";
  GgufConvert opt;
  opt.matrix_type = 1;
  test::convert_hf_to_gguf(dir, p, opt);
  const LoadedModel gg = load_model(p, {});
  const io::GgufFile f(p);
  const io::GgufTensor& t = *f.tensor("blk.0.attn_norm.weight");
  ASSERT_EQ(t.type, 0u);
  EXPECT_EQ(std::memcmp(gg.weights.layers[0].attn_norm.data(), t.data, t.nbytes), 0);
  std::mt19937 rng(4);
  const auto tokens = test::random_tokens(rng, 8, gg.config.vocab);
  EXPECT_NE(test::first_bit_difference(logits(load_hf(dir, {}), tokens), logits(gg, tokens)), -1);
}

// llama.cpp's hard-coded Gemma values, read back from the metadata alone.
TEST(LoadGguf, GemmaHardCodedValues) {
  const ModelConfig g3 = read_model_config(edited("g3", [](auto&, auto&) {}, Arch::Gemma3));
  EXPECT_EQ(test::sliding_of(g3), (std::vector<uint8_t>{1, 1, 1, 1, 1, 0}));
  EXPECT_EQ(g3.rope_local_theta, 10000.f);
  EXPECT_EQ(g3.attn_softcap, 0.f);
  EXPECT_EQ(g3.query_scale, float(std::pow(32.0, -0.5)));  // 1/sqrt(head_dim)
  const ModelConfig nowin = read_model_config(edited("g3w", [](auto& kv, auto&) {
    set(kv, "gemma3.attention.sliding_window", io::GgufValue::u32(0)); }, Arch::Gemma3));
  EXPECT_EQ(test::sliding_of(nowin), std::vector<uint8_t>(6, 0));
  EXPECT_EQ(nowin.rope_local_theta, 0.f);
  const ModelConfig g2 = read_model_config(edited("g2", [](auto& kv, auto&) {
    erase_key(kv, "gemma2.attn_logit_softcapping");
    erase_key(kv, "gemma2.attention.sliding_window"); }, Arch::Gemma2));
  EXPECT_EQ(g2.attn_softcap, 50.f);  // llama.cpp's defaults
  EXPECT_EQ(g2.sliding_window, 4096);
  EXPECT_EQ(test::sliding_of(g2), (std::vector<uint8_t>{1, 0}));
  EXPECT_EQ(g2.embed_scale, std::sqrt(64.f));
}

TEST(LoadGguf, AlignmentVersionAndAnyFileName) {
  const std::string dir = test::random_hf_checkpoint("gguf-misc", spec_for(Arch::Qwen3, DType::F32));
  const std::string p = test::temp_dir("gguf-misc") + "/weights.bin";  // not named .gguf
  GgufConvert opt;
  opt.alignment = 64;
  opt.version = 2;
  test::convert_hf_to_gguf(dir, p, opt);
  EXPECT_EQ(read_model_config(p).source, "gguf");
  std::mt19937 rng(5);
  const auto tokens = test::random_tokens(rng, 9, 320);
  EXPECT_EQ(test::first_bit_difference(logits(load_hf(dir, {}), tokens),
                                       logits(load_model(p, {}), tokens)), -1);
}

TEST(LoadGguf, InconsistentFilesNameTheTensorOrKey) {
  expect_error<ConfigError>([&] { load_model(edited("arch", [](auto& kv, auto&) {
                              set(kv, "general.architecture", io::GgufValue::str("mamba")); }), {}); },
                            {"general.architecture", "mamba", "not supported"});
  expect_error<ConfigError>([&] { load_model(edited("nokey", [](auto& kv, auto&) {
                              erase_key(kv, "llama.block_count"); }), {}); },
                            {"llama.block_count", "missing"});
  expect_error<ShapeError>([&] { load_model(edited("shape", [](auto&, auto& ts) {
                             auto& t = find(ts, "blk.1.ffn_up.weight");
                             t.dims = {t.dims[0] / 2, t.dims[1] * 2}; }), {}); },
                           {"blk.1.ffn_up.weight", "shape [192, 32]", "[96, 64]"});
  expect_error<FormatError>([&] { load_model(edited("missing", [](auto&, auto& ts) {
                              find(ts, "blk.0.attn_k.weight").name = "blk.0.attn_kk.weight"; }), {}); },
                            {"blk.0.attn_k.weight", "not found"});
  expect_error<FormatError>([&] { load_model(edited("layers", [](auto& kv, auto&) {
                              set(kv, "llama.block_count", io::GgufValue::u32(60000)); }), {}); },
                            {"60000 layers", "holds 22 tensors"});
  expect_error<FormatError>([&] { load_model(edited("extra", [](auto&, auto& ts) {
                              ts.push_back({"blk.0.attn_q.bias", {64}, 0, std::string(256, '\0')}); }), {}); },
                            {"blk.0.attn_q.bias", "would be ignored"});
  expect_error<ShapeError>([&] { load_model(edited("vocab", [](auto& kv, auto&) {
                             set(kv, "llama.vocab_size", io::GgufValue::u32(999)); }), {}); },
                           {"llama.vocab_size", "999", "320"});
  expect_error<ConfigError>([&] { load_model(edited("yarn", [](auto& kv, auto&) {
                              set(kv, "llama.rope.scaling.type", io::GgufValue::str("yarn")); }), {}); },
                            {"rope.scaling.type", "yarn"});
  expect_error<ConfigError>([&] { load_model(edited("freqs", [](auto&, auto& ts) {
                              auto& t = find(ts, "rope_freqs.weight");
                              float v = 3.3f;
                              std::memcpy(&t.bytes[4 * 5], &v, 4); }), {}); },
                            {"rope_freqs.weight", "not llama3"});
  // NaN in a matrix.
  expect_error<FormatError>([&] { load_model(edited("nan", [](auto&, auto& ts) {
                              auto& t = find(ts, "blk.0.ffn_down.weight");
                              float v = std::nanf("");
                              std::memcpy(&t.bytes[40], &v, 4); }), {}); },
                            {"blk.0.ffn_down.weight", "non-finite"});
  // A non-finite fp16 scale in a block-quantized matrix and embedding: the
  // tensor's F32 values requantized, then one block's d set to NaN / -Inf.
  const auto requantized = [](io::GgufWriteTensor& t, GgmlType type, size_t row, uint16_t d) {
    const size_t cols = size_t(t.dims[0]), rows = size_t(t.dims[1]);
    const size_t rb = ggml_row_bytes(uint32_t(type), cols);
    std::string out(rows * rb, '\0');
    for (size_t r = 0; r < rows; ++r) {
      kernels::quantize_row(type, reinterpret_cast<const float*>(t.bytes.data()) + r * cols, cols,
                            &out[r * rb]);
    }
    std::memcpy(&out[row * rb + ggml_type_info(uint32_t(type)).block_bytes], &d, 2);  // block 1
    t.type = uint32_t(type);
    t.bytes = std::move(out);
  };
  expect_error<FormatError>([&] { load_model(edited("nan-q8", [&](auto&, auto& ts) {
                              requantized(find(ts, "blk.1.ffn_down.weight"), GgmlType::Q8_0, 3,
                                          0x7E00); }), {}); },
                            {"blk.1.ffn_down.weight", "non-finite scale d", "block 1 of row 3",
                             "Q8_0"});
  expect_error<FormatError>([&] { load_model(edited("inf-embd", [&](auto&, auto& ts) {
                              requantized(find(ts, "token_embd.weight"), GgmlType::Q4_0, 5,
                                          0xFC00); }), {}); },
                            {"token_embd.weight", "non-finite scale d = -inf", "row 5"});
}

// Messages about a GGUF file name its metadata keys, never the Hugging Face
// config field the value maps to.
TEST(LoadGguf, ErrorsNameGgufKeys) {
  auto refused = [](const char* tag, const std::string& key, std::vector<std::string> names) {
    const std::string p = edited(tag, [&](auto& kv, auto&) { set(kv, key, io::GgufValue::u32(0)); });
    try {
      load_model(p, {});
      ADD_FAILURE() << key << " = 0 was accepted";
    } catch (const ConfigError& e) {
      const std::string msg = e.what();
      for (auto& n : names) EXPECT_NE(msg.find(n), std::string::npos) << msg;
      for (const char* hf : {"max_position_embeddings", "num_key_value_heads", "intermediate_size",
                             "hidden_size"}) {
        EXPECT_EQ(msg.find(hf), std::string::npos) << msg;
      }
    }
  };
  refused("ctx0", "llama.context_length", {"llama.context_length", "positive"});
  refused("kv0", "llama.attention.head_count_kv", {"llama.attention.head_count_kv"});
  refused("ffn0", "llama.feed_forward_length", {"llama.feed_forward_length"});
  refused("d0", "llama.embedding_length", {"llama.embedding_length"});
}

TEST(LoadGguf, UnsupportedTypesAreRefusedNamingTheTensor) {
  // A block type mtpspec does not compute with (Q8_1, valid blocks).
  const std::string q = edited("q81", [](auto&, auto& ts) {
    auto& t = find(ts, "blk.1.attn_output.weight");
    t.type = uint32_t(GgmlType::Q8_1);
    t.bytes.assign(size_t(t.dims[1]) * size_t(t.dims[0]) / 32 * 36, '\0');
  });
  expect_error<ConfigError>([&] { load_model(q, {}); },
                            {"blk.1.attn_output.weight", "Q8_1", "cannot compute"});
  const std::string norm = edited("q8norm", [](auto&, auto& ts) {
    auto& t = find(ts, "output_norm.weight");
    t.type = uint32_t(GgmlType::Q8_0);
    t.bytes.assign(size_t(t.dims[0]) / 32 * 34, '\0');
  });
  expect_error<ConfigError>([&] { load_model(norm, {}); }, {"output_norm.weight", "Q8_0", "norm"});
  const std::string unk = edited("unk", [](auto&, auto& ts) { find(ts, "blk.0.ffn_gate.weight").type = 17; });
  expect_error<FormatError>(
      [&] { load_model(unk, {}); },
      {"tensor blk.0.ffn_gate.weight has ggml type 17 (IQ2_XS), which mtpspec does not support"});
  const std::string none = edited("none", [](auto&, auto& ts) { find(ts, "blk.0.ffn_gate.weight").type = 99; });
  expect_error<FormatError>([&] { load_model(none, {}); },
                            {"tensor blk.0.ffn_gate.weight has ggml type 99, which mtpspec does not support"});
}

// A GGUF whose matrices are stored as ggml blocks (quantized by mtpspec's own
// quantizer, row by row) holds them bit for bit: its logits equal the HF
// checkpoint's requantized at load with --weights of that type (the same
// quantizer on the same rows; the Q/K permutation moves whole rows).
struct QuantCase {
  Arch arch;
  GgmlType type;
  int width;  // d_model = ffn = heads·head_dim (a multiple of the block)
};
void PrintTo(const QuantCase& c, std::ostream* os) {
  *os << arch_name(c.arch) << "/" << ggml_type_name(uint32_t(c.type));
}
class QuantGgufEqualsRequantizedHf : public ::testing::TestWithParam<QuantCase> {};

TEST_P(QuantGgufEqualsRequantizedHf, BitwiseEqualLogits) {
  const QuantCase qc = GetParam();
  RandomSpec s = spec_for(qc.arch, DType::F32);
  s.tie = false;  // a tied head would be the (float) embedding in the GGUF
  s.d_model = qc.width;
  s.ffn = qc.width;
  s.head_dim = qc.width / s.n_heads;
  const std::string dir = test::random_hf_checkpoint("gguf-quant-hf", s);
  const std::string gguf = test::temp_dir("gguf-out") + "/quant.gguf";
  GgufConvert opt;
  opt.matrix_type = uint32_t(qc.type);
  opt.type_of = [](const std::string& n) { return n == "token_embd.weight" ? 0 : -1; };
  test::convert_hf_to_gguf(dir, gguf, opt);
  WeightType hold = WeightType::F32;
  for (WeightType t : {WeightType::Q8_0, WeightType::Q4_0, WeightType::Q4_1, WeightType::Q5_0,
                       WeightType::Q5_1, WeightType::Q4_K, WeightType::Q5_K, WeightType::Q6_K}) {
    if (kernels::weight_ggml_type(t) == qc.type) hold = t;
  }
  ASSERT_NE(hold, WeightType::F32);
  const LoadedModel hf = load_hf(dir, {hold});
  const LoadedModel gg = load_model(gguf, {WeightType::F32});  // blocks held as stored
  EXPECT_EQ(gg.weights.layers[0].wqkv.hold(), hold);
  std::mt19937 rng(5);
  const auto tokens = test::random_tokens(rng, 20, hf.config.vocab);
  const auto x = logits(hf, tokens), y = logits(gg, tokens);
  ASSERT_EQ(x.size(), y.size());
  EXPECT_EQ(test::first_bit_difference(x, y), -1);
}

INSTANTIATE_TEST_SUITE_P(
    Types, QuantGgufEqualsRequantizedHf,
    ::testing::Values(QuantCase{Arch::Llama, GgmlType::Q8_0, 64},
                      QuantCase{Arch::Llama, GgmlType::Q4_0, 64},
                      QuantCase{Arch::Qwen2, GgmlType::Q5_0, 64},
                      QuantCase{Arch::Qwen2, GgmlType::Q5_1, 64},
                      QuantCase{Arch::Llama, GgmlType::Q4_1, 64},
                      QuantCase{Arch::Gemma2, GgmlType::Q8_0, 64},
                      QuantCase{Arch::Llama, GgmlType::Q4_K, 256},
                      QuantCase{Arch::Qwen3, GgmlType::Q6_K, 256},
                      QuantCase{Arch::Llama, GgmlType::Q5_K, 256}),
    [](const auto& info) {
      return std::string(arch_name(info.param.arch)) + "_" +
             ggml_type_name(uint32_t(info.param.type));
    });

// Q4_K_M's mix (llama-quantize): Q4_K q/k and gate/up, Q6_K v and down and a
// Q6_K token_embd used as the tied head: one fused wqkv of two block types
// (a composite matrix). Verify == decode holds bit for bit, and the rows are
// the stored blocks.
TEST(LoadGguf, MixedBlockTypesLikeQ4KM) {
  RandomSpec s = spec_for(Arch::Llama, DType::F32);
  s.d_model = s.ffn = 256;
  s.head_dim = 256 / s.n_heads;
  s.tie = true;
  const std::string dir = test::random_hf_checkpoint("gguf-q4km", s);
  const std::string gguf = test::temp_dir("gguf-out") + "/q4km.gguf";
  GgufConvert opt;
  opt.matrix_type = uint32_t(GgmlType::Q4_K);
  opt.type_of = [](const std::string& n) {
    const bool six = n.find("attn_v") != std::string::npos ||
                     n.find("ffn_down") != std::string::npos || n == "token_embd.weight";
    return six ? int(GgmlType::Q6_K) : -1;
  };
  test::convert_hf_to_gguf(dir, gguf, opt);
  const LoadedModel gg = load_model(gguf, {WeightType::F32});
  const auto& l0 = gg.weights.layers[0];
  ASSERT_TRUE(l0.wqkv.is_composite());
  EXPECT_EQ(l0.wqkv.parts().size(), 2u);
  EXPECT_EQ(l0.wqkv.parts()[0].hold(), WeightType::Q4_K);
  EXPECT_EQ(l0.wqkv.parts()[1].hold(), WeightType::Q6_K);
  EXPECT_EQ(l0.w_down.hold(), WeightType::Q6_K);
  EXPECT_EQ(gg.weights.lm_head.hold(), WeightType::Q6_K);
  // The embedding row is the stored blocks' dequantization.
  const io::GgufFile f(gguf);
  const io::GgufTensor* e = f.tensor("token_embd.weight");
  std::vector<float> want(size_t(s.d_model)), got(size_t(s.d_model));
  kernels::dequantize_row(GgmlType::Q6_K, e->data + 7 * ggml_row_bytes(e->type, size_t(s.d_model)),
                          size_t(s.d_model), want.data());
  gg.weights.embed.lookup(7, 1.f, got.data());
  EXPECT_EQ(test::first_bit_difference(want, got), -1);
  // Verify rows == decode rows.
  Model m(gg);
  std::mt19937 rng(2);
  const auto tokens = test::random_tokens(rng, 18, gg.config.vocab);
  ThreadPool pool(2);
  KVCache a(m.config(), 1, 64), b(m.config(), 1, 64);
  const auto one = test::run_chunks(m, a, 0, tokens, {1}, &pool).logits;
  const auto many = test::run_chunks(m, b, 0, tokens, {5, 3, 7}, &pool).logits;
  EXPECT_EQ(test::first_bit_difference(one, many), -1);
  for (float v : one) ASSERT_TRUE(std::isfinite(v));
}

TEST(LoadGguf, TruncatedOrForeignFilesAreClearErrors) {
  const std::string good = edited("good", [](auto&, auto&) {});
  const std::string data = read_file(good);
  const std::string p = test::temp_dir("gguf-trunc") + "/t.gguf";
  for (size_t cut : {size_t(4), size_t(100), data.size() / 2, data.size() - 1000}) {
    std::ofstream(p, std::ios::binary).write(data.data(), std::streamsize(cut));
    expect_error<IoError>([&] { load_model(p, {}); }, {p, "truncated"});
  }
}

TEST(LoadGguf, FingerprintIsThatOfTheStoredBytes) {
  const std::string dir = test::random_hf_checkpoint("gguf-fp", spec_for(Arch::Gemma2, DType::F32));
  const std::string out = test::temp_dir("gguf-out");
  const std::string g32 = out + "/a.gguf", g16 = out + "/b.gguf", again = out + "/c.gguf";
  GgufConvert o32, o16;
  o16.matrix_type = 1;
  test::convert_hf_to_gguf(dir, g32, o32);
  test::convert_hf_to_gguf(dir, g16, o16);
  test::convert_hf_to_gguf(dir, again, o32);
  const std::string hf = target_fingerprint(load_hf(dir, {}), false);
  const std::string a = target_fingerprint(load_model(g32, {}), false);
  const std::string b = target_fingerprint(load_model(g16, {}), false);
  EXPECT_NE(a, hf);  // same logits, but another file: another target
  EXPECT_NE(a, b);   // F16 bytes differ from F32 bytes
  EXPECT_EQ(a, target_fingerprint(load_model(again, {}), false));  // the bytes, not the path
}

}  // namespace
}  // namespace mtp::model

namespace mtp::model {
namespace {

// --weights q8_0 | q4_k requantizes at load: another function, so another
// fingerprint (a drafter of the original is refused on it by default), the
// same one for the same type every time; fp32/bf16 holds keep the stored one.
TEST(Fingerprint, RequantizedTargetsHaveTheirOwn) {
  const std::string dir = test::random_hf_checkpoint("fp-requant", RandomSpec::for_arch(Arch::Llama));
  const std::string fp32 = target_fingerprint(load_model(dir, {WeightType::F32}), false);
  EXPECT_EQ(target_fingerprint(load_model(dir, {WeightType::BF16}), false), fp32);
  const std::string q8 = target_fingerprint(load_model(dir, {WeightType::Q8_0}), false);
  const std::string q4 = target_fingerprint(load_model(dir, {WeightType::Q4_0}), false);
  EXPECT_NE(q8, fp32);
  EXPECT_NE(q4, fp32);
  EXPECT_NE(q4, q8);
  EXPECT_EQ(target_fingerprint(load_model(dir, {WeightType::Q8_0}), false), q8);
}

}  // namespace
}  // namespace mtp::model
