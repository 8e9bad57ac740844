// Hostile drafter-side files (issue 60): shard manifests and drafter
// metadata with wrong types or deep nesting are FormatErrors naming the file,
// field and value (they were nlohmann type_errors: exit 4, "a bug"); a
// drafter whose finite weights overflow fp32 gives neutral (all-zero) logit
// rows and one warning naming it, never NaN logits to a sampler.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "drafter/drafter.h"
#include "drafter/mtp_runner.h"
#include "drafter/shards.h"
#include "io/safetensors.h"
#include "model/fingerprint.h"
#include "model/loader.h"
#include "model_util.h"
#include "test_util.h"

using nlohmann::json;

namespace mtp::drafter {
namespace {

using test::expect_error;

json good_manifest() {
  return {{"format", kShardsFormat}, {"version", 1}, {"target_fingerprint", "fp"},
          {"seq_len", 4}, {"hidden_dtype", "BF16"}, {"d_model", 8},
          {"shards", json::array({{{"file", "shard-0.safetensors"}, {"sequences", 2}}})}};
}

TEST(ManifestTypes, WrongTypesNameTheFileFieldAndValue) {
  const std::string dir = test::temp_dir("manifest-types");
  const std::string path = dir + "/manifest.json";
  std::ofstream(path) << good_manifest().dump();
  EXPECT_EQ(read_manifest(dir)["d_model"], 8);
  struct Case {
    const char* field;
    json value;
    const char* says;
  };
  for (const Case& c : {Case{"d_model", "64", "\"64\""}, Case{"shards", 5, "5"},
                        Case{"seq_len", 2.5, "2.5"}, Case{"target_fingerprint", 7, "7"},
                        Case{"hidden_dtype", json::array(), "[]"}}) {
    SCOPED_TRACE(c.field);
    json m = good_manifest();
    m[c.field] = c.value;
    std::ofstream(path, std::ios::trunc) << m.dump();
    expect_error<FormatError>([&] { read_manifest(dir); }, {path, c.field, c.says});
  }
  // Inside a shard entry.
  json m = good_manifest();
  m["shards"][0]["sequences"] = "two";
  std::ofstream(path, std::ios::trunc) << m.dump();
  expect_error<FormatError>([&] { read_manifest(dir); }, {path, "shards[0]", "sequences", "two"});
  // Deep nesting (a field nested 100,000 levels).
  std::string deep = good_manifest().dump();
  deep.insert(1, "\"x\": " + std::string(100000, '[') + std::string(100000, ']') + ",");
  std::ofstream(path, std::ios::trunc) << deep;
  expect_error<FormatError>([&] { read_manifest(dir); }, {path, "deeper than", "'x[]"});
}


// A drafter file whose config is `cfg` (or whose tensors `edit` changes).
std::string drafter_file(const test::SmallTarget& t, const std::string& dir, const std::string& name,
                         const std::function<void(io::Metadata&)>& meta_edit,
                         const std::function<void(const std::string&, std::vector<float>&)>& edit = nullptr) {
  DrafterConfig dc;
  dc.K = 2;
  auto tensors = random_drafter_tensors(t.lm.config, dc, 5);
  if (edit) {
    for (auto& [n, v] : tensors) edit(n, v);
  }
  const std::string good = dir + "/good-" + name;
  write_drafter(good, t.lm.config, t.fingerprint, dc, tensors, {});
  io::TensorSet ts = io::TensorSet::open_file(good);
  std::vector<io::TensorView> views;
  for (const auto& n : ts.names()) views.push_back(ts.get(n));
  io::Metadata meta = ts.metadata();
  meta_edit(meta);
  const std::string p = dir + "/" + name;
  io::write_safetensors(p, views, meta);
  return p;
}

// Drafter config errors named no file ("drafter config: K = ..."); a 4 MB
// value was dumped whole into the message.
TEST(DrafterConfigErrors, NameTheFileAndClipTheValue) {
  const std::string dir = test::temp_dir("drafter-cfg-errors");
  const test::SmallTarget t = test::small_llama2c_target(dir);
  auto load = [&](const std::string& p) {
    return [&t, p] { Drafter::load(p, t.lm.config, t.fingerprint, kernels::WeightType::F32); };
  };
  std::string p = drafter_file(t, dir, "k.safetensors", [](io::Metadata& m) {
    json c = json::parse(m["config"]);
    c["K"] = "two";
    m["config"] = c.dump();
  });
  expect_error<FormatError>(load(p), {p, "config", "K", "two"});
  p = drafter_file(t, dir, "dtype.safetensors", [](io::Metadata& m) {
    json c = json::parse(m["config"]);
    c["hidden_dtype"] = std::string(4 << 20, 'Q');
    m["config"] = c.dump();
  });
  const std::string msg = expect_error<FormatError>(load(p), {p, "dtype"});
  EXPECT_LT(msg.size(), 1000u) << "the 4 MB value was dumped";
  p = drafter_file(t, dir, "deep.safetensors", [](io::Metadata& m) {
    m["target"] = "{\"a\": " + std::string(300000, '[') + "}";
  });
  expect_error<FormatError>(load(p), {p, "target", "deeper than"});
}

// One finite all-3e38 matrix: the module's forward overflows. Every logit
// row it gives is all zeros (a uniform draft distribution), never NaN.
TEST(OverflowingDrafter, GivesNeutralLogitRows) {
  const std::string dir = test::temp_dir("drafter-overflow");
  const test::SmallTarget t = test::small_llama2c_target(dir);
  const std::string p = drafter_file(t, dir, "big.safetensors", [](io::Metadata&) {},
                                     [](const std::string& n, std::vector<float>& v) {
                                       if (n.find("eh_proj") != std::string::npos) {
                                         std::fill(v.begin(), v.end(), 3e38f);
                                       }
                                     });
  const Drafter d = Drafter::load(p, t.lm.config, t.fingerprint, kernels::WeightType::F32);
  const model::Model m(model::load_model(dir + "/t.bin", {}));
  MtpRunner run(m, d, 1, 16);
  const size_t dm = size_t(m.config().d_model), w = run.logits_width();
  std::vector<model::Row> rows = {{0, 0, 3}, {0, 1, 4}};
  std::vector<float> h(2 * dm, 0.5f), out(2 * dm), logits(2 * w, -1.f);
  run.forward(0, rows, h.data(), out.data(), logits.data(), nullptr, nullptr);
  for (float x : logits) ASSERT_EQ(x, 0.f);
}

}  // namespace
}  // namespace mtp::drafter
