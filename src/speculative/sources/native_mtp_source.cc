#include "speculative/sources/native_mtp_source.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "core/error.h"
#include "speculative/sources/builtin_source.h"
#include "speculative/sources/mtp_chains.h"

namespace mtp::speculative {

namespace {
using sources_detail::Clock;
using sources_detail::since;

// Rows of one sequence per head call (a longer catch-up takes several).
constexpr int kQMax = 64;
}  // namespace

void register_native_mtp_source() {
  register_builtin_source(
      kNativeMtpSource,
      [](const SourceContext& c) -> std::unique_ptr<DraftSource> {
        return std::make_unique<NativeMtpSource>(*c.target, c.slots, c.ctx, c.draft_k);
      },
      "the target checkpoint's own multi-token-prediction head (Qwen3.5's mtp.* tensors)");
}

NativeMtpSource::NativeMtpSource(const model::Model& target, int slots, int ctx, int max_len)
    : head_(target, slots, ctx + kMaxLen, kQMax),
      max_len_(max_len > 0 ? max_len : kDefaultLen),
      d_(size_t(target.config().d_model)), V_(size_t(target.config().vocab)) {
  if (max_len_ > kMaxLen) {
    fail<InputError>("the native MTP head drafts at most {} tokens per step, asked for {}",
                     kMaxLen, max_len_);
  }
}

void NativeMtpSource::run(std::span<ProposeJob> jobs, int depth, bool logits, ThreadPool* pool) {
  h_out_.resize(rows_.size() * d_);
  if (logits) logits_.resize(rows_.size() * V_);
  const auto t0 = Clock::now();
  head_.forward(rows_, h_in_.data(), h_out_.data(), logits ? logits_.data() : nullptr,
                logits ? mask_.data() : nullptr, pool);
  const double s = since(t0);
  if (on_call) on_call(depth, int(rows_.size()), s);
  const double share = s / double(rows_.size());
  for (size_t r = 0; r < rows_.size(); ++r) {
    ProposeJob& j = jobs[job_of_[r]];
    j.seconds += share;
    if (j.depth_seconds && size_t(depth) < j.depth_seconds->size()) {
      (*j.depth_seconds)[size_t(depth)] += share;
    }
  }
}

void NativeMtpSource::catch_up(std::span<ProposeJob> jobs, bool logits) {
  last_logits_.resize(std::max(last_logits_.size(), jobs.size()));
  last_out_.resize(std::max(last_out_.size(), jobs.size()));
  std::vector<int> next(jobs.size()), end(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    const ProposeJob& j = jobs[i];
    MTP_CHECK(j.target, "native-mtp: job {} has no target", i);
    const int N = int(j.committed.size());
    MTP_CHECK(j.target->forwarded() >= N - 1, "native-mtp catch-up: the target has forwarded {} "
              "positions, need {}", j.target->forwarded(), N - 1);
    end[i] = std::max(0, N - 1);  // rows [next, end): final rows up to N-2
    // Row N-2 again when its logits are wanted (they are not kept across calls).
    const int keep = logits ? std::min(head_.kv().length(j.slot), end[i] - 1)
                            : std::min(head_.kv().length(j.slot), end[i]);
    next[i] = std::max(0, keep);
    head_.kv().truncate(j.slot, next[i]);
  }
  ThreadPool* pool = jobs.empty() || !jobs[0].target ? nullptr : jobs[0].target->pool();
  for (;;) {
    rows_.clear(), h_in_.clear(), mask_.clear(), job_of_.clear();
    for (size_t i = 0; i < jobs.size(); ++i) {
      const ProposeJob& j = jobs[i];
      const int b = std::min(end[i], next[i] + kQMax);
      for (int p = next[i]; p < b; ++p) {
        rows_.push_back({j.slot, p, j.committed[size_t(p) + 1]});
        h_in_.resize(rows_.size() * d_);
        j.target->post_norm_hidden(p, 1, h_in_.data() + (rows_.size() - 1) * d_);
        mask_.push_back(logits && p == end[i] - 1);
        job_of_.push_back(i);
      }
      next[i] = b;
    }
    if (rows_.empty()) return;
    run(jobs, 0, logits, pool);
    for (size_t r = 0; r < rows_.size(); ++r) {
      if (!mask_[r]) continue;
      const size_t i = job_of_[r];
      last_logits_[i].assign(logits_.begin() + long(r * V_), logits_.begin() + long((r + 1) * V_));
      last_out_[i].assign(h_out_.begin() + long(r * d_), h_out_.begin() + long((r + 1) * d_));
    }
  }
}

void NativeMtpSource::prefill(std::span<ProposeJob> jobs) { catch_up(jobs, false); }

void NativeMtpSource::propose(std::span<ProposeJob> jobs) {
  std::vector<size_t> live;
  for (size_t i = 0; i < jobs.size(); ++i) {
    ProposeJob& j = jobs[i];
    MTP_CHECK(j.out && j.sampler && j.target, "native-mtp: job {} lacks its tree, sampler or "
              "target", i);
    j.out->clear();
    if (j.scores) j.scores->clear();
  }
  catch_up(jobs, true);
  std::vector<std::vector<int32_t>> drafts(jobs.size());
  auto push = [&](size_t i, const float* lg, int k) {
    ProposeJob& j = jobs[i];
    if (j.p_min > 0 && top_probability(lg, V_) < j.p_min) return false;
    float max_logit = 0;
    const int64_t pos = int64_t(j.committed.size()) + k;  // draft k: the token at N + k
    const int32_t t = choose_draft(*j.sampler, j.mode, lg, V_, nullptr, pos, *j.out, max_logit);
    j.out->push(t, k - 1, {kNativeMtpSource, k});
    if (j.scores) j.scores->push_back(max_logit);
    drafts[i].push_back(t);
    return true;
  };
  for (size_t i = 0; i < jobs.size(); ++i) {
    const ProposeJob& j = jobs[i];
    if (j.committed.size() < 2 || j.max_len < 1) continue;
    if (push(i, last_logits_[i].data(), 0)) live.push_back(i);
  }
  ThreadPool* pool = jobs.empty() ? nullptr : jobs[0].target->pool();
  for (int k = 1; k < max_len_ && !live.empty(); ++k) {
    rows_.clear(), h_in_.clear(), mask_.clear(), job_of_.clear();
    std::vector<size_t> still;
    for (size_t i : live) {
      const ProposeJob& j = jobs[i];
      if (k >= j.max_len) continue;
      const int N = int(j.committed.size());
      rows_.push_back({j.slot, N - 2 + k, drafts[i].back()});
      h_in_.insert(h_in_.end(), last_out_[i].begin(), last_out_[i].end());
      mask_.push_back(1);
      job_of_.push_back(i);
      still.push_back(i);
    }
    if (rows_.empty()) break;
    run(jobs, k, true, pool);
    live.clear();
    for (size_t r = 0; r < rows_.size(); ++r) {
      const size_t i = job_of_[r];
      last_out_[i].assign(h_out_.begin() + long(r * d_), h_out_.begin() + long((r + 1) * d_));
      if (push(i, logits_.data() + r * V_, k)) live.push_back(i);
    }
  }
  // Draft rows never stay in the head's cache.
  for (const ProposeJob& j : jobs) {
    const int final_rows = std::max(0, int(j.committed.size()) - 1);
    if (head_.kv().length(j.slot) > final_rows) head_.kv().truncate(j.slot, final_rows);
  }
}

DraftSource::Cost NativeMtpSource::measure_cost(ThreadPool* pool) {
  // Calls of q head rows with one logits row, in a head of its own (the
  // slots' caches stay untouched).
  const model::Model& m = head_.target();
  return cost_from_calls([&](int q) {
    drafter::NativeHead head(m, 1, q + 1, std::max(q, 1));
    std::vector<float> h_in(size_t(q) * d_, 0.1f), h_out(size_t(q) * d_), logits(size_t(q) * V_);
    std::vector<uint8_t> mask(size_t(q), 0);
    mask.back() = 1;
    std::vector<model::Row> rows;
    for (int i = 0; i < q; ++i) rows.push_back({0, i, int32_t((3 + i) % m.config().vocab)});
    const auto t0 = Clock::now();
    head.forward(rows, h_in.data(), h_out.data(), logits.data(), mask.data(), pool);
    return since(t0);
  });
}

}  // namespace mtp::speculative
