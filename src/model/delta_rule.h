// The arithmetic of one Gated DeltaNet layer token by token (Qwen3.5's
// linear attention, transformers' Qwen3_5GatedDeltaNet with its recurrent
// rule, read not copied): the causal depthwise convolution, the q/k
// normalisation, the gates and the delta-rule state update. Every path that
// advances a recurrent state — prefill, decode, verify rows, rows of many
// sequences, and the replay of a rollback (model/kv_cache.h) — runs these
// functions one token at a time in the same order, so a state is a function
// of its sequence's tokens only, bit for bit.
#pragma once
#include <cstddef>

#include "model/config.h"

namespace mtp::model::delta {

// silu of the causal depthwise convolution at one position, every channel:
// out[c] = silu(Σ_{i < kc} w[c·kc + i] · in[i][c]), i ascending; in[i] is
// the conv input of position pos - kc + 1 + i ([C]), null before the
// sequence's start (zeros).
void conv_silu(const float* const* in, const float* w, int C, int kc, float* out);

// q and k of every key head of a conv output qkv ([C] = q | k | v) divided by
// sqrt(Σ x² + 1e-6) (transformers' l2norm), q then also by sqrt(k_dim).
void normalize_qk(const LinearAttn& a, float* qkv);

// The gates of one token from its projections a and b ([v_heads] each):
// g[h] = a_neg[h] · softplus(a[h] + dt_bias[h]), beta[h] = sigmoid(b[h]);
// out: g [v_heads] then beta [v_heads].
void gates(const LinearAttn& a, const float* a_in, const float* b_in, const float* a_neg,
           const float* dt_bias, float* out);

// One token of the gated delta rule for value head h of a normalised qkv:
//   S = S_src · exp(g);  delta = (v - Sᵀk) · beta;  S_dst = S + k deltaᵀ;
//   out = S_dstᵀ q                                    (S: [k_dim, v_dim])
// src and dst are that head's state ([k_dim · v_dim]); they may be the same
// buffer. out: [v_dim], or null (a replay needs only the state).
void step(const LinearAttn& a, int h, const float* src, float* dst, const float* qkv, float g,
          float beta, float* out);

}  // namespace mtp::model::delta
