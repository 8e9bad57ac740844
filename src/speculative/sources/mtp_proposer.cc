#include "speculative/sources/mtp_proposer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>

#include "core/error.h"

namespace mtp::speculative {

MtpProposer::MtpProposer(const drafter::Drafter& d, TargetSession& target, float p_min, int modules,
                         const SamplerOptions& sampling, SpecSampling mode)
    : target_(target),
      chains_(target.model(), d, 1, target.ctx()),
      p_min_(p_min),
      modules_(modules > 0 ? std::min(modules, d.config().K) : d.config().K),
      d_(size_t(target.model().config().d_model)),
      sampler_(sampling),
      mode_(mode) {
  module_s_.assign(d.config().K, 0.0);
  chains_.on_call = [this](int, int rows, double s) {
    observe_call(rows, s);
    if (chooser_) chooser_->observe_module(rows, s);
  };
}

MtpChains::Job MtpProposer::job(std::span<const int32_t> committed, int max_k, DraftTree* tree) {
  MtpChains::Job j;
  j.slot = 0;
  j.committed = committed;
  j.target = &target_;
  j.pool = target_.pool();
  j.modules = modules_;
  j.max_k = max_k;
  j.p_min = p_min_;
  j.sampler = &sampler_;
  j.mode = mode_;
  j.tree = tree;
  j.history = &history_;
  j.module_seconds = &module_s_;
  return j;
}

void MtpProposer::run_module(int k, const float* h_in, float* h_out, float* logits,
                             const uint8_t* mask) {
  auto t0 = std::chrono::steady_clock::now();
  chains_.runner().forward(k, rows_, h_in, h_out, logits, mask, target_.pool());
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  module_s_[k] += s;
  observe_call(int(rows_.size()), s);
  if (chooser_) chooser_->observe_module(int(rows_.size()), s);
}

void MtpProposer::observe_call(int rows, double seconds) {
  if (timing_draft_) {
    draft_calls_.push_back({rows, seconds});
  } else {
    calls_->observe(rows, seconds);
  }
}

double MtpProposer::timed(const std::function<void()>& work) {
  const auto t0 = std::chrono::steady_clock::now();
  draft_calls_.clear();
  timing_draft_ = true;
  work();
  timing_draft_ = false;
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  double in_calls = 0;
  for (const auto& [rows, s] : draft_calls_) in_calls += s;
  const double scale = in_calls > 0 ? wall / in_calls : 1.0;
  for (const auto& [rows, s] : draft_calls_) calls_->observe(rows, s * scale);
  return wall;
}

void MtpProposer::prefill(std::span<const int32_t> prompt) {
  timed([&] { catch_up(prompt); });
  std::fill(module_s_.begin(), module_s_.end(), 0.0);
}

double MtpProposer::catch_up_and_propose(std::span<const int32_t> committed, int max_k,
                                         DraftTree& tree) {
  return timed([&] {
    commit(committed);
    propose(committed, max_k, tree);
  });
}

void MtpProposer::draft_seconds(std::span<const int32_t> committed, int max_len,
                                std::vector<double>& by_len) {
  by_len.assign(size_t(std::max(0, max_len)), 0.0);
  double s = 0;
  int len = 0;  // lengths 1..len priced: every call of their modules counted
  chains_.draft_calls(0, int(committed.size()), std::min(max_len, modules_), planned_);
  for (const auto& [k, rows] : planned_) {
    for (; len < k; ++len) by_len[size_t(len)] = s;
    s += calls_->seconds(rows);
  }
  for (; len < max_len; ++len) by_len[size_t(len)] = s;
}

void MtpProposer::catch_up(std::span<const int32_t> committed, int modules) {
  MtpChains::Job j = job(committed, 0, nullptr);
  chains_.catch_up({&j, 1}, modules);
}

void MtpProposer::propose(std::span<const int32_t> committed, int max_k, DraftTree& tree) {
  if (tree_opts_.is_tree()) return propose_tree(committed, max_k, tree);
  // Module 0 catches up here (its last final row yields d_0); modules k >= 1
  // catch up inside their drafting call — one weight read per module per
  // cycle instead of two — or, when they do not draft this cycle, at a later
  // propose (their cache length says where they are).
  MtpChains::Job j = job(committed, max_k, &tree);
  chains_.draft({&j, 1});
}

}  // namespace mtp::speculative
