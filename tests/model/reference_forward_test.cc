// Model::forward against an independent reference: a plain scalar decoder in
// double precision, written here from the Hugging Face / llama2.c semantics of
// each family (not from block.cc), run on the exact fp32 weights the engine
// holds. Every row's logits and capture hidden must agree within a tolerance
// derived from the dimensions (see tolerance() below).
//
// The reference takes its hyper-parameters from the checkpoint's own
// config.json (hf_config_json) and the family rules of transformers — not from
// the engine's parsed ModelConfig — so a mis-parsed key is caught too. Only the
// weights come from the loaded model (PackedMatrix::row_f32, the fp32 norm
// vectors with Gemma's 1 + w folded in, EmbeddingTable::lookup), and the tied
// head is read from the embedding table, not from the engine's packed copy.
//
// ReferenceForward.DetectsPerturbations shows the comparison can fail: a
// reference with one detail wrong (one RoPE sin sign, the window off by one, a
// softcap dropped, ...) must exceed the tolerance.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint_util.h"
#include "model/forward.h"
#include "model/loader.h"
#include "model_util.h"
#include "test_util.h"

namespace mtp::test {
namespace {

using nlohmann::json;
using model::Arch;

constexpr double kPi = 3.14159265358979323846;

// ---------------------------------------------------------------- reference --

// Everything the reference needs besides the weights, from the family semantics.
struct RefConfig {
  int d = 0, L = 0, H = 0, KV = 0, hd = 0, ffn = 0, V = 0;
  double eps = 1e-6;
  bool gelu_tanh = false;      // Gemma: gelu_pytorch_tanh; else SiLU
  bool interleaved = false;    // llama2.c: RoPE pairs (2i, 2i+1); HF: (i, i + hd/2)
  bool qkv_bias = false;       // Qwen2
  bool qk_norm = false;        // Qwen3, Gemma 3
  bool sandwich = false;       // Gemma 2/3 post-attention / post-ffn norms
  bool tied = false;           // lm_head = embedding table
  double embed_scale = 1.0;    // Gemma: sqrt(hidden_size)
  double score_scale = 0;      // query_pre_attn_scalar^-0.5 (Gemma) or hd^-0.5
  double attn_cap = 0, final_cap = 0;       // 0 = none
  std::vector<double> inv_global, inv_local;  // [hd/2]
  std::vector<int> window;          // [L] 0 = full causal
  std::vector<uint8_t> local_rope;  // [L] 1 = layer uses inv_local
};

// inv_freq[i] = theta^(-2i/hd), then transformers' rope_scaling rules.
std::vector<double> rope_inv_freq(double theta, int hd, const json& scaling) {
  std::vector<double> inv(hd / 2);
  for (int i = 0; i < hd / 2; ++i) inv[i] = std::pow(theta, -2.0 * i / hd);
  if (scaling.is_null()) return inv;
  const std::string type = scaling.value("rope_type", scaling.value("type", std::string()));
  const double factor = scaling.value("factor", 1.0);
  if (type == "linear") {
    for (double& f : inv) f /= factor;
  } else if (type == "llama3") {
    // transformers _compute_llama3_parameters.
    const double lo = scaling.at("low_freq_factor").get<double>();
    const double hi = scaling.at("high_freq_factor").get<double>();
    const double old_ctx = scaling.at("original_max_position_embeddings").get<double>();
    const double low_wavelen = old_ctx / lo, high_wavelen = old_ctx / hi;
    for (double& f : inv) {
      const double wavelen = 2 * kPi / f;
      if (wavelen < high_wavelen) continue;  // high frequency: unchanged
      if (wavelen > low_wavelen) {
        f /= factor;  // low frequency: scaled
      } else {        // medium: smooth interpolation
        const double smooth = (old_ctx / wavelen - lo) / (hi - lo);
        f = (1 - smooth) * f / factor + smooth * f;
      }
    }
  } else if (type != "default") {
    ADD_FAILURE() << "reference: unknown rope_type " << type;
  }
  return inv;
}

double num_or(const json& c, const char* key, double dflt) {
  return c.contains(key) && !c.at(key).is_null() ? c.at(key).get<double>() : dflt;
}

// From the checkpoint's config.json and transformers' family semantics.
RefConfig ref_config_hf(const RandomSpec& s) {
  const json c = hf_config_json(s);
  RefConfig r;
  r.d = c.at("hidden_size");
  r.L = c.at("num_hidden_layers");
  r.H = c.at("num_attention_heads");
  r.KV = c.at("num_key_value_heads");
  r.hd = c.contains("head_dim") && !c.at("head_dim").is_null() ? c.at("head_dim").get<int>()
                                                                : r.d / r.H;
  r.ffn = c.at("intermediate_size");
  r.V = c.at("vocab_size");
  r.eps = c.at("rms_norm_eps");
  r.tied = c.value("tie_word_embeddings", true);
  const bool gemma = s.arch == Arch::Gemma2 || s.arch == Arch::Gemma3;
  r.gelu_tanh = gemma;
  r.sandwich = gemma;
  r.qkv_bias = s.arch == Arch::Qwen2;
  r.qk_norm = s.arch == Arch::Qwen3 || s.arch == Arch::Gemma3;
  r.embed_scale = gemma ? std::sqrt(double(r.d)) : 1.0;
  r.score_scale = gemma ? 1.0 / std::sqrt(c.at("query_pre_attn_scalar").get<double>())
                        : 1.0 / std::sqrt(double(r.hd));
  if (s.arch == Arch::Gemma2) {
    r.attn_cap = num_or(c, "attn_logit_softcapping", 0);
    r.final_cap = num_or(c, "final_logit_softcapping", 0);
  }
  const json scaling = c.contains("rope_scaling") ? c.at("rope_scaling") : json();
  r.inv_global = rope_inv_freq(c.at("rope_theta").get<double>(), r.hd, scaling);
  r.inv_local = s.arch == Arch::Gemma3
                    ? rope_inv_freq(num_or(c, "rope_local_base_freq", 10000.0), r.hd, json())
                    : r.inv_global;
  r.window.assign(r.L, 0);
  r.local_rope.assign(r.L, 0);
  for (int l = 0; l < r.L; ++l) {
    bool sliding = false;
    if (s.arch == Arch::Gemma2) sliding = l % 2 == 0;  // Gemma2: even layers local
    if (s.arch == Arch::Gemma3) {
      sliding = (l + 1) % c.at("sliding_window_pattern").get<int>() != 0;
    }
    if (sliding) r.window[l] = c.at("sliding_window").get<int>();
    r.local_rope[l] = s.arch == Arch::Gemma3 && sliding;
  }
  return r;
}

// llama2.c run.c semantics: eps 1e-5, theta 1e4, interleaved pairs, SiLU.
RefConfig ref_config_llama2c(int dim, int hidden, int layers, int heads, int kv_heads, int vocab) {
  RefConfig r;
  r.d = dim;
  r.L = layers;
  r.H = heads;
  r.KV = kv_heads;
  r.hd = dim / heads;
  r.ffn = hidden;
  r.V = std::abs(vocab);
  r.eps = 1e-5;
  r.interleaved = true;
  r.tied = vocab > 0;
  r.score_scale = 1.0 / std::sqrt(double(r.hd));
  r.inv_global = rope_inv_freq(10000.0, r.hd, json());
  r.inv_local = r.inv_global;
  r.window.assign(r.L, 0);
  r.local_rope.assign(r.L, 0);
  return r;
}

using Vec = std::vector<double>;

struct Mat {
  size_t rows = 0, cols = 0;
  Vec w;  // row-major
  Vec apply(const Vec& x) const {
    Vec y(rows, 0.0);
    for (size_t r = 0; r < rows; ++r) {
      double acc = 0;
      for (size_t c = 0; c < cols; ++c) acc += w[r * cols + c] * x[c];
      y[r] = acc;
    }
    return y;
  }
};

Mat to_mat(const kernels::PackedMatrix& p) {
  Mat m{p.rows(), p.cols(), Vec(p.rows() * p.cols())};
  std::vector<float> row(p.cols());
  for (size_t r = 0; r < p.rows(); ++r) {
    p.row_f32(r, row.data());
    std::copy(row.begin(), row.end(), m.w.begin() + r * p.cols());
  }
  return m;
}

Vec to_vec(const std::vector<float>& v) { return Vec(v.begin(), v.end()); }

Vec rms_norm(const Vec& x, const Vec& w, double eps) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double inv = 1.0 / std::sqrt(ss / double(x.size()) + eps);
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * w[i];
  return y;
}

double act(double x, bool gelu_tanh) {
  if (gelu_tanh) {
    return 0.5 * x * (1 + std::tanh(std::sqrt(2 / kPi) * (x + 0.044715 * x * x * x)));
  }
  return x / (1 + std::exp(-x));
}

struct RefLayer {
  Vec attn_norm, post_attn_norm, ffn_norm, post_ffn_norm, q_norm, k_norm, qkv_bias;
  Mat wqkv, wo, w_gate_up, w_down;
};

// A deliberate error inside the reference, for the negative test.
struct Perturb {
  int flip_sin_freq = -1;  // negate sin of this RoPE frequency (all heads, positions)
};

struct RefOut {
  std::vector<Vec> hidden, logits;  // [n][d], [n][V]
};

// x rotated in place by angle pos · inv[i] for pair i.
void rope(double* x, int pos, const Vec& inv, bool interleaved, const Perturb& p) {
  const int half = int(inv.size());
  for (int i = 0; i < half; ++i) {
    const double a = pos * inv[i];
    const double cs = std::cos(a), sn = (i == p.flip_sin_freq ? -1 : 1) * std::sin(a);
    const int i0 = interleaved ? 2 * i : i, i1 = interleaved ? 2 * i + 1 : i + half;
    const double x0 = x[i0], x1 = x[i1];
    x[i0] = x0 * cs - x1 * sn;
    x[i1] = x1 * cs + x0 * sn;
  }
}

// Tokens at positions 0..n-1 of one sequence, full causal pass.
RefOut reference_forward(const model::Model& m, const RefConfig& rc,
                         const std::vector<int32_t>& tokens, const Perturb& p = {}) {
  const model::ModelWeights& W = m.weights();
  const int n = int(tokens.size()), d = rc.d, hd = rc.hd, H = rc.H, KV = rc.KV;
  const int qd = H * hd, kvd = KV * hd;

  std::vector<RefLayer> layers(rc.L);
  for (int l = 0; l < rc.L; ++l) {
    const model::LayerWeights& lw = W.layers[l];
    RefLayer& r = layers[l];
    r.attn_norm = to_vec(lw.attn_norm);
    r.post_attn_norm = to_vec(lw.post_attn_norm);
    r.ffn_norm = to_vec(lw.ffn_norm);
    r.post_ffn_norm = to_vec(lw.post_ffn_norm);
    r.q_norm = to_vec(lw.q_norm);
    r.k_norm = to_vec(lw.k_norm);
    r.qkv_bias = to_vec(lw.qkv_bias);
    r.wqkv = to_mat(lw.wqkv);
    r.wo = to_mat(lw.wo);
    r.w_gate_up = to_mat(lw.w_gate_up);
    r.w_down = to_mat(lw.w_down);
    EXPECT_EQ(r.wqkv.rows, size_t(qd + 2 * kvd));
    EXPECT_EQ(r.w_gate_up.rows, size_t(2 * rc.ffn));
  }
  std::vector<float> row(d);
  auto embed_row = [&](int32_t id) {
    W.embed.lookup(id, 1.0f, row.data());
    return Vec(row.begin(), row.end());
  };
  Mat head;
  if (rc.tied) {
    head = {size_t(rc.V), size_t(d), Vec(size_t(rc.V) * d)};
    for (int v = 0; v < rc.V; ++v) {
      Vec e = embed_row(v);
      std::copy(e.begin(), e.end(), head.w.begin() + size_t(v) * d);
    }
  } else {
    head = to_mat(W.lm_head);
  }

  std::vector<Vec> x(n);
  for (int t = 0; t < n; ++t) {
    x[t] = embed_row(tokens[t]);
    for (double& v : x[t]) v *= rc.embed_scale;
  }

  for (int l = 0; l < rc.L; ++l) {
    const RefLayer& lw = layers[l];
    const Vec& inv = rc.local_rope[l] ? rc.inv_local : rc.inv_global;
    std::vector<Vec> q(n), k(n), v(n);
    for (int t = 0; t < n; ++t) {
      Vec qkv = lw.wqkv.apply(rms_norm(x[t], lw.attn_norm, rc.eps));
      if (rc.qkv_bias) {
        for (size_t i = 0; i < qkv.size(); ++i) qkv[i] += lw.qkv_bias[i];
      }
      q[t].assign(qkv.begin(), qkv.begin() + qd);
      k[t].assign(qkv.begin() + qd, qkv.begin() + qd + kvd);
      v[t].assign(qkv.begin() + qd + kvd, qkv.end());
      auto head_norm_rope = [&](Vec& z, int nh, const Vec& nw) {
        for (int h = 0; h < nh; ++h) {
          double* zh = z.data() + size_t(h) * hd;
          if (rc.qk_norm) {
            Vec y = rms_norm(Vec(zh, zh + hd), nw, rc.eps);
            std::copy(y.begin(), y.end(), zh);
          }
          rope(zh, t, inv, rc.interleaved, p);
        }
      };
      head_norm_rope(q[t], H, lw.q_norm);
      head_norm_rope(k[t], KV, lw.k_norm);
    }
    std::vector<Vec> attn_out(n, Vec(qd, 0.0));
    for (int t = 0; t < n; ++t) {
      for (int h = 0; h < H; ++h) {
        const int g = h / (H / KV);
        std::vector<double> score;
        std::vector<int> keys;
        for (int s = 0; s <= t; ++s) {
          if (rc.window[l] > 0 && t - s >= rc.window[l]) continue;
          double dot = 0;
          for (int i = 0; i < hd; ++i) dot += q[t][h * hd + i] * k[s][g * hd + i];
          dot *= rc.score_scale;
          if (rc.attn_cap > 0) dot = rc.attn_cap * std::tanh(dot / rc.attn_cap);
          score.push_back(dot);
          keys.push_back(s);
        }
        const double mx = *std::max_element(score.begin(), score.end());
        double z = 0;
        for (double& sc : score) z += (sc = std::exp(sc - mx));
        for (size_t j = 0; j < keys.size(); ++j) {
          for (int i = 0; i < hd; ++i) {
            attn_out[t][h * hd + i] += score[j] / z * v[keys[j]][g * hd + i];
          }
        }
      }
    }
    for (int t = 0; t < n; ++t) {
      Vec o = lw.wo.apply(attn_out[t]);
      if (rc.sandwich) o = rms_norm(o, lw.post_attn_norm, rc.eps);
      for (int i = 0; i < d; ++i) x[t][i] += o[i];
      Vec gu = lw.w_gate_up.apply(rms_norm(x[t], lw.ffn_norm, rc.eps));
      Vec a(rc.ffn);
      for (int i = 0; i < rc.ffn; ++i) a[i] = act(gu[i], rc.gelu_tanh) * gu[rc.ffn + i];
      Vec mo = lw.w_down.apply(a);
      if (rc.sandwich) mo = rms_norm(mo, lw.post_ffn_norm, rc.eps);
      for (int i = 0; i < d; ++i) x[t][i] += mo[i];
    }
  }

  RefOut out;
  const Vec final_norm = to_vec(W.final_norm);
  for (int t = 0; t < n; ++t) {
    out.hidden.push_back(x[t]);
    Vec lg = head.apply(rms_norm(x[t], final_norm, rc.eps));
    if (rc.final_cap > 0) {
      for (double& z : lg) z = rc.final_cap * std::tanh(z / rc.final_cap);
    }
    out.logits.push_back(lg);
  }
  return out;
}

// ---------------------------------------------------------------- comparison --

// Per-row tolerance, relative to the row's magnitude ‖ref_row‖∞:
//
//   tol = 64 · ε32 · sqrt(K · L) · ‖ref_row‖∞,   ε32 = 2^-23,
//   K = the longest reduction (max of d, H·hd, ffn, n tokens), L = layers.
//
// Why: the engine rounds every product and sum to fp32 (ε32 relative). A
// length-K fp32 dot product has error ≈ sqrt(K)·ε32·‖a‖‖b‖ when rounding errors
// have random sign (the worst case K·ε32 is not reached in practice). RMSNorm,
// softmax and the residual adds keep errors relative to the row's scale, and
// the small random weights (0.5/√cols) give every sub-layer a gain of order 1,
// so the per-layer errors add up over the L layers no faster than L·sqrt(K)·ε32
// in the worst sign pattern and sqrt(L·K)·ε32 for random signs; we take the
// latter. The factor 64 covers the ~13 sequential rounding stages of a layer
// (norm, qkv, qk-norm, RoPE, scores, softmax, weighted sum, o_proj, post-norm,
// gate/up, activation, down, post-norm), fp32 exp/tanh/sin/cos (a few ulp
// each) and ×2–3 headroom. For these sizes tol ≈ 1e-4 · ‖row‖∞; every planted
// error in DetectsPerturbations lands ≥ 700× above it. (Observed on a correct
// engine: ≤ 0.03 · tol.)
double tolerance(const RefConfig& rc, int n_tokens, double row_scale) {
  return fp32_forward_tolerance(std::max({rc.d, rc.H * rc.hd, rc.ffn, n_tokens}), rc.L, row_scale);
}

struct Comparison {
  double worst_ratio = 0;  // max over rows and elements of |Δ| / tol (pass: <= 1)
  double worst_abs = 0;
  std::string where;
};

void compare_rows(const std::vector<float>& eng, const std::vector<Vec>& ref, const RefConfig& rc,
                  int n, const char* what, Comparison& c) {
  for (size_t t = 0; t < ref.size(); ++t) {
    const size_t w = ref[t].size();
    double scale = 0;
    for (double v : ref[t]) scale = std::max(scale, std::abs(v));
    const double tol = tolerance(rc, n, scale);
    for (size_t i = 0; i < w; ++i) {
      const double diff = std::abs(double(eng[t * w + i]) - ref[t][i]);
      if (!(diff / tol <= c.worst_ratio)) {  // NaN also lands here
        c.worst_ratio = std::isnan(diff) ? INFINITY : diff / tol;
        c.worst_abs = diff;
        c.where = std::string(what) + " row " + std::to_string(t) + " [" + std::to_string(i) +
                  "]: engine " + std::to_string(eng[t * w + i]) + " ref " +
                  std::to_string(ref[t][i]) + " tol " + std::to_string(tol);
      }
    }
  }
}

struct Engine {
  model::Model model;
  std::vector<int32_t> tokens;
  RowOutputs out;
};

// Runs `n` random tokens through the engine in calls of 9, 1 and 6 rows
// (prefill, decode, verify-sized chunks of one sequence).
Engine run_engine(const std::string& path, int n, uint32_t seed) {
  Engine e{model::Model(model::load_model(path, model::LoadOptions{})), {}, {}};
  std::mt19937 rng(seed);
  e.tokens = random_tokens(rng, n, e.model.config().vocab);
  model::KVCache kv = e.model.make_cache(1, n + 8);
  e.out = run_chunks(e.model, kv, 0, e.tokens, {9, 1, 6}, nullptr);
  return e;
}

Comparison compare(const Engine& e, const RefConfig& rc, const Perturb& p = {}) {
  const int n = int(e.tokens.size());
  RefOut ref = reference_forward(e.model, rc, e.tokens, p);
  Comparison c;
  compare_rows(e.out.hidden, ref.hidden, rc, n, "hidden", c);
  compare_rows(e.out.logits, ref.logits, rc, n, "logits", c);
  return c;
}

constexpr int kTokens = 16;

void expect_matches(const std::string& path, const RefConfig& rc, uint32_t seed) {
  Engine e = run_engine(path, kTokens, seed);
  ASSERT_EQ(e.model.config().d_model, rc.d);
  ASSERT_EQ(e.model.config().vocab, rc.V);
  Comparison c = compare(e, rc);
  EXPECT_LE(c.worst_ratio, 1.0) << "worst at " << c.where;
  std::printf("  max |engine - reference| / tol = %.3g (|Δ| = %.3g at %s)\n", c.worst_ratio,
              c.worst_abs, c.where.c_str());
}

RandomSpec gemma_spec(Arch a) {
  RandomSpec s = RandomSpec::for_arch(a);
  s.sliding_window = 5;           // 16 tokens cross it
  s.query_pre_attn_scalar = 20;   // ≠ head_dim (32), so the score scale is checked
  return s;
}

std::string llama2c_path() {
  static const std::string path = [] {
    std::string p = temp_dir("ref-llama2c") + "/random.bin";
    write_random_llama2c(p, 64, 136, 2, 4, 2, 300, 128, 21);  // GQA 4/2, shared head
    return p;
  }();
  return path;
}

// ---------------------------------------------------------------- tests --

TEST(ReferenceForward, Llama) {
  RandomSpec s = RandomSpec::for_arch(Arch::Llama);
  expect_matches(random_hf_checkpoint("ref-llama", s), ref_config_hf(s), 1);
}

TEST(ReferenceForward, LlamaRopeLlama3) {
  RandomSpec s = RandomSpec::for_arch(Arch::Llama);
  // original context 64, hd 16: frequency 0 is high (unchanged), 1–2 medium
  // (smoothed), 3–7 low (÷ 8).
  s.config_patch = {{"rope_scaling",
                     {{"rope_type", "llama3"},
                      {"factor", 8.0},
                      {"low_freq_factor", 1.0},
                      {"high_freq_factor", 4.0},
                      {"original_max_position_embeddings", 64}}}};
  expect_matches(random_hf_checkpoint("ref-llama3", s), ref_config_hf(s), 2);
}

TEST(ReferenceForward, Qwen2) {
  RandomSpec s = RandomSpec::for_arch(Arch::Qwen2);
  expect_matches(random_hf_checkpoint("ref-qwen2", s), ref_config_hf(s), 3);
}

TEST(ReferenceForward, Qwen3) {
  RandomSpec s = RandomSpec::for_arch(Arch::Qwen3);
  expect_matches(random_hf_checkpoint("ref-qwen3", s), ref_config_hf(s), 4);
}

TEST(ReferenceForward, Gemma2) {
  RandomSpec s = gemma_spec(Arch::Gemma2);
  expect_matches(random_hf_checkpoint("ref-gemma2", s), ref_config_hf(s), 5);
}

// Gemma 2's real caps (50 / 30) barely bend O(1) scores and logits; small caps
// make both soft-caps change the outputs far beyond the tolerance.
TEST(ReferenceForward, Gemma2SmallSoftcaps) {
  RandomSpec s = gemma_spec(Arch::Gemma2);
  s.config_patch = {{"attn_logit_softcapping", 0.5}, {"final_logit_softcapping", 0.2}};
  expect_matches(random_hf_checkpoint("ref-gemma2-caps", s), ref_config_hf(s), 6);
}

TEST(ReferenceForward, Gemma3) {
  RandomSpec s = gemma_spec(Arch::Gemma3);
  expect_matches(random_hf_checkpoint("ref-gemma3", s), ref_config_hf(s), 7);
}

// Linear scaling on the global layer only (as Gemma 3 4B+); local layers keep
// rope_local_base_freq unscaled.
TEST(ReferenceForward, Gemma3RopeLinear) {
  RandomSpec s = gemma_spec(Arch::Gemma3);
  s.config_patch = {{"rope_scaling", {{"rope_type", "linear"}, {"factor", 8.0}}}};
  expect_matches(random_hf_checkpoint("ref-gemma3-linear", s), ref_config_hf(s), 8);
}

TEST(ReferenceForward, Llama2c) {
  expect_matches(llama2c_path(), ref_config_llama2c(64, 136, 2, 4, 2, 300), 9);
}

// The comparison can fail: each reference below has one detail wrong, and the
// engine must then disagree with it beyond the tolerance.
TEST(ReferenceForward, DetectsPerturbations) {
  struct Case {
    std::string name;
    RandomSpec spec;  // unused for llama2.c
    bool llama2c = false;
    std::function<void(RefConfig&, Perturb&)> wrong;
  };
  RandomSpec llama3 = RandomSpec::for_arch(Arch::Llama);
  llama3.config_patch = {{"rope_scaling",
                          {{"rope_type", "llama3"},
                           {"factor", 8.0},
                           {"low_freq_factor", 1.0},
                           {"high_freq_factor", 4.0},
                           {"original_max_position_embeddings", 64}}}};
  RandomSpec caps = gemma_spec(Arch::Gemma2);
  caps.config_patch = {{"attn_logit_softcapping", 0.5}, {"final_logit_softcapping", 0.2}};
  const std::vector<Case> cases = {
      {"llama: one RoPE sin sign flipped", RandomSpec::for_arch(Arch::Llama), false,
       [](RefConfig&, Perturb& p) { p.flip_sin_freq = 1; }},
      {"llama2c: rotate-half instead of interleaved", {}, true,
       [](RefConfig& r, Perturb&) { r.interleaved = false; }},
      {"llama3 rope_scaling ignored", llama3, false,
       [](RefConfig& r, Perturb&) { r.inv_global = rope_inv_freq(10000.0, r.hd, json()); }},
      {"qwen2: qkv bias dropped", RandomSpec::for_arch(Arch::Qwen2), false,
       [](RefConfig& r, Perturb&) { r.qkv_bias = false; }},
      {"qwen3: no qk-norm", RandomSpec::for_arch(Arch::Qwen3), false,
       [](RefConfig& r, Perturb&) { r.qk_norm = false; }},
      {"gemma2: sliding window one wider", gemma_spec(Arch::Gemma2), false,
       [](RefConfig& r, Perturb&) {
         for (int& w : r.window) w += w > 0;
       }},
      {"gemma2: score scale 1/sqrt(head_dim)", gemma_spec(Arch::Gemma2), false,
       [](RefConfig& r, Perturb&) { r.score_scale = 1.0 / std::sqrt(double(r.hd)); }},
      {"gemma2: attention softcap dropped", caps, false,
       [](RefConfig& r, Perturb&) { r.attn_cap = 0; }},
      {"gemma2: final softcap dropped", caps, false,
       [](RefConfig& r, Perturb&) { r.final_cap = 0; }},
      {"gemma3: local layers with the global theta", gemma_spec(Arch::Gemma3), false,
       [](RefConfig& r, Perturb&) { r.inv_local = r.inv_global; }},
      {"gemma3: SiLU instead of GeLU-tanh", gemma_spec(Arch::Gemma3), false,
       [](RefConfig& r, Perturb&) { r.gelu_tanh = false; }},
      {"gemma3: no sandwich norms", gemma_spec(Arch::Gemma3), false,
       [](RefConfig& r, Perturb&) { r.sandwich = false; }},
  };
  uint32_t seed = 40;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    RefConfig rc = c.llama2c ? ref_config_llama2c(64, 136, 2, 4, 2, 300) : ref_config_hf(c.spec);
    const std::string path = c.llama2c ? llama2c_path() : random_hf_checkpoint("ref-neg", c.spec);
    Engine e = run_engine(path, kTokens, ++seed);
    // The faithful reference agrees ...
    EXPECT_LE(compare(e, rc).worst_ratio, 1.0);
    // ... the wrong one does not.
    Perturb p;
    c.wrong(rc, p);
    Comparison bad = compare(e, rc, p);
    EXPECT_GT(bad.worst_ratio, 1.0) << "a wrong reference was not detected";
    std::printf("  %-45s max |Δ| / tol = %.3g\n", c.name.c_str(), bad.worst_ratio);
  }
}

}  // namespace
}  // namespace mtp::test
