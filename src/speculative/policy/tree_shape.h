// The shape of the draft tree an MTP drafter proposes each cycle
// (`--tree W1,W2,...`, `--tree-budget N`, `--tree auto`), and the chooser
// that picks a static shape from measurement for `--tree auto`.
//
// Static widths W: every node at depth d (the root = depth 0) gets the
// W[d] best children by its module's scores (draft_tree.h), so the tree has
// Σ_d Π_{j<=d} W[j] nodes and depth W.size(). Budget N: EAGLE-2 style — at
// each depth the `beam` nodes of highest cumulative draft probability
// (the product of the module probabilities along the path) are expanded with
// their `beam` best children, up to the draft length; then the N nodes of
// highest cumulative probability are kept (a node's is never above its
// parent's, so they form a tree). Auto: the static shape TreeChooser picks.
//
// TreeChooser (auto): expected tokens per second of a static shape W from
//   - â(d, r): the rolling live probability that the child of rank r (0 =
//     best score) of the accepted node at depth d-1 is accepted — decayed
//     counts over the cycles that reached depth d-1 with that child present,
//     smoothed toward a prior (rank 0 at depth 1: 0.6; rank 0 deeper: â at
//     the depth above; rank r > 0: half of rank r-1) with weight 2, so ranks
//     never tried still get an estimate that invites trying them;
//   - E(W) = 1 + Σ_{d=1..D} Π_{j<=d} Σ_{r<W[j-1]} â(j, r) tokens per cycle;
//   - cost(W) = m(1 + nodes(W)) (the target's measured curve, draft_budget.h;
//     with a timer, points are timed when a choice first needs them)
//     + the drafter's module calls: module 0's catch-up, and one call per
//     depth >= 1 whose rows are that module's catch-up and the nodes above
//     it (mtp_tree.cc), priced by a rolling linear fit seconds = a + b · rows
//     of live module calls;
//     The verify of q rows is priced as it runs inside a cycle once cycles
//     have verified q rows (propose to commit: the forward and the accept; a
//     decayed mean, weighed against the timed price as one more cycle), and
//     from the timing until then — lowered, never raised, by the ratio of
//     cycles to timing at the nearest verified q, and never below a
//     verified price of fewer rows. Not CostCurve::observe's ratio, which
//     one verified q extends to every q: the chooser would scale all shapes
//     by the one it runs and never learn that another costs less. The
//     isolated timings read low on a cache-resident target: on the demo
//     target (37.7 MB) they were flat to 7 rows (1 thread) and 15 rows
//     (2 threads), 5 rows cost 1.12x the timing inside a cycle, and auto
//     verified 2,1,1 and 2,2 trees that gained no token over the chain
//     1,1,1, at 0.84x its speed;
//     + a per-cycle overhead: the rolling mean of (a live cycle's seconds,
//     propose to propose) − (this model's seconds for its shape) — what the
//     isolated costs miss (bookkeeping, sampling, verify inside a cycle
//     costing more than the isolated m(q));
// and picks the W (non-increasing widths, depth <= the draft length, nodes
// <= max_nodes) maximising E / cost, re-chosen every `every` cycles.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "speculative/policy/call_cost_fit.h"
#include "speculative/policy/draft_budget.h"

namespace mtp::speculative {

struct TreeOptions {
  enum class Kind { Chain, Static, Budget, Auto };
  Kind kind = Kind::Chain;
  std::vector<int> widths;  // Static
  int budget = 0;           // Budget: nodes at most
  int max_nodes = 32;       // Budget and Auto: nodes at most (verify rows - 1)

  bool is_tree() const { return kind != Kind::Chain; }
  // A tree shape: "auto" or "W1,W2,..." (each >= 1); otherwise an
  // InputError about the setting "tree" naming the value (core/setting.h).
  static TreeOptions parse(const std::string& value);
  static TreeOptions with_budget(int nodes);  // InputError about "tree_budget" unless 1..63
  // A shape in a list of shapes to compare (bench): "chain", "budget=N", or
  // a shape parse() takes; its errors are about "tree_shapes".
  static TreeOptions from_name(const std::string& name);
  // The deepest tree this shape asks for (0 = as deep as the draft length).
  int depth() const { return kind == Kind::Static ? int(widths.size()) : 0; }
  // "chain", "2,2,1", "budget 16", "auto".
  std::string describe() const;
  // Nodes of a static shape: Σ_d Π_{j<=d} W[j].
  static int nodes(const std::vector<int>& widths);
};

// Widths as text, "2,2,1".
std::string widths_text(const std::vector<int>& widths);

class TreeChooser {
 public:
  // Seconds of an isolated forward of q rows (ForwardTimer::seconds).
  using Timer = std::function<double(int q)>;
  // curve: the target's m(q); decode_s: one decode step's seconds (prices
  // module calls before any is observed); max_depth: the draft length.
  // timer (optional): the curve is completed lazily — when a choice falls on
  // a shape whose 1 + nodes rows the curve has no point for, that forward (or,
  // far past the timed points, one of twice the largest timed q below it) is
  // timed, added, and the choice made again (each q at most once). Between
  // points the curve is linear and beyond the last it extends the last slope,
  // which on a curve that steepens with q (memory-bound, then compute-bound)
  // prices an untimed large tree at most at its cost: the chooser times it
  // rather than ruling it out unseen. The other way round, a steep last
  // segment (a noisy point, or a tile boundary) would price every larger shape
  // out unseen for good: so once the winner's q is timed, the choice is made
  // again with the curve flat beyond its last point (optimistic), and a winner
  // there past the last point is timed too (with the same doubling cap). The
  // timing is left out of the cycle's seconds (observe_cycle).
  // A point timed in a noisy moment would otherwise decide for good: m(3)
  // timed at 1.58 decodes instead of ~1.2 (and m(4) raised to it) kept a
  // 2-deep chain from ever being chosen on a memory-bound target — auto ran
  // at 1.54x plain against the chain's 1.96x (docs/lab/performance-history.md
  // "the demo target widened to d 1280"). So when the best shape verifying another row count than
  // the winner comes within kRetimeMargin of it, the timed point that prices
  // it — the one whose own timing sets that price, q = 1 included: a slow
  // m(1) flattens every point up to the next larger timing — is timed again
  // (at most kMaxTimings timings per point, kRetimeAfter choices apart) and
  // keeps the lower timing (CostCurve::lower_point).
  TreeChooser(CostCurve curve, double decode_s, int max_depth, int max_nodes, Timer timer = {});

  // The shape for the next cycle.
  const std::vector<int>& widths();
  // A cycle's outcome: the widths used and the rank of the accepted child at
  // each depth along the accepted path (ranks.size() = accepted nodes); the
  // path ended at depth ranks.size() (no child matched, or a leaf).
  void observe(const std::vector<int>& used, const std::vector<int>& ranks);
  // A module call of `rows` rows took `seconds`.
  void observe_module(int rows, double seconds);
  // A whole cycle with shape `used` took `seconds` (propose to propose).
  void observe_cycle(const std::vector<int>& used, double seconds);
  // A cycle's verify of q rows (1 + its tree's nodes) took `seconds`
  // (propose to commit).
  void observe_verify(int q, double seconds);

  // fn(w) for every shape it chooses from: non-increasing widths, depth <=
  // max_depth, nodes <= max_nodes.
  void each_shape(const std::function<void(const std::vector<int>&)>& fn) const;
  double acceptance(int depth, int rank) const;  // â(depth, rank), depth >= 1
  double expected_tokens(const std::vector<int>& w) const;
  double cycle_seconds(const std::vector<int>& w) const;  // model + overhead
  double overhead_seconds() const { return overhead_; }
  // A verify of q rows as priced now (timed, or as cycles verified it).
  double verify_seconds(int q) const;
  std::vector<int> verified_rows() const;  // the q cycles have verified (recently), ascending
  int choices_made() const { return choices_; }
  int points_retimed() const { return retimed_; }
  const CostCurve& curve() const { return curve_; }

 private:
  void choose();
  void pick();               // widths_ = the best shape (timing points it needs)
  bool retime_contender();   // true: a point was timed again (see the constructor)
  void note_timed(int q);
  bool verified(int q) const;  // cycles have verified q rows (recently)
  double model_seconds(const std::vector<int>& w) const;
  CostCurve curve_;
  bool optimistic_ = false;
  int max_depth_, max_nodes_;
  static constexpr int kMaxWidth = 8, kEvery = 8;
  static constexpr double kDecay = 0.98, kPriorWeight = 2.0;
  static constexpr double kRetimeMargin = 0.25;
  static constexpr int kMaxTimings = 2, kRetimeAfter = 4;
  std::vector<int> timings_, timed_at_;  // [q]: timings of the point, choice of the last
  // [q]: the cycles' verify seconds and their weight, both decayed by kDecay
  // per verify observed (any q), so a price not seen for long returns toward
  // the timed one and its shape is tried again.
  std::vector<double> live_s_, live_w_;
  static constexpr double kVerifyPrior = 1.0;     // the timed price's weight in a verified one
  static constexpr double kVerifiedWeight = 0.05;  // below: as if never verified
  int retimed_ = 0;
  std::vector<std::vector<double>> acc_, seen_;  // [depth-1][rank]
  CallCostFit modules_{kDecay};  // module call seconds by rows
  double default_call_s_;
  double overhead_ = 0, overhead_n_ = 0;  // decayed mean of the cycles' excess
  Timer timer_;
  double timing_s_ = 0;  // spent timing points since the last observe_cycle
  std::vector<int> widths_;
  int since_ = 0, choices_ = 0;
};

// --tree auto's chooser for a drafter of draft length draft_k: times the
// target's m(q) at q = 1..4 now and larger q (up to 1 + t.max_nodes) when a
// choice first needs them (TreeChooser's timer).
TreeChooser make_tree_chooser(const model::Model& m, const TreeOptions& t, int draft_k,
                              ThreadPool* pool);

}  // namespace mtp::speculative
