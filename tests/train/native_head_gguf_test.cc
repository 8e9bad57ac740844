// train-native-head on GGUF targets (train/native_head_gguf.h): a random
// Qwen3.5 with its native head, converted the way llama.cpp's converter does
// it (gguf_util.h: F32 or quantized matrices), fine-tuned; the GGUF written
// keeps every key and every other tensor as stored, its head is the trained
// one (read back through the tests' own converter names, independent of the
// engine's), its names are the `gguf` package's, and speculation with it
// prints what plain decoding prints.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>

#include <nlohmann/json.hpp>

#include "checkpoint_util.h"
#include "cli_util.h"
#include "core/error.h"
#include "gguf_util.h"
#include "io/gguf.h"
#include "io/pretrain_data.h"
#include "io/safetensors.h"
#include "model/hf_config.h"
#include "model/layer_io.h"
#include "model/loader.h"
#include "python_util.h"
#include "test_util.h"
#include "train_fixture.h"
#include "train/native_head_gguf.h"
#include "train/native_head_train.h"

namespace mtp::train {
namespace {

namespace fs = std::filesystem;

test::RandomSpec head_spec() {
  test::RandomSpec s = test::RandomSpec::for_arch(model::Arch::Qwen35);
  s.mtp = true;
  s.vocab = 320;  // the converter's test vocabulary needs >= 259 tokens
  s.seed = 5;
  return s;
}

// A token stream with structure (t_{i+1} from the two before it) in dir.
std::string tokens_file(const std::string& dir, int vocab) {
  std::mt19937 rng(11);
  io::PretrainData d;
  for (int doc = 0; doc < 24; ++doc) {
    std::vector<int32_t> ids = {int32_t(3 + rng() % 60), int32_t(3 + rng() % 60)};
    while (ids.size() < 40) {
      const int32_t a = ids.back(), b = ids[ids.size() - 2];
      ids.push_back(rng() % 8 == 0 ? int32_t(3 + rng() % 60) : (5 * a + 3 * b) % 61 + 3);
    }
    (doc % 6 == 5 ? d.heldout : d.train).add_document(ids, 1, 2);
  }
  d.info = {{"vocab", vocab}, {"bos_id", 1}, {"eos_id", 2}, {"identity_hash", "synthetic"}};
  const std::string path = io::pretrain_tokens_path(dir);
  io::write_pretrain_data(path, d);
  return path;
}

struct Fixture {
  std::string hf, gguf, out, tokens;
  NativeHeadTrainResult r;
};

// The random checkpoint as a GGUF of matrix type `type`, fine-tuned from its
// own head into out.gguf.
Fixture fine_tune(const std::string& tag, uint32_t type) {
  Fixture f;
  f.hf = test::random_hf_checkpoint(tag, head_spec());
  const std::string dir = test::temp_dir(tag + "-gguf");
  f.gguf = dir + "/target.gguf";
  test::GgufConvert conv;
  conv.matrix_type = type;
  test::convert_hf_to_gguf(f.hf, f.gguf, conv);
  f.tokens = tokens_file(dir, head_spec().vocab);
  f.out = dir + "/out.gguf";
  NativeHeadTrainOptions o;
  o.target = f.gguf;
  o.tokens = f.tokens;
  o.out = f.out;
  o.steps = 20;
  o.seq_len = 32;
  o.lr = 3e-3;
  f.r = train_native_head(o);
  return f;
}

bool head_tensor(const model::ModelConfig& c, const std::string& gguf_name) {
  return gguf_name.starts_with("blk." + std::to_string(c.n_layers) + ".");
}

// The written GGUF: the source's keys, its tensors in its order, all but the
// head's block byte-identical; the head's block F32 of the same dims.
void expect_trunk_kept(const std::string& src, const std::string& out) {
  const io::GgufFile a(src), b(out);
  const model::ModelConfig c = model::gguf_model_config(a);
  ASSERT_EQ(a.metadata().size(), b.metadata().size());
  for (size_t i = 0; i < a.metadata().size(); ++i) {
    EXPECT_EQ(a.metadata()[i].first, b.metadata()[i].first);
    EXPECT_EQ(a.metadata()[i].second.describe(), b.metadata()[i].second.describe());
  }
  ASSERT_EQ(a.tensors().size(), b.tensors().size());
  bool fc_changed = false;
  for (size_t i = 0; i < a.tensors().size(); ++i) {
    const io::GgufTensor &x = a.tensors()[i], &y = b.tensors()[i];
    SCOPED_TRACE(x.name);
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.dims, y.dims);
    const bool same = x.type == y.type && x.nbytes == y.nbytes &&
                      std::memcmp(x.data, y.data, x.nbytes) == 0;
    if (!head_tensor(c, x.name)) {
      EXPECT_TRUE(same) << "a trunk tensor changed";
    } else {
      EXPECT_EQ(y.type, uint32_t(GgmlType::F32));
      if (x.name.ends_with("nextn.eh_proj.weight")) fc_changed = !same;
    }
  }
  EXPECT_TRUE(fc_changed) << "the head was not written";
}

std::vector<float> head_logits(const model::Model& m, const std::vector<int32_t>& tokens,
                               const model::Model* capture_from = nullptr) {
  return test::native_head_logits(m, tokens, capture_from ? *capture_from : m);
}

double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(double(a[i]) - b[i]));
  return m;
}

// Rows whose argmax differ between a and b ([rows, V] each).
long argmax_differs(const std::vector<float>& a, const std::vector<float>& b, size_t V) {
  long n = 0;
  for (size_t r = 0; r < a.size() / V; ++r) {
    auto am = std::max_element(a.begin() + long(r * V), a.begin() + long((r + 1) * V));
    auto bm = std::max_element(b.begin() + long(r * V), b.begin() + long((r + 1) * V));
    n += (am - a.begin()) - long(r * V) != (bm - b.begin()) - long(r * V);
  }
  return n;
}

// hf_dir with its mtp.* replaced by the head in GGUF `gguf`, read through the
// tests' converter names (gguf_util.h) and its 1 + w rule (on the GGUF name,
// as llama.cpp's converter tests it), into a new folder.
std::string head_as_hf(const std::string& hf_dir, const std::string& gguf, const std::string& tag) {
  const model::ModelConfig c = model::read_hf_config(hf_dir);
  const io::GgufFile g(gguf);
  const std::string out = test::temp_dir(tag);
  fs::copy_file(hf_dir + "/config.json", out + "/config.json");
  io::SafetensorsFile st(hf_dir + "/model.safetensors");
  std::vector<io::TensorView> views;
  std::vector<std::vector<float>> keep;
  for (const std::string& n : st.names()) {
    if (!n.starts_with("mtp.")) {
      views.push_back(st.get(n));
      continue;
    }
    const std::string gname = test::hf_to_gguf_name(c, n);
    const io::GgufTensor* t = g.tensor(gname);
    EXPECT_NE(t, nullptr) << n;
    if (!t) continue;
    EXPECT_EQ(t->type, uint32_t(GgmlType::F32)) << n;
    std::vector<float> v(t->numel());
    std::memcpy(v.data(), t->data, v.size() * sizeof(float));
    if (gname.ends_with("norm.weight")) {  // the converter's 1 + w
      for (float& x : v) x -= 1.0f;
    }
    keep.push_back(std::move(v));
    views.push_back(io::make_view(n, DType::F32, st.get(n).shape, keep.back()));
  }
  io::write_safetensors(out + "/model.safetensors", views, {{"format", "pt"}});
  return out;
}

std::vector<int32_t> probe(int n) {
  std::vector<int32_t> t = {1, 17, 40};
  while (int(t.size()) < n) t.push_back((5 * t.back() + 3 * t[t.size() - 2]) % 61 + 3);
  return t;
}

// F32 target: the trunk kept bit for bit; the head read back through the
// converter's names drafts what the GGUF's head drafts (within the gate's
// tolerance, argmax equal), and the head it started from is far from it.
TEST(NativeHeadGguf, ExportKeepsTheTrunkAndHoldsTheTrainedHead) {
  const Fixture f = fine_tune("nhg-f32", 0);
  ASSERT_EQ(f.r.losses.size(), 20u);
  EXPECT_LT(f.r.losses.back(), f.r.losses.front()) << "the head did not learn";
  EXPECT_TRUE(f.r.parity_passed);
  EXPECT_GT(f.r.parity_decided, 0);
  expect_trunk_kept(f.gguf, f.out);

  const model::Model exported(model::load_model(f.out, {}));
  ASSERT_TRUE(exported.weights().mtp.present());
  const model::Model rebuilt(model::load_model(head_as_hf(f.hf, f.out, "nhg-f32-hf"), {}));
  const model::Model original(model::load_model(f.hf, {}));
  const std::vector<int32_t> toks = probe(32);
  const std::vector<float> g = head_logits(exported, toks), h = head_logits(rebuilt, toks),
                           before = head_logits(original, toks);
  const size_t V = size_t(exported.config().vocab);
  std::printf("exported head vs its converter-named HF twin: max|dlogit| %.3g (tolerance %.3g); "
              "the initial head: %.3g\n", max_diff(g, h), f.r.parity_tol, max_diff(g, before));
  EXPECT_LE(max_diff(g, h), f.r.parity_tol);
  EXPECT_EQ(argmax_differs(g, h, V), 0);
  EXPECT_GT(max_diff(g, before), 10 * f.r.parity_tol);
}

// The names and the MTP block's shapes against the gguf package's tables; a
// planted wrong name and a planted wrong shape are refused by the same check.
TEST(NativeHeadGguf, NamesAreTheGgufPackagesQwen35Names) {
  std::string why;
  const std::string py = test::ref_python({"gguf", "numpy"}, &why);
  if (py.empty()) GTEST_SKIP() << why;
  const std::string script = std::string(MTPSPEC_SOURCE_DIR) + "/tests/python/gguf_nextn_names.py";
  const Fixture f = fine_tune("nhg-names", 0);
  ASSERT_TRUE(f.r.parity_passed);
  std::string log;
  EXPECT_EQ(test::run_python(py, script, {f.out}, &log), 0) << log;

  const io::GgufFile g(f.out);
  const std::string blk = "blk." + std::to_string(model::gguf_model_config(g).n_layers) + ".";
  auto planted = [&](const std::string& tag, auto&& edit) {
    std::vector<io::GgufWriteTensor> ts;
    for (const io::GgufTensor& t : g.tensors()) {
      ts.push_back({t.name, t.dims, t.type, std::string(reinterpret_cast<const char*>(t.data), t.nbytes)});
    }
    edit(ts);
    const std::string p = test::temp_dir("nhg-planted-" + tag) + "/bad.gguf";
    io::write_gguf(p, g.metadata(), ts, g.version());
    std::string out;
    EXPECT_NE(test::run_python(py, script, {p}, &out), 0) << tag << " was not refused";
    std::printf("planted %s: %s", tag.c_str(), out.c_str());
  };
  planted("name", [&](std::vector<io::GgufWriteTensor>& ts) {
    for (auto& t : ts) {
      if (t.name == blk + "nextn.enorm.weight") t.name = blk + "nextn.e_norm.weight";
    }
  });
  planted("shape", [&](std::vector<io::GgufWriteTensor>& ts) {
    for (auto& t : ts) {
      if (t.name == blk + "nextn.eh_proj.weight") std::swap(t.dims[0], t.dims[1]);
    }
  });
}

// A Q8_0 target, through the CLI: the head trains against the served
// (quantized) capture, the gate passes, the quantized trunk stays as stored,
// and speculation with the exported head prints what plain decoding prints.
// The head's drafts on the F32 twin's capture differ from those on the
// served one by more than the gate's tolerance: a gate fed the twin's
// capture would not be checking the served target's.
TEST(NativeHeadGguf, QuantizedTargetTrainsAgainstTheServedCapture) {
  const std::string hf = test::random_hf_checkpoint("nhg-q8", head_spec());
  const std::string dir = test::temp_dir("nhg-q8-gguf");
  const std::string gguf = dir + "/target.gguf", out = dir + "/out.gguf";
  test::GgufConvert conv;
  conv.matrix_type = uint32_t(GgmlType::Q8_0);
  test::convert_hf_to_gguf(hf, gguf, conv);
  const std::string tokens = tokens_file(dir, head_spec().vocab);
  const test::CliResult t = test::run_cli(
      "train-native-head -m " + test::shell_quote(gguf) + " --tokens " +
      test::shell_quote(tokens) + " -o " + test::shell_quote(out) +
      " --steps 20 --seq-len 32 --lr 3e-3");
  ASSERT_EQ(t.status, 0) << t.err;
  const auto j = nlohmann::json::parse(t.out);
  EXPECT_TRUE(j["parity"]["passed"].get<bool>());
  EXPECT_GT(j["parity"]["decided"].get<long>(), 0);
  const double tol = j["parity"]["tolerance"].get<double>();
  expect_trunk_kept(gguf, out);

  const model::Model m(model::load_model(out, {}));
  const model::Model twin(model::load_model(hf, {}));
  const std::vector<int32_t> toks = probe(32);
  const double d = max_diff(head_logits(m, toks), head_logits(m, toks, &twin));
  std::printf("exported head on the served vs the F32 twin's capture: max|dlogit| %.3g "
              "(tolerance %.3g)\n", d, tol);
  EXPECT_GT(d, 10 * tol);

  for (const char* sampling : {"--temp 0", "--temp 0.8 --seed 3"}) {
    SCOPED_TRACE(sampling);
    const std::string common = "generate -m " + test::shell_quote(out) +
                               " -p 'abc de abc de abc' -n 24 --threads 1 --json " + sampling;
    const test::CliResult plain = test::run_cli(common + " --no-spec");
    ASSERT_EQ(plain.status, 0) << plain.err;
    const test::CliResult spec = test::run_cli(common + " --draft-source native-mtp --no-gate");
    ASSERT_EQ(spec.status, 0) << spec.err;
    const auto a = nlohmann::json::parse(plain.out), b = nlohmann::json::parse(spec.out);
    EXPECT_EQ(b["token_ids"], a["token_ids"]);
    EXPECT_GT(b["stats"]["drafted"][0].get<long>(), 0) << b["stats"].dump();
  }
}

// A GGUF init whose head block is missing is refused naming the tensor.
TEST(NativeHeadGguf, InitWithoutTheHeadIsRefused) {
  const std::string hf = test::random_hf_checkpoint("nhg-nohead", head_spec());
  const std::string g = test::temp_dir("nhg-nohead-g") + "/t.gguf";
  test::GgufConvert conv;
  conv.edit = [](io::GgufMetadata&, std::vector<io::GgufWriteTensor>& ts) {
    std::erase_if(ts, [](const io::GgufWriteTensor& t) {
      return t.name.ends_with("nextn.hnorm.weight");
    });
  };
  test::convert_hf_to_gguf(hf, g, conv);
  const model::ModelConfig c = model::read_hf_config(hf);
  test::expect_error<FormatError>([&] { read_gguf_native_head(g, c); },
                                  {"nextn.hnorm.weight", "mtp.pre_fc_norm_hidden.weight"});
}

}  // namespace
}  // namespace mtp::train
