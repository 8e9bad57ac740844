#include "model/random_model.h"

#include <sys/mman.h>

#include <cmath>
#include <memory>
#include <vector>

#include "core/error.h"
#include "model/family.h"

namespace mtp::model {

namespace {

// Fast deterministic normal-ish values: sum of 4 uniforms (Irwin–Hall),
// scaled to unit variance. Quality is irrelevant here; speed is not (1 B values).
class FastNormal {
 public:
  explicit FastNormal(uint64_t seed) : s_(seed * 0x9E3779B97F4A7C15ull + 1) {}
  float next() {
    float sum = 0;
    for (int i = 0; i < 4; ++i) {
      s_ ^= s_ << 13;
      s_ ^= s_ >> 7;
      s_ ^= s_ << 17;
      sum += float(s_ >> 40) * (1.0f / 16777216.0f);
    }
    return (sum - 2.0f) * 1.7320508f;  // var of sum = 4/12
  }

 private:
  uint64_t s_;
};

kernels::PackedMatrix random_matrix(size_t rows, size_t cols, kernels::WeightType hold,
                                    uint64_t seed) {
  std::vector<uint16_t> w(rows * cols);  // generated directly as bf16
  FastNormal n(seed);
  const float sd = 1.0f / std::sqrt(float(cols));
  for (auto& x : w) x = f32_to_bf16(sd * n.next());
  return kernels::PackedMatrix::pack(w.data(), DType::BF16, rows, cols, hold);
}

}  // namespace

RandomModelSpec random_model_preset(const std::string& name) {
  if (name == "1b") return {"1b", 2048, 22, 32, 4, 5632, 32000, 2048};
  if (name == "tiny") return {"tiny", 64, 2, 4, 2, 160, 512, 512};
  if (name == "gemma4-e2b") {
    RandomModelSpec s{"gemma4-e2b", 1536, 35, 8, 1, 6144, 262144, 131072};
    s.arch = Arch::Gemma4;
    s.head_dim = 256, s.global_head_dim = 512, s.ple_dim = 256, s.kv_shared = 20;
    s.window = 512, s.period = 5;
    return s;
  }
  // Qwen3.5 (the published config.json files, docs/FORMATS.md "Qwen3.5").
  if (name == "qwen35-0.8b" || name == "qwen35-4b") {
    const bool small = name == "qwen35-0.8b";
    RandomModelSpec s = small ? RandomModelSpec{name, 1024, 24, 8, 2, 3584, 248320, 262144}
                              : RandomModelSpec{name, 2560, 32, 16, 4, 9216, 248320, 262144};
    s.arch = Arch::Qwen35;
    s.head_dim = 256, s.period = 4, s.lin_v_heads = small ? 16 : 32, s.tie = small;
    return s;
  }
  // Qwen3-0.6B's shapes: the plain transformer of Qwen3.5-0.8B's size.
  if (name == "qwen3-0.6b") {
    RandomModelSpec s{name, 1024, 28, 16, 8, 3072, 151936, 40960};
    s.arch = Arch::Qwen3;
    s.head_dim = 128, s.tie = true;
    return s;
  }
  fail<InputError>("unknown random model preset '{}' (known: 1b, tiny, gemma4-e2b, qwen35-0.8b, "
                   "qwen35-4b, qwen3-0.6b)", name);
}

namespace {

// Gemma 4's config from a spec: layer kinds, sharing, per-layer embeddings,
// proportional RoPE on the full layers (transformers' defaults).
void gemma4_config(const RandomModelSpec& s, ModelConfig& c) {
  c.arch = Arch::Gemma4;
  c.head_dim = s.head_dim;
  apply_family(family(Arch::Gemma4), c);
  std::vector<uint8_t> sliding(size_t(s.n_layers));
  for (int l = 0; l < s.n_layers; ++l) sliding[size_t(l)] = (l + 1) % s.period != 0;
  sliding.back() = 0;
  c.set_uniform_layers(sliding);
  const int first = s.n_layers - s.kv_shared;
  for (int l = 0; l < s.n_layers; ++l) {
    LayerKind& k = c.layers[size_t(l)];
    if (!k.sliding) k.head_dim = s.global_head_dim;
    for (int o = first - 1; l >= first && o >= 0 && k.kv_source < 0; --o) {
      if (c.layers[size_t(o)].sliding == k.sliding) k.kv_source = o;
    }
    if (l >= first) k.ffn = 2 * s.ffn;
  }
  c.sliding_window = s.window;
  c.rope_theta = 1e6f;
  c.rope_local_theta = 1e4f;
  c.rope_partial = 0.25f;
  c.final_softcap = 30.f;
  c.ple_dim = s.ple_dim;
  c.ple_embed_scale = std::sqrt(float(s.ple_dim));  // 16: exact in bf16
  c.embed_scale = round_bf16(c.embed_scale);        // the bf16 table's scale
  c.tie_embeddings = true;
}

// Qwen3.5's config from a spec: three Gated DeltaNet layers to one full
// attention layer (the last of each period), the family's DeltaNet shape
// (16 key heads of 128) with the spec's value heads, partial rotary 0.25.
void qwen35_config(const RandomModelSpec& s, ModelConfig& c) {
  c.arch = Arch::Qwen35;
  c.head_dim = s.head_dim;
  apply_family(family(Arch::Qwen35), c);
  c.set_uniform_layers(std::vector<uint8_t>(size_t(s.n_layers), 0));
  for (int l = 0; l < s.n_layers; ++l) c.layers[size_t(l)].recurrent = (l + 1) % s.period != 0;
  c.linear = family(Arch::Qwen35).linear_defaults;
  c.linear.v_heads = s.lin_v_heads;
  c.rope_theta = 1e7f;
  c.rope_rotary_dim = s.head_dim / 4;
  c.tie_embeddings = s.tie;
}

// A zero-filled anonymous mapping of `bytes`, never written (see the header).
std::shared_ptr<void> zero_map(size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) fail<IoError>("cannot map {} bytes for the per-layer table", bytes);
  return std::shared_ptr<void>(p, [bytes](void* q) { munmap(q, bytes); });
}

}  // namespace

LoadedModel random_model(const RandomModelSpec& s, kernels::WeightType hold, uint64_t seed,
                         TiedHead tied) {
  LoadedModel m;
  m.path = "random:" + s.name + ":seed=" + std::to_string(seed);
  ModelConfig& c = m.config;
  c.arch = Arch::Llama;
  c.source = "random";
  c.d_model = s.d_model;
  c.n_layers = s.n_layers;
  c.n_heads = s.n_heads;
  c.n_kv_heads = s.n_kv_heads;
  c.head_dim = s.d_model / s.n_heads;
  c.ffn = s.ffn;
  c.vocab = s.vocab;
  c.max_position = s.max_position;
  if (s.arch == Arch::Gemma4) gemma4_config(s, c);
  if (s.arch == Arch::Qwen35) qwen35_config(s, c);
  if (s.arch == Arch::Qwen3) {
    c.arch = Arch::Qwen3;
    c.head_dim = s.head_dim;
    apply_family(family(Arch::Qwen3), c);
    c.tie_embeddings = s.tie;
  }
  c.validate();
  const size_t d = c.d_model;
  auto emb = std::make_shared<std::vector<uint16_t>>(size_t(c.vocab) * d);
  FastNormal n(seed);
  for (auto& x : *emb) x = f32_to_bf16(n.next());
  m.weights.embed = EmbeddingTable{emb->data(), DType::BF16, size_t(c.vocab), d, GgmlType::F32, emb};
  m.weights.keep_alive.push_back(emb);
  uint64_t k = seed * 1000;
  for (int l = 0; l < c.n_layers; ++l) {
    const LayerKind kind = c.layer_kind(l);
    const size_t hd = kind.head_dim, qd = size_t(c.n_heads) * hd, kvd = size_t(kind.n_kv_heads) * hd;
    LayerWeights w;
    w.attn_norm.assign(d, 1.0f);
    w.ffn_norm.assign(d, 1.0f);
    if (c.sandwich_norms) w.post_attn_norm.assign(d, 1.0f), w.post_ffn_norm.assign(d, 1.0f);
    if (kind.recurrent) {  // Gated DeltaNet: fused in_proj, conv, decay, gated norm, out_proj
      const LinearAttn& a = c.linear;
      const size_t C = size_t(a.conv_dim()), V = size_t(a.value_dim()), hv = size_t(a.v_heads);
      w.w_lin_in = random_matrix(C + V + 2 * hv, d, hold, ++k);
      w.w_lin_out = random_matrix(d, V, hold, ++k);
      w.conv_w.assign(C * size_t(a.conv_kernel), 0.5f);
      w.a_neg.assign(hv, -1.0f);
      w.dt_bias.assign(hv, 0.0f);
      w.lin_norm.assign(size_t(a.v_dim), 1.0f);
    } else {
      if (c.qk_norm) w.q_norm.assign(hd, 1.0f), w.k_norm.assign(hd, 1.0f);
      const size_t q_rows = c.attn_gate ? 2 * qd : qd;  // Qwen3.5: query and its gate
      w.wqkv = random_matrix(q_rows + (kind.owns_kv() ? 2 * kvd : 0), d, hold, ++k);
      w.wo = random_matrix(d, qd, hold, ++k);
    }
    w.w_gate_up = random_matrix(2 * size_t(kind.ffn), d, hold, ++k);
    w.w_down = random_matrix(d, size_t(kind.ffn), hold, ++k);
    if (c.ple_dim > 0) {
      w.w_ple_gate = random_matrix(size_t(c.ple_dim), d, hold, ++k);
      w.w_ple_proj = random_matrix(d, size_t(c.ple_dim), hold, ++k);
      w.ple_post_norm.assign(d, 1.0f);
    }
    m.weights.layers.push_back(std::move(w));
  }
  m.weights.final_norm.assign(d, 1.0f);
  if (c.ple_dim > 0) {
    const size_t all = size_t(c.n_layers) * size_t(c.ple_dim);
    auto table = zero_map(size_t(c.vocab) * all * sizeof(uint16_t));
    m.weights.ple_embed = EmbeddingTable{table.get(), DType::BF16, size_t(c.vocab), all};
    m.weights.keep_alive.push_back(table);
    m.weights.ple_model_proj = random_matrix(all, d, hold, ++k);
    m.weights.ple_proj_norm.assign(size_t(c.ple_dim), 1.0f);
  }
  m.weights.lm_head = c.tie_embeddings ? m.weights.embed.head(hold, tied, "the random embedding")
                                       : random_matrix(size_t(c.vocab), d, hold, ++k);
  return m;
}

}  // namespace mtp::model
