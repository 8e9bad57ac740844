#include "model/block.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "model/forward.h"

namespace mtp::model {

namespace kern = mtp::kernels;

namespace {

// inv_freq[i] = theta^(-2i/hd) (fp32 pow, as Hugging Face computes it), scaled.
std::vector<float> make_inv_freq(int head_dim, float theta, const RopeScaling& sc) {
  int half = head_dim / 2;
  std::vector<float> f(half);
  for (int i = 0; i < half; ++i) f[i] = 1.0f / std::pow(theta, float(2 * i) / float(head_dim));
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

}  // namespace

Rope::Rope(const ModelConfig& c) {
  inv_global_ = make_inv_freq(c.head_dim, c.rope_theta, c.rope_scaling);
  has_local_ = c.rope_local_theta > 0;
  // Gemma 3's sliding layers use the local base without scaling.
  inv_local_ = has_local_ ? make_inv_freq(c.head_dim, c.rope_local_theta, RopeScaling{})
                          : inv_global_;
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

void block_forward(const ModelConfig& c, bool sliding, const LayerWeights& L,
                   std::span<const Row> rows, KVCache& kv, int kv_layer, const float* cs,
                   float* x, BlockScratch& s, ThreadPool* pool) {
  const size_t q = rows.size();
  const size_t d = c.d_model, hd = c.head_dim, H = c.n_heads, KV = c.n_kv_heads;
  const size_t qkv_dim = (H + 2 * KV) * hd, kv_dim = KV * hd, ffn = c.ffn;
  const size_t slots = size_t(kv.slots(kv_layer));
  // Tree rows' key lists (kv_cache.h "Tree rows"), built once per row.
  s.tree_key_off.assign(q + 1, 0);
  s.tree_keys.clear();
  for (size_t r = 0; r < q; ++r) {
    if (rows[r].node >= 0) kv.tree_key_slots(rows[r], kv_layer, sliding, s.tree_keys);
    s.tree_key_off[r + 1] = s.tree_keys.size();
  }
  s.xn.resize(q * d);
  s.qkv.resize(q * qkv_dim);
  s.att.resize(q * H * hd);
  s.proj.resize(q * d);
  s.gu.resize(q * 2 * ffn);
  s.act.resize(q * ffn);

  // --- attention -----------------------------------------------------------
  for (size_t r = 0; r < q; ++r) {
    kern::rmsnorm(x + r * d, L.attn_norm.data(), d, c.norm_eps, s.xn.data() + r * d);
  }
  kern::matmul(L.wqkv, s.xn.data(), q, s.qkv.data(), pool);  // [q, (H+2KV)·hd]
  for (size_t r = 0; r < q; ++r) {
    float* v = s.qkv.data() + r * qkv_dim;
    if (c.qkv_bias) {
      for (size_t i = 0; i < qkv_dim; ++i) v[i] += L.qkv_bias[i];
    }
    const float* cr = cs + r * hd;  // cos[hd/2], sin[hd/2]
    for (size_t h = 0; h < H + KV; ++h) {  // q heads, then k heads
      float* hv = v + h * hd;
      if (c.qk_norm) kern::rmsnorm(hv, (h < H ? L.q_norm : L.k_norm).data(), hd, c.norm_eps, hv);
      kern::rope(hv, cr, cr + hd / 2, hd, c.rope_interleaved);
    }
    const Row& row = rows[r];
    const size_t slot = kv.write_slot(row, kv_layer);
    std::memcpy(kv.k(row.seq, kv_layer) + slot * kv_dim, v + H * hd, kv_dim * sizeof(float));
    std::memcpy(kv.v(row.seq, kv_layer) + slot * kv_dim, v + (H + KV) * hd,
                kv_dim * sizeof(float));
  }
  const size_t group = H / KV;
  const size_t window = size_t(c.sliding_window);
  const float scale = c.score_scale();
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
      const float* kh = kv.k(first.seq, kv_layer) + kvh * hd;
      const float* vh = kv.v(first.seq, kv_layer) + kvh * hd;
      if (first.node >= 0) {  // a tree row: its own key list, the same keys decode would read
        const size_t r = r0, n = s.tree_key_off[r + 1] - s.tree_key_off[r];
        scores.resize(std::max(scores.size(), n));
        for (size_t h = kvh * group; h < (kvh + 1) * group; ++h)
          kern::attend_slots(s.qkv.data() + r * qkv_dim + h * hd, kh, vh, kv_dim,
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
          qs.push_back({s.qkv.data() + r * qkv_dim + h * hd, lo, hi, scores.data() + at,
                        s.att.data() + (r * H + h) * hd});
          at += hi - lo + 1;
        }
      }
      kern::attend_group(qs, kh, vh, kv_dim, slots, hd, scale, c.attn_softcap);
    }
  };
  if (pool) pool->parallel_for(units.size() * KV, attn);
  else attn(0, units.size() * KV, 0);
  kern::matmul(L.wo, s.att.data(), q, s.proj.data(), pool);  // [q, d]
  for (size_t r = 0; r < q; ++r) {
    float* p = s.proj.data() + r * d;
    if (c.sandwich_norms) kern::rmsnorm(p, L.post_attn_norm.data(), d, c.norm_eps, p);
    float* xr = x + r * d;
    for (size_t i = 0; i < d; ++i) xr[i] += p[i];
    kern::rmsnorm(xr, L.ffn_norm.data(), d, c.norm_eps, s.xn.data() + r * d);
  }
  // --- feed-forward ----------------------------------------------------------
  kern::matmul(L.w_gate_up, s.xn.data(), q, s.gu.data(), pool);  // [q, 2·ffn]
  for (size_t r = 0; r < q; ++r) {
    const float* g = s.gu.data() + r * 2 * ffn;
    if (c.activation == Activation::SiLU) kern::silu_mul(g, g + ffn, ffn, s.act.data() + r * ffn);
    else kern::gelu_tanh_mul(g, g + ffn, ffn, s.act.data() + r * ffn);
  }
  kern::matmul(L.w_down, s.act.data(), q, s.proj.data(), pool);  // [q, d]
  for (size_t r = 0; r < q; ++r) {
    float* p = s.proj.data() + r * d;
    if (c.sandwich_norms) kern::rmsnorm(p, L.post_ffn_norm.data(), d, c.norm_eps, p);
    float* xr = x + r * d;
    for (size_t i = 0; i < d; ++i) xr[i] += p[i];
  }
}

}  // namespace mtp::model
