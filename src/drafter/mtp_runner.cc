#include "drafter/mtp_runner.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/progress.h"
#include "kernels/ops.h"

namespace mtp::drafter {

namespace kern = mtp::kernels;

MtpRunner::MtpRunner(const model::Model& target, const Drafter& drafter, int n_seq, int ctx,
                     int q_max)
    : target_(target), d_(drafter),
      head_(drafter.draft_head(target.weights().lm_head)) {
  for (int i = 0; i < drafter.config().K; ++i) {
    kv_.emplace_back(drafter.block_config(), n_seq, ctx, q_max);
  }
}

void MtpRunner::forward(int mk, std::span<const model::Row> rows, const float* h_in,
                        float* h_out, float* logits, const uint8_t* mask, ThreadPool* pool) {
  if (mk < 0 || mk >= K()) fail<InputError>("module {} does not exist (K = {})", mk, K());
  const model::ModelConfig& bc = d_.block_config();
  const MtpModule& m = d_.modules()[mk];
  const size_t q = rows.size(), d = bc.d_model;
  if (q == 0) return;
  model::KVCache& kv = kv_[mk];
  kv.begin_rows(rows, bc.vocab);

  // Fusion: cat = [enorm(embed(tok)); hnorm(h)] per row, then x = eh_proj · cat.
  cat_.resize(q * 2 * d);
  x_.resize(q * d);
  std::vector<float> h(d);
  for (size_t r = 0; r < q; ++r) {
    float* e = cat_.data() + r * 2 * d;
    target_.embed(rows[r].token, e);
    kern::rmsnorm(e, m.enorm.data(), d, bc.norm_eps, e);
    std::memcpy(h.data(), h_in + r * d, d * sizeof(float));
    if (mk == 0) round_to(d_.config().hidden_dtype, h.data(), d);  // the capture contract
    kern::rmsnorm(h.data(), m.hnorm.data(), d, bc.norm_eps, e + d);
  }
  kern::matmul(m.eh_proj, cat_.data(), q, x_.data(), pool);  // [q, d]

  target_.rope().tables(rows, target_.rope().local_for(bc.is_sliding(0)), cs_);
  model::block_forward(bc, 0, m.block, rows, kv, cs_.data(), x_.data(), scratch_, pool);
  kv.end_rows(rows);

  if (h_out) std::memcpy(h_out, x_.data(), q * d * sizeof(float));
  if (logits) {
    target_.logits_for_rows(x_.data(), q, mask, logits, pool, head_);
    neutralise_non_finite(mk, q, mask, logits);
  }
}

// A drafter whose weights are finite but whose forward overflows fp32 (one
// all-3e38 matrix passes the load checks) gives NaN or infinite logits; a
// sampler fed them broke the request (a cancelled stream, token id -1 from
// rejection sampling, the target's weights blamed). Such a row becomes all
// zeros — a uniform draft distribution, valid for every verifier, so the
// output is what it would be without the drafter — and one warning names the
// drafter. Rows of a sound drafter are left untouched.
void MtpRunner::neutralise_non_finite(int mk, size_t q, const uint8_t* mask, float* logits) {
  static std::atomic<bool> warned{false};
  const size_t w = logits_width();
  for (size_t r = 0; r < q; ++r) {
    if (mask && !mask[r]) continue;
    float* row = logits + r * w;
    if (std::all_of(row, row + w, [](float x) { return std::isfinite(x); })) continue;
    std::fill(row, row + w, 0.f);
    if (!warned.exchange(true)) {
      note("warning: drafter '{}': module {} gives non-finite logits (its forward pass overflows "
           "fp32: the drafter's weights are broken); its drafts at such rows are ignored — the "
           "output is unchanged, speculation gains nothing there\n", d_.path(), mk);
    }
  }
}

}  // namespace mtp::drafter
