// Gemma 4 against an independent reference: a scalar double-precision decoder
// written here from the published model (transformers' Gemma4TextModel /
// Gemma4ForCausalLM, read not copied), which takes its hyper-parameters from
// config.json by transformers' rules (Gemma4TextConfig) and its weights from
// the checkpoint's tensors by their Hugging Face names — sharing no code with
// the engine's parsers, loaders or forward. Every row's logits and capture
// hidden must agree within ref_compare.h's tolerance, on random checkpoints
// of every variant: per-layer embeddings on and off, KV sharing (a shared
// sliding layer owned by a sliding layer, a shared full layer by a full one),
// the double-wide MLP, two head widths with proportional RoPE, K = V with
// their own kv heads, the soft-cap, bf16 storage (the embedding scale's
// dtype), the multimodal layout, prompts longer than the sliding window.
// Gemma4Reference.DetectsPerturbations shows each feature matters: a
// reference with that feature's handling dropped or changed must disagree.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>

#include <nlohmann/json.hpp>

#include "checkpoint_util.h"
#include "core/dtype.h"
#include "core/mapped_file.h"
#include "io/safetensors.h"
#include "model/forward.h"
#include "model/loader.h"
#include "model_util.h"
#include "python_util.h"
#include "ref_compare.h"
#include "test_util.h"

namespace mtp::test {
namespace {

using nlohmann::json;
using G4Vec = std::vector<double>;

// What the reference takes from config.json (transformers' Gemma4TextConfig).
struct G4Config {
  int d = 0, L = 0, H = 0, V = 0, window = 0, ple = 0, shared = 0, ffn = 0;
  double eps = 1e-6, softcap = 0;
  std::vector<bool> full;              // per layer
  std::vector<int> hd, kv, ffn_of, owner;  // per layer; owner: the layer whose K/V it uses
  std::vector<bool> k_eq_v;
  double theta_local = 1e4, theta_global = 1e6, partial = 1, factor = 1;
};

// Deliberate errors in the reference, for DetectsPerturbations.
struct G4Perturb {
  bool no_ple = false, no_v_norm = false, no_qk_norm = false, no_scalar = false;
  bool no_softcap = false, scaled_scores = false, first_owner = false;
  bool full_rotation = false, swapped_theta = false, v_after_k_norm = false;
  bool exact_embed_scale = false, wider_window = false, no_window = false;
};

int num(const json& j, const char* k, int def) {
  return j.contains(k) && !j.at(k).is_null() ? j.at(k).get<int>() : def;
}

G4Config read_g4_config(const std::string& dir) {
  json top = json::parse(read_file(dir + "/config.json"));
  const json c = top.contains("text_config") ? top.at("text_config") : top;
  G4Config r;
  r.d = c.at("hidden_size");
  r.L = c.at("num_hidden_layers");
  r.H = c.at("num_attention_heads");
  r.V = c.at("vocab_size");
  r.eps = c.value("rms_norm_eps", 1e-6);
  r.ffn = c.at("intermediate_size");
  r.window = c.at("sliding_window");
  r.ple = num(c, "hidden_size_per_layer_input", 256);
  r.shared = num(c, "num_kv_shared_layers", 0);
  r.softcap = c.contains("final_logit_softcapping") && !c.at("final_logit_softcapping").is_null()
                  ? c.at("final_logit_softcapping").get<double>() : 0;
  const bool k_eq_v = c.value("attention_k_eq_v", false);
  const int head_dim = num(c, "head_dim", 256), global_hd = num(c, "global_head_dim", 512);
  const int kv = num(c, "num_key_value_heads", 4);
  const int global_kv = k_eq_v ? num(c, "num_global_key_value_heads", kv) : kv;
  const json& rp = c.at("rope_parameters");
  r.theta_local = rp.at("sliding_attention").at("rope_theta");
  r.theta_global = rp.at("full_attention").at("rope_theta");
  if (rp.at("full_attention").value("rope_type", "") == "proportional") {
    r.partial = rp.at("full_attention").value("partial_rotary_factor", 1.0);
    r.factor = rp.at("full_attention").value("factor", 1.0);
  }
  const int first_shared = r.L - r.shared;
  for (int l = 0; l < r.L; ++l) {
    // Gemma4TextConfig: the last layer is forced to full attention.
    const bool full = l == r.L - 1 || c.at("layer_types").at(size_t(l)) == "full_attention";
    r.full.push_back(full);
    r.hd.push_back(full ? global_hd : head_dim);
    r.kv.push_back(full ? global_kv : kv);
    r.k_eq_v.push_back(full && k_eq_v);
    const bool shared = l >= first_shared;
    r.ffn_of.push_back(shared && c.value("use_double_wide_mlp", false) ? 2 * r.ffn : r.ffn);
    int owner = l;
    if (shared) {  // the last layer of the same type before the shared ones
      for (int o = first_shared - 1; o >= 0; --o) {
        const bool of = o == r.L - 1 || c.at("layer_types").at(size_t(o)) == "full_attention";
        if (of == full) {
          owner = o;
          break;
        }
      }
    }
    r.owner.push_back(owner);
  }
  return r;
}

// A checkpoint's tensors by Hugging Face name, as doubles.
struct G4Weights {
  io::TensorSet ts;
  std::string prefix;
  DType embed_dtype = DType::F32;
  std::vector<double> get(const std::string& name) const {
    const io::TensorView& v = ts.get(prefix + name);
    std::vector<float> f(v.numel());
    to_f32(v.data, v.dtype, f.size(), f.data());
    return {f.begin(), f.end()};
  }
  bool has(const std::string& name) const { return ts.contains(prefix + name); }
};

G4Vec mat_vec(const std::vector<double>& w, size_t rows, const G4Vec& x) {
  G4Vec y(rows, 0.0);
  for (size_t r = 0; r < rows; ++r) {
    double a = 0;
    for (size_t c = 0; c < x.size(); ++c) a += w[r * x.size() + c] * x[c];
    y[r] = a;
  }
  return y;
}

// transformers' Gemma4RMSNorm: x · (mean(x²) + eps)^-0.5 · w (no weight: · 1).
G4Vec g4_norm(const G4Vec& x, const double* w, double eps) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double inv = std::pow(ss / double(x.size()) + eps, -0.5);
  G4Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * (w ? w[i] : 1.0);
  return y;
}

double gelu_tanh(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}

// Rotate-half RoPE of one head: pair (i, i + hd/2) by pos · inv[i].
void g4_rope(double* x, int pos, const G4Vec& inv) {
  const size_t half = inv.size();
  for (size_t i = 0; i < half; ++i) {
    const double a = pos * inv[i], c = std::cos(a), s = std::sin(a);
    const double x0 = x[i], x1 = x[i + half];
    x[i] = x0 * c - x1 * s;
    x[i + half] = x1 * c + x0 * s;
  }
}

// Default RoPE (sliding) or proportional (full): the first
// int(partial · hd // 2) pairs rotate with theta^(-2i/hd) / factor.
G4Vec g4_inv_freq(const G4Config& c, int hd, bool full, const G4Perturb& p) {
  const bool global = full != p.swapped_theta;
  const double theta = global ? c.theta_global : c.theta_local;
  const double partial = full && !p.full_rotation ? c.partial : 1.0;
  const int rotated = int(std::floor(partial * hd / 2));
  G4Vec inv(size_t(hd / 2), 0.0);
  for (int i = 0; i < rotated; ++i) inv[size_t(i)] = std::pow(theta, -2.0 * i / hd) / (full ? c.factor : 1.0);
  return inv;
}

// The scale transformers multiplies a table by: sqrt(dim) cast to its dtype.
double dtype_scale(double v, DType t, bool exact) {
  if (exact || t == DType::F32) return v;
  return t == DType::BF16 ? double(round_bf16(float(v))) : double(f16_to_f32(f32_to_f16(float(v))));
}

struct G4RefOut {
  std::vector<G4Vec> hidden, logits;
};

// The per-layer inputs of every token: [n][L · ple].
std::vector<G4Vec> g4_per_layer_inputs(const G4Config& c, const G4Weights& w,
                                       const std::vector<int32_t>& toks,
                                       const std::vector<G4Vec>& x0, const G4Perturb& p) {
  const size_t P = size_t(c.L) * size_t(c.ple);
  const auto table = w.get("embed_tokens_per_layer.weight");
  const auto proj = w.get("per_layer_model_projection.weight");
  const auto norm = w.get("per_layer_projection_norm.weight");
  const DType t = w.ts.get(w.prefix + "embed_tokens_per_layer.weight").dtype;
  const double tok_scale = dtype_scale(std::sqrt(double(c.ple)), t, p.exact_embed_scale);
  std::vector<G4Vec> out;
  for (size_t n = 0; n < toks.size(); ++n) {
    G4Vec pr = mat_vec(proj, P, x0[n]);
    for (double& v : pr) v *= float(std::pow(double(c.d), -0.5));
    G4Vec r(P);
    for (int l = 0; l < c.L; ++l) {
      G4Vec part(pr.begin() + l * c.ple, pr.begin() + (l + 1) * c.ple);
      part = g4_norm(part, norm.data(), c.eps);
      for (int i = 0; i < c.ple; ++i) {
        const double tok = table[size_t(toks[n]) * P + size_t(l * c.ple + i)] * tok_scale;
        r[size_t(l * c.ple + i)] = (part[size_t(i)] + tok) * float(std::pow(2.0, -0.5));
      }
    }
    out.push_back(r);
  }
  return out;
}

G4RefOut g4_reference(const std::string& dir, const std::vector<int32_t>& toks,
                      const G4Perturb& p = {}) {
  const G4Config c = read_g4_config(dir);
  G4Weights w{io::TensorSet::open_dir(dir, [](std::string_view n) {
                return n.starts_with("model.vision_tower.") || n.starts_with("model.audio_tower.");
              }), "", DType::F32};
  w.prefix = w.ts.contains("model.language_model.embed_tokens.weight") ? "model.language_model."
                                                                        : "model.";
  const size_t n = toks.size(), d = size_t(c.d);
  const auto embed = w.get("embed_tokens.weight");
  const DType et = w.ts.get(w.prefix + "embed_tokens.weight").dtype;
  const double escale = dtype_scale(std::sqrt(double(c.d)), et, p.exact_embed_scale);
  std::vector<G4Vec> x(n);
  for (size_t t = 0; t < n; ++t) {
    x[t].assign(embed.begin() + long(size_t(toks[t]) * d), embed.begin() + long((toks[t] + 1) * d));
    for (double& v : x[t]) v *= escale;
  }
  const bool ple = c.ple > 0 && !p.no_ple;
  const std::vector<G4Vec> pli = c.ple > 0 ? g4_per_layer_inputs(c, w, toks, x, p) : std::vector<G4Vec>{};
  std::vector<std::vector<G4Vec>> K(size_t(c.L)), Vv(size_t(c.L));  // [layer][token]
  for (int l = 0; l < c.L; ++l) {
    const std::string pre = "layers." + std::to_string(l) + ".";
    const int hd = c.hd[size_t(l)], KV = c.kv[size_t(l)], H = c.H;
    const G4Vec inv = g4_inv_freq(c, hd, c.full[size_t(l)], p);
    int owner = c.owner[size_t(l)];
    if (p.first_owner && owner != l) {  // the first earlier layer of its kind instead of the last
      for (int o = 0; o < owner; ++o) {
        if (c.full[size_t(o)] == c.full[size_t(l)]) {
          owner = o;
          break;
        }
      }
    }
    const auto in_norm = w.get(pre + "input_layernorm.weight");
    const auto wq = w.get(pre + "self_attn.q_proj.weight");
    const auto qn = w.get(pre + "self_attn.q_norm.weight");
    std::vector<G4Vec> q(n);
    for (size_t t = 0; t < n; ++t) {
      const G4Vec h = g4_norm(x[t], in_norm.data(), c.eps);
      q[t] = mat_vec(wq, size_t(H * hd), h);
      for (int hh = 0; hh < H; ++hh) {
        double* z = q[t].data() + hh * hd;
        if (!p.no_qk_norm) {
          G4Vec y = g4_norm(G4Vec(z, z + hd), qn.data(), c.eps);
          std::copy(y.begin(), y.end(), z);
        }
        g4_rope(z, int(t), inv);
      }
      if (owner != l) continue;  // a shared layer computes no K/V
      const auto wk = w.get(pre + "self_attn.k_proj.weight");
      const auto kn = w.get(pre + "self_attn.k_norm.weight");
      G4Vec k = mat_vec(wk, size_t(KV * hd), h);
      G4Vec v = c.k_eq_v[size_t(l)] ? k : mat_vec(w.get(pre + "self_attn.v_proj.weight"), size_t(KV * hd), h);
      for (int hh = 0; hh < KV; ++hh) {
        double* z = k.data() + hh * hd;
        if (!p.no_qk_norm) {
          G4Vec y = g4_norm(G4Vec(z, z + hd), kn.data(), c.eps);
          std::copy(y.begin(), y.end(), z);
        }
        if (p.v_after_k_norm && c.k_eq_v[size_t(l)]) std::copy(z, z + hd, v.data() + hh * hd);
        g4_rope(z, int(t), inv);
        double* vz = v.data() + hh * hd;
        if (!p.no_v_norm) {
          G4Vec y = g4_norm(G4Vec(vz, vz + hd), nullptr, c.eps);
          std::copy(y.begin(), y.end(), vz);
        }
      }
      K[size_t(l)].push_back(k);
      Vv[size_t(l)].push_back(v);
    }
    // Attention with the owner's K/V: scale 1 (q/k norms), causal, a sliding
    // layer sees the last `window` positions (kv > q - window).
    const int window = p.no_window ? 0 : c.window + (p.wider_window ? 1 : 0);
    const auto wo = w.get(pre + "self_attn.o_proj.weight");
    for (size_t t = 0; t < n; ++t) {
      G4Vec att(size_t(H * hd), 0.0);
      for (int hh = 0; hh < H; ++hh) {
        const int g = hh / (H / KV);
        std::vector<double> sc;
        std::vector<size_t> keys;
        for (size_t s = 0; s <= t; ++s) {
          if (!c.full[size_t(l)] && window > 0 && int(t - s) >= window) continue;
          double dot = 0;
          for (int i = 0; i < hd; ++i) dot += q[t][size_t(hh * hd + i)] * K[size_t(owner)][s][size_t(g * hd + i)];
          sc.push_back(p.scaled_scores ? dot / std::sqrt(double(hd)) : dot);
          keys.push_back(s);
        }
        const double mx = *std::max_element(sc.begin(), sc.end());
        double z = 0;
        for (double& v : sc) z += (v = std::exp(v - mx));
        for (size_t j = 0; j < keys.size(); ++j) {
          for (int i = 0; i < hd; ++i) {
            att[size_t(hh * hd + i)] += sc[j] / z * Vv[size_t(owner)][keys[j]][size_t(g * hd + i)];
          }
        }
      }
      G4Vec o = g4_norm(mat_vec(wo, d, att), w.get(pre + "post_attention_layernorm.weight").data(), c.eps);
      for (size_t i = 0; i < d; ++i) x[t][i] += o[i];
    }
    const int F = c.ffn_of[size_t(l)];
    const auto pre_ff = w.get(pre + "pre_feedforward_layernorm.weight");
    const auto post_ff = w.get(pre + "post_feedforward_layernorm.weight");
    const auto gate = w.get(pre + "mlp.gate_proj.weight"), up = w.get(pre + "mlp.up_proj.weight");
    const auto down = w.get(pre + "mlp.down_proj.weight");
    for (size_t t = 0; t < n; ++t) {
      const G4Vec h = g4_norm(x[t], pre_ff.data(), c.eps);
      const G4Vec gg = mat_vec(gate, size_t(F), h), uu = mat_vec(up, size_t(F), h);
      G4Vec a(static_cast<size_t>(F), 0.0);
      for (int i = 0; i < F; ++i) a[size_t(i)] = gelu_tanh(gg[size_t(i)]) * uu[size_t(i)];
      const G4Vec f = g4_norm(mat_vec(down, d, a), post_ff.data(), c.eps);
      for (size_t i = 0; i < d; ++i) x[t][i] += f[i];
      if (ple) {  // x += norm(proj(gelu(gate(x)) · per_layer_input))
        const auto pg = w.get(pre + "per_layer_input_gate.weight");
        const auto pp = w.get(pre + "per_layer_projection.weight");
        G4Vec e = mat_vec(pg, size_t(c.ple), x[t]);
        for (int i = 0; i < c.ple; ++i) e[size_t(i)] = gelu_tanh(e[size_t(i)]) * pli[t][size_t(l * c.ple + i)];
        const G4Vec y = g4_norm(mat_vec(pp, d, e), w.get(pre + "post_per_layer_input_norm.weight").data(), c.eps);
        for (size_t i = 0; i < d; ++i) x[t][i] += y[i];
      }
      if (!p.no_scalar) {
        const double s = w.get(pre + "layer_scalar")[0];
        for (double& v : x[t]) v *= s;
      }
    }
  }
  G4RefOut out;
  const auto fnorm = w.get("norm.weight");
  for (size_t t = 0; t < n; ++t) {
    out.hidden.push_back(x[t]);
    G4Vec lg = mat_vec(embed, size_t(c.V), g4_norm(x[t], fnorm.data(), c.eps));  // tied head
    if (c.softcap > 0 && !p.no_softcap) {
      for (double& z : lg) z = c.softcap * std::tanh(z / c.softcap);
    }
    out.logits.push_back(lg);
  }
  return out;
}

// ---------------------------------------------------------------- engine side

constexpr int kG4Tokens = 16;  // > the variants' sliding windows

struct G4Run {
  std::vector<int32_t> tokens;
  RowOutputs out;
  int L = 0;
  double K = 0;
};

// The engine over kG4Tokens random tokens in calls of 9, 1 and 6 rows.
G4Run g4_engine(const std::string& dir, uint32_t seed) {
  model::Model m(model::load_model(dir, {}));
  std::mt19937 rng(seed);
  G4Run r;
  r.tokens = random_tokens(rng, kG4Tokens, m.config().vocab);
  model::KVCache kv = m.make_cache(1, kG4Tokens + 8);
  r.out = run_chunks(m, kv, 0, r.tokens, {9, 1, 6}, nullptr);
  const G4Config c = read_g4_config(dir);
  r.L = c.L;
  r.K = std::max({double(c.d), double(c.L * c.ple), double(kG4Tokens)});
  for (int l = 0; l < c.L; ++l) {
    r.K = std::max({r.K, double(c.H * c.hd[size_t(l)]), double(c.ffn_of[size_t(l)])});
  }
  return r;
}

RefComparison g4_compare(const std::string& dir, const G4Run& r, const G4Perturb& p = {}) {
  const G4RefOut ref = g4_reference(dir, r.tokens, p);
  RefComparison c;
  compare_ref_rows(r.out.hidden, ref.hidden, r.K, r.L, "hidden", c);
  compare_ref_rows(r.out.logits, ref.logits, r.K, r.L, "logits", c);
  return c;
}

void g4_expect_matches(const std::string& dir, uint32_t seed) {
  const G4Run r = g4_engine(dir, seed);
  const RefComparison c = g4_compare(dir, r);
  EXPECT_LE(c.worst_ratio, 1.0) << "worst at " << c.where;
  std::printf("  max |engine - reference| / tol = %.3g (%s)\n", c.worst_ratio, c.where.c_str());
}

// The variants.
RandomSpec g4_spec() { return RandomSpec::for_arch(model::Arch::Gemma4); }

RandomSpec g4_k_eq_v() {  // 31B-like: K = V on full layers with their own kv heads, no PLE
  RandomSpec s = g4_spec();
  s.k_eq_v = true;
  s.n_global_kv_heads = 1;
  s.ple_dim = 0;
  s.double_wide = false;
  s.final_softcap = 0.5f;  // small: the cap bends every logit
  return s;
}

RandomSpec g4_bf16() {  // sqrt(96) is not a bf16 number: the embedding scale's dtype shows
  RandomSpec s = g4_spec();
  s.d_model = 96;
  s.dtype = DType::BF16;
  return s;
}

TEST(Gemma4Reference, PleSharingDoubleWideMixedHeads) {
  g4_expect_matches(random_hf_checkpoint("g4-ref", g4_spec()), 1);
}

TEST(Gemma4Reference, KEqualsVGlobalKvHeadsSoftcap) {
  g4_expect_matches(random_hf_checkpoint("g4-ref-kv", g4_k_eq_v()), 2);
}

TEST(Gemma4Reference, Bf16EmbeddingScaleInTheTablesDtype) {
  g4_expect_matches(random_hf_checkpoint("g4-ref-bf16", g4_bf16()), 3);
}

TEST(Gemma4Reference, MultimodalLayout) {
  RandomSpec s = g4_spec();
  s.nested_text_config = true;
  g4_expect_matches(random_hf_checkpoint("g4-ref-mm", s), 4);
}

// Each planted error must be seen: the engine agrees with the faithful
// reference and disagrees with the wrong one beyond the tolerance.
TEST(Gemma4Reference, DetectsPerturbations) {
  struct Case {
    const char* name;
    RandomSpec spec;
    std::function<void(G4Perturb&)> wrong;
  };
  const std::vector<Case> cases = {
      {"per-layer embeddings dropped", g4_spec(), [](G4Perturb& p) { p.no_ple = true; }},
      {"shared layers read the first owner of their kind", g4_spec(),
       [](G4Perturb& p) { p.first_owner = true; }},
      {"full layers rotate every pair", g4_spec(), [](G4Perturb& p) { p.full_rotation = true; }},
      {"layer kinds' thetas swapped", g4_spec(), [](G4Perturb& p) { p.swapped_theta = true; }},
      {"no V norm", g4_spec(), [](G4Perturb& p) { p.no_v_norm = true; }},
      {"no q/k norms", g4_spec(), [](G4Perturb& p) { p.no_qk_norm = true; }},
      {"layer scalars dropped", g4_spec(), [](G4Perturb& p) { p.no_scalar = true; }},
      {"scores scaled by 1/sqrt(head_dim)", g4_spec(), [](G4Perturb& p) { p.scaled_scores = true; }},
      {"sliding window one wider", g4_spec(), [](G4Perturb& p) { p.wider_window = true; }},
      {"no sliding window", g4_spec(), [](G4Perturb& p) { p.no_window = true; }},
      {"K = V: V taken after K's norm", g4_k_eq_v(), [](G4Perturb& p) { p.v_after_k_norm = true; }},
      {"soft-cap dropped", g4_k_eq_v(), [](G4Perturb& p) { p.no_softcap = true; }},
      {"embedding scale in fp32, not bf16", g4_bf16(), [](G4Perturb& p) { p.exact_embed_scale = true; }},
  };
  uint32_t seed = 50;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string dir = random_hf_checkpoint("g4-neg", c.spec);
    const G4Run r = g4_engine(dir, ++seed);
    EXPECT_LE(g4_compare(dir, r).worst_ratio, 1.0);
    G4Perturb p;
    c.wrong(p);
    const RefComparison bad = g4_compare(dir, r, p);
    EXPECT_GT(bad.worst_ratio, 1.0) << "a wrong reference was not detected";
    std::printf("  %-50s max |Δ| / tol = %.3g\n", c.name, bad.worst_ratio);
  }
}

// ------------------------------------------------------ transformers itself

// transformers' own Gemma 4 (PyPI, CPU, float32, eager attention) on the same
// random checkpoints — the authority where our reading of its code and its
// code disagree. Label `reference`; skipped without the reference venv.
// Each side rounds to fp32 on its own path: 2 × the tolerance of one.
// A bf16 checkpoint: transformers in float32 with the embedding scales cast
// to bf16 as its own bf16 run casts them (transformers_logits.py).
void g4_expect_transformers(const RandomSpec& spec, uint32_t seed) {
  std::string why;
  const std::string py = ref_python({"torch", "transformers", "numpy"}, &why);
  if (py.empty()) GTEST_SKIP() << why;
  const std::string dir = random_hf_checkpoint("g4-hf", spec);
  const G4Run r = g4_engine(dir, seed);
  std::string toks;
  for (int32_t t : r.tokens) toks += (toks.empty() ? "" : ",") + std::to_string(t);
  const std::string out = temp_dir("g4-hf-out") + "/logits.f32";
  std::string log;
  std::vector<std::string> args = {dir, toks, out};
  if (spec.dtype == DType::BF16) args.push_back("bfloat16");
  ASSERT_EQ(run_python(py, std::string(MTPSPEC_SOURCE_DIR) + "/tests/model/transformers_logits.py",
                       args, &log), 0) << log;
  const std::string bytes = read_file(out);
  const size_t V = r.out.logits.size() / r.tokens.size();
  ASSERT_EQ(bytes.size(), r.out.logits.size() * sizeof(float));
  std::vector<std::vector<double>> hf(r.tokens.size(), std::vector<double>(V));
  for (size_t t = 0; t < r.tokens.size(); ++t) {
    for (size_t i = 0; i < V; ++i) {
      float f;
      std::memcpy(&f, bytes.data() + (t * V + i) * sizeof(float), sizeof f);
      hf[t][i] = f;
    }
  }
  RefComparison c;
  compare_ref_rows(r.out.logits, hf, r.K, 2 * r.L, "logits vs transformers", c);
  EXPECT_LE(c.worst_ratio, 2.0) << c.where;
  // Greedy ids equal wherever the top two are further apart than the tolerance.
  for (size_t t = 0; t < r.tokens.size(); ++t) {
    std::vector<double> row = hf[t];
    const size_t best = size_t(std::max_element(row.begin(), row.end()) - row.begin());
    const size_t mine = size_t(std::max_element(r.out.logits.begin() + long(t * V),
                                                r.out.logits.begin() + long((t + 1) * V)) -
                               (r.out.logits.begin() + long(t * V)));
    std::nth_element(row.begin(), row.begin() + 1, row.end(), std::greater<>());
    double scale = 0;
    for (double v : hf[t]) scale = std::max(scale, std::abs(v));
    if (row[0] - row[1] > 2 * ref_tolerance(r.K, 2 * r.L, scale)) {
      EXPECT_EQ(mine, best) << "row " << t;
    }
  }
  std::printf("  max |engine - transformers| / tol = %.3g (%s)\n", c.worst_ratio, c.where.c_str());
}

TEST(TransformersGemma4, PleSharingDoubleWideMixedHeads) { g4_expect_transformers(g4_spec(), 11); }
TEST(TransformersGemma4, KEqualsVGlobalKvHeadsSoftcap) { g4_expect_transformers(g4_k_eq_v(), 12); }
TEST(TransformersGemma4, Bf16EmbeddingScale) { g4_expect_transformers(g4_bf16(), 13); }

}  // namespace
}  // namespace mtp::test
