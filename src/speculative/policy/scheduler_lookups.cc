#include "speculative/policy/scheduler_lookups.h"

#include <algorithm>
#include <chrono>

namespace mtp::speculative {

LookupArms::LookupArms(int classes, int max_k)
    : classes_(std::max(1, classes)),
      arms_(size_t(kSources * classes_), AcceptCounters(max_k)) {}

int LookupArms::arm(int source, int cls) const {
  return source * classes_ + std::clamp(cls, 0, classes_ - 1);
}

DraftSource::Kind lookup_source_kind(int source) {
  return source == 0 ? DraftSource::Kind::PromptLookup : DraftSource::Kind::History;
}

SeqLookups::SeqLookups(bool prompt, const LookupOptions& o,
                       std::shared_ptr<const HistoryStore> history)
    : history_(std::move(history)) {
  if (prompt) prompt_.emplace(o);
}

BudgetSeq SeqLookups::propose(std::span<const int32_t> committed, int limit, LookupArms& arms,
                              SpecStats& stats) {
  using Clock = std::chrono::steady_clock;
  BudgetSeq best;
  proposals_.clear();
  best_ = -1;
  if (limit < 1) return best;
  double best_e = 0;
  for (int src = 0; src < LookupArms::kSources; ++src) {
    const auto t0 = Clock::now();
    Proposal p;
    p.source = src;
    if (src == 0 && prompt_) {
      prompt_->propose(committed, limit, p.tokens);
      p.cls = prompt_->last_class();
    } else if (src == 1 && history_) {
      p.cls = std::max(0, history_->propose(committed, limit, p.tokens) - 1);
    }
    const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    stats.time_draft_s += dt;
    if (p.tokens.empty()) continue;
    DepthCounts& st = stats.sources[DraftSource::kind_name(lookup_source_kind(src))];
    st.proposed += long(p.tokens.size());
    st.time_s += dt;
    std::vector<double> est =
        arms.at(src, p.cls).estimate(int(p.tokens.size()), LookupArms::kPrior);
    double e = 0;
    for (double x : est) e += x;
    if (best_ < 0 || e > best_e) {
      best_e = e;
      best.p = std::move(est);
      best.first_s = 0;
      best.free = true;
      best_ = int(proposals_.size());
    }
    proposals_.push_back(std::move(p));
  }
  return best;
}

void SeqLookups::judge(LookupArms& arms, int chosen, int verified, int accepted,
                       std::span<const int32_t> committed, size_t n_before) {
  for (size_t i = 0; i < proposals_.size(); ++i) {
    const Proposal& p = proposals_[i];
    const int arm = arms.arm(p.source, p.cls);
    AcceptCounters& c = arms.at(arm);
    c.step();
    if (int(i) == chosen) {  // verified: every node reached, the accepted path
      c.add(verified, accepted);
      if (accepted == verified) judge_.add(arm, n_before, verified, p.tokens);  // the rest later
      continue;
    }
    judge_.add(arm, n_before, 0, p.tokens);
  }
  // Right as far as the committed text shows: every position it reaches
  // counts as reached (as in a verified chain), the common prefix accepted.
  judge_.judge(committed, [&](const ProposalJudge::Verdict& v) {
    arms.at(v.arm).add(std::min(v.known, v.len), v.matched, v.from);
  });
}

}  // namespace mtp::speculative
