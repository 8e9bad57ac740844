// `mtpspec bench --trees chain 3,2,1 budget=16 auto`: draft-tree shapes
// (tree_shape.h) against plain generation and against each other, at one
// draft length, interleaved per prompt like run_interleaved (bench.h): per
// repeat and prompt one plain run, then one run per shape, so machine drift
// hits all alike. "chain" is the drafter's chain of the same depth — the
// comparison the tree bar is about. Auto's chooser is made once (the
// target's m(q) timed before the runs) and keeps learning across prompts, as
// in a long-running process; the shapes it chose are reported.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "measure/bench.h"
#include "speculative/policy/tree_shape.h"

namespace mtp::speculative {

struct TreeRun {
  std::string shape;
  SpecStats stats;
  double tokens = 0, seconds = 0;  // generation: (n_gen − 1) over gen_s
  long flips = 0;                  // outputs differing from plain (greedy/coupled: must be 0)
};

struct TreesResult {
  int draft_k = 0, threads = 1;
  double plain_tokens = 0, plain_seconds = 0;
  std::vector<TreeRun> runs;  // one per shape, in the order asked
  std::vector<std::pair<int, double>> auto_curve;  // auto's timed m(q) points (q, seconds)
  // auto's m(q) as it priced verifies at the end, the cycles' own verify
  // times folded in (TreeChooser::observe_verify): at every timed or verified q.
  std::vector<std::pair<int, double>> auto_curve_live;
  double plain_tok_s() const;
  double tok_s(size_t i) const;
  double speedup(size_t i) const;  // runs[i] tok/s over plain tok/s
  // {"draft_k", "threads", "plain_tok_s", "auto_curve": [[q, s]...], "auto_curve_live": [[q, s]...],
  //  "shapes": {name: {"tok_s", "speedup", "tokens_per_cycle", "nodes_per_cycle",
  //  "flips", "stats"}}}
  nlohmann::json to_json() const;
};

TreesResult run_trees(const BenchInputs& in, const std::vector<std::string>& shapes, int draft_k,
                      int n, int repeat);

}  // namespace mtp::speculative
