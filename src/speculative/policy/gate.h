// The union's decision rule: which source's chain to verify this cycle, and
// how long, from LIVE numbers only (the earlier system's union trusted offline
// acceptance and ran 35–52 % slower than plain).
//
// Per source s and draft position j the gate keeps a rolling acceptance
// α_s[j] = P(draft j accepted | drafts 0..j-1 accepted): decayed counts
// (weight `decay` per observation of that position), starting from a prior of
// weight `prior_weight` that decays like an observation: `prior_accept` at
// position 0, the estimate of position j - 1 at position j.
// A chain of L drafts from s is then expected to yield
//     E_s(L) = 1 + Σ_{i<L} Π_{j≤i} α_s[j]  tokens (the +1: the target's own)
// for a cycle costing verify_s(L + 1) + draft_s(L) seconds, where verify_s(q)
// starts from the measured m(q) curve × one decode step (CostModel, e.g.
// forward_timing.h) and follows the live verify times of q-row cycles, and
// draft_s is the source's live drafting time (lookups ≈ 0) or what the caller
// predicts it costs now (set_draft_seconds: the MTP drafter, backlog included).
// Plain decoding is the option "no drafts": 1 token for verify_s(1).
// The choice maximises E / cost over sources and L. A source whose best is
// below plain (break-even) is skipped; every source not verified for its probe
// interval is verified once (a probe) with the chain length its own estimates
// rate best — not necessarily its full proposal: on a target whose verify rows
// are dear, the short probe is the cheap one (gate.cc) —, the interval
// doubling (up to probe_max) while probes do not pay and resetting when the
// source wins on merit — so a useless source costs only its probes. A probe
// that pays (its accepted tokens per second beat the value of the choice it
// displaced: plain decoding, or the source chosen on merit) is followed
// by another in the next cycle unless the source wins on merit by then: a
// drafter (no shadow judgements: it runs only when verified) right again
// after a hard patch would otherwise climb back one doubling interval per
// probe (16 + 32 + 64 + 128 cycles: most of a generation).
// Sources whose proposals cost nothing (lookups) are also judged every cycle
// against the tokens the target emitted (observe_shadow), so their estimates
// stay live while another source is verified — and past the drafts verified,
// as the committed text reaches them (UnionProposer), so a position the gate
// stopped verifying does not keep its last bad estimate for good.
//
// Extension point (trees): value() and expected_tokens() are per (source, L);
// a tree verifier would rank several sources' chains by value, merge them
// into one DraftTree (a trie; shared prefixes verified once, a token proposed
// by two sources attributed to the first that proposed that path) under a
// node budget priced by verify_s(nodes + 1), and observe() each source on the
// deepest node of its own chain that was accepted.
#pragma once
#include <optional>
#include <span>
#include <vector>

#include "speculative/policy/call_cost_fit.h"

namespace mtp::speculative {

// Seconds of a q-row verify forward for q = 1..m.size(): max(m[0..q-1])
// (monotone: more rows never cost less), extrapolated linearly beyond.
struct CostModel {
  std::vector<double> verify_s;
  double at(int q) const;
  // From forward_times() (seconds per q).
  static CostModel from_times(const std::vector<double>& seconds) { return {seconds}; }
};

struct GateOptions {
  bool enabled = true;        // false: never skip (always the best source with a proposal)
  double decay = 0.9;         // rolling weight per observation of a position (~10 cycles)
  double prior_accept = 0.5;  // α of position 0 never observed (deeper: the position above's α)
  double prior_weight = 1.0;
  int probe_every = 16;       // cycles without a verify before a probe
  int probe_max = 128;        // the interval's cap while probes keep losing
  // ... unless a losing probe lost more than probe_budget of the cycles up to
  // the next one would take at plain decoding's cost: then the interval
  // keeps doubling up to where it does not. A probe is dear where it carries
  // work that grows with the pause before it — the MTP modules' catch-up,
  // which on a compute-bound drafter costs a third of a decode step per
  // committed token (stories260K) — and a probe every 128 cycles then costs
  // as much as drafting every cycle.
  double probe_budget = 0.02;
  // A source is chosen on merit only when its value beats plain decoding by
  // this fraction: costs are timed on a noisy machine, and a tie is no gain
  // (a useless source whose extra row looks free would otherwise be verified
  // every cycle). Likewise the source chosen on merit last keeps being chosen
  // until another beats it by this fraction (rolling estimates of ~10
  // observations fluctuate; switching on every fluctuation verified weaker
  // lookups in place of the drafter). Probes are not affected.
  double min_gain = 0.03;
  bool learn_costs = true;    // follow live verify/draft times (tests: fixed costs)
  double cost_ema = 0.1;      // weight of a new timing
  // Verify costs are followed live only for the row counts verified, so a
  // point of the starting curve timed in a noisy moment (a 1.7x spike at
  // q = 4, say) would keep its length from ever being chosen. With
  // learn_costs, a chain length next to the one chosen on merit whose verify
  // cost was not timed live for this many cycles is verified once instead
  // (the neighbour of the best choice: nearly the same value), and the first
  // live timing of a row count replaces the starting curve's point when lower.
  int length_probe_every = 32;
  // Likewise a point not timed live for this many cycles is stale. The
  // host's speed moves every cost at once (a noisy neighbour), but only the
  // row counts verified are re-timed: after a slow patch the drafter's
  // verify points stayed inflated while plain decoding, chosen instead, was
  // re-timed at the fast speed — a drafter that beat plain at every speed
  // was locked out for 1700+ cycles (probes move an EMA 10 % at a time).
  // So a timing of a stale point moves it by stale_weight, not cost_ema —
  // up or down: replacing it only by a lower timing (as before) kept the
  // rarely verified row counts at the minimum of their timings while plain
  // decoding's was a mean — on a target where the drafter is near break-even
  // (stories260K: 1.84 tokens for a 2-row verify of ~1.5 decode steps plus
  // drafting) that bias alone made it win on merit now and then, each a loss.
  int cost_stale_after = 16;
  double stale_weight = 0.5;
};

class SourceGate {
 public:
  SourceGate(int n_sources, int max_k, CostModel cost, GateOptions o = {});

  struct Choice {
    int source = -1;  // -1: plain decode step
    int len = 0;
    bool probe = false;
    double value = 0;  // expected tokens per second
  };
  // available[s] = the longest chain source s can propose now (0 = none).
  Choice choose(std::span<const int> available);
  // The verify of `len` drafts of `source` accepted `accepted` of them;
  // cycle_s: what that cycle took, measured (drafting, any catch-up it
  // carried, verify) — whether a probe paid is judged on it; 0: on the model
  // (cycle_seconds).
  void observe(int source, int len, int accepted, double cycle_s = 0);
  // A proposal that was NOT verified, judged against what the target then
  // emitted: `known` tokens of truth (the accepted drafts + the target's own),
  // `matched` = the proposal's prefix equal to them. Positions < min(matched,
  // known) count as accepted; position `matched` as rejected when matched <
  // known and < len; deeper positions are unknown. Live evidence at no cost —
  // it also stands in for a probe (the source's idle clock restarts).
  // from > 0: only positions >= from are judged (those below were judged
  // already) — a proposal's tail judged later, once the committed text
  // reached it (UnionProposer: also the tail of the chain verified).
  void observe_shadow(int source, int len, int matched, int known, int from = 0);
  // Live timings: a verify of q rows; source s drafting a chain of len.
  void observe_verify(int q, double seconds);
  void observe_draft(int source, int len, double seconds);
  // The caller's prediction of what source s drafting a chain of L =
  // 1..by_len.size() costs NOW (by_len[L - 1], seconds), replacing its live
  // drafting times from then on. For a source whose cost depends on its
  // state: the MTP modules catch up, in the call that drafts, on every row
  // committed since they last ran — one cycle's rows while it is verified
  // every cycle, a backlog after a pause, dear where module rows are (a
  // compute-bound drafter: measured on stories260K, the union's MTP probes
  // after pauses cost it 7 % against the same union without them; charged an
  // amortised share, they looked cheap and kept being made).
  void set_draft_seconds(int source, std::span<const double> by_len);
  // A cycle passed (every cycle, after observe): the probe clocks.
  void tick(const Choice& c);

  double acceptance(int source, int pos) const;
  double expected_tokens(int source, int len) const;  // E_s(len)
  double cycle_seconds(int source, int len) const;    // verify + draft
  double value(int source, int len) const { return expected_tokens(source, len) / cycle_seconds(source, len); }
  double plain_value() const { return 1.0 / cost_.at(1); }
  const GateOptions& options() const { return o_; }
  int n_sources() const { return int(src_.size()); }
  const CostModel& cost() const { return cost_; }
  int max_k() const { return max_k_; }

 private:
  struct Source {
    std::vector<double> acc, seen;  // [pos] decayed accepted / observed
    std::vector<double> prior;      // [pos] the prior's weight, decayed like an observation
    std::vector<double> draft_s;    // [len] live drafting seconds (< 0: never seen)
    std::vector<double> predicted;  // [len - 1] set_draft_seconds (empty: draft_s)
    int idle = 0;                   // cycles since last verified
    int interval = 0;               // current probe interval
    bool paid = false;              // the last verify beat what it displaced (observe)
    double lost_s = 0;              // ... and the seconds it lost against it
  };
  double draft_seconds(const Source& s, int len) const;
  // α at position p from its decayed counts and the prior `prior` (gate.cc).
  double estimate(const Source& s, size_t p, double prior) const;
  int max_k_;
  CostModel cost_;
  GateOptions o_;
  std::vector<Source> src_;
  int last_merit_ = -1;  // the source last chosen on merit (-1: plain)
  double displaced_ = 0;  // the value of the merit choice the last probe displaced
  // [q - 1], q = 1..max_k + 1: cycles since a q-row verify was timed live
  // (or since the gate began), and whether it ever was (until then its cost
  // is the starting curve's point).
  std::vector<int> cost_age_;
  std::vector<bool> cost_live_;
};

// The gate kept across generations (SpecOptions::gate_memory): what one
// generation learned — live acceptance per source and position, live costs,
// the probe schedule — is where the next one starts, instead of the prior. A
// process that serves many generations with one source set (bench --sources,
// a server) then explores a source once, not once per generation: a drafter
// below break-even costs only its probes from the second generation on.
// Empty until the first generation; a generation with another source set or
// draft length starts it afresh (from that generation's cost curve).
struct GateMemory {
  std::optional<SourceGate> gate;
  // The MTP modules' call costs (MtpProposer::use_call_costs): what a draft
  // costs is priced from them before the first draft of a generation too.
  CallCostByRows module_calls;
  // The gate for n_sources sources and chains up to max_k, made from `cost`
  // and `o` when there is none of that shape yet.
  SourceGate& get(int n_sources, int max_k, const CostModel& cost, const GateOptions& o);
};

}  // namespace mtp::speculative
