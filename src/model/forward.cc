#include "model/forward.h"

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"

namespace mtp::model {

namespace k = mtp::kernels;

struct Model::Scratch {
  std::vector<float> x, xn, qkv, att, proj, gu, act, cs_global, cs_local, scores;
  std::vector<float> head_in, head_out;
};

namespace {

// inv_freq[i] = theta^(-2i/hd) (computed as HF does: fp32 pow), then scaled.
std::vector<float> make_inv_freq(int head_dim, float theta, const RopeScaling& sc) {
  int half = head_dim / 2;
  std::vector<float> f(half);
  for (int i = 0; i < half; ++i) {
    f[i] = 1.0f / std::pow(theta, float(2 * i) / float(head_dim));
  }
  if (sc.type == RopeScaling::Type::Linear) {
    for (auto& v : f) v /= sc.factor;
  } else if (sc.type == RopeScaling::Type::Llama3) {
    // Hugging Face _compute_llama3_parameters.
    double old_ctx = sc.original_max_position;
    double low_wl = old_ctx / sc.low_freq_factor, high_wl = old_ctx / sc.high_freq_factor;
    for (auto& v : f) {
      double wl = 2 * M_PI / v;
      if (wl < high_wl) continue;  // high frequency: unchanged
      if (wl > low_wl) {
        v = float(v / sc.factor);
      } else {
        double smooth = (old_ctx / wl - sc.low_freq_factor) /
                        (sc.high_freq_factor - sc.low_freq_factor);
        v = float((1 - smooth) * v / sc.factor + smooth * v);
      }
    }
  }
  return f;
}

}  // namespace

Model::Model(LoadedModel m) : m_(std::move(m)), scratch_(std::make_unique<Scratch>()) {
  const ModelConfig& c = m_.config;
  c.validate();
  inv_freq_global_ = make_inv_freq(c.head_dim, c.rope_theta, c.rope_scaling);
  float local = c.rope_local_theta > 0 ? c.rope_local_theta : c.rope_theta;
  // Gemma 3's sliding layers use the local base without scaling.
  inv_freq_local_ = c.rope_local_theta > 0 ? make_inv_freq(c.head_dim, local, RopeScaling{})
                                           : inv_freq_global_;
}

Model::~Model() = default;
Model::Model(Model&&) noexcept = default;

void Model::embed(int32_t token, float* out) const {
  m_.weights.embed.lookup(token, m_.config.embed_scale, out);
}

// cs: [q, head_dim] = cos[half] then sin[half] per row, for that row's position.
void Model::rope_tables(std::span<const Row> rows, bool local, std::vector<float>& cs) const {
  const auto& inv = local ? inv_freq_local_ : inv_freq_global_;
  size_t half = inv.size();
  cs.resize(rows.size() * 2 * half);
  for (size_t r = 0; r < rows.size(); ++r) {
    float* c = cs.data() + r * 2 * half;
    for (size_t i = 0; i < half; ++i) {
      float ang = float(rows[r].pos) * inv[i];
      c[i] = std::cos(ang);
      c[half + i] = std::sin(ang);
    }
  }
}

void Model::logits_from_hidden(const float* hidden, size_t q, float* logits,
                               ThreadPool* pool) const {
  const ModelConfig& c = m_.config;
  const size_t d = c.d_model;
  std::vector<float> xn(q * d);
  for (size_t r = 0; r < q; ++r) {
    k::rmsnorm(hidden + r * d, m_.weights.final_norm.data(), d, c.norm_eps, xn.data() + r * d);
  }
  k::matmul(m_.weights.lm_head, xn.data(), q, logits, pool);
  if (c.final_softcap > 0) k::softcap(logits, q * size_t(c.vocab), c.final_softcap);
}

void Model::forward(std::span<const Row> rows, KVCache& kv, const ForwardOut& out,
                    ThreadPool* pool) const {
  const ModelConfig& c = m_.config;
  const ModelWeights& w = m_.weights;
  const size_t q = rows.size();
  if (q == 0) return;
  const size_t d = c.d_model, hd = c.head_dim, H = c.n_heads, KV = c.n_kv_heads;
  const size_t qkv_dim = (H + 2 * KV) * hd, kv_dim = KV * hd, ffn = c.ffn;

  // Validate everything before the cache is touched.
  for (size_t r = 0; r < q; ++r) {
    const Row& row = rows[r];
    if (row.token < 0 || row.token >= c.vocab) {
      fail<InputError>("forward row {}: token id {} is outside the vocabulary [0, {})", r,
                       row.token, c.vocab);
    }
    if (row.seq < 0 || row.seq >= kv.n_seq()) {
      fail<InputError>("forward row {}: sequence {} not in the cache ({} sequences)", r, row.seq,
                       kv.n_seq());
    }
  }
  try {
    for (const Row& row : rows) kv.begin_write(row.seq, row.pos);
  } catch (...) {
    for (const Row& row : rows) kv.abort_write(row.seq);
    throw;
  }

  Scratch& s = *scratch_;
  s.x.resize(q * d);
  s.xn.resize(q * d);
  s.qkv.resize(q * qkv_dim);
  s.att.resize(q * H * hd);
  s.proj.resize(q * d);
  s.gu.resize(q * 2 * ffn);
  s.act.resize(q * ffn);
  rope_tables(rows, false, s.cs_global);
  if (c.rope_local_theta > 0) rope_tables(rows, true, s.cs_local);

  for (size_t r = 0; r < q; ++r) embed(rows[r].token, s.x.data() + r * d);

  const float scale = c.score_scale();
  for (int l = 0; l < c.n_layers; ++l) {
    const LayerWeights& L = w.layers[l];
    const bool sliding = c.is_sliding(l);
    const int slots = kv.slots(l);
    // --- attention ---------------------------------------------------------
    for (size_t r = 0; r < q; ++r) {
      k::rmsnorm(s.x.data() + r * d, L.attn_norm.data(), d, c.norm_eps, s.xn.data() + r * d);
    }
    k::matmul(L.wqkv, s.xn.data(), q, s.qkv.data(), pool);  // [q, (H+2KV)·hd]
    const std::vector<float>& cs = sliding && c.rope_local_theta > 0 ? s.cs_local : s.cs_global;
    for (size_t r = 0; r < q; ++r) {
      float* v = s.qkv.data() + r * qkv_dim;
      if (c.qkv_bias) {
        for (size_t i = 0; i < qkv_dim; ++i) v[i] += L.qkv_bias[i];
      }
      const float* cr = cs.data() + r * hd;  // cos[hd/2], sin[hd/2]
      for (size_t h = 0; h < H + KV; ++h) {  // q heads then k heads
        float* hv = v + h * hd;
        if (c.qk_norm) {
          k::rmsnorm(hv, (h < H ? L.q_norm : L.k_norm).data(), hd, c.norm_eps, hv);
        }
        k::rope(hv, cr, cr + hd / 2, hd, c.rope_interleaved);
      }
      // Append K and V of this row to its sequence's cache.
      const Row& row = rows[r];
      size_t slot = size_t(row.pos % slots);
      std::memcpy(kv.k(row.seq, l) + slot * kv_dim, v + H * hd, kv_dim * sizeof(float));
      std::memcpy(kv.v(row.seq, l) + slot * kv_dim, v + (H + KV) * hd, kv_dim * sizeof(float));
    }
    const size_t group = H / KV;
    const size_t max_span = size_t(sliding ? std::min(c.sliding_window, kv.ctx()) : kv.ctx());
    auto attn = [&](size_t b, size_t e, size_t) {
      std::vector<float> scores(max_span);
      for (size_t t = b; t < e; ++t) {
        size_t r = t / H, h = t % H;
        const Row& row = rows[r];
        size_t hi = size_t(row.pos);
        size_t lo = sliding && hi + 1 > size_t(c.sliding_window) ? hi + 1 - c.sliding_window : 0;
        size_t kvh = h / group;
        k::attend(s.qkv.data() + r * qkv_dim + h * hd, kv.k(row.seq, l) + kvh * hd,
                  kv.v(row.seq, l) + kvh * hd, kv_dim, size_t(slots), lo, hi, hd, scale,
                  c.attn_softcap, scores.data(), s.att.data() + r * H * hd + h * hd);
      }
    };
    if (pool) pool->parallel_for(q * H, attn);
    else attn(0, q * H, 0);
    k::matmul(L.wo, s.att.data(), q, s.proj.data(), pool);  // [q, d]
    for (size_t r = 0; r < q; ++r) {
      float* p = s.proj.data() + r * d;
      if (c.sandwich_norms) k::rmsnorm(p, L.post_attn_norm.data(), d, c.norm_eps, p);
      float* x = s.x.data() + r * d;
      for (size_t i = 0; i < d; ++i) x[i] += p[i];
      k::rmsnorm(x, L.ffn_norm.data(), d, c.norm_eps, s.xn.data() + r * d);
    }
    // --- feed-forward --------------------------------------------------------
    k::matmul(L.w_gate_up, s.xn.data(), q, s.gu.data(), pool);  // [q, 2·ffn]
    for (size_t r = 0; r < q; ++r) {
      const float* g = s.gu.data() + r * 2 * ffn;
      if (c.activation == Activation::SiLU) k::silu_mul(g, g + ffn, ffn, s.act.data() + r * ffn);
      else k::gelu_tanh_mul(g, g + ffn, ffn, s.act.data() + r * ffn);
    }
    k::matmul(L.w_down, s.act.data(), q, s.proj.data(), pool);  // [q, d]
    for (size_t r = 0; r < q; ++r) {
      float* p = s.proj.data() + r * d;
      if (c.sandwich_norms) k::rmsnorm(p, L.post_ffn_norm.data(), d, c.norm_eps, p);
      float* x = s.x.data() + r * d;
      for (size_t i = 0; i < d; ++i) x[i] += p[i];
    }
  }
  for (const Row& row : rows) kv.end_write(row.seq);

  if (out.hidden) std::memcpy(out.hidden, s.x.data(), q * d * sizeof(float));
  if (!out.logits) return;
  if (!out.logits_mask) {
    logits_from_hidden(s.x.data(), q, out.logits, pool);
    return;
  }
  // Only the selected rows: gather, head, scatter. (The head is batch-invariant,
  // so a row's logits do not depend on which other rows were selected.)
  std::vector<size_t> sel;
  for (size_t r = 0; r < q; ++r) {
    if (out.logits_mask[r]) sel.push_back(r);
  }
  if (sel.empty()) return;
  const size_t V = c.vocab;
  s.head_in.resize(sel.size() * d);
  s.head_out.resize(sel.size() * V);
  for (size_t i = 0; i < sel.size(); ++i) {
    std::memcpy(s.head_in.data() + i * d, s.x.data() + sel[i] * d, d * sizeof(float));
  }
  logits_from_hidden(s.head_in.data(), sel.size(), s.head_out.data(), pool);
  for (size_t i = 0; i < sel.size(); ++i) {
    std::memcpy(out.logits + sel[i] * V, s.head_out.data() + i * V, V * sizeof(float));
  }
}

}  // namespace mtp::model
