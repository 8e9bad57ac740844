// bench's results: the JSON schema (stable keys, see issue 5), the terminal
// summary, the Markdown report and the SVG plot; and --cycle-cost's table.
#pragma once
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "spec/bench_math.h"

namespace mtp::app {

struct BenchResult {
  int K = 0;
  double baseline_tok_s = 0, spec_tok_s = 0, speedup = 0;  // generation only
  // Same outputs, wall time with prompt processing (the target's prefill, and
  // the drafter's modules over the prompt) included: plain / speculative.
  double end_to_end_speedup = 0;
  spec::Spread spread;
  std::vector<double> acceptance_live, acceptance_tf_corpus, acceptance_tf_own;
  std::string acceptance_tf_corpus_note;  // why acceptance_tf_corpus is empty
  double tokens_per_cycle = 0;
  std::vector<double> verify_multiplier;  // [q - 1]
  std::vector<double> drafter_cost;       // [k], per cycle, relative to a decode
  double predicted_speedup = 0, cycle_cost = 0, other_fraction = 0;
  std::optional<double> break_even;
  long flips = 0;                         // runs whose speculative output differed
  double target_distinct_2 = 0;           // diversity of the target's own continuations
};

nlohmann::json bench_json(const BenchResult& r);
void print_bench(const BenchResult& r, std::FILE* out);
void write_bench_report(const BenchResult& r, const std::string& path, const std::string& model,
                        const std::string& drafter);
// Predicted speedup against (uniform) acceptance, the break-even line, and the
// measured point (mean live acceptance, measured speedup).
void write_bench_plot(const BenchResult& r, const std::string& path);

// `bench --cycle-cost`: one row per draft length K.
struct CycleCostRow {
  int k = 0;
  spec::CycleCost cost;  // relative to one plain decode step
  double draft_forward_rel = 0;  // of cost.draft_rel: the drafter modules' forwards
  double tokens_per_cycle = 0;
  std::vector<double> acceptance_live;
  long cycles = 0;
  double spec_tok_s = 0;
};
struct CycleCostResult {
  std::string model, drafter;
  int threads = 0;
  double decode_step_s = 0;  // one plain decode step, measured interleaved
  long flips = 0;            // speculative runs whose output differed from plain
  std::vector<CycleCostRow> rows;
};
// Keys: model, drafter, threads, decode_step_s, baseline_tok_s, flips,
// cycle_cost: [{k, cycle_rel_decode, draft_rel, verify_rel, other_rel,
// other_fraction, draft_forward_rel, tokens_per_cycle, acceptance_live,
// cycles, spec_tok_s}].
nlohmann::json cycle_cost_json(const CycleCostResult& r);
// A Markdown table and whether "other" stays under 5 % of a cycle at every K.
void print_cycle_cost(const CycleCostResult& r, std::FILE* out);

}  // namespace mtp::app
