// How many tokens each speculating sequence drafts this step, from the
// measured cost of a forward of q rows, m(q) (the scheduler times a few q at
// start, forward_cost_curve) — so speculation shrinks when the batch is full.
//
// A step's decode rows cost m(R) and emit T tokens (one per decoding
// sequence, plus the accepted drafts). Adding draft j (0-based depth) to a
// sequence adds one row (m(R + 1) − m(R)) and drafter time: module j's call,
// whose weights are read once for every sequence drafting at depth j (the
// scheduler batches them, mtp_chains.h: ModuleCost::call_s, paid once per
// depth in use), the sequence's rows in it (row_s each: j non-final rows,
// plus for j = 0 its catch-up, first_s); it is expected to add P_j tokens,
// the probability that drafts 0..j are all accepted (estimated per sequence,
// estimate_accept). For every depth cap c = 0..K the drafts are added
// greedily, the most likely first, while they raise the step's expected
// tokens per second (P_j / Δcost > T / cost, with the calls of depths < c
// counted up front), and the cap with the best tokens per second wins — so a
// call that no single sequence would pay for alone is made when enough
// sequences share it. Deeper drafts of a sequence come only after its
// shallower ones.
#pragma once
#include <algorithm>
#include <random>
#include <span>
#include <vector>

#include "core/thread_pool.h"
#include "model/forward.h"

namespace mtp::speculative {

// m(q): seconds of one forward of q rows, linear between measured points —
// followed live where observe() is fed: the value at q is the timed curve
// times the ratio of measured to timed seconds (an average over the
// forwards of q rows seen, weight kLive for a new one), linear in q between
// the q observed and constant beyond them, never decreasing in q. The
// machine's speed moves (this project's 2-core VM: DRAM bandwidth by up to
// 2x within an hour), and with it the shape: verify rows cost relatively more
// when the weights stream faster, which a curve timed once at start misses.
class CostCurve {
 public:
  static constexpr double kLive = 0.1;
  CostCurve() = default;
  // points: (q, seconds), q ascending, at least one.
  explicit CostCurve(std::vector<std::pair<int, double>> points);
  double operator()(int q) const;
  // The timed curve alone (no live ratio).
  double timed(int q) const;
  // A forward of q rows took `seconds`.
  void observe(int q, double seconds);
  // A timed point at q (a forward of q rows timed in isolation, as
  // forward_cost_curve does): inserted, or the existing one replaced; the
  // points stay non-decreasing (each at least the timings below it).
  void add_point(int q, double seconds);
  // Another timing of the point at q (which must exist): the point keeps the
  // lower of its timings — a forward's time on a noisy host only ever gains —
  // and points above it that it had raised come down with it.
  void lower_point(int q, double seconds);
  bool has_point(int q) const;
  const std::vector<std::pair<int, double>>& points() const { return pts_; }

 private:
  double ratio(int q) const;
  void rebuild();  // pts_ = raw_ made non-decreasing
  std::vector<std::pair<int, double>> pts_;
  std::vector<std::pair<int, double>> raw_;  // the timings as given (constructor, add_point, lower_point)
  std::vector<std::pair<int, double>> live_;  // (q, measured / timed), q ascending
};

// Times forwards of q rows of random tokens at positions 16 .. 16 + q - 1 in a
// KV cache of its own, after a 16-row prefill (which also pages the weights
// in); the cache is rolled back after each call. The model and pool must
// outlive it.
class ForwardTimer {
 public:
  ForwardTimer(const model::Model& m, int q_max, ThreadPool* pool);
  int q_max() const { return q_max_; }
  double seconds(int q);  // one forward of q rows, 1 <= q <= q_max()

 private:
  static constexpr int kPos = 16;
  const model::Model& m_;
  ThreadPool* pool_;
  int q_max_;
  model::KVCache kv_;
  std::mt19937 rng_{1};
  std::vector<float> logits_;
};

// Measures m(q) at q = 1, 2, 3, 4, 6, 8, 12, ... up to q_max (the fastest
// of 1 + reps interleaved rounds after a 16-row prefill that pages the
// weights in; q = 1 twice in the first round) at a short context; between
// points the curve is linear, beyond the last point it extends its last slope.
// stop_m > 0: the first round stops at the first q whose forward costs at
// least stop_m decodes, and only q up to it are timed — a caller whose cycle
// can return at most stop_m tokens gains nothing from a verify that costs
// more (the tree chooser: 1 + draft length), and on a memory-bound target the
// forwards of 24..64 rows would cost ~20 decodes of start-up per round.
CostCurve forward_cost_curve(const model::Model& m, int q_max, int reps, ThreadPool* pool,
                             double stop_m = 0);
// The same with a timer the caller keeps (q_max <= timer.q_max()), which can
// time more points later (TreeChooser's lazy points).
CostCurve forward_cost_curve(ForwardTimer& timer, int q_max, int reps, double stop_m = 0);

// P_j for j = 0 .. k_max-1 from a sequence's counters (SpecStats::drafted /
// accepted: cycles whose tree / accepted path reached depth j + 1), smoothed
// toward prior^(j+1) with weight `weight`, non-increasing in j.
std::vector<double> estimate_accept(std::span<const double> drafted,
                                    std::span<const double> accepted, int k_max,
                                    double prior = 0.6, double weight = 2.0);

// A sequence's depth counters for the budget, forgetting: every step of the
// sequence (drafting or not) multiplies the counts by kForget. Acceptance
// moves with the text, and a sequence whose first drafts failed must not be
// priced out for good — its estimate, no longer fed, returns toward the prior
// (after 10 steps the old counts weigh 0.35), it drafts again and measures
// anew. (SpecStats keeps the plain totals for reporting.)
//
// decay_prior: the prior's weight (2) forgets like the counts — for an
// estimate fed every step (a free source's arm, judged whether verified or
// not: policy/source_arms.h), whose counts saturate at ~1 / (1 − kForget)
// observations: with a fixed prior weight a source never right kept an
// estimate of prior / 6 (0.08) for good, and where a verify row costs less
// than that (5 % of a decode, say) it was verified every step. A priced
// source's counters keep the fixed weight: fed only when it drafts, they must
// return toward the prior while it does not.
class AcceptCounters {
 public:
  static constexpr double kForget = 0.9;
  explicit AcceptCounters(int k_max = 0, bool decay_prior = false)
      : drafted_(size_t(std::max(0, k_max)), 0.0), accepted_(drafted_), decay_prior_(decay_prior) {}
  void step();
  // One verified cycle: its tree reached depth `reached`, its accepted path
  // `accepted` drafts. from > 0: only depths from + 1 on (the rest of a
  // judgement whose shallower depths were counted already).
  void add(int reached, int accepted, int from = 0);
  std::vector<double> estimate(int k_max, double prior) const {
    return estimate_accept(drafted_, accepted_, k_max, prior, prior_weight_);
  }

 private:
  std::vector<double> drafted_, accepted_;
  bool decay_prior_ = false;
  double prior_weight_ = 2.0;
};

// Drafter seconds charged to a sequence's first draft of a step beyond the
// module calls: the modules' catch-up on the tokens committed since its last
// draft (modules × module_row_s per token). The catch-up is charged for at
// most `tokens_per_cycle` tokens — what one drafting cycle commits, i.e. its
// amortised share: a catch-up debt grows by a token every step a sequence
// does not draft (and starts at the whole prompt), so charging all of it
// would price a sequence out for good once it paused (measured on the 1 B
// widened target: 1.013 rows per forward with a drafter worth 1.14x alone).
// The real catch-up then runs, batched, in the next drafting cycle; what it
// costs beyond this share the scheduler's live ratio of measured to modelled
// drafter time accounts for (scheduler.h).
double first_draft_seconds(double module_row_s, int modules, int gap, double tokens_per_cycle);

// A drafter module call: call_s for a call of a few rows (its weights read
// once, shared by every sequence in the call), row_s for each further row.
struct ModuleCost {
  double call_s = 0;
  double row_s = 0;
};

struct BudgetSeq {
  std::vector<double> p;  // P_j, j < its draft limit (empty: does not speculate)
  double first_s = 0;     // drafter seconds of a cycle's first draft beyond its
                          // module calls (first_draft_seconds)
  // Drafts that cost no drafter time (a lookup's proposal, already made): each
  // costs its row only, makes no module call and is not held to the depth cap
  // (the cap prices the module calls of depths in use).
  bool free = false;
};

// What one sequence's chain option adds to a step, alone: the best over its
// lengths k = 1..p.size() of Σ_{j<k} P_j − rate · (m(rows + k) − m(rows) +
// first_s + k · per_draft_s), rate = the step's tokens per second without it
// (decode rows / m(decode rows)); 0 when no length pays. The scheduler
// compares a sequence's options with it (the drafter's chain against a
// lookup's proposal, whose drafting costs nothing) before the budget sizes the
// chosen one among all sequences.
double chain_net_value(const CostCurve& m, int rows, double rate, std::span<const double> p,
                       double first_s, double per_draft_s);

// Draft lengths for one step. base_rows: the rows every sequence forwards
// anyway (decode/verify roots, prefill chunks): a draft's row costs
// m(base_rows + n + 1) − m(base_rows + n); decode_rows: the decode roots
// among them, one token each — the rate to beat is theirs, m(decode_rows)
// for decode_rows tokens (prefill rows are work that is done anyway: counting
// them in the rate would make any draft look cheap beside a prompt chunk);
// max_rows: the step's row budget (>= base_rows).
std::vector<int> allocate_drafts(const CostCurve& m, const ModuleCost& module, int base_rows,
                                 int decode_rows, int max_rows,
                                 std::span<const BudgetSeq> seqs);

}  // namespace mtp::speculative
