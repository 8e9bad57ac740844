#include "drafter/native_head.h"

#include <cstring>

#include "core/error.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"

namespace mtp::drafter {

namespace kern = mtp::kernels;

namespace {

const model::ModelConfig& checked_config(const model::Model& t) {
  if (!NativeHead::available(t)) {
    fail<InputError>("the target ({}) has no native multi-token-prediction head: its checkpoint "
                     "holds no mtp.* tensors (GGUF: blk.N.nextn.*)", model::arch_name(t.config().arch));
  }
  return t.config();
}

}  // namespace

NativeHead::NativeHead(const model::Model& target, int n_seq, int ctx, int q_max)
    : target_(target), cfg_(model::native_mtp_config(checked_config(target))),
      kv_(cfg_, n_seq, ctx, q_max, /*tree_slots=*/0) {}

void NativeHead::forward(std::span<const model::Row> rows, const float* h_in, float* out,
                         float* logits, const uint8_t* mask, ThreadPool* pool) {
  const model::NativeMtpWeights& w = target_.weights().mtp;
  const size_t q = rows.size(), d = size_t(cfg_.d_model), V = size_t(cfg_.vocab);
  if (q == 0) return;
  kv_.begin_rows(rows, cfg_.vocab);

  // [norm_e(embed(token)); norm_h(h)] per row, then x = fc · that.  // [q, 2d] -> [q, d]
  cat_.resize(q * 2 * d);
  x_.resize(q * d);
  for (size_t r = 0; r < q; ++r) {
    float* e = cat_.data() + r * 2 * d;
    target_.embed(rows[r].token, e);
    kern::rmsnorm(e, w.norm_embed.data(), d, cfg_.norm_eps, e);
    kern::rmsnorm(h_in + r * d, w.norm_hidden.data(), d, cfg_.norm_eps, e + d);
  }
  kern::matmul(w.fc, cat_.data(), q, x_.data(), pool);

  target_.rope().tables(rows, target_.rope().local_for(false), cs_);
  model::block_forward(cfg_, 0, w.layer, rows, kv_, cs_.data(), x_.data(), scratch_, pool);
  kv_.end_rows(rows);

  out_.resize(q * d);
  for (size_t r = 0; r < q; ++r) {
    kern::rmsnorm(x_.data() + r * d, w.norm.data(), d, cfg_.norm_eps, out_.data() + r * d);
  }
  if (out) std::memcpy(out, out_.data(), q * d * sizeof(float));
  if (!logits) return;
  // The selected rows through the target's lm_head (batch-invariant: a row's
  // logits do not depend on the other rows).
  std::vector<size_t> sel;
  for (size_t r = 0; r < q; ++r) {
    if (!mask || mask[r]) sel.push_back(r);
  }
  packed_.resize(sel.size() * d);
  packed_logits_.resize(sel.size() * V);
  for (size_t i = 0; i < sel.size(); ++i) {
    std::memcpy(packed_.data() + i * d, out_.data() + sel[i] * d, d * sizeof(float));
  }
  kern::matmul(target_.weights().lm_head, packed_.data(), sel.size(), packed_logits_.data(), pool);
  if (cfg_.final_softcap > 0) kern::softcap(packed_logits_.data(), sel.size() * V, cfg_.final_softcap);
  for (size_t i = 0; i < sel.size(); ++i) {
    std::memcpy(logits + sel[i] * V, packed_logits_.data() + i * V, V * sizeof(float));
  }
}

}  // namespace mtp::drafter
