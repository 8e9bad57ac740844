#include "model/forward.h"

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"

namespace mtp::model {

namespace kern = mtp::kernels;

struct Model::Scratch {
  std::vector<float> x, cs_global, cs_local, head_in, head_out, ple, ple_tok;
  BlockScratch block;
};

Model::Model(LoadedModel m)
    : m_((m.config.validate(), std::move(m))), rope_(m_.config),
      scratch_(std::make_unique<Scratch>()) {}

Model::~Model() = default;
Model::Model(Model&&) noexcept = default;

void Model::embed(int32_t token, float* out) const {
  m_.weights.embed.lookup(token, m_.config.embed_scale, out);
}

KVCache Model::make_cache(int n_seq, int ctx, int q_max, int tree_slots) const {
  KVCache kv(m_.config, n_seq, ctx, q_max, tree_slots);
  if (kv.has_recurrent()) {
    std::vector<const float*> conv(size_t(m_.config.n_layers), nullptr);
    for (int l = 0; l < m_.config.n_layers; ++l) {
      if (m_.config.is_recurrent(l)) conv[size_t(l)] = m_.weights.layers[size_t(l)].conv_w.data();
    }
    kv.bind_conv_weights(std::move(conv));
  }
  return kv;
}

void Model::final_norm(const float* hidden, size_t q, float* out) const {
  const size_t d = size_t(m_.config.d_model);
  for (size_t r = 0; r < q; ++r) {
    kern::rmsnorm(hidden + r * d, m_.weights.final_norm.data(), d, m_.config.norm_eps, out + r * d);
  }
}

void Model::logits_from_hidden(const float* hidden, size_t q, float* logits, ThreadPool* pool,
                               const kernels::PackedMatrix* head) const {
  const kernels::PackedMatrix& w = head ? *head : m_.weights.lm_head;
  const ModelConfig& c = m_.config;
  const size_t d = c.d_model;
  std::vector<float> xn(q * d);
  final_norm(hidden, q, xn.data());
  kern::matmul(w, xn.data(), q, logits, pool);
  if (c.final_softcap > 0) kern::softcap(logits, q * w.rows(), c.final_softcap);
}

void Model::forward(std::span<const Row> rows, KVCache& kv, const ForwardOut& out,
                    ThreadPool* pool) const {
  const ModelConfig& c = m_.config;
  const size_t q = rows.size();
  if (q == 0) return;
  const size_t d = c.d_model;

  kv.begin_rows(rows, c.vocab);  // validates every row before the cache is touched

  Scratch& s = *scratch_;
  s.x.resize(q * d);
  rope_.tables(rows, false, s.cs_global);
  if (rope_.has_local()) rope_.tables(rows, true, s.cs_local);
  for (size_t r = 0; r < q; ++r) embed(rows[r].token, s.x.data() + r * d);
  if (c.ple_dim > 0) per_layer_inputs(rows, s.x.data(), pool);
  const size_t ple_stride = size_t(c.n_layers) * size_t(c.ple_dim);
  for (int l = 0; l < c.n_layers; ++l) {
    const float* cs = rope_.local_for(c.is_sliding(l)) ? s.cs_local.data() : s.cs_global.data();
    block_forward(c, l, m_.weights.layers[l], rows, kv, cs, s.x.data(), s.block, pool,
                  c.ple_dim > 0 ? s.ple.data() + size_t(l) * size_t(c.ple_dim) : nullptr,
                  ple_stride);
  }
  kv.end_rows(rows);

  if (out.hidden) std::memcpy(out.hidden, s.x.data(), q * d * sizeof(float));
  if (out.logits) logits_for_rows(s.x.data(), q, out.logits_mask, out.logits, pool);
}

void Model::per_layer_inputs(std::span<const Row> rows, const float* x, ThreadPool* pool) const {
  const ModelConfig& c = m_.config;
  const ModelWeights& w = m_.weights;
  const size_t q = rows.size(), e = size_t(c.ple_dim), P = size_t(c.n_layers) * e;
  // transformers' Python-float constants, as fp32: hidden_size**-0.5, 2.0**-0.5.
  const float proj_scale = float(std::pow(double(c.d_model), -0.5));
  const float input_scale = float(std::pow(2.0, -0.5));
  Scratch& s = *scratch_;
  s.ple.resize(q * P);
  s.ple_tok.resize(P);
  kern::matmul(w.ple_model_proj, x, q, s.ple.data(), pool);  // [q, L·e]
  for (size_t r = 0; r < q; ++r) {
    float* p = s.ple.data() + r * P;
    for (size_t i = 0; i < P; ++i) p[i] *= proj_scale;
    for (size_t l = 0; l < size_t(c.n_layers); ++l) {
      kern::rmsnorm(p + l * e, w.ple_proj_norm.data(), e, c.norm_eps, p + l * e);
    }
    w.ple_embed.lookup(rows[r].token, c.ple_embed_scale, s.ple_tok.data());  // one row, in place
    for (size_t i = 0; i < P; ++i) p[i] = (p[i] + s.ple_tok[i]) * input_scale;
  }
}

void Model::logits_for_rows(const float* hidden, size_t q, const uint8_t* mask, float* logits,
                            ThreadPool* pool, const kernels::PackedMatrix* head) const {
  if (!mask) return logits_from_hidden(hidden, q, logits, pool, head);
  // Gather the selected rows, run the head, scatter. The head is batch-invariant,
  // so a row's logits do not depend on which other rows were selected.
  const size_t d = m_.config.d_model, V = head ? head->rows() : size_t(m_.config.vocab);
  std::vector<size_t> sel;
  for (size_t r = 0; r < q; ++r) {
    if (mask[r]) sel.push_back(r);
  }
  if (sel.empty()) return;
  Scratch& s = *scratch_;
  s.head_in.resize(sel.size() * d);
  s.head_out.resize(sel.size() * V);
  for (size_t i = 0; i < sel.size(); ++i) {
    std::memcpy(s.head_in.data() + i * d, hidden + sel[i] * d, d * sizeof(float));
  }
  logits_from_hidden(s.head_in.data(), sel.size(), s.head_out.data(), pool, head);
  for (size_t i = 0; i < sel.size(); ++i) {
    std::memcpy(logits + sel[i] * V, s.head_out.data() + i * V, V * sizeof(float));
  }
}

}  // namespace mtp::model
