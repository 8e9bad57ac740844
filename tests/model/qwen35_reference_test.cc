// Qwen3.5 against the independent reference (tests/qwen35_reference.h: a
// double-precision decoder with the recurrence token by token, sharing no
// code with the engine): every row's logits, capture hidden and each
// recurrent layer's final state within ref_compare.h's tolerance, greedy ids
// equal, on random checkpoints of every variant (text-only and the nested
// multimodal layout, bf16, value heads = key heads, key width != value
// width, the native MTP head's tensors present). Qwen35Reference.
// DetectsPerturbations shows each feature matters; transformers' own model
// checks the same checkpoints under the `reference` label.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>

#include "checkpoint_util.h"
#include "core/mapped_file.h"
#include "model/forward.h"
#include "model/loader.h"
#include "model_util.h"
#include "python_util.h"
#include "qwen35_reference.h"
#include "ref_compare.h"
#include "test_util.h"

namespace mtp::test {
namespace {

constexpr int kQ35Tokens = 14;

struct Q35Run {
  std::vector<int32_t> tokens;
  RowOutputs out;
  std::vector<std::vector<float>> states;  // per recurrent layer, after the last token
  int L = 0;
  double K = 0;
};

// The engine over kQ35Tokens random tokens in calls of 5, 1 and 8 rows.
Q35Run q35_engine(const std::string& dir, uint32_t seed) {
  model::Model m(model::load_model(dir, {}));
  std::mt19937 rng(seed);
  Q35Run r;
  r.tokens = random_tokens(rng, kQ35Tokens, m.config().vocab);
  model::KVCache kv = m.make_cache(1, kQ35Tokens + 8);
  r.out = run_chunks(m, kv, 0, r.tokens, {5, 1, 8}, nullptr);
  const auto& c = m.config();
  for (int l = 0; l < c.n_layers; ++l) {
    if (!c.is_recurrent(l)) continue;
    const float* s = kv.rec_state(0, l);
    r.states.emplace_back(s, s + c.linear.state_floats());
  }
  const Q35Config q = read_q35_config(dir);
  r.L = q.L;
  r.K = std::max({double(q.d), double(q.ffn), double(2 * q.H * q.hd), double(kQ35Tokens),
                  double(2 * q.nk * q.dk + q.nv * q.dv)});
  return r;
}

RefComparison q35_compare(const std::string& dir, const Q35Run& r, const Q35Perturb& p = {}) {
  const Q35Out ref = q35_reference(dir, r.tokens, p);
  RefComparison c;
  compare_ref_rows(r.out.hidden, ref.hidden, r.K, r.L, "hidden", c);
  compare_ref_rows(r.out.logits, ref.logits, r.K, r.L, "logits", c);
  for (size_t i = 0; i < r.states.size(); ++i) {
    compare_ref_rows(r.states[i], {ref.states[i]}, r.K, r.L, "recurrent state", c);
  }
  return c;
}

void q35_expect_matches(const std::string& dir, uint32_t seed) {
  const Q35Run r = q35_engine(dir, seed);
  const RefComparison c = q35_compare(dir, r);
  EXPECT_LE(c.worst_ratio, 1.0) << "worst at " << c.where;
  // Greedy ids equal wherever the reference's top two are apart by more
  // than the tolerance.
  const Q35Out ref = q35_reference(dir, r.tokens);
  const size_t V = ref.logits[0].size();
  for (size_t t = 0; t < r.tokens.size(); ++t) {
    std::vector<double> row = ref.logits[t];
    const size_t best = size_t(std::max_element(row.begin(), row.end()) - row.begin());
    const auto eng = r.out.logits.begin() + long(t * V);
    const size_t mine = size_t(std::max_element(eng, eng + long(V)) - eng);
    std::nth_element(row.begin(), row.begin() + 1, row.end(), std::greater<>());
    double scale = 0;
    for (double v : ref.logits[t]) scale = std::max(scale, std::abs(v));
    if (row[0] - row[1] > ref_tolerance(r.K, r.L, scale)) EXPECT_EQ(mine, best) << "row " << t;
  }
  std::printf("  max |engine - reference| / tol = %.3g (%s)\n", c.worst_ratio, c.where.c_str());
}

RandomSpec q35_spec() { return RandomSpec::for_arch(model::Arch::Qwen35); }

TEST(Qwen35Reference, TextOnly) { q35_expect_matches(random_hf_checkpoint("q35-ref", q35_spec()), 1); }

TEST(Qwen35Reference, NestedLayoutWithMtpHead) {
  RandomSpec s = q35_spec();
  s.nested_text_config = true;
  s.mtp = true;
  s.tie = false;
  q35_expect_matches(random_hf_checkpoint("q35-ref-mm", s), 2);
}

TEST(Qwen35Reference, Bf16EqualHeadsWiderValues) {
  RandomSpec s = q35_spec();
  s.dtype = DType::BF16;
  s.lin_k_heads = s.lin_v_heads = 3;
  s.lin_k_dim = 8;
  s.lin_v_dim = 12;
  s.conv_kernel = 3;
  s.n_layers = 5;
  s.layer_types = {"linear_attention", "full_attention", "linear_attention", "linear_attention",
                   "full_attention"};
  q35_expect_matches(random_hf_checkpoint("q35-ref-bf16", s), 3);
}

// Each planted error must be seen: the engine agrees with the faithful
// reference and disagrees with the wrong one beyond the tolerance.
TEST(Qwen35Reference, DetectsPerturbations) {
  const std::vector<std::pair<const char*, std::function<void(Q35Perturb&)>>> cases = {
      {"norms x̂·w instead of x̂·(1 + w)", [](Q35Perturb& p) { p.plain_norms = true; }},
      {"attention output not gated", [](Q35Perturb& p) { p.no_gate = true; }},
      {"every head dim rotates", [](Q35Perturb& p) { p.full_rotation = true; }},
      {"convolution dropped", [](Q35Perturb& p) { p.no_conv = true; }},
      {"state not decayed", [](Q35Perturb& p) { p.no_decay = true; }},
      {"value heads tiled over key heads", [](Q35Perturb& p) { p.tiled_heads = true; }},
      {"q/k not l2-normalised", [](Q35Perturb& p) { p.no_qk_l2norm = true; }},
  };
  const std::string dir = random_hf_checkpoint("q35-neg", q35_spec());
  const Q35Run r = q35_engine(dir, 9);
  EXPECT_LE(q35_compare(dir, r).worst_ratio, 1.0);
  for (const auto& [name, wrong] : cases) {
    SCOPED_TRACE(name);
    Q35Perturb p;
    wrong(p);
    const RefComparison bad = q35_compare(dir, r, p);
    EXPECT_GT(bad.worst_ratio, 1.0) << "a wrong reference was not detected";
    std::printf("  %-40s max |Δ| / tol = %.3g\n", name, bad.worst_ratio);
  }
}

// ------------------------------------------------------ transformers itself

// transformers' own Qwen3.5 (PyPI, CPU, float32, eager attention, no cache:
// its chunked delta rule) on the same random checkpoints — the authority where
// our reading of its code and its code disagree. It drops the mtp.* tensors,
// so the native head is checked against our reference only. Label
// `reference`; skipped without the reference venv. Each side rounds to fp32
// on its own path: 2 × the tolerance of one.
void q35_expect_transformers(const RandomSpec& spec, uint32_t seed) {
  std::string why;
  const std::string py = ref_python({"torch", "transformers", "numpy"}, &why);
  if (py.empty()) GTEST_SKIP() << why;
  const std::string dir = random_hf_checkpoint("q35-hf", spec);
  const Q35Run r = q35_engine(dir, seed);
  std::string toks;
  for (int32_t t : r.tokens) toks += (toks.empty() ? "" : ",") + std::to_string(t);
  const std::string out = temp_dir("q35-hf-out") + "/logits.f32";
  std::string log;
  ASSERT_EQ(run_python(py, std::string(MTPSPEC_SOURCE_DIR) + "/tests/model/transformers_logits.py",
                       {dir, toks, out}, &log), 0) << log;
  const std::string bytes = read_file(out);
  const size_t n = r.tokens.size(), V = r.out.logits.size() / n;
  ASSERT_EQ(bytes.size(), r.out.logits.size() * sizeof(float));
  std::vector<std::vector<double>> hf(n, std::vector<double>(V));
  for (size_t i = 0; i < n * V; ++i) {
    float f;
    std::memcpy(&f, bytes.data() + i * sizeof(float), sizeof f);
    hf[i / V][i % V] = f;
  }
  RefComparison c;
  compare_ref_rows(r.out.logits, hf, r.K, 2 * r.L, "logits vs transformers", c);
  EXPECT_LE(c.worst_ratio, 2.0) << c.where;
  std::printf("  max |engine - transformers| / tol = %.3g (%s)\n", c.worst_ratio, c.where.c_str());
}

TEST(TransformersQwen35, TextOnly) { q35_expect_transformers(q35_spec(), 21); }

TEST(TransformersQwen35, NestedLayoutWithMtpHead) {
  RandomSpec s = q35_spec();
  s.nested_text_config = true;
  s.mtp = true;
  s.tie = false;
  q35_expect_transformers(s, 22);
}

TEST(TransformersQwen35, EqualHeadsWiderValues) {
  RandomSpec s = q35_spec();
  s.lin_k_heads = s.lin_v_heads = 3;
  s.lin_v_dim = 12;
  s.conv_kernel = 3;
  q35_expect_transformers(s, 23);
}

}  // namespace
}  // namespace mtp::test
