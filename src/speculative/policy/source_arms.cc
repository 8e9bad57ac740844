#include "speculative/policy/source_arms.h"

#include <algorithm>

namespace mtp::speculative {

SourceArms::SourceArms(const std::vector<int>& classes, int max_k) : classes_(classes) {
  int n = 0;
  for (int c : classes_) {
    first_.push_back(n);
    n += std::max(1, c);
  }
  arms_.assign(size_t(n), AcceptCounters(max_k, /*decay_prior=*/true));
}

int SourceArms::arm(int source, int cls) const {
  return first_[size_t(source)] + std::clamp(cls, 0, std::max(1, classes_[size_t(source)]) - 1);
}

BudgetSeq SeqProposals::choose(SourceArms& arms, int limit) {
  BudgetSeq best;
  best_ = -1;
  if (limit < 1) return best;
  double best_e = 0;
  for (size_t i = 0; i < proposals_.size(); ++i) {
    Proposal& p = proposals_[i];
    if (int(p.tokens.size()) > limit) p.tokens.resize(size_t(limit));
    if (p.tokens.empty()) continue;
    std::vector<double> est =
        arms.at(arms.arm(p.source, p.cls)).estimate(int(p.tokens.size()), SourceArms::kPrior);
    double e = 0;
    for (double x : est) e += x;
    if (best_ < 0 || e > best_e) {
      best_e = e;
      best.p = std::move(est);
      best.first_s = 0;
      best.free = true;
      best_ = int(i);
    }
  }
  return best;
}

void SeqProposals::judge(SourceArms& arms, int chosen, int verified, int accepted,
                         std::span<const int32_t> committed, size_t n_before) {
  for (size_t i = 0; i < proposals_.size(); ++i) {
    const Proposal& p = proposals_[i];
    if (p.tokens.empty()) continue;
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
