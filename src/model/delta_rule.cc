#include "model/delta_rule.h"

#include <cmath>
#include <vector>

namespace mtp::model::delta {

namespace {
float silu(float x) { return x / (1.0f + std::exp(-x)); }
}  // namespace

void conv_silu(const float* const* in, const float* w, int C, int kc, float* out) {
  for (int c = 0; c < C; ++c) {
    float acc = 0.0f;
    for (int i = 0; i < kc; ++i) {
      if (in[i]) acc += w[size_t(c) * size_t(kc) + size_t(i)] * in[i][c];
    }
    out[c] = silu(acc);
  }
}

void normalize_qk(const LinearAttn& a, float* qkv) {
  const size_t dk = size_t(a.k_dim);
  const float q_scale = std::sqrt(float(a.k_dim));
  for (int part = 0; part < 2; ++part) {
    for (int h = 0; h < a.k_heads; ++h) {
      float* x = qkv + size_t(part) * size_t(a.key_dim()) + size_t(h) * dk;
      float ss = 0.0f;
      for (size_t i = 0; i < dk; ++i) ss += x[i] * x[i];
      const float inv = 1.0f / std::sqrt(ss + 1e-6f);
      for (size_t i = 0; i < dk; ++i) x[i] *= inv;
      if (part == 0) {
        for (size_t i = 0; i < dk; ++i) x[i] /= q_scale;
      }
    }
  }
}

void gates(const LinearAttn& a, const float* a_in, const float* b_in, const float* a_neg,
           const float* dt_bias, float* out) {
  for (int h = 0; h < a.v_heads; ++h) {
    const float x = a_in[h] + dt_bias[h];
    const float softplus = x > 20.0f ? x : std::log1p(std::exp(x));  // torch's threshold
    out[h] = a_neg[h] * softplus;
    out[a.v_heads + h] = 1.0f / (1.0f + std::exp(-b_in[h]));
  }
}

void step(const LinearAttn& a, int h, const float* src, float* dst, const float* qkv, float g,
          float beta, float* out) {
  const size_t dk = size_t(a.k_dim), dv = size_t(a.v_dim);
  const int kh = a.k_head_of(h);
  const float* q = qkv + size_t(kh) * dk;
  const float* k = qkv + size_t(a.key_dim()) + size_t(kh) * dk;
  const float* v = qkv + 2 * size_t(a.key_dim()) + size_t(h) * dv;
  thread_local std::vector<float> mem, delta;
  mem.assign(dv, 0.0f);
  delta.resize(dv);
  const float decay = std::exp(g);
  // Decay, and Sᵀk over i ascending (each j its own chain).
  for (size_t i = 0; i < dk; ++i) {
    const float* s = src + i * dv;
    float* t = dst + i * dv;
    const float ki = k[i];
    for (size_t j = 0; j < dv; ++j) {
      const float x = s[j] * decay;
      t[j] = x;
      mem[j] += x * ki;
    }
  }
  for (size_t j = 0; j < dv; ++j) delta[j] = (v[j] - mem[j]) * beta;
  // The rank-one update, and Sᵀq over i ascending.
  if (!out) {
    for (size_t i = 0; i < dk; ++i) {
      float* t = dst + i * dv;
      const float ki = k[i];
      for (size_t j = 0; j < dv; ++j) t[j] += ki * delta[j];
    }
    return;
  }
  for (size_t j = 0; j < dv; ++j) out[j] = 0.0f;
  for (size_t i = 0; i < dk; ++i) {
    float* t = dst + i * dv;
    const float ki = k[i], qi = q[i];
    for (size_t j = 0; j < dv; ++j) {
      const float x = t[j] + ki * delta[j];
      t[j] = x;
      out[j] += x * qi;
    }
  }
}

}  // namespace mtp::model::delta
