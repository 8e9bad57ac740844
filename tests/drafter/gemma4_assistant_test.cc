// Gemma 4's assistant (drafter/gemma4_assistant.h, assistant_runner.h):
// - a published-layout directory loads next to a random Gemma 4 target, and
//   an assistant that does not fit it, or a malformed one, is refused with
//   the field and both values named;
// - its drafts over a committed sequence (the teacher-forced replay the live
//   source must equal) agree step by step with an independent float64 numpy
//   reference (assistant_reference.py) for both head kinds, and each planted
//   error in that reference — the K/V of the other kind's layer, the first
//   owner instead of the last, a window one key narrower, the pre-norm
//   hidden, the full head instead of the centroid head — is seen.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "assistant_compare.h"
#include "assistant_util.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "drafter/assistant_runner.h"
#include "drafter/gemma4_assistant.h"
#include "model/forward.h"
#include "model/loader.h"
#include "model_util.h"
#include "python_util.h"
#include "test_util.h"
#include "venv_util.h"

namespace mtp::drafter {
namespace {

using nlohmann::json;
using test::AssistantSpec;
using test::RandomSpec;

model::Model load_target(const RandomSpec& t, const std::string& tag) {
  return model::Model(model::load_model(test::random_hf_checkpoint(tag, t), {}));
}

// The message of the error load() throws, "" when it loads.
template <class E>
std::string refusal(const RandomSpec& t, const AssistantSpec& a) {
  const model::Model m = load_target(t, "g4a-target");
  const std::string dir = test::random_assistant("g4a-bad", t, a);
  try {
    Gemma4Assistant::load(dir, m.config());
  } catch (const E& e) {
    return e.what();
  }
  return "";
}

TEST(Gemma4Assistant, LoadsThePublishedLayout) {
  const RandomSpec t = test::assistant_target_spec();
  const model::Model m = load_target(t, "g4a-load");
  for (bool ordered : {false, true}) {
    AssistantSpec a;
    a.ordered = ordered;
    a.centroids = 8;
    a.top_k = 3;
    const std::string dir = test::random_assistant("g4a", t, a);
    EXPECT_TRUE(is_assistant_dir(dir));
    const Gemma4Assistant g = Gemma4Assistant::load(dir, m.config());
    const AssistantConfig& c = g.config();
    EXPECT_EQ(c.backbone, 64);
    EXPECT_EQ(c.block.d_model, 32);
    EXPECT_EQ(c.block.n_layers, 3);
    // The random target: layers s s f s s f, the last two shared.
    EXPECT_EQ(c.kv_layer(true), 3);
    EXPECT_EQ(c.kv_layer(false), 2);
    EXPECT_EQ(c.block.layer_kind(2).head_dim, 32);
    EXPECT_EQ(c.block.layer_kind(0).head_dim, 16);
    EXPECT_EQ(c.block.layer_kind(0).kv_source, 3);
    EXPECT_EQ(c.block.layer_kind(2).kv_source, 2);
    EXPECT_EQ(c.ordered, ordered);
    EXPECT_EQ(g.weights().clusters.size(), ordered ? 8u : 0u);
    // The tied head reads the fp32 table in place (model::TiedHead::Auto).
    EXPECT_EQ(g.weights().head.is_view(), !ordered);
    // Every stored tensor once: embed 384x32, 3 layers, norm, projections.
    int64_t layers = 0;
    for (int hd : {16, 16, 32}) layers += 4 * 32 + 2 * 4 * hd * 32 + hd + 3 * 48 * 32 + 1;
    const int64_t expect = 384 * 32 + layers + 32 + 32 * 128 + 64 * 32 +
                           (ordered ? 8 * 32 + 384 : 0);
    EXPECT_EQ(g.parameters(), expect);
  }
  // Keys: everything before the query (full), the last window + 1 (sliding).
  const Gemma4Assistant g = Gemma4Assistant::load(test::random_assistant("g4a", t, {}), m.config());
  EXPECT_EQ(g.config().first_key(false, 20), 0);
  EXPECT_EQ(g.config().first_key(true, 20), 20 - 1 - 6);
  EXPECT_EQ(g.config().first_key(true, 3), 0);
  EXPECT_FALSE(is_assistant_dir(test::random_hf_checkpoint("g4a-t", t)));
  // A hold that rounds the table packs the tied head; an untied head is packed.
  const Gemma4Assistant rounded = Gemma4Assistant::load(test::random_assistant("g4a", t, {}),
                                                        m.config(), kernels::WeightType::BF16);
  EXPECT_FALSE(rounded.weights().head.is_view());
  EXPECT_EQ(rounded.weights().head.hold(), kernels::WeightType::BF16);
  // --tied-head packed reaches the assistant: a copy even where auto views.
  EXPECT_FALSE(Gemma4Assistant::load(test::random_assistant("g4a", t, {}), m.config(), {}, nullptr,
                                     model::TiedHead::Packed)
                   .weights().head.is_view());
  AssistantSpec untied;
  untied.tie = false;
  EXPECT_FALSE(Gemma4Assistant::load(test::random_assistant("g4a-u", t, untied), m.config())
                   .weights().head.is_view());
}

TEST(Gemma4Assistant, RefusesWhatDoesNotFit) {
  const RandomSpec t = test::assistant_target_spec();
  struct Case {
    const char* name;
    json patch;
    std::vector<std::string> words;  // in the message
  };
  const std::vector<Case> cases = {
      {"backbone", {{"backbone_hidden_size", 48}}, {"backbone_hidden_size is 48", "64"}},
      {"vocabulary", {{"text_config", {{"vocab_size", 256}}}}, {"vocab_size is 256", "384"}},
      {"head width", {{"text_config", {{"head_dim", 8}}}}, {"'head_dim' is 8", "head width 16"}},
      {"global head width", {{"text_config", {{"global_head_dim", 16}}}},
       {"'global_head_dim' is 16", "head width 32"}},
      {"kv heads", {{"text_config", {{"num_key_value_heads", 1}}}},
       {"'num_key_value_heads' gives 1", "has 2"}},
      {"window", {{"text_config", {{"sliding_window", 7}}}}, {"'sliding_window' is 7", "6"}},
      {"per-layer embeddings", {{"text_config", {{"hidden_size_per_layer_input", 8}}}},
       {"'hidden_size_per_layer_input' is 8", "must be 0"}},
      {"owning layers", {{"text_config", {{"num_kv_shared_layers", 1}}}},
       {"'num_kv_shared_layers' is 1", "3"}},
      {"model type", {{"model_type", "gemma4_text"}}, {"model_type is 'gemma4_text'"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    AssistantSpec a;
    a.config_patch = c.patch;
    const std::string msg = refusal<ConfigError>(t, a);
    ASSERT_FALSE(msg.empty()) << "loaded";
    for (const std::string& w : c.words) EXPECT_NE(msg.find(w), std::string::npos) << msg;
  }
  AssistantSpec a;
  a.ordered = true;
  a.centroids = 5;  // 384 % 5 != 0
  std::string msg = refusal<ConfigError>(t, a);
  EXPECT_NE(msg.find("num_centroids 5 does not divide the vocabulary of 384"), std::string::npos) << msg;
  a.centroids = 8;
  a.top_k = 9;
  msg = refusal<ConfigError>(t, a);
  EXPECT_NE(msg.find("centroid_intermediate_top_k is 9"), std::string::npos) << msg;
  // A target of another family.
  const model::Model llama(model::load_model(
      test::random_hf_checkpoint("g4a-llama", RandomSpec::for_arch(model::Arch::Llama)), {}));
  EXPECT_THROW(Gemma4Assistant::load(test::random_assistant("g4a", t, {}), llama.config()),
               ConfigError);
}

TEST(Gemma4Assistant, RefusesMalformedTensors) {
  const RandomSpec t = test::assistant_target_spec();
  AssistantSpec a;
  a.ordered = true;
  a.centroids = 8;
  a.top_k = 2;
  for (int64_t i = 0; i < 384; ++i) a.ordering.push_back(i);
  a.ordering[10] = 3;  // 3 twice, 10 never
  std::string msg = refusal<FormatError>(t, a);
  EXPECT_NE(msg.find("not a permutation"), std::string::npos) << msg;
  EXPECT_NE(msg.find("entry 10 is 3"), std::string::npos) << msg;
  a.ordering[10] = 384;
  msg = refusal<FormatError>(t, a);
  EXPECT_NE(msg.find("entry 10 is 384"), std::string::npos) << msg;
  // A tensor nothing reads, a missing one, a misshapen one.
  AssistantSpec b;
  b.extra_tensors = {{"model.layers.0.mlp.extra.weight", {4, 4}}};
  msg = refusal<FormatError>(t, b);
  EXPECT_NE(msg.find("'model.layers.0.mlp.extra.weight'"), std::string::npos) << msg;
  b.extra_tensors = {};
  b.edit = [](const std::string& n, std::vector<int64_t>& shape, std::vector<float>&) {
    if (n == "post_projection.weight") shape.clear();
  };
  msg = refusal<FormatError>(t, b);
  EXPECT_NE(msg.find("'post_projection.weight' not found"), std::string::npos) << msg;
  b.edit = [](const std::string& n, std::vector<int64_t>& shape, std::vector<float>& v) {
    if (n == "pre_projection.weight") shape = {32, 64}, v.resize(32 * 64);
  };
  EXPECT_THROW(refusal<FormatError>(t, b), ShapeError);
  // The K/V projections of shared layers are ignored, as transformers does.
  AssistantSpec c;
  c.extra_tensors = {{"model.layers.0.self_attn.k_proj.weight", {32, 32}}};
  EXPECT_EQ(refusal<FormatError>(t, c), "");
}

// ------------------------------------------------------------- reference

struct RefRun {
  std::vector<int32_t> tokens;
  std::vector<std::vector<AssistantDraft>> engine;
  json ref;
};

constexpr int kN0 = 2, kSteps = 3;

// The engine's replay and the numpy reference's over 16 random tokens.
RefRun run_reference(const std::string& py, const RandomSpec& t, const AssistantSpec& a,
                     const std::string& perturb = "") {
  const std::string tdir = test::random_hf_checkpoint("g4a-ref-t", t);
  const std::string adir = test::random_assistant("g4a-ref-a", t, a);
  model::Model m(model::load_model(tdir, {}));
  const Gemma4Assistant g = Gemma4Assistant::load(adir, m.config());
  RefRun r;
  std::mt19937 rng(uint32_t(a.seed));
  r.tokens = test::random_tokens(rng, 16, t.vocab);
  r.engine = assistant_teacher_forced(m, g, r.tokens, kN0, kSteps, nullptr, true);
  std::string toks;
  for (int32_t x : r.tokens) toks += (toks.empty() ? "" : ",") + std::to_string(x);
  const std::string out = test::temp_dir("g4a-ref-out") + "/ref.json";
  std::string log;
  const std::string script = std::string(MTPSPEC_SOURCE_DIR) + "/tests/drafter/assistant_reference.py";
  std::string args = "'" + script + "' '" + tdir + "' '" + adir + "' " + toks + " " +
                     std::to_string(kN0) + " " + std::to_string(kSteps) + " '" + out + "' " + perturb;
  EXPECT_EQ(test::run_python(py, args, &log), 0) << log;
  r.ref = json::parse(read_file(out));
  return r;
}

// max |engine - reference| / tolerance over every compared score; the
// chosen tokens must agree wherever the reference's top two are apart by
// more than the tolerance (a chain is compared up to its first such tie).
double compare(const RefRun& r, bool expect_tokens) {
  double worst = 0;
  // Reductions: the target's (d 64, ffn 192, 4·32) and the assistant's.
  const double K = 256;
  const int L = 6 + 3;
  const json& chains = r.ref.at("chains");
  EXPECT_EQ(chains.size(), r.engine.size());
  for (size_t i = 0; i < chains.size() && i < r.engine.size(); ++i) {
    for (size_t j = 0; j < size_t(kSteps); ++j) {
      const json& ref = chains[i][j];
      const AssistantDraft& eng = r.engine[i][j];
      std::vector<double> rl = ref.at("logits").get<std::vector<double>>();
      std::vector<int32_t> rids;
      if (!ref.at("ids").is_null()) rids = ref.at("ids").get<std::vector<int32_t>>();
      if (rids != eng.ids || rl.size() != eng.logits.size()) {
        worst = INFINITY;  // another set of tokens scored
        break;
      }
      double scale = 0;
      for (double v : rl) scale = std::max(scale, std::abs(v));
      const double tol = test::fp32_forward_tolerance(K, L, scale);
      for (size_t k = 0; k < rl.size(); ++k) {
        worst = std::max(worst, std::abs(double(eng.logits[k]) - rl[k]) / tol);
      }
      std::vector<double> sorted = rl;
      std::nth_element(sorted.begin(), sorted.begin() + 1, sorted.end(), std::greater<>());
      if (sorted[0] - sorted[1] <= 2 * tol) break;  // a near tie: later inputs may differ
      if (expect_tokens) {
        EXPECT_EQ(eng.token, ref.at("token").get<int32_t>()) << "N=" << kN0 + int(i) << " step " << j;
      }
      if (eng.token != ref.at("token").get<int32_t>()) break;
    }
  }
  return worst;
}

void expect_matches(const RandomSpec& t, const AssistantSpec& a) {
  MTP_REQUIRE_VENV(py, "test", "scripts/install-test-venv.sh");
  const RefRun r = run_reference(py, t, a);
  const double worst = compare(r, true);
  EXPECT_LE(worst, 1.0);
  std::printf("  max |engine - reference| / tol = %.3g\n", worst);
}

TEST(Gemma4AssistantReference, FullHeadDraftsEqualTheReference) {
  expect_matches(test::assistant_target_spec(), {});
}

TEST(Gemma4AssistantReference, CentroidHeadDraftsEqualTheReference) {
  AssistantSpec a;
  a.ordered = true;
  a.centroids = 16;
  a.top_k = 3;
  a.seed = 12;
  expect_matches(test::assistant_target_spec(), a);
}

TEST(Gemma4AssistantReference, Bf16AssistantUntiedHead) {
  AssistantSpec a;
  a.dtype = DType::BF16;
  a.tie = false;
  a.seed = 13;
  expect_matches(test::assistant_target_spec(), a);
}

// Each planted error must be seen: beyond the tolerance, or other tokens
// scored. Head widths equal across kinds so the wrong kind's K/V fit.
TEST(Gemma4AssistantReference, DetectsPerturbations) {
  MTP_REQUIRE_VENV(py, "test", "scripts/install-test-venv.sh");
  RandomSpec t = test::assistant_target_spec();
  t.global_head_dim = 16;
  for (const char* p : {"wrong_kind", "first_owner", "window", "pre_norm", "full_head"}) {
    SCOPED_TRACE(p);
    AssistantSpec a;  // the full head but to see the centroid head dropped
    a.ordered = std::string(p) == "full_head";
    a.centroids = 16;
    a.top_k = 3;
    EXPECT_LE(compare(run_reference(py, t, a), true), 1.0);
    const double bad = compare(run_reference(py, t, a, p), false);
    EXPECT_GT(bad, 1.0) << "a wrong reference was not detected";
    std::printf("  %-12s max |Δ| / tol = %.3g\n", p, bad);
  }
}

// ------------------------------------------------------ transformers itself

// transformers' Gemma4AssistantForCausalLM (PyPI, CPU, float32, eager) on the
// inputs its candidate generator passes after a prefill — the target's own
// hidden state and shared K/V —, forward by forward: every score within 2×
// the tolerance (two fp32 paths), the centroid head's selected tokens the
// same set, the chosen tokens equal wherever the top two are apart. Label
// `reference`; skipped without the reference venv.
void expect_transformers(const RandomSpec& t, const AssistantSpec& a) {
  std::string why;
  const std::string py = test::ref_python({"torch", "transformers"}, &why);
  if (py.empty()) GTEST_SKIP() << why;
  const std::string tdir = test::random_hf_checkpoint("g4a-hf-t", t);
  const std::string adir = test::random_assistant("g4a-hf-a", t, a);
  model::Model m(model::load_model(tdir, {}));
  const Gemma4Assistant g = Gemma4Assistant::load(adir, m.config());
  std::mt19937 rng(uint32_t(a.seed));
  const std::vector<int32_t> toks = test::random_tokens(rng, 16, t.vocab);
  const auto eng = assistant_teacher_forced(m, g, toks, kN0, kSteps, nullptr, true);
  std::string list;
  for (int32_t x : toks) list += (list.empty() ? "" : ",") + std::to_string(x);
  const std::string out = test::temp_dir("g4a-hf-out") + "/hf.json";
  std::string log;
  ASSERT_EQ(test::run_python(py, std::string(MTPSPEC_SOURCE_DIR) + "/tests/drafter/assistant_transformers.py",
                             {tdir, adir, list, std::to_string(kN0), std::to_string(kSteps), out}, &log), 0) << log;
  const json hf = json::parse(read_file(out)).at("chains");
  long tokens = 0;
  const double worst = test::compare_with_transformers(hf, eng, &tokens);
  EXPECT_LE(worst, 2.0);
  EXPECT_GT(tokens, 20);
  std::printf("  max |engine - transformers| / tol = %.3g over %ld drafts\n", worst, tokens);
}

TEST(TransformersGemma4Assistant, FullHead) { expect_transformers(test::assistant_target_spec(), {}); }

TEST(TransformersGemma4Assistant, CentroidHead) {
  AssistantSpec a;
  a.ordered = true;
  a.centroids = 16;
  a.top_k = 3;
  a.seed = 14;
  expect_transformers(test::assistant_target_spec(), a);
}

}  // namespace
}  // namespace mtp::drafter
