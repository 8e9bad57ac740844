// Printing bench's results (speculative/bench.h measures them): the terminal summary,
// the Markdown report and the SVG plot; and --cycle-cost's table.
#pragma once
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "measure/bench.h"
#include "measure/bench_sources.h"
#include "measure/bench_trees.h"

namespace mtp::app {

using speculative::BenchResult;
using speculative::CycleCostResult;

void print_bench(const BenchResult& r, std::FILE* out);
// held: the target's matrix types (held_types), printed beside the model.
void write_bench_report(const BenchResult& r, const std::string& path, const std::string& model,
                        const std::string& held, const std::string& drafter);
// Predicted speedup against (uniform) acceptance, the break-even line, and the
// measured point (mean live acceptance, measured speedup).
void write_bench_plot(const BenchResult& r, const std::string& path);

// A Markdown table and whether "other" stays under 5 % of a cycle at every K.
void print_cycle_cost(const CycleCostResult& r, std::FILE* out);

// bench --sources: per kind, a Markdown table of plain and each source
// (tokens per cycle, tok/s, speedup, outputs differing), then per source the
// times chosen / probes / acceptance by position.
void print_sources(const speculative::SourcesResult& r, std::FILE* out);
// bench --trees: one Markdown table row per shape.
void print_trees(const speculative::TreesResult& r, std::FILE* out);

}  // namespace mtp::app
