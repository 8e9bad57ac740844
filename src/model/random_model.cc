#include "model/random_model.h"

#include <cmath>
#include <memory>
#include <vector>

#include "core/error.h"

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
  fail<InputError>("unknown random model preset '{}' (known: 1b, tiny)", name);
}

LoadedModel random_model(const RandomModelSpec& s, kernels::WeightType hold, uint64_t seed) {
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
  c.validate();
  const size_t d = c.d_model, hd = c.head_dim, qd = size_t(c.n_heads) * hd,
               kvd = size_t(c.n_kv_heads) * hd;
  auto emb = std::make_shared<std::vector<uint16_t>>(size_t(c.vocab) * d);
  FastNormal n(seed);
  for (auto& x : *emb) x = f32_to_bf16(n.next());
  m.weights.embed = EmbeddingTable{emb->data(), DType::BF16, size_t(c.vocab), d};
  m.weights.keep_alive.push_back(emb);
  uint64_t k = seed * 1000;
  for (int l = 0; l < c.n_layers; ++l) {
    LayerWeights w;
    w.attn_norm.assign(d, 1.0f);
    w.ffn_norm.assign(d, 1.0f);
    w.wqkv = random_matrix(qd + 2 * kvd, d, hold, ++k);
    w.wo = random_matrix(d, qd, hold, ++k);
    w.w_gate_up = random_matrix(2 * size_t(c.ffn), d, hold, ++k);
    w.w_down = random_matrix(d, size_t(c.ffn), hold, ++k);
    m.weights.layers.push_back(std::move(w));
  }
  m.weights.final_norm.assign(d, 1.0f);
  m.weights.lm_head = random_matrix(size_t(c.vocab), d, hold, ++k);
  return m;
}

}  // namespace mtp::model
