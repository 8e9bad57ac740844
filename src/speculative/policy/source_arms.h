// The free draft sources' live acceptance (sources/draft_source.h: sources
// that propose for every sequence every step without a forward — the
// lookups, a registered source), pooled over all sequences of the engine.
//
// Arm = (source, evidence class): a proposal's class is what its source knew
// about its quality when proposing (a lookup: the matched suffix length
// n − 1), so long matches and short ones have their own estimates. An arm
// learns from every proposal of every sequence, verified or not:
//   - verified: every node was reached, the accepted path's length accepted
//     (AcceptCounters::add(size, accepted));
//   - not verified: judged against the tokens the step committed, as far as
//     they go (reached = min(length, emitted), accepted = the common prefix)
//     — free evidence, so an arm the budget stopped verifying keeps being
//     measured and comes back when the text starts repeating;
//   - the rest of each proposal — the unverified drafts past a verified
//     chain all accepted, the part of another the step's tokens did not
//     reach — as later steps commit the text (lookup.h ProposalJudge), so
//     depths the budget stopped verifying are measured too.
// Every judgement first forgets (AcceptCounters::step, ×0.9), so an arm
// follows the text's recent behaviour.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "speculative/cycle/spec_loop.h"
#include "speculative/policy/draft_budget.h"
#include "speculative/sources/lookup.h"

namespace mtp::speculative {

class SourceArms {
 public:
  // An arm's per-depth prior before evidence (estimate_accept): below the
  // drafter's 0.6, so an arm earns its verifies from judgements.
  static constexpr double kPrior = 0.5;
  SourceArms() = default;
  // classes[s]: free source s's evidence classes; max_k: the longest draft.
  SourceArms(const std::vector<int>& classes, int max_k);
  int arm(int source, int cls) const;  // the arm's index
  AcceptCounters& at(int arm) { return arms_[size_t(arm)]; }

 private:
  std::vector<int> first_;  // [source] its first arm
  std::vector<int> classes_;
  std::vector<AcceptCounters> arms_;
};

// One sequence's free proposals, step by step.
class SeqProposals {
 public:
  struct Proposal {
    int source = 0;  // index among the engine's free sources
    int cls = 0;     // evidence class
    std::vector<int32_t> tokens;
  };
  // This step's proposals (the engine fills them: one per free source that
  // proposed something).
  std::vector<Proposal>& proposals() { return proposals_; }
  const std::vector<Proposal>& proposals() const { return proposals_; }
  // The budget entry of the proposal of most expected tokens (free drafts,
  // at most `limit` of them; empty p: none) — best() is its index (-1).
  BudgetSeq choose(SourceArms& arms, int limit);
  int best() const { return best_; }
  // After the step's verify: each proposal's arm learns (see above). chosen:
  // the proposal verified (-1: none), `verified` / `accepted` its nodes;
  // committed: the sequence's text, n_before tokens of it before this step.
  void judge(SourceArms& arms, int chosen, int verified, int accepted,
             std::span<const int32_t> committed, size_t n_before);

 private:
  std::vector<Proposal> proposals_;
  int best_ = -1;
  ProposalJudge judge_;  // proposals' drafts not judged yet
};

}  // namespace mtp::speculative
