// bench's results: the JSON schema (stable keys, see issue 5), the terminal
// summary, the Markdown report and the SVG plot.
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
  double baseline_tok_s = 0, spec_tok_s = 0, speedup = 0;
  spec::Spread spread;
  std::vector<double> acceptance_live, acceptance_tf_corpus, acceptance_tf_own;
  double tokens_per_cycle = 0;
  std::vector<double> verify_multiplier;  // [q - 1]
  std::vector<double> drafter_cost;       // [k], per cycle, relative to a decode
  double predicted_speedup = 0, cycle_cost = 0, other_fraction = 0;
  std::optional<double> break_even;
  long flips = 0;                         // runs whose speculative output differed
};

nlohmann::json bench_json(const BenchResult& r);
void print_bench(const BenchResult& r, std::FILE* out);
void write_bench_report(const BenchResult& r, const std::string& path, const std::string& model,
                        const std::string& drafter);
// Predicted speedup against (uniform) acceptance, the break-even line, and the
// measured point (mean live acceptance, measured speedup).
void write_bench_plot(const BenchResult& r, const std::string& path);

}  // namespace mtp::app
