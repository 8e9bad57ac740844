// Impossible config values, and configs that disagree with the tensors or the
// file size, are typed errors naming the file, the field and the value, found
// before anything is allocated; large but real values load. (The KV cache
// sized by need: tests/speculative/context_test.cc.)
#include <gtest/gtest.h>

#include <chrono>
#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "checkpoint_util.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "model/forward.h"
#include "model/hf_config.h"
#include "model/loader.h"
#include "model_util.h"
#include "test_util.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace mtp::model {
namespace {

using test::RandomSpec;

using test::expect_error;

ModelConfig parse(const json& patch, RandomSpec s = {}) {
  json j = test::hf_config_json(s);
  j.merge_patch(patch);
  return parse_hf_config(j, nullptr, "/some/dir/config.json");
}

// Every size field, every impossible value: ConfigError naming file, field, value.
TEST(ConfigValidation, ImpossibleHfValuesNameFileFieldAndValue) {
  struct Case {
    const char* key;
    json value;
    std::string shown;  // how the value appears in the message
  };
  const std::vector<Case> cases = {
      {"hidden_size", 0, "0"},
      {"hidden_size", -64, "-64"},
      {"num_hidden_layers", 0, "0"},
      {"num_hidden_layers", -2, "-2"},
      {"num_hidden_layers", 1000000000, "1000000000"},
      {"num_hidden_layers", INT_MAX, std::to_string(INT_MAX)},
      {"num_attention_heads", 0, "0"},
      {"num_attention_heads", -4, "-4"},
      {"num_key_value_heads", 0, "0"},
      {"num_key_value_heads", -2, "-2"},
      {"num_key_value_heads", 3, "3"},  // does not divide 4 heads
      {"num_key_value_heads", 8, "8"},  // more kv heads than heads
      {"head_dim", 0, "0"},
      {"head_dim", -16, "-16"},
      {"head_dim", 15, "15"},  // RoPE needs pairs
      {"intermediate_size", 0, "0"},
      {"intermediate_size", -96, "-96"},
      {"vocab_size", 0, "0"},
      {"vocab_size", -320, "-320"},
      {"max_position_embeddings", 0, "0"},
      {"max_position_embeddings", -1, "-1"},
      {"rms_norm_eps", 0, "0"},
      {"rms_norm_eps", -1e-6, "-1e-06"},
      {"rms_norm_eps", 1e300, "inf"},  // not representable in fp32
      {"rope_theta", 0, "0"},
      {"rope_theta", -10000, "-10000"},
      {"rope_theta", 1e39, "inf"},
      {"hidden_size", 3000000000LL, "3000000000"},  // not a 32-bit integer
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string(c.key) + " = " + c.value.dump());
    std::string key = c.key;
    // The field name as the message gives it (the key itself).
    expect_error<ConfigError>([&] { parse({{c.key, c.value}}); },
                              {"/some/dir/config.json", key, c.shown});
  }
}

TEST(ConfigValidation, HeadsMustDivideHiddenSizeWhenHeadDimIsDerived) {
  json p = {{"hidden_size", 100}, {"num_attention_heads", 3}, {"num_key_value_heads", 3},
            {"head_dim", nullptr}};
  expect_error<ConfigError>([&] { parse(p); },
                            {"config.json", "hidden_size 100", "num_attention_heads 3"});
  // With head_dim given, q width need not equal hidden_size (Qwen3, Gemma).
  p["head_dim"] = 32;
  EXPECT_EQ(parse(p).head_dim, 32);
}

TEST(ConfigValidation, RopeScalingFactorsMustBeUsable) {
  json rs = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 4.0},
             {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192}};
  expect_error<ConfigError>([&] { parse({{"rope_scaling", rs}}); },
                            {"high_freq_factor", "low_freq_factor"});
  rs["high_freq_factor"] = 8.0;
  rs["original_max_position_embeddings"] = 0;
  expect_error<ConfigError>([&] { parse({{"rope_scaling", rs}}); },
                            {"original_max_position_embeddings", "0"});
}

// Large values real checkpoints use are not refused.
TEST(ConfigValidation, LargeButRealValuesParse) {
  EXPECT_EQ(parse({{"max_position_embeddings", 1010000}}).max_position, 1010000);  // Qwen2.5-1M
  EXPECT_EQ(parse({{"max_position_embeddings", INT_MAX}}).max_position, INT_MAX);
  EXPECT_EQ(parse({{"vocab_size", 262144}}).vocab, 262144);  // Gemma 3
  EXPECT_EQ(parse({{"num_hidden_layers", 126}}).n_layers, 126);  // Llama 3.1 405B
  EXPECT_FLOAT_EQ(parse({{"rope_theta", 1e9}}).rope_theta, 1e9f);
  EXPECT_FLOAT_EQ(parse({{"rms_norm_eps", 1e-12}}).norm_eps, 1e-12f);
}

// A config that implies more weights than the files hold is refused before
// the loader builds per-layer tables — quickly, whatever the count.
TEST(ConfigValidation, ConfigDisagreeingWithTheFilesIsRefusedBeforeAllocating) {
  const std::vector<std::pair<json, std::string>> cases = {
      {{{"num_hidden_layers", 1000000000}}, "num_hidden_layers must be in 1..65536, got 1000000000"},
      {{{"num_hidden_layers", 65536}}, "num_hidden_layers 65536"},
      {{{"vocab_size", 2000000000}}, "vocab_size 2000000000"},
      {{{"intermediate_size", 2000000000}}, "intermediate_size 2000000000"},
      {{{"hidden_size", 1 << 30}, {"head_dim", 16}}, "hidden_size 1073741824"}};
  for (const auto& [patch, says] : cases) {
    SCOPED_TRACE(patch.dump());
    RandomSpec s;
    std::string dir = test::random_hf_checkpoint("cfg-big", s);
    json j = json::parse(read_file(dir + "/config.json"));
    j.merge_patch(patch);
    std::ofstream(dir + "/config.json") << j.dump();
    auto t0 = std::chrono::steady_clock::now();
    expect_error<ConfigError>([&] { load_model(dir, {}); }, {dir + "/config.json", says});
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
  }
  // One layer more than stored: the byte check may pass, the tensor check names it.
  RandomSpec s;
  s.config_patch = {{"num_hidden_layers", 3}};
  s.edit = [](const std::string& name, std::vector<int64_t>& shape, std::vector<float>&) {
    if (name.find("layers.2.") != std::string::npos) shape.clear();
  };
  s.n_layers = 3;
  std::string dir = test::random_hf_checkpoint("cfg-layers", s);
  expect_error<FormatError>([&] { load_model(dir, {}); }, {"layers.2.", "not found"});
}

TEST(ConfigValidation, LargeRealVocabularyLoads) {
  RandomSpec s;
  s.d_model = 16;
  s.n_heads = 2;
  s.n_kv_heads = 1;
  s.head_dim = 8;
  s.ffn = 32;
  s.n_layers = 1;
  s.vocab = 262144;  // Gemma 3's vocabulary, on a toy width
  s.tie = true;
  s.dtype = DType::BF16;
  s.max_position = 1010000;
  std::string dir = test::random_hf_checkpoint("cfg-vocab", s);
  LoadedModel lm = load_model(dir, {});
  EXPECT_EQ(lm.config.vocab, 262144);
  EXPECT_EQ(lm.config.max_position, 1010000);
}

// ---------------------------------------------------------------- llama2.c

void write_header(const std::string& path, const int32_t (&h)[7]) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.write(reinterpret_cast<const char*>(h), sizeof h);
}

TEST(ConfigValidation, Llama2cHeaderMustMatchTheFileSize) {
  const std::string dir = test::temp_dir("cfg-l2c");
  const std::string good = dir + "/good.bin";
  test::write_random_llama2c(good, 32, 64, 2, 4, 2, 100, 64, 3);
  const std::string full = read_file(good);
  EXPECT_NO_THROW(read_model_config(good));
  auto write = [&](const std::string& bytes) {
    std::string p = dir + "/bad.bin";
    std::ofstream(p, std::ios::binary | std::ios::trunc).write(bytes.data(), bytes.size());
    return p;
  };
  // Trailing bytes: FormatError; short by any amount: IoError. Both say why.
  std::string p = write(full + std::string(4, '\0'));
  expect_error<FormatError>([&] { read_model_config(p); }, {p, "4 bytes follow the last tensor"});
  expect_error<FormatError>([&] { load_model(p, {}); }, {p, "follow the last tensor"});
  p = write(full.substr(0, full.size() - 4));
  expect_error<IoError>([&] { load_model(p, {}); }, {p, "truncated", "implies"});

  // Each field changed to something the file cannot hold.
  int32_t h0[7];
  std::memcpy(h0, full.data(), sizeof h0);
  struct Case {
    int field;
    int32_t value;
    std::string says;
  };
  const std::vector<Case> cases = {
      {0, 0, "dim must be positive, got 0"},
      {0, -32, "dim must be positive, got -32"},
      {0, 30, "not a multiple of n_heads"},
      {0, 64, "implies"},
      {1, 0, "hidden_dim must be positive"},
      {1, 1 << 30, "implies"},
      {2, 0, "n_layers must be positive"},
      {2, 1000000000, "implies"},
      {3, 0, "n_heads must be positive"},
      {3, 3, "not a multiple of n_heads"},
      {4, 0, "n_kv_heads must be positive"},
      {4, 3, "n_heads 4 is not a multiple of n_kv_heads 3"},
      {4, 8, "n_heads 4 is not a multiple of n_kv_heads 8"},
      {5, 0, "vocab_size must be non-zero"},
      {5, INT_MIN, "vocab_size out of range"},
      {5, INT_MAX, "implies"},
      {5, -100, "implies"},  // unshared: a classifier the file does not hold
      {6, 0, "seq_len must be positive"},
      {6, -1, "seq_len must be positive"},
      {6, INT_MAX, "implies"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(testing::Message() << "field " << c.field << " = " << c.value);
    int32_t h[7];
    std::memcpy(h, h0, sizeof h);
    h[c.field] = c.value;
    std::string q = write(full);
    write_header(q, h);
    try {
      read_model_config(q);
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(q), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(c.says), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(std::to_string(c.value)), std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace mtp::model
