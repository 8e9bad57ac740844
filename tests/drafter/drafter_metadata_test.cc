// The drafter file's metadata must agree with its tensors: a K that names
// fewer or more modules than stored, a draft_vocab larger than the target's
// vocabulary, non-integer or non-object metadata — each a FormatError naming
// the file, never a silently ignored module or an unbounded allocation.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "drafter/drafter.h"
#include "drafter/shards.h"
#include "io/safetensors.h"
#include "model/fingerprint.h"
#include "model/loader.h"
#include "model_util.h"
#include "test_util.h"

using nlohmann::json;

namespace mtp::drafter {
namespace {


// Rewrites `src` into `dst` with __metadata__ key `key` set to `value`
// (tensors unchanged), or with `drop` tensors removed.
void rewrite_meta(const std::string& src, const std::string& dst, const std::string& key,
             const std::string& value, const std::string& drop_prefix = "") {
  io::TensorSet ts = io::TensorSet::open_file(src);
  std::vector<io::TensorView> views;
  for (const auto& n : ts.names()) {
    if (!drop_prefix.empty() && n.rfind(drop_prefix, 0) == 0) continue;
    views.push_back(ts.get(n));
  }
  io::Metadata meta = ts.metadata();
  if (!key.empty()) meta[key] = value;
  io::write_safetensors(dst, views, meta);
}

using test::expect_error;

TEST(DrafterMetadata, KMustMatchTheModulesPresent) {
  std::string dir = test::temp_dir("drafter-meta");
  test::SmallTarget t = test::small_llama2c_target(dir);
  DrafterConfig dc;
  dc.K = 3;
  std::string good = dir + "/d3.safetensors";
  write_drafter(good, t.lm.config, t.fingerprint, dc,
                random_drafter_tensors(t.lm.config, dc, 7), {});
  auto load = [&](const std::string& p) {
    return Drafter::load(p, t.lm.config, t.fingerprint, kernels::WeightType::F32);
  };
  EXPECT_EQ(load(good).config().K, 3);
  for (int k : {1, 2}) {
    SCOPED_TRACE(k);
    DrafterConfig less = dc;
    less.K = k;
    std::string p = dir + "/k.safetensors";
    rewrite_meta(good, p, "config", less.to_json().dump());
    expect_error<FormatError>([&] { load(p); },
                              {p, "mtp." + std::to_string(k) + ".", "K = " + std::to_string(k)});
  }
  // More modules in the metadata than stored: the missing tensor is named.
  DrafterConfig more = dc;
  more.K = 4;
  std::string p = dir + "/k4.safetensors";
  rewrite_meta(good, p, "config", more.to_json().dump());
  expect_error<FormatError>([&] { load(p); }, {"mtp.3.", "not found"});
  // A stray tensor beside the modules.
  io::TensorSet ts = io::TensorSet::open_file(good);
  std::vector<io::TensorView> views;
  for (const auto& n : ts.names()) views.push_back(ts.get(n));
  std::vector<float> extra(4, 0.f);
  views.push_back(io::make_view("mtp.0.block.extra.bias", DType::F32, {4}, extra));
  p = dir + "/stray.safetensors";
  io::write_safetensors(p, views, ts.metadata());
  expect_error<FormatError>([&] { load(p); }, {p, "mtp.0.block.extra.bias"});
}

TEST(DrafterMetadata, ConfigValuesAreCheckedBeforeUse) {
  auto bad = [](const json& j, const std::string& says) {
    SCOPED_TRACE(j.dump());
    expect_error<FormatError>([&] { DrafterConfig::from_json(j); }, {says});
  };
  bad({{"K", 0}}, "K = 0");
  bad({{"K", 17}}, "K = 17");
  bad({{"K", 2.5}}, "K = 2.5");
  bad({{"K", "2"}}, "K = \"2\"");
  bad(json::object(), "missing 'K'");
  bad(json::array(), "not a JSON object");
  bad({{"K", 2}, {"window", -1}}, "window = -1");
  bad({{"K", 2}, {"window", 1e12}}, "window");
  bad({{"K", 2}, {"draft_vocab", -5}}, "draft_vocab = -5");
  bad({{"K", 2}, {"draft_vocab", int64_t(1) << 40}}, "draft_vocab");  // no 4 TB resize
  bad({{"K", 2}, {"hidden_dtype", 5}}, "drafter config");
  EXPECT_EQ(DrafterConfig::from_json({{"K", 2}}).K, 2);
}

TEST(DrafterMetadata, DraftVocabLargerThanTheTargetIsRefused) {
  std::string dir = test::temp_dir("drafter-meta2");
  test::SmallTarget t = test::small_llama2c_target(dir);
  DrafterConfig dc;
  std::string good = dir + "/d.safetensors";
  write_drafter(good, t.lm.config, t.fingerprint, dc, random_drafter_tensors(t.lm.config, dc, 7),
                {});
  json cfg = dc.to_json();
  cfg["draft_vocab"] = 51;  // the target has 50 tokens
  std::string p = dir + "/dv.safetensors";
  rewrite_meta(good, p, "config", cfg.dump());
  expect_error<FormatError>(
      [&] { Drafter::load(p, t.lm.config, t.fingerprint, kernels::WeightType::F32); },
      {p, "51", "50"});
  // Metadata that is JSON but not an object.
  rewrite_meta(good, p, "target", "[1,2]");
  expect_error<FormatError>(
      [&] { Drafter::load(p, t.lm.config, t.fingerprint, kernels::WeightType::F32); },
      {p, "target", "not a JSON object"});
  rewrite_meta(good, p, "target", R"({"fingerprint": 5})");
  expect_error<ConfigError>(
      [&] { Drafter::load(p, t.lm.config, t.fingerprint, kernels::WeightType::F32); }, {p});
}

// Found by probing the fuzz_shards_manifest target: a non-integer "version"
// escaped as a nlohmann::type_error instead of a FormatError.
TEST(ShardsManifest, NonIntegerVersionIsAFormatError) {
  std::string dir = test::temp_dir("manifest");
  json m = {{"format", kShardsFormat}, {"version", 1}, {"target_fingerprint", "fp"},
            {"seq_len", 4}, {"hidden_dtype", "BF16"}, {"d_model", 8}, {"shards", json::array()}};
  std::ofstream(dir + "/manifest.json") << m.dump();
  EXPECT_EQ(read_manifest(dir)["seq_len"], 4);
  for (json v : {json("1"), json(1.5), json(nullptr), json::array()}) {
    SCOPED_TRACE(v.dump());
    m["version"] = v;
    std::ofstream(dir + "/manifest.json", std::ios::trunc) << m.dump();
    expect_error<FormatError>([&] { read_manifest(dir); }, {dir, "version"});
  }
}

// Found by tests/fuzz/json_probe.py (UBSan): safetensors offsets need not be
// aligned, and read_shard handed out int32/bf16 pointers at odd addresses
// (misaligned loads in every reader). Now such tensors are copied.
TEST(ShardsManifest, UnalignedShardTensorsAreReadAligned) {
  const int S = 2, L = 3, D = 2;
  std::vector<uint8_t> pad = {7};  // "a_pad" sorts first: everything after is at odd offsets
  std::vector<uint16_t> hidden(S * L * D);
  for (size_t i = 0; i < hidden.size(); ++i) hidden[i] = f32_to_bf16(float(i));
  std::vector<int32_t> length = {3, 2}, tokens = {1, 5, 6, 1, 7, 0};
  std::vector<uint8_t> mask = {0, 1, 1, 0, 1, 0};
  std::string p = test::temp_dir("shard-align") + "/shard-00000.safetensors";
  io::write_safetensors(p, {io::make_view("a_pad", DType::U8, {1}, pad),
                            io::make_view("hidden", DType::BF16, {S, L, D}, hidden),
                            io::make_view("length", DType::I32, {S}, length),
                            io::make_view("loss_mask", DType::U8, {S, L}, mask),
                            io::make_view("tokens", DType::I32, {S, L}, tokens)});
  {  // mapped until the block ends: the rewrite below is refused while it is
    Shard sh = read_shard(p);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(sh.tokens) % alignof(int32_t), 0u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(sh.length) % alignof(int32_t), 0u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(sh.hidden) % alignof(uint16_t), 0u);
    EXPECT_EQ(std::vector<int32_t>(sh.tokens, sh.tokens + S * L), tokens);
    EXPECT_EQ(std::vector<int32_t>(sh.length, sh.length + S), length);
    std::vector<float> row(D);
    sh.hidden_row(1, 2, row.data());
    EXPECT_EQ(row[0], 10.f);
    EXPECT_EQ(row[1], 11.f);
  }
  // A hidden tensor of a non-float dtype is refused.
  std::vector<int32_t> ihidden(S * L * D);
  io::write_safetensors(p, {io::make_view("hidden", DType::I32, {S, L, D}, ihidden),
                            io::make_view("length", DType::I32, {S}, length),
                            io::make_view("loss_mask", DType::U8, {S, L}, mask),
                            io::make_view("tokens", DType::I32, {S, L}, tokens)});
  expect_error<FormatError>([&] { read_shard(p); }, {p, "layout"});
}

}  // namespace
}  // namespace mtp::drafter
