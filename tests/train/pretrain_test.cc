// `mtpspec pretrain`: the libtorch model and the engine compute the same
// function on the checkpoint pretraining writes (layout errors — RoPE pairing,
// head order, transposes, the untied head — show up as logit differences far
// above a tolerance derived from the dimensions); a stopped and resumed run
// writes the same bits as an uninterrupted one; and the command works end to
// end, with clear errors for bad input.
#include "train/pretrain.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>

#include "checkpoint_util.h"
#include "cli_util.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "io/pretrain_data.h"
#include "io/safetensors.h"
#include "model/forward.h"
#include "model/loader.h"
#include "test_util.h"
#include "train_fixture.h"
#include "train/checkpoint.h"
#include "train/native_head_train.h"

namespace mtp::train {
namespace {

namespace fs = std::filesystem;

constexpr int kPreVocab = 300;

// A learnable synthetic language whose next token depends on the previous two
// (so the model must attend by relative position, through RoPE): from two random
// tokens, t_{i+1} = (7·t_i + 5·t_{i-1}) mod 297 + 3, with an occasional random
// token. BOS 1, EOS 2.
int32_t next_token(int32_t a, int32_t b) { return (7 * a + 5 * b) % (kPreVocab - 3) + 3; }

std::string synthetic_model_dir(const std::string& tag) {
  const std::string dir = test::temp_dir(tag);
  std::mt19937 rng(7);
  io::PretrainData d;
  for (int doc = 0; doc < 60; ++doc) {
    std::vector<int32_t> ids = {int32_t(3 + rng() % (kPreVocab - 3)),
                                int32_t(3 + rng() % (kPreVocab - 3))};
    const int len = 8 + int(rng() % 30);
    while (int(ids.size()) < len) {
      ids.push_back(rng() % 10 == 0 ? int32_t(3 + rng() % (kPreVocab - 3))
                                    : next_token(ids[ids.size() - 1], ids[ids.size() - 2]));
    }
    (doc % 6 == 5 ? d.heldout : d.train).add_document(ids, 1, 2);
  }
  d.info = {{"vocab", kPreVocab}, {"bos_id", 1}, {"eos_id", 2}, {"identity_hash", "synthetic"}};
  io::write_pretrain_data(io::pretrain_tokens_path(dir), d);
  return dir;
}

PretrainOptions quick(const std::string& dir) {
  PretrainOptions o;
  o.model_dir = dir;
  o.preset = "micro";  // d 64, 2 layers, 4 heads / 2 KV heads (GQA), head_dim 16
  o.seq_len = 32;
  o.batch = 4;
  o.steps = 24;
  o.lr = 3e-3;
  o.threads = 1;
  o.progress = false;
  return o;
}

// The engine's logits for every position of one sequence: [T, V].
std::vector<float> engine_logits(const model::Model& m, const std::vector<int32_t>& tokens) {
  model::KVCache kv = m.make_cache(1, int(tokens.size()), int(tokens.size()));
  std::vector<model::Row> rows;
  for (size_t t = 0; t < tokens.size(); ++t) rows.push_back({0, int32_t(t), tokens[t]});
  std::vector<float> out(tokens.size() * size_t(m.config().vocab));
  model::ForwardOut fo;
  fo.logits = out.data();
  m.forward(rows, kv, fo, nullptr);
  return out;
}

// Logit tolerance, derived as in train/parity.cc: both sides evaluate the same
// fp32 expression in different summation orders, so with u = 2^-24 and n the
// longest reduction, each of the ~8 reductions per layer differs by about
// √n·u relative to the activations' scale; |logit_v| <= ‖W_v‖·‖x̂‖ with
// ‖x̂‖ <= √d·max|g| (RMS-normalised, final-norm gain g). C = 64 of headroom
// per stage group, (layers + 1) groups.
// A tied head is the embedding table; a Gemma 4 layer's longest reduction
// may be its own head width or MLP, and its per-layer-embedding stage adds a
// group.
// Qwen3.5's (1 + w) gains count as stored + 1; its native head (gain
// mtp.norm) adds two groups (fc and its layer) to the trunk's.
double logit_tolerance(const std::string& dir, const std::string& gain_name = "model.norm.weight",
                       int extra_groups = 0) {
  model::LoadedModel lm = model::load_model(dir, {});
  const model::ModelConfig& c = lm.config;
  io::SafetensorsFile f(dir + "/model.safetensors");
  const auto& head = f.get(c.tie_embeddings ? "model.embed_tokens.weight" : "lm_head.weight");
  const auto& gain = f.get(gain_name);
  const double one = c.norm_one_plus ? 1.0 : 0.0;
  const float* w = static_cast<const float*>(head.data);
  double max_row = 0, max_g = 0;
  for (int v = 0; v < c.vocab; ++v) {
    double s = 0;
    for (int i = 0; i < c.d_model; ++i) s += double(w[v * c.d_model + i]) * w[v * c.d_model + i];
    max_row = std::max(max_row, std::sqrt(s));
  }
  for (int i = 0; i < c.d_model; ++i) {
    max_g = std::max(max_g, std::fabs(one + static_cast<const float*>(gain.data)[i]));
  }
  double n = std::max({2.0 * c.d_model, double(c.max_position),
                       double(c.n_layers) * c.ple_dim});
  for (int l = 0; l < c.n_layers; ++l) {
    const model::LayerKind k = c.layer_kind(l);
    n = std::max({n, double(c.n_heads) * k.head_dim, double(k.ffn)});
  }
  const double ref = std::sqrt(double(c.d_model)) * max_g * max_row;
  const int groups = c.n_layers + 1 + (c.ple_dim > 0 ? 1 : 0) + extra_groups;
  return 64.0 * groups * std::ldexp(1.0, -24) * std::sqrt(n) * ref;
}

// 32 tokens of the synthetic recurrence from BOS, with a stray token every 9th.
std::vector<int32_t> probe_tokens() {
  std::vector<int32_t> tokens = {1, 17, 100};
  while (tokens.size() < 32) {
    tokens.push_back(tokens.size() % 9 == 0 ? 200
                                            : next_token(tokens.back(), tokens[tokens.size() - 2]));
  }
  return tokens;
}

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, std::fabs(double(x)));
  return m;
}

struct Compared {
  double max_diff = 0, tol = 0;
  long decided = 0, agreed = 0;
};

// Row by row, engine logits against the reference's ([rows, V] each).
Compared compare_rows(const std::vector<float>& eng, const std::vector<float>& reference,
                      size_t V, double tol) {
  Compared r;
  r.tol = tol;
  for (size_t t = 0; t < reference.size() / V; ++t) {
    const float* a = eng.data() + t * V;
    const float* b = reference.data() + t * V;
    size_t ae = 0, ar = 0;
    for (size_t v = 0; v < V; ++v) {
      r.max_diff = std::max(r.max_diff, std::fabs(double(a[v]) - b[v]));
      if (a[v] > a[ae]) ae = v;
      if (b[v] > b[ar]) ar = v;
    }
    float second = -INFINITY;
    for (size_t v = 0; v < V; ++v) {
      if (v != ar) second = std::max(second, b[v]);
    }
    if (double(b[ar]) - second > 2 * tol) {
      ++r.decided;
      r.agreed += ae == ar;
    }
  }
  return r;
}

// `ok` (the engine against the reference logits `ref`) passes: within its
// tolerance, more than `min_decided` rows with a clear winner and every one
// agreeing, and the tolerance far below the logits' own scale (the check can
// tell). Prints the numbers under `what`.
void expect_matches(const std::string& what, const Compared& ok, const std::vector<float>& ref,
                    long min_decided) {
  std::printf("%s: max|dlogit| %.3g, tolerance %.3g, %ld decided\n", what.c_str(), ok.max_diff,
              ok.tol, ok.decided);
  EXPECT_LE(ok.max_diff, ok.tol) << what;
  EXPECT_GT(ok.decided, min_decided) << what;
  EXPECT_EQ(ok.agreed, ok.decided) << what;
  EXPECT_LT(ok.tol, 1e-3 * max_abs(ref)) << what;
}

Compared compare(const std::string& dir, const std::vector<float>& reference,
                 const std::vector<int32_t>& tokens, double tol) {
  model::Model m(model::load_model(dir, {}));
  return compare_rows(engine_logits(m, tokens), reference, size_t(m.config().vocab), tol);
}

// The classic Hugging Face <-> Meta conversion: rotate-half row order to
// interleaved pairs within every head, for q_proj and k_proj.
void permute_qk_rows(const std::string& src_dir, const std::string& dst_dir) {
  fs::create_directories(dst_dir);
  for (const char* f : {"config.json"}) fs::copy_file(src_dir + "/" + f, dst_dir + "/" + f);
  model::LoadedModel lm = model::load_model(src_dir, {});
  const int hd = lm.config.head_dim, d = lm.config.d_model;
  io::SafetensorsFile f(src_dir + "/model.safetensors");
  std::vector<std::vector<float>> store;
  std::vector<io::TensorView> views;
  for (const std::string& name : f.names()) {
    const io::TensorView& v = f.get(name);
    const float* p = static_cast<const float*>(v.data);
    std::vector<float> x(p, p + v.numel());
    if (name.find("q_proj") != std::string::npos || name.find("k_proj") != std::string::npos) {
      const int heads = int(v.shape[0]) / hd;
      for (int h = 0; h < heads; ++h) {
        for (int i = 0; i < hd / 2; ++i) {
          for (int j = 0; j < 2; ++j) {
            const size_t to = size_t(h * hd + 2 * i + j), from = size_t(h * hd + i + j * hd / 2);
            std::copy_n(p + from * size_t(d), d, x.begin() + to * size_t(d));
          }
        }
      }
    }
    store.push_back(std::move(x));
    views.push_back(io::make_view(name, DType::F32, v.shape, store.back()));
  }
  io::write_safetensors(dst_dir + "/model.safetensors", views);
}

TEST(Pretrain, EngineLogitsMatchLibtorch) {
  const std::string dir = synthetic_model_dir("pretrain_parity");
  PretrainOptions o = quick(dir);
  o.steps = 80;  // attention sharp enough that the RoPE layout matters
  PretrainReport r = run_pretrain(o);
  ASSERT_TRUE(r.model_written);
  EXPECT_EQ(r.final_step, 80);
  EXPECT_LT(r.train_loss, std::log(double(kPreVocab)) - 1.0) << "training did not learn";
  ASSERT_GE(r.eval_loss, 0);

  model::LoadedModel lm = model::load_model(dir, {});
  EXPECT_EQ(lm.config.n_kv_heads, 2);
  EXPECT_EQ(lm.config.n_heads, 4);
  EXPECT_FALSE(lm.config.tie_embeddings);
  EXPECT_EQ(lm.config.bos_id, 1);
  EXPECT_EQ(lm.config.max_position, 32);

  const std::vector<int32_t> tokens = probe_tokens();
  const std::vector<float> ref = torch_logits(dir, tokens);
  const double tol = logit_tolerance(dir);
  // Most positions have a clear winner after training.
  expect_matches("engine vs libtorch", compare(dir, ref, tokens, tol), ref, 24);

  // A layout error (interleaved RoPE rows) is caught by exactly this check.
  const std::string bad = test::temp_dir("pretrain_parity_bad") + "/model";
  permute_qk_rows(dir, bad);
  const Compared wrong = compare(bad, ref, tokens, tol);
  std::printf("interleaved q/k rows: max|dlogit| %.3g\n", wrong.max_diff);
  EXPECT_GT(wrong.max_diff, 10 * tol);
}

// config.json of `dir` changed by `patch`, beside the same weights, in a new folder.
std::string patched_copy(const std::string& dir, const std::string& tag,
                         const nlohmann::json& patch) {
  const std::string out = test::temp_dir(tag) + "/model";
  fs::create_directories(out);
  fs::copy_file(dir + "/model.safetensors", out + "/model.safetensors");
  nlohmann::json cfg = nlohmann::json::parse(read_file(dir + "/config.json"));
  cfg.merge_patch(patch);
  std::ofstream(out + "/config.json") << cfg.dump(2);
  return out;
}

// The tiny Gemma 4 of the micro preset: 4 layers (full, sliding, sliding,
// full), the last two reading the K/V of layers 1 (sliding) and 0 (full)
// with double-wide MLPs, per-layer embeddings, a window of 8 under 32-token
// windows. libtorch and the engine compute the same function on what
// pretraining wrote.
TEST(Pretrain, Gemma4EngineLogitsMatchLibtorch) {
  const std::string dir = synthetic_model_dir("pretrain_gemma4");
  PretrainOptions o = quick(dir);
  o.arch = "gemma4";
  o.steps = 80;
  PretrainReport r = run_pretrain(o);
  ASSERT_TRUE(r.model_written);
  EXPECT_LT(r.train_loss, std::log(double(kPreVocab)) - 1.0) << "training did not learn";

  model::LoadedModel lm = model::load_model(dir, {});
  const model::ModelConfig& c = lm.config;
  ASSERT_EQ(c.arch, model::Arch::Gemma4);
  ASSERT_EQ(c.n_layers, 4);
  EXPECT_TRUE(c.tie_embeddings);
  EXPECT_EQ(c.ple_dim, 8);
  EXPECT_EQ(c.sliding_window, 8);
  EXPECT_EQ(test::sliding_of(c), (std::vector<uint8_t>{0, 1, 1, 0}));
  EXPECT_EQ(c.layer_kind(2).kv_source, 1);
  EXPECT_EQ(c.layer_kind(3).kv_source, 0);
  EXPECT_EQ(c.layer_kind(0).head_dim, 2 * c.layer_kind(1).head_dim);
  EXPECT_EQ(c.layer_kind(2).ffn, 2 * c.layer_kind(1).ffn);

  const std::vector<int32_t> tokens = probe_tokens();
  const std::vector<float> ref = torch_logits(dir, tokens);
  const double tol = logit_tolerance(dir);
  expect_matches("gemma4 engine vs libtorch", compare(dir, ref, tokens, tol), ref, 24);

  // The check can tell: a window twice as wide (the prompt is longer than
  // both), or proportional RoPE rotating every pair, is far outside it.
  for (const auto& [tag, patch] :
       std::vector<std::pair<std::string, nlohmann::json>>{
           {"window", {{"sliding_window", 16}}},
           {"rope", {{"rope_parameters", {{"full_attention", {{"partial_rotary_factor", 1.0}}}}}}}}) {
    const Compared wrong = compare(patched_copy(dir, "pretrain_gemma4_" + tag, patch), ref,
                                   tokens, tol);
    std::printf("%s changed: max|dlogit| %.3g\n", tag.c_str(), wrong.max_diff);
    EXPECT_GT(wrong.max_diff, 10 * tol) << tag;
  }
}

// A copy of `dir` whose tensors `edit` changed (name, fp32 values).
std::string edited_copy(const std::string& dir, const std::string& tag,
                        const std::function<void(const std::string&, std::vector<float>&)>& edit) {
  const std::string out = test::temp_dir(tag) + "/model";
  fs::create_directories(out);
  fs::copy_file(dir + "/config.json", out + "/config.json");
  io::SafetensorsFile f(dir + "/model.safetensors");
  std::vector<std::vector<float>> store;
  std::vector<io::TensorView> views;
  store.reserve(f.names().size());
  for (const std::string& name : f.names()) {
    const io::TensorView& v = f.get(name);
    const float* p = static_cast<const float*>(v.data);
    store.emplace_back(p, p + v.numel());
    edit(name, store.back());
    views.push_back(io::make_view(name, DType::F32, v.shape, store.back()));
  }
  io::write_safetensors(out + "/model.safetensors", views);
  return out;
}

// The engine's native head teacher-forced like torch_mtp_logits: row t embeds
// tokens[t + 1] and reads the target's hidden at t after the final norm
// (post_norm false: the pre-norm capture instead, a planted fault): [T - 1, V].
std::vector<float> engine_mtp_logits(const std::string& dir, const std::vector<int32_t>& tokens,
                                     bool post_norm = true) {
  const model::Model m(model::load_model(dir, {}));
  return test::native_head_logits(m, tokens, m, post_norm);
}

// The tiny Qwen3.5 of the micro preset: a Gated DeltaNet layer then a gated
// full-attention one, trained with its native MTP head. libtorch and the
// engine compute the same trunk and the same head on what pretraining wrote;
// the check tells a conv without its history, a fully rotated head, and a
// head reading the pre-norm hidden.
TEST(Pretrain, Qwen35EngineLogitsAndNativeHeadMatchLibtorch) {
  const std::string dir = synthetic_model_dir("pretrain_qwen35");
  PretrainOptions o = quick(dir);
  o.arch = "qwen35";
  o.steps = 80;
  PretrainReport r = run_pretrain(o);
  ASSERT_TRUE(r.model_written);
  EXPECT_LT(r.train_loss, std::log(double(kPreVocab)) - 1.0) << "training did not learn";
  EXPECT_GE(r.mtp_loss, 0);
  EXPECT_LT(r.mtp_loss, std::log(double(kPreVocab)) - 1.0) << "the native head did not learn";

  model::LoadedModel lm = model::load_model(dir, {});
  const model::ModelConfig& c = lm.config;
  ASSERT_EQ(c.arch, model::Arch::Qwen35);
  EXPECT_EQ(c.n_layers, 2);
  EXPECT_TRUE(c.is_recurrent(0));
  EXPECT_FALSE(c.is_recurrent(1));
  EXPECT_EQ(c.mtp_layers, 1);
  EXPECT_TRUE(lm.weights.mtp.present());
  EXPECT_EQ(c.rope_rotary_dim, 4);

  const std::vector<int32_t> tokens = probe_tokens();
  const std::vector<float> ref = torch_logits(dir, tokens);
  const double tol = logit_tolerance(dir);
  expect_matches("qwen35 engine vs libtorch", compare(dir, ref, tokens, tol), ref, 24);

  // The conv without its history (every tap but the current one zeroed), or
  // every dim of the head rotated, is far outside the tolerance.
  const std::string no_conv = edited_copy(dir, "pretrain_qwen35_conv",
                                          [&](const std::string& n, std::vector<float>& v) {
    if (n.find("conv1d.weight") == std::string::npos) return;
    const size_t kc = size_t(c.linear.conv_kernel);
    for (size_t i = 0; i < v.size(); ++i) {
      if (i % kc != kc - 1) v[i] = 0;
    }
  });
  const nlohmann::json full_rot = {{"rope_parameters", {{"partial_rotary_factor", 1.0}}}};
  for (const auto& [tag, bad] : std::vector<std::pair<std::string, std::string>>{
           {"conv history", no_conv},
           {"rotation", patched_copy(dir, "pretrain_qwen35_rope", full_rot)}}) {
    const Compared wrong = compare(bad, ref, tokens, tol);
    std::printf("%s changed: max|dlogit| %.3g\n", tag.c_str(), wrong.max_diff);
    EXPECT_GT(wrong.max_diff, 10 * tol) << tag;
  }

  // The native head: the engine's drafts = the libtorch head's, teacher-forced.
  const std::vector<float> mref = torch_mtp_logits(dir, tokens);
  const double mtol = logit_tolerance(dir, "mtp.norm.weight", 2);
  const size_t V = size_t(c.vocab);
  expect_matches("qwen35 native head engine vs libtorch",
                 compare_rows(engine_mtp_logits(dir, tokens), mref, V, mtol), mref, 16);
  const Compared pre = compare_rows(engine_mtp_logits(dir, tokens, false), mref, V, mtol);
  std::printf("native head on the pre-norm hidden: max|dlogit| %.3g\n", pre.max_diff);
  EXPECT_GT(pre.max_diff, 10 * mtol);
}

// train-native-head on the micro Qwen3.5: a few steps from its pretrained
// head against the engine's target; the directory written keeps every trunk
// tensor, loads in the engine, and its head drafts what the libtorch head
// trained (teacher-forced logits within the tolerance, argmax equal); the
// head it started from is far outside that tolerance, so the check can tell.
TEST(Pretrain, Qwen35NativeHeadFineTuneExportsWhatItTrained) {
  const std::string dir = synthetic_model_dir("ft_qwen35");
  PretrainOptions o = quick(dir);
  o.arch = "qwen35";
  o.steps = 40;
  ASSERT_TRUE(run_pretrain(o).model_written);
  NativeHeadTrainOptions f;
  f.target = f.init_from = dir;
  f.tokens = io::pretrain_tokens_path(dir);
  f.out = test::temp_dir("ft_qwen35_out") + "/model";
  f.steps = 30;
  f.seq_len = 32;
  f.lr = 3e-3;
  const NativeHeadTrainResult r = train_native_head(f);
  ASSERT_EQ(r.losses.size(), 30u);
  EXPECT_LT(r.losses.back(), r.losses.front()) << "the head did not learn";
  EXPECT_TRUE(r.parity_passed);
  EXPECT_GT(r.parity_decided, 0);

  io::SafetensorsFile a(dir + "/model.safetensors"), b(f.out + "/model.safetensors");
  ASSERT_EQ(a.names(), b.names());
  for (const std::string& n : a.names()) {
    const io::TensorView &x = a.get(n), &y = b.get(n);
    const bool same = x.nbytes == y.nbytes && std::memcmp(x.data, y.data, x.nbytes) == 0;
    if (n.rfind("mtp.", 0) != 0) EXPECT_TRUE(same) << n << ": a trunk tensor changed";
    if (n == "mtp.fc.weight") EXPECT_FALSE(same) << "the head was not written";
  }

  const std::vector<int32_t> tokens = probe_tokens();
  const std::vector<float> mref = torch_mtp_logits(f.out, tokens);
  const double mtol = logit_tolerance(f.out, "mtp.norm.weight", 2);
  const size_t V = size_t(model::load_model(f.out, {}).config.vocab);
  const Compared ok = compare_rows(engine_mtp_logits(f.out, tokens), mref, V, mtol);
  std::printf("fine-tuned head, engine vs libtorch: max|dlogit| %.3g, tolerance %.3g, %ld "
              "decided\n", ok.max_diff, mtol, ok.decided);
  EXPECT_LE(ok.max_diff, mtol);
  EXPECT_GT(ok.decided, 16);
  EXPECT_EQ(ok.agreed, ok.decided);
  const Compared before = compare_rows(engine_mtp_logits(dir, tokens), mref, V, mtol);
  std::printf("the head it started from: max|dlogit| %.3g\n", before.max_diff);
  EXPECT_GT(before.max_diff, 10 * mtol);
}

std::vector<std::string> metric_lines(const std::string& dir) {
  std::ifstream in(dir + "/pretrain/metrics.jsonl");
  std::vector<std::string> out;
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    j.erase("tokens_per_s");
    j.erase("elapsed_s");
    out.push_back(j.dump());
  }
  return out;
}

TEST(Pretrain, StoppedAndResumedRunIsBitIdentical) {
  const std::string a = synthetic_model_dir("pretrain_a"), b = synthetic_model_dir("pretrain_b");
  auto opts = [](const std::string& dir) {
    PretrainOptions o = quick(dir);
    o.steps = 8;
    o.eval_every = 2;
    o.save_every = 3;  // the stop below falls between periodic saves
    return o;
  };
  PretrainReport ra = run_pretrain(opts(a));
  ASSERT_TRUE(ra.model_written);

  PretrainOptions ob = opts(b);
  ob.stop_after = 5;
  PretrainReport rb1 = run_pretrain(ob);
  EXPECT_EQ(rb1.final_step, 5);
  EXPECT_FALSE(rb1.model_written);
  EXPECT_FALSE(fs::exists(b + "/model.safetensors")) << "an unfinished run wrote a model";
  EXPECT_THROW(run_pretrain(ob), InputError);  // a checkpoint, and no --resume
  ob.stop_after = 0;
  ob.resume = true;
  ob.lr = 1e-3;
  EXPECT_THROW(run_pretrain(ob), InputError);  // changed flags on resume
  ob.lr = quick(b).lr;
  PretrainReport rb2 = run_pretrain(ob);
  EXPECT_EQ(rb2.final_step, 8);
  EXPECT_EQ(rb2.steps_done, 3);

  EXPECT_EQ(read_file(a + "/model.safetensors"), read_file(b + "/model.safetensors"));
  EXPECT_EQ(read_file(a + "/config.json"), read_file(b + "/config.json"));
  Checkpoint ca = load_checkpoint(checkpoint_path(a + "/pretrain"));
  Checkpoint cb = load_checkpoint(checkpoint_path(b + "/pretrain"));
  EXPECT_TRUE(ca.adam_m == cb.adam_m && ca.adam_v == cb.adam_v);
  EXPECT_EQ(metric_lines(a), metric_lines(b));
  EXPECT_EQ(ra.eval_loss, rb2.eval_loss);
}

// A small English corpus: sentences from a few templates, one document each.
std::string write_corpus(const std::string& dir) {
  const char* who[] = {"The cat",     "A dog",       "My friend",
                       "The old man", "Every child", "Our teacher"};
  const char* did[] = {"walked to", "looked at", "talked about", "dreamed of", "ran past", "found"};
  const char* what[] = {"the river.",    "a small house.",   "the green hill.",
                        "an open door.", "the busy market.", "a quiet garden."};
  std::string text;
  std::mt19937 rng(3);
  for (int i = 0; i < 240; ++i) {
    text += std::string(who[rng() % 6]) + " " + did[rng() % 6] + " " + what[rng() % 6];
    text += i % 3 == 0 ? "\nThen it was 12 o'clock.\n\n" : "\n\n";
  }
  const std::string path = dir + "/corpus.txt";
  std::ofstream(path) << text;
  return path;
}

TEST(Pretrain, CommandEndToEndAndErrors) {
  const std::string tmp = test::temp_dir("pretrain_cli");
  const std::string corpus = write_corpus(tmp), out = tmp + "/model";
  const std::string base = "pretrain --corpus " + test::shell_quote(corpus) + " -o " +
                           test::shell_quote(out) +
                           " --preset micro --vocab 400 --threads 1 "
                           "--seq-len 32 --batch 2 --heldout 0.2 --no-progress";
  test::CliResult r = test::run_cli(base + " --steps 3");
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.model",
                        "pretrain/tokens.safetensors", "pretrain/metrics.jsonl"}) {
    EXPECT_TRUE(fs::exists(out + "/" + f)) << f;
  }
  EXPECT_NE(read_file(out + "/pretrain/metrics.jsonl").find("\"eval\""), std::string::npos);
  const nlohmann::json cfg = nlohmann::json::parse(read_file(out + "/config.json"));
  EXPECT_EQ(cfg["architectures"][0], "LlamaForCausalLM");
  EXPECT_LE(cfg["vocab_size"].get<int>(), 400);

  test::CliResult g =
      test::run_cli("generate -m " + test::shell_quote(out) + " -p 'The cat' -n 6 --temp 0");
  EXPECT_EQ(g.status, 0) << g.err;
  EXPECT_NE(g.err.find(" generated"), std::string::npos) << g.err;

  // Run again with --resume: the data is reused and the model is the same.
  const std::string model = read_file(out + "/model.safetensors");
  r = test::run_cli(base + " --steps 3 --resume");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("reusing the tokenizer"), std::string::npos) << r.out;
  EXPECT_EQ(read_file(out + "/model.safetensors"), model);

  auto error = [&](const std::string& args, const std::string& want) {
    test::CliResult e = test::run_cli(args);
    EXPECT_EQ(e.status, 2) << args << "\n" << e.err;
    EXPECT_NE(e.err.find(want), std::string::npos) << args << "\n" << e.err;
  };
  const std::string fresh = " -o " + test::shell_quote(tmp + "/fresh") + " --no-progress";
  error(base + " --steps 3", "already holds a pretraining checkpoint");
  error("pretrain --corpus " + test::shell_quote(tmp + "/missing.txt") + fresh, "missing.txt");
  std::ofstream(tmp + "/empty.txt") << "\n\n  \n";
  error("pretrain --corpus " + test::shell_quote(tmp + "/empty.txt") + fresh, "no documents");
  error("pretrain --corpus " + test::shell_quote(corpus) + fresh + " --vocab 100", "too small");
  // The corpus is named (it was "this corpus").
  error("pretrain --corpus " + test::shell_quote(corpus) + fresh + " --vocab 270",
        "--vocab: a vocabulary of 270 is too small for the corpus '" + corpus + "'");
  error("pretrain --corpus " + test::shell_quote(corpus) + fresh + " --preset huge",
        "unknown preset 'huge'");
  EXPECT_FALSE(fs::exists(tmp + "/fresh/model.safetensors"));
}

}  // namespace
}  // namespace mtp::train
