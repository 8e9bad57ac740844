// The scheduler's lookup sources (scheduler.h "Lookups"): a sequence's prompt
// lookup and the shared history store, with live acceptance pooled over all
// sequences per arm.
//
// Arm = (source, evidence class): the class is the matched suffix length
// n − 1 (ChainSource::last_class), so long matches and short ones have their
// own estimates (the union's evidence classes, union_proposer.h). An arm
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
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "speculative/policy/draft_budget.h"
#include "speculative/cycle/draft_tree.h"
#include "speculative/sources/history.h"
#include "speculative/sources/lookup.h"
#include "speculative/cycle/spec_loop.h"

namespace mtp::speculative {

// Pooled live acceptance of the lookup arms (one per source × class).
class LookupArms {
 public:
  // An arm's per-depth prior before evidence (estimate_accept): below the
  // drafter's 0.6, so an arm earns its verifies from judgements.
  static constexpr double kPrior = 0.5;
  static constexpr int kSources = 2;  // 0 prompt lookup, 1 history
  LookupArms() = default;
  LookupArms(int classes, int max_k);
  AcceptCounters& at(int source, int cls) { return at(arm(source, cls)); }
  int arm(int source, int cls) const;  // the arm's index
  AcceptCounters& at(int arm) { return arms_[size_t(arm)]; }

 private:
  int classes_ = 0;
  std::vector<AcceptCounters> arms_;  // [source × classes_ + class]
};

DraftSource::Kind lookup_source_kind(int source);  // 0 prompt, 1 history

// One sequence's lookup proposals, step by step.
class SeqLookups {
 public:
  struct Proposal {
    int source = 0;  // 0 prompt lookup, 1 history
    int cls = 0;     // evidence class
    std::vector<int32_t> tokens;
  };
  // prompt: run a prompt lookup of its own (o: its ngram_max, max_draft);
  // history: the shared store (may be null).
  SeqLookups(bool prompt, const LookupOptions& o, std::shared_ptr<const HistoryStore> history);

  // This step's proposals continuing `committed` (at most `limit` tokens
  // each); returns the budget entry of the one of most expected tokens (free
  // drafts; empty p: none). Counts proposed tokens and time in stats.sources.
  BudgetSeq propose(std::span<const int32_t> committed, int limit, LookupArms& arms,
                    SpecStats& stats);
  // After the step's verify: each proposal's arm learns (see above). chosen:
  // the proposal verified (-1: none), `verified` / `accepted` its nodes;
  // committed: the sequence's text, n_before tokens of it before this step.
  void judge(LookupArms& arms, int chosen, int verified, int accepted,
             std::span<const int32_t> committed, size_t n_before);

  const std::vector<Proposal>& proposals() const { return proposals_; }
  int best() const { return best_; }  // index of propose()'s pick (-1: none)

 private:
  std::optional<PromptLookup> prompt_;
  std::shared_ptr<const HistoryStore> history_;
  std::vector<Proposal> proposals_;
  int best_ = -1;
  ProposalJudge judge_;  // proposals' drafts not judged yet
};

}  // namespace mtp::speculative
