// The union of draft sources: each cycle, ONE chain — the proposal of the
// source the gate (gate.h) values highest per second from live numbers, cut
// to the length it chose — or no draft at all (a plain decode step).
//
// Sources: chain sources (lookup.h: prompt lookup, history.h: the datastore),
// proposing for ~free every cycle, and optionally the MTP drafter, whose
// proposal costs module forwards and so is only computed when chosen. The
// MTP modules' final rows are caught up lazily: not after every cycle but
// right before the MTP source drafts again, in batched calls over all rows
// committed since (MtpProposer::commit → catch_up, from the target's capture
// rows and the committed tokens only), so live ≡ teacher-forced holds
// whatever was skipped. The gate prices the MTP source each cycle with what
// drafting would cost now — its module calls, backlog included
// (MtpProposer::draft_seconds) — and judges a probe on the cycle's measured
// seconds: after a pause the backlog is part of what choosing the drafter
// costs. With the MTP drafter as the only source the same gate skips a
// drafter below break-even, paying only its probes.
//
// Exactness: sources only propose; the verifier decides every token, so the
// output equals plain generation's whatever is chosen (greedy and coupled
// sampling; rejection sampling treats lookups as point masses).
// Evidence classes: the gate's "sources" are arms — one per (lookup, class)
// (ChainSource::classes(): the matched suffix length of a lookup), then the
// MTP drafter — so a lookup's long matches and short ones have their own live
// acceptance; probes, shadow judgements and costs are per arm (with one
// estimate per lookup the union verified history's 1-token matches as
// readily as its 4-token ones: PERFORMANCE.md "Session 16").
// Deep positions: a lookup's proposal is judged against the committed text
// to its end — the drafts past the ones verified too, as later cycles commit
// the text they guessed (lookup.h ProposalJudge). With only the verified
// drafts judged, a position the gate stopped verifying kept the estimate of
// its last bad patch for good: history alone on the widened demo target's
// `quote` prompts verified 3-draft chains in 96 % of one run's cycles (3.05
// tokens per cycle against 3.85 in other runs; PERFORMANCE.md, issue-17
// section "Session 32").
// Attribution: the verified chain has one source, so a token two sources
// proposed is credited to the one whose chain was verified (the tree union
// would credit the first source on that path: see gate.h).
// Stats: SpecStats::sources[name] gets proposed (tokens proposed, chosen or
// not), chosen, probes and time_s (drafting, lookups and catch-up included);
// SpecSequence adds drafted / accepted by position for the verified nodes.
#pragma once
#include <chrono>
#include <optional>
#include <span>
#include <vector>

#include "speculative/policy/gate.h"
#include "speculative/sources/lookup.h"
#include "speculative/sources/mtp_proposer.h"

namespace mtp::speculative {

class UnionProposer : public Proposer {
 public:
  // mtp may be null (lookups only); mtp_k = its draft length (modules in use).
  // Sources are indexed lookups first, then MTP. stats may be null.
  UnionProposer(std::vector<ChainSource*> lookups, MtpProposer* mtp, int mtp_k, int max_k,
                CostModel cost, GateOptions gate, SpecStats* stats);
  // The same with a gate kept by the caller (GateMemory: it outlives this
  // generation); its shape must be this union's (sources, max_k).
  UnionProposer(std::vector<ChainSource*> lookups, MtpProposer* mtp, int mtp_k, int max_k,
                SourceGate& gate, SpecStats* stats);

  // The gate's arms for these sources: Σ lookups' classes (+ 1 with MTP).
  static int gate_arms(std::span<ChainSource* const> lookups, bool mtp);

  UnionProposer(const UnionProposer&) = delete;  // gate_ may point into own_gate_
  UnionProposer& operator=(const UnionProposer&) = delete;

  void propose(std::span<const int32_t> committed, int max_k, DraftTree& tree) override;
  // Records what the last verify accepted (and judges the lookups not verified
  // against the emitted tokens: gate.h); the MTP catch-up waits (see above).
  void commit(std::span<const int32_t> committed) override;
  bool counts_sources() const override { return true; }

  const SourceGate& gate() const { return *gate_; }
  // The gate arm of lookup i's class c; the MTP arm is gate_arms - 1.
  int arm(size_t i, int c) const { return arm0_[i] + c; }
  // The sequence of choices (source index: lookups, then MTP; -1 plain), for tests.
  const std::vector<int>& choices() const { return choices_; }

 private:
  using Clock = std::chrono::steady_clock;
  DepthCounts* counts(DraftSource::Kind k);
  void init_arms();
  std::vector<ChainSource*> lookups_;
  MtpProposer* mtp_;
  int mtp_k_;
  std::optional<SourceGate> own_gate_;
  SourceGate* gate_;  // own_gate_ or the caller's
  SpecStats* stats_;
  std::vector<std::vector<int32_t>> proposals_;
  std::vector<int> arm0_;       // [lookup] its first arm
  std::vector<int> prop_arm_;   // [lookup] the arm of this cycle's proposal
  std::vector<int> arm_owner_;  // [arm] its lookup (lookups_.size(): MTP)
  int mtp_arm_ = -1;
  std::vector<int> available_, choices_;
  SourceGate::Choice last_;
  int last_n_ = 0, last_len_ = 0;
  bool pending_ = false;  // a proposal awaits its commit
  ProposalJudge judge_;  // the lookups' proposals, judged as the text grows
  std::vector<double> mtp_cost_;  // [len - 1] the MTP source's drafting seconds now
  double last_draft_s_ = 0;       // the MTP source's catch-up + drafting this cycle
  Clock::time_point proposed_at_;
};

}  // namespace mtp::speculative
