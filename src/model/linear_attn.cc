// The token mixer of a Gated DeltaNet layer (Qwen3.5's linear attention;
// transformers' Qwen3_5GatedDeltaNet, read not copied): the fused input
// projections, the causal depthwise convolution over the ring of conv inputs
// the cache keeps, the normalised q/k, the gates, the delta-rule recurrence
// one token at a time (model/delta_rule.h), the gated RMSNorm and out_proj.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "model/block.h"
#include "model/delta_rule.h"

namespace mtp::model {

namespace kern = mtp::kernels;

namespace {

// Runs fn(b, e) over [0, n) on the pool, or in one piece without it.
template <class F>
void parallel(ThreadPool* pool, size_t n, F&& fn) {
  if (pool && n > 1) {
    pool->parallel_for(n, [&](size_t b, size_t e, size_t) { fn(b, e); });
  } else {
    fn(0, n);
  }
}

}  // namespace

void linear_attn_forward(const ModelConfig& c, int layer, const LayerWeights& L,
                         std::span<const Row> rows, KVCache& kv, const float* xn,
                         BlockScratch& s, ThreadPool* pool) {
  const LinearAttn& a = c.linear;
  const size_t q = rows.size(), C = size_t(a.conv_dim()), vd = size_t(a.value_dim());
  const size_t hv = size_t(a.v_heads), dv = size_t(a.v_dim), kc = size_t(a.conv_kernel);
  const size_t in_w = C + vd + 2 * hv, S = size_t(a.k_dim) * dv;
  s.lin_in.resize(q * in_w);
  s.lin_conv.resize(q * C);
  s.lin_out.resize(q * vd);
  kern::matmul(L.w_lin_in, xn, q, s.lin_in.data(), pool);  // [q, C | z | b | a]

  // The rows' conv inputs and gates into the cache's ring, then each row's
  // convolution (its window: earlier positions of this call or the ring).
  for (size_t r = 0; r < q; ++r) {
    const Row& row = rows[r];
    const float* in = s.lin_in.data() + r * in_w;
    std::memcpy(kv.conv_input(row.seq, layer, row.pos), in, C * sizeof(float));
    delta::gates(a, in + C + vd + hv, in + C + vd, L.a_neg.data(), L.dt_bias.data(),
                 kv.gates(row.seq, layer, row.pos));
  }
  parallel(pool, q, [&](size_t b, size_t e) {
    std::vector<const float*> win(kc);
    for (size_t r = b; r < e; ++r) {
      const Row& row = rows[r];
      for (size_t i = 0; i < kc; ++i) {
        win[i] = kv.conv_input(row.seq, layer, row.pos - int(kc) + 1 + int(i));
      }
      float* out = s.lin_conv.data() + r * C;
      delta::conv_silu(win.data(), L.conv_w.data(), int(C), int(kc), out);
      delta::normalize_qk(a, out);
    }
  });

  // The recurrence: each (sequence, value head) runs its rows in position
  // order; units of different sequences or heads are independent.
  s.seq_rows.resize(size_t(kv.n_seq()));
  for (auto& v : s.seq_rows) v.clear();
  for (size_t r = 0; r < q; ++r) s.seq_rows[size_t(rows[r].seq)].push_back(r);
  std::vector<int> seqs;
  for (int i = 0; i < kv.n_seq(); ++i) {
    if (!s.seq_rows[size_t(i)].empty()) seqs.push_back(i);
  }
  parallel(pool, seqs.size() * hv, [&](size_t b, size_t e) {
    for (size_t u = b; u < e; ++u) {
      const int seq = seqs[u / hv];
      const int h = int(u % hv);
      float* state = kv.rec_state(seq, layer) + size_t(h) * S;
      for (size_t r : s.seq_rows[size_t(seq)]) {
        const Row& row = rows[r];
        const float* src = kv.rec_source(row, layer) + size_t(h) * S;
        const float* g = kv.gates(seq, layer, row.pos);
        delta::step(a, h, src, state, s.lin_conv.data() + r * C, g[h], g[hv + size_t(h)],
                    s.lin_out.data() + r * vd + size_t(h) * dv);
      }
    }
  });

  // The gated norm per head: rmsnorm(o) · w · silu(z), then out_proj.
  for (size_t r = 0; r < q; ++r) {
    const float* z = s.lin_in.data() + r * in_w + C;
    float* o = s.lin_out.data() + r * vd;
    for (size_t h = 0; h < hv; ++h) {
      float* oh = o + h * dv;
      kern::rmsnorm(oh, L.lin_norm.data(), dv, c.norm_eps, oh);
      for (size_t j = 0; j < dv; ++j) {
        const float zj = z[h * dv + j];
        oh[j] *= zj / (1.0f + std::exp(-zj));
      }
    }
  }
  s.proj.resize(q * size_t(c.d_model));
  kern::matmul(L.w_lin_out, s.lin_out.data(), q, s.proj.data(), pool);  // [q, d]
}

}  // namespace mtp::model
