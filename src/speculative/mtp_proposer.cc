#include "speculative/mtp_proposer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "drafter/module_rows.h"
#include "kernels/ops.h"

namespace mtp::speculative {

float top_probability(const float* logits, size_t vocab) {
  float mx = logits[kernels::argmax(logits, vocab)];
  double sum = 0;
  for (size_t i = 0; i < vocab; ++i) sum += std::exp(double(logits[i]) - mx);
  return float(1.0 / sum);
}

MtpProposer::MtpProposer(const drafter::Drafter& d, TargetSession& target, float p_min, int modules,
                         const SamplerOptions& sampling, SpecSampling mode)
    : target_(target),
      runner_(target.model(), d, 1, target.ctx()),
      p_min_(p_min),
      modules_(modules > 0 ? std::min(modules, d.config().K) : d.config().K),
      d_(size_t(target.model().config().d_model)),
      sampler_(sampling),
      mode_(mode) {
  final_out_.assign(d.config().K, std::vector<float>(size_t(target.ctx()) * d_));
  d0_logits_.resize(runner_.logits_width());
  module_s_.assign(d.config().K, 0.0);
}

void MtpProposer::run_module(int k, const float* h_in, float* h_out, float* logits,
                             const uint8_t* mask) {
  auto t0 = std::chrono::steady_clock::now();
  runner_.forward(k, rows_, h_in, h_out, logits, mask, target_.pool());
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  module_s_[k] += s;
  if (chooser_) chooser_->observe_module(int(rows_.size()), s);
}

void MtpProposer::catch_up(std::span<const int32_t> committed, int modules) {
  const int N = int(committed.size());
  const int q_max = runner_.kv(0).q_max();
  const size_t V = d0_logits_.size();
  MTP_CHECK(target_.forwarded() >= N - 1,
            "drafter catch-up: the target has forwarded {} positions, need {}",
            target_.forwarded(), N - 1);
  // Module 0's logits must be those of row N-2; if that row is already final
  // but its logits were not kept, recompute it.
  if (d0_row_ != N - 2 && runner_.kv(0).length(0) > N - 2 && N >= 2) {
    runner_.kv(0).truncate(0, N - 2);
  }
  for (int k = 0; k < std::min(modules, modules_); ++k) {
    const int end = drafter::module_row_count(N, k);  // final rows are [0, end)
    auto h_prev = [&](int t) {
      return k == 0 ? target_.hidden(t) : final_out_[k - 1].data() + size_t(t) * d_;
    };
    drafter::for_each_row_chunk(runner_.kv(k).length(0), end, q_max, [&](int t0, int t1) {
      drafter::gather_module_rows(0, k, t0, t1, committed, h_prev, d_, rows_, h_in_);
      const bool last = k == 0 && t1 == end;
      float* lg = nullptr;
      if (last) {  // logits of row N-2 only
        mask_.assign(rows_.size(), 0);
        mask_.back() = 1;
        logits_.resize(rows_.size() * V);
        lg = logits_.data();
      }
      run_module(k, h_in_.data(), final_out_[k].data() + size_t(t0) * d_, lg,
                 last ? mask_.data() : nullptr);
      if (last) {
        std::memcpy(d0_logits_.data(), logits_.data() + (rows_.size() - 1) * V, V * sizeof(float));
        d0_row_ = N - 2;
      }
    });
  }
}

int32_t MtpProposer::choose(const float* lg, int64_t pos, DraftTree& tree, float& max_logit) {
  const size_t V = runner_.logits_width();
  const std::vector<int32_t>& vocab = runner_.drafter().config().draft_vocab;
  const int32_t* ids = vocab.empty() ? nullptr : vocab.data();
  const size_t a = kernels::argmax(lg, V);
  max_logit = lg[a];
  if (sampler_.greedy()) return runner_.token_of(a);
  if (mode_ == SpecSampling::Coupled) return sampler_.sample(lg, V, pos, ids, NoiseStream::Choice);
  TokenDist q;
  sampler_.distribution(lg, V, ids, q);
  const int32_t t = sample_dist(q, sampler_.options().seed, pos, NoiseStream::Draft);
  tree.dist.push_back(std::move(q));  // node tree.size() is pushed next
  return t;
}

void MtpProposer::propose(std::span<const int32_t> committed, int max_k, DraftTree& tree) {
  if (tree_opts_.is_tree()) return propose_tree(committed, max_k, tree);
  // Module 0 catches up here (its last final row yields d_0); modules k >= 1
  // catch up inside their drafting call below — one weight read per module
  // per cycle instead of two — or, when they do not draft this cycle, at a
  // later propose (their cache length says where they are).
  catch_up(committed, 1);
  const int N = int(committed.size());
  const size_t V = d0_logits_.size();
  tree.clear();
  drafts_.clear();
  if (max_k < 1 || d0_row_ != N - 2) return;
  if (p_min_ > 0 && top_probability(d0_logits_.data(), V) < p_min_) return;
  float max_logit = 0;
  // Module k drafts the token at sequence position N + k.
  drafts_.push_back(choose(d0_logits_.data(), N, tree, max_logit));
  tree.push(drafts_.back(), -1, {DraftSource::Kind::Mtp, 0});
  history_.push_back({N, 0, drafts_.back(), max_logit});
  auto token_at = [&](int j) { return j < N ? committed[j] : drafts_[size_t(j - N)]; };
  const int q_max = runner_.kv(0).q_max();
  for (int k = 1; k < std::min(max_k, modules_); ++k) {
    // Module k's rows: final [0, final_len), of which [c0, final_len) are not
    // in its cache yet (the catch-up), and non-final [final_len, N - 1), from
    // the drafts. One call runs both when they fit in q_max rows (a row's
    // result does not depend on which rows share its call: batch invariance),
    // earlier catch-up chunks run first. Outputs land in final_out_[k] at
    // their row index; rows past final_len are scratch there, read by module
    // k + 1 below and overwritten once they become final.
    const int final_len = drafter::module_row_count(N, k);
    const int end = N - 1;
    auto h_prev = [&](int t) { return final_out_[k - 1].data() + size_t(t) * d_; };
    int c0 = runner_.kv(k).length(0);
    MTP_CHECK(c0 <= final_len && end - final_len <= q_max,
              "module {}: cache length {}, final rows {}, rows {}, q_max {}", k, c0, final_len,
              end, q_max);
    for (; end - c0 > q_max; c0 += q_max) {  // catch-up chunks that do not fit with the drafts
      drafter::gather_module_rows(0, k, c0, c0 + q_max, token_at, h_prev, d_, rows_, h_in_);
      run_module(k, h_in_.data(), final_out_[k].data() + size_t(c0) * d_, nullptr, nullptr);
    }
    drafter::gather_module_rows(0, k, c0, end, token_at, h_prev, d_, rows_, h_in_);
    mask_.assign(rows_.size(), 0);
    mask_.back() = 1;
    logits_.resize(rows_.size() * V);
    run_module(k, h_in_.data(), final_out_[k].data() + size_t(c0) * d_, logits_.data(),
               mask_.data());
    runner_.kv(k).truncate(0, final_len);  // non-final rows never stay in the cache
    const float* lg = logits_.data() + (rows_.size() - 1) * V;
    if (p_min_ > 0 && top_probability(lg, V) < p_min_) break;
    drafts_.push_back(choose(lg, N + k, tree, max_logit));
    tree.push(drafts_.back(), k - 1, {DraftSource::Kind::Mtp, k});
    history_.push_back({N, k, drafts_.back(), max_logit});
  }
}

}  // namespace mtp::speculative
