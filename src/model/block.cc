#include "model/block.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "model/forward.h"

namespace mtp::model {

namespace kern = mtp::kernels;

namespace {

// inv_freq[i] = theta^(-2i/hd) (fp32 pow, as Hugging Face computes it), scaled.
// partial < 1 (proportional RoPE): pairs from floor(partial·hd/2) on do not
// rotate (inv_freq 0: cos 1, sin 0).
std::vector<float> make_inv_freq(int head_dim, float theta, const RopeScaling& sc,
                                 float partial = 1.0f) {
  int half = head_dim / 2;
  std::vector<float> f(half);
  for (int i = 0; i < half; ++i) f[i] = 1.0f / std::pow(theta, float(2 * i) / float(head_dim));
  // Python: int(partial_rotary_factor * head_dim // 2), in doubles.
  const int rotated = partial < 1.0f ? int(std::floor(double(partial) * head_dim / 2)) : half;
  for (int i = rotated; i < half; ++i) f[i] = 0.0f;
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
        double smooth =
            (old_ctx / wl - sc.low_freq_factor) / (sc.high_freq_factor - sc.low_freq_factor);
        v = float((1 - smooth) * v / sc.factor + smooth * v);
      }
    }
  }
  return f;
}

// The head width of the first layer with the given sliding flag (the
// config's head_dim when there is none): the layers sharing a table share it.
int head_dim_of(const ModelConfig& c, bool sliding) {
  for (int l = 0; l < c.n_layers; ++l) {
    const LayerKind k = c.layer_kind(l);
    if (k.sliding == sliding && !k.recurrent) return k.head_dim;
  }
  return c.head_dim;
}

}  // namespace

Rope::Rope(const ModelConfig& c) {
  const int global_hd = head_dim_of(c, false), local_hd = head_dim_of(c, true);
  // Partial rotary (Qwen3.5): the table of the rotated dims only.
  inv_global_ = make_inv_freq(c.rotary_dim(global_hd), c.rope_theta, c.rope_scaling,
                              c.rope_partial);
  has_local_ = c.rope_local_theta > 0 || local_hd != global_hd;
  // Sliding layers use the local base without scaling (Gemma 3/4).
  inv_local_ = !has_local_ ? inv_global_
               : c.rope_local_theta > 0
                   ? make_inv_freq(local_hd, c.rope_local_theta, RopeScaling{})
                   : make_inv_freq(local_hd, c.rope_theta, c.rope_scaling);
}

void Rope::tables(std::span<const Row> rows, bool local, std::vector<float>& cs) const {
  const auto& inv = local ? inv_local_ : inv_global_;
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

namespace {

// The shape of one layer's attention as block_forward runs it. A row of
// s.qkv holds the q heads q_stride apart (with an output gate, Qwen3.5: each
// head's hd query values, then its hd gate values), then K at k_off, then V.
struct Shape {
  LayerKind k;
  size_t d, hd, H, KV, q_dim, kv_dim, qkv_dim, q_stride, k_off, rot;
  Shape(const ModelConfig& c, int layer) : k(c.layer_kind(layer)) {
    d = size_t(c.d_model), hd = size_t(k.head_dim), H = size_t(c.n_heads);
    KV = size_t(k.n_kv_heads), q_dim = H * hd, kv_dim = KV * hd;
    q_stride = c.attn_gate ? 2 * hd : hd;
    k_off = H * q_stride;
    qkv_dim = k_off + (!k.owns_kv() ? 0 : k.k_eq_v ? kv_dim : 2 * kv_dim);
    rot = size_t(c.rotary_dim(k.head_dim));
  }
};

// q/k/v of every row from xn: biases, per-head q/k norms and RoPE, V's norm;
// a K/V owner writes its rows' K and V into the cache (kv: null only for a
// layer that owns none).
void project_qkv(const ModelConfig& c, const Shape& sh, int layer, const LayerWeights& L,
                 std::span<const Row> rows, KVCache* kv, const float* cs, BlockScratch& s,
                 ThreadPool* pool) {
  const size_t q = rows.size(), hd = sh.hd, H = sh.H, KV = sh.KV;
  kern::matmul(L.wqkv, s.xn.data(), q, s.qkv.data(), pool);  // [q, qkv_dim]
  if (c.v_norm) s.ones.assign(hd, 1.0f);  // V's norm has no weight
  for (size_t r = 0; r < q; ++r) {
    float* v = s.qkv.data() + r * sh.qkv_dim;
    if (c.qkv_bias) {
      for (size_t i = 0; i < sh.qkv_dim; ++i) v[i] += L.qkv_bias[i];
    }
    const size_t rot = sh.rot;
    const float* cr = cs + r * rot;  // cos[rot/2], sin[rot/2]
    for (size_t h = 0; h < H; ++h) {
      float* hv = v + h * sh.q_stride;
      if (c.qk_norm) kern::rmsnorm(hv, L.q_norm.data(), hd, c.norm_eps, hv);
      kern::rope(hv, cr, cr + rot / 2, rot, c.rope_interleaved);
    }
    if (!sh.k.owns_kv()) continue;
    MTP_CHECK(kv != nullptr, "layer {} owns K/V but got no cache", layer);
    const Row& row = rows[r];
    const size_t slot = kv->write_slot(row, layer);
    float* kc = kv->k(row.seq, layer) + slot * sh.kv_dim;
    float* vc = kv->v(row.seq, layer) + slot * sh.kv_dim;
    // V: its own projection, or (K = V) K's projection before K's norm and RoPE.
    std::memcpy(vc, v + sh.k_off + (sh.k.k_eq_v ? 0 : sh.kv_dim), sh.kv_dim * sizeof(float));
    for (size_t h = 0; h < KV; ++h) {
      float* kh = v + sh.k_off + h * hd;
      if (c.qk_norm) kern::rmsnorm(kh, L.k_norm.data(), hd, c.norm_eps, kh);
      kern::rope(kh, cr, cr + rot / 2, rot, c.rope_interleaved);
      if (c.v_norm) kern::rmsnorm(vc + h * hd, s.ones.data(), hd, c.norm_eps, vc + h * hd);
    }
    std::memcpy(kc, v + sh.k_off, sh.kv_dim * sizeof(float));
  }
}

// Attention of every row over the cached K/V of layer `layer` (its owner's)
// into s.att [q, H·hd].
void attend_rows(const ModelConfig& c, const Shape& sh, int layer, std::span<const Row> rows,
                 KVCache& kv, BlockScratch& s, ThreadPool* pool) {
  const size_t q = rows.size(), hd = sh.hd, H = sh.H, KV = sh.KV, kv_dim = sh.kv_dim;
  const size_t qkv_dim = sh.qkv_dim, slots = size_t(kv.slots(layer));
  const bool sliding = sh.k.sliding;
  // Tree rows' key lists (kv_cache.h "Tree rows"), built once per row.
  s.tree_key_off.assign(q + 1, 0);
  s.tree_keys.clear();
  for (size_t r = 0; r < q; ++r) {
    if (rows[r].node >= 0) kv.tree_key_slots(rows[r], layer, sliding, s.tree_keys);
    s.tree_key_off[r + 1] = s.tree_keys.size();
  }
  const size_t group = H / KV;
  const size_t window = size_t(c.sliding_window);
  const float scale = c.query_scale > 0.f ? c.query_scale : 1.0f / std::sqrt(float(hd));
  auto key_range = [&](const Row& row, size_t& lo, size_t& hi) {
    hi = size_t(row.pos);
    lo = sliding && hi + 1 > window ? hi + 1 - window : 0;
  };
  // Units of work: a tree row alone (its own key list: attend_slots per head),
  // or a run of consecutive rows of one sequence (rows of a verify or a
  // prompt chunk) whose key ranges fit the ring together, at most
  // kAttendGroupMax / group rows: per kv head, ONE attend_group call for the
  // run's rows × the kv head's query heads, every output attend()'s bits
  // (kernels/ops.h), the keys read once for all of them.
  auto& units = s.attn_units;  // rows [first, second) of each unit
  units.clear();
  const size_t run_max = std::max<size_t>(1, kern::kAttendGroupMax / group);
  for (size_t r = 0; r < q;) {
    size_t e = r + 1;
    if (rows[r].node < 0) {
      size_t lo0, hi0;
      key_range(rows[r], lo0, hi0);
      size_t ulo = lo0, uhi = hi0;
      while (e < q && e - r < run_max && rows[e].node < 0 && rows[e].seq == rows[r].seq) {
        size_t lo, hi;
        key_range(rows[e], lo, hi);
        if (std::max(uhi, hi) - std::min(ulo, lo) >= slots) break;
        ulo = std::min(ulo, lo);
        uhi = std::max(uhi, hi);
        ++e;
      }
    }
    units.emplace_back(r, e);
    r = e;
  }
  auto attn = [&](size_t b, size_t e, size_t) {
    std::vector<float> scores;
    std::vector<kern::AttendQuery> qs;
    for (size_t t = b; t < e; ++t) {
      const size_t r0 = units[t / KV].first, r1 = units[t / KV].second;
      const size_t kvh = t % KV;
      const Row& first = rows[r0];
      const float* kh = kv.k(first.seq, layer) + kvh * hd;
      const float* vh = kv.v(first.seq, layer) + kvh * hd;
      if (first.node >= 0) {  // a tree row: its own key list, the same keys decode would read
        const size_t r = r0, n = s.tree_key_off[r + 1] - s.tree_key_off[r];
        scores.resize(std::max(scores.size(), n));
        for (size_t h = kvh * group; h < (kvh + 1) * group; ++h)
          kern::attend_slots(s.qkv.data() + r * qkv_dim + h * sh.q_stride, kh, vh, kv_dim,
                             s.tree_keys.data() + s.tree_key_off[r], n, hd, scale,
                             c.attn_softcap, scores.data(), s.att.data() + (r * H + h) * hd);
        continue;
      }
      size_t total = 0;
      for (size_t r = r0; r < r1; ++r) {
        size_t lo, hi;
        key_range(rows[r], lo, hi);
        total += group * (hi - lo + 1);
      }
      scores.resize(std::max(scores.size(), total));
      qs.clear();
      size_t at = 0;
      for (size_t r = r0; r < r1; ++r) {
        size_t lo, hi;
        key_range(rows[r], lo, hi);
        for (size_t h = kvh * group; h < (kvh + 1) * group; ++h) {
          qs.push_back({s.qkv.data() + r * qkv_dim + h * sh.q_stride, lo, hi, scores.data() + at,
                        s.att.data() + (r * H + h) * hd});
          at += hi - lo + 1;
        }
      }
      kern::attend_group(qs, kh, vh, kv_dim, slots, hd, scale, c.attn_softcap);
    }
  };
  if (pool) pool->parallel_for(units.size() * KV, attn);
  else attn(0, units.size() * KV, 0);
}

// Qwen3.5's output gate: each head's attention output × sigmoid(its gate).
void gate_attention(const Shape& sh, size_t q, BlockScratch& s) {
  for (size_t r = 0; r < q; ++r) {
    for (size_t h = 0; h < sh.H; ++h) {
      const float* g = s.qkv.data() + r * sh.qkv_dim + h * sh.q_stride + sh.hd;
      float* o = s.att.data() + (r * sh.H + h) * sh.hd;
      for (size_t i = 0; i < sh.hd; ++i) o[i] *= 1.0f / (1.0f + std::exp(-g[i]));
    }
  }
}

// x[r] += norm(p[r]) (norm null: p[r]), r < q.
void add_residual(const ModelConfig& c, const float* norm, float* p, float* x, size_t q,
                  size_t d) {
  for (size_t r = 0; r < q; ++r) {
    float* pr = p + r * d;
    if (norm) kern::rmsnorm(pr, norm, d, c.norm_eps, pr);
    float* xr = x + r * d;
    for (size_t i = 0; i < d; ++i) xr[i] += pr[i];
  }
}

// Per-layer embeddings (Gemma 4): x += norm(proj(gelu(gate(x)) · ple)).
void ple_residual(const ModelConfig& c, const LayerWeights& L, const float* ple,
                  size_t ple_stride, size_t q, float* x, BlockScratch& s, ThreadPool* pool) {
  const size_t d = size_t(c.d_model), e = size_t(c.ple_dim);
  s.ple.resize(q * 2 * e);
  float* g = s.ple.data();          // [q, e] gate
  float* a = g + q * e;             // [q, e] gelu(gate) · ple
  kern::matmul(L.w_ple_gate, x, q, g, pool);
  for (size_t r = 0; r < q; ++r) kern::gelu_tanh_mul(g + r * e, ple + r * ple_stride, e, a + r * e);
  kern::matmul(L.w_ple_proj, a, q, s.proj.data(), pool);  // [q, d]
  add_residual(c, L.ple_post_norm.data(), s.proj.data(), x, q, d);
}

}  // namespace

void attention_in(const ModelConfig& c, int layer, const LayerWeights& L,
                  std::span<const Row> rows, KVCache* kv, const float* cs, const float* x,
                  BlockScratch& s, ThreadPool* pool) {
  const Shape sh(c, layer);
  const size_t q = rows.size(), d = sh.d;
  s.xn.resize(q * d);
  s.qkv.resize(q * sh.qkv_dim);
  s.att.resize(q * sh.q_dim);
  for (size_t r = 0; r < q; ++r) {
    kern::rmsnorm(x + r * d, L.attn_norm.data(), d, c.norm_eps, s.xn.data() + r * d);
  }
  project_qkv(c, sh, layer, L, rows, kv, cs, s, pool);
}

void attention_out(const ModelConfig& c, const LayerWeights& L, size_t q, float* x,
                   BlockScratch& s, ThreadPool* pool) {
  const size_t d = size_t(c.d_model);
  s.proj.resize(q * d);
  kern::matmul(L.wo, s.att.data(), q, s.proj.data(), pool);  // [q, d]
  add_residual(c, c.sandwich_norms ? L.post_attn_norm.data() : nullptr, s.proj.data(), x, q, d);
}

void feed_forward(const ModelConfig& c, int layer, const LayerWeights& L, size_t q, float* x,
                  BlockScratch& s, ThreadPool* pool, const float* ple, size_t ple_stride) {
  const size_t d = size_t(c.d_model), ffn = size_t(c.layer_kind(layer).ffn);
  s.xn.resize(q * d);
  s.proj.resize(q * d);
  s.gu.resize(q * 2 * ffn);
  s.act.resize(q * ffn);
  for (size_t r = 0; r < q; ++r) {
    kern::rmsnorm(x + r * d, L.ffn_norm.data(), d, c.norm_eps, s.xn.data() + r * d);
  }
  kern::matmul(L.w_gate_up, s.xn.data(), q, s.gu.data(), pool);  // [q, 2·ffn]
  for (size_t r = 0; r < q; ++r) {
    const float* g = s.gu.data() + r * 2 * ffn;
    if (c.activation == Activation::SiLU) kern::silu_mul(g, g + ffn, ffn, s.act.data() + r * ffn);
    else kern::gelu_tanh_mul(g, g + ffn, ffn, s.act.data() + r * ffn);
  }
  kern::matmul(L.w_down, s.act.data(), q, s.proj.data(), pool);  // [q, d]
  add_residual(c, c.sandwich_norms ? L.post_ffn_norm.data() : nullptr, s.proj.data(), x, q, d);
  if (c.ple_dim > 0) {
    MTP_CHECK(ple != nullptr, "layer {} of a model with per-layer embeddings got no input", layer);
    ple_residual(c, L, ple, ple_stride, q, x, s, pool);
  }
  if (c.layer_scalar) {
    for (size_t i = 0; i < q * d; ++i) x[i] *= L.layer_scalar;
  }
}

void block_forward(const ModelConfig& c, int layer, const LayerWeights& L,
                   std::span<const Row> rows, KVCache& kv, const float* cs, float* x,
                   BlockScratch& s, ThreadPool* pool, const float* ple, size_t ple_stride) {
  const Shape sh(c, layer);
  const size_t q = rows.size();
  if (sh.k.recurrent) {  // the recurrent token mixer (Gated DeltaNet) in place of attention
    s.xn.resize(q * sh.d);
    for (size_t r = 0; r < q; ++r) {
      kern::rmsnorm(x + r * sh.d, L.attn_norm.data(), sh.d, c.norm_eps, s.xn.data() + r * sh.d);
    }
    linear_attn_forward(c, layer, L, rows, kv, s.xn.data(), s, pool);  // -> s.proj [q, d]
    add_residual(c, c.sandwich_norms ? L.post_attn_norm.data() : nullptr, s.proj.data(), x, q,
                 sh.d);
  } else {
    attention_in(c, layer, L, rows, &kv, cs, x, s, pool);
    attend_rows(c, sh, layer, rows, kv, s, pool);
    if (c.attn_gate) gate_attention(sh, q, s);  // Qwen3.5: sigmoid output gate
    attention_out(c, L, q, x, s, pool);
  }
  feed_forward(c, layer, L, q, x, s, pool, ple, ple_stride);
}

}  // namespace mtp::model
