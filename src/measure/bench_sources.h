// `mtpspec bench --sources mtp,prompt,history,union`: each draft source alone
// and the union, against plain generation, per prompt kind (io/prompts.h
// "kind"), interleaved per prompt like run_interleaved (bench.h) so machine
// drift hits all alike.
//
// Configurations: every registered draft source alone by its name ("mtp":
// the drafter under the budget, "prompt", "history", a user's), "mtp-nogate"
// (the drafter at full length every cycle), "union" (every source available:
// drafter if any, prompt, history). The budget follows `gate` (--no-gate: off
// for all).
// History: the datastore of prompt p holds the corpus (if any) and the plain
// outputs (prompt + continuation, repeat 1's seed) of the OTHER prompts only,
// never p's own earlier runs or repeats (they would inflate acceptance); those
// outputs come from an untimed plain pass before the timed runs.
// The verify cost curve m(q) is timed once at the start (forward_times at the
// mean prompt length + n/2) and shared by every engine.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "measure/bench.h"
#include "speculative/sources/lookup.h"

namespace mtp::speculative {

struct SourceBenchOptions {
  std::vector<std::string> sources;       // in order of running
  std::vector<std::string> kinds;         // [prompt]: its kind ("" = "free")
  LookupOptions lookup;
  double history_mb = 64;
  std::vector<std::vector<int32_t>> corpus;  // --lookup-corpus documents, token ids
  bool gate = true;
  int draft_k = 0;  // the drafter's and the native head's draft length (0 = the drafter's K)
};

struct SourceRun {
  std::string source;
  SpecStats stats;
  double tokens = 0, seconds = 0;  // generation: (n_gen − 1) over gen_s
  long flips = 0;                  // outputs differing from plain (greedy/coupled: must be 0)
};

struct KindRuns {
  std::string kind;
  int prompts = 0;
  double plain_tokens = 0, plain_seconds = 0;
  std::vector<SourceRun> runs;  // [i] for SourceBenchOptions::sources[i]
  double plain_tok_s() const;
  double speedup(size_t i) const;  // runs[i] tok/s over plain tok/s
};

struct SourcesResult {
  std::vector<KindRuns> kinds;  // each kind in order of first appearance, then "all"
  std::vector<double> verify_s;  // the cost curve used: seconds of a q-row verify
  int threads = 1;
  // {"verify_s": [...], "threads", "kinds": {kind: {"prompts", "plain_tok_s",
  //  "sources": {name: {"tok_s", "speedup", "tokens_per_cycle", "flips", "stats"}}}}}
  nlohmann::json to_json() const;
};

// Every source name known to run_sources (InputError for another).
std::vector<std::string> bench_source_names();

SourcesResult run_sources(const BenchInputs& in, const SourceBenchOptions& o, int n, int repeat);

}  // namespace mtp::speculative
