// What `mtpspec bench` measures, and how: plain and speculative generation
// interleaved on the same prompts (run_interleaved), live acceptance beside
// teacher-forced accuracy, the verify multiplier, the drafter's cost and the
// arithmetic of bench_math.h (measure_bench), and the cost of one cycle for a
// range of draft lengths (measure_cycle_cost). The CLI (app/cmd_bench.cc)
// only opens the target, calls these and prints (app/bench_report.h).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/thread_pool.h"
#include "drafter/drafter.h"
#include "drafter/gemma4_assistant.h"
#include "tokenizer/tokenizer.h"
#include "model/forward.h"
#include "measure/bench_math.h"
#include "speculative/scheduler/generate.h"
#include "speculative/cycle/spec_loop.h"

namespace mtp::speculative {

// What a benchmark runs on: a target (tokenizer null for a random one), a
// drafter — the K-module one, or Gemma 4's assistant (the source
// "gemma4-assistant"; then drafter is null, and only run_interleaved and
// measure_cycle_cost run) — and the prompts as token ids.
struct BenchInputs {
  const model::Model* model = nullptr;
  const io::Tokenizer* tokenizer = nullptr;
  const drafter::Drafter* drafter = nullptr;
  std::shared_ptr<const drafter::Gemma4Assistant> assistant;
  std::vector<std::vector<int32_t>> prompts;
  ThreadPool* pool = nullptr;
  // Sampling of every run (plain and speculative alike) and how speculation
  // samples at temperature > 0.
  SamplerOptions sampling;
  SpecSampling mode = SpecSampling::Coupled;
  // [prompt]: how the progress lines name it (the prompts file's "id"); empty:
  // by its number.
  std::vector<std::string> labels;
};

// Speculative runs at one draft length, summed over repeats and prompts.
struct SpecRuns {
  int K = 0;
  SpecStats stats;                 // cycles, acceptance, time split, per-module time
  double tokens = 0, seconds = 0;  // generation: (n_gen − 1) tokens over gen_s
  double total_s = 0;              // prompt processing + generation (prompt_s + gen_s)
  std::vector<double> speedups;    // per repeat: its spec tok/s over its plain tok/s
};

struct InterleavedRuns {
  double plain_tokens = 0, plain_seconds = 0;  // as SpecRuns::tokens / seconds
  double plain_total_s = 0;                    // as SpecRuns::total_s
  std::vector<SpecRuns> spec;                  // [i] for Ks[i]
  long flips = 0;                              // speculative runs whose output differed
  std::vector<std::vector<int32_t>> own;       // prompt + plain continuation (repeat 1)
  std::vector<std::vector<int32_t>> plain_out; // plain continuations only (repeat 1)

  // Seconds of one plain decode step (generation time per token after the first).
  double decode_step_s() const { return plain_tokens > 0 ? plain_seconds / plain_tokens : 0; }
};

// Plain and speculative generation interleaved on the same prompts, so a drift
// in machine speed hits both alike: per repeat and prompt, one plain run, then
// one speculative run for each draft length in Ks (in order; each in 1..the
// drafter's K — any length >= 1 with the assistant —, else InputError), n new tokens each, all with in.sampling
// (repeat r adds r to its seed). Greedy and coupled sampling: every
// speculative output must equal the plain one token for token; a run where it
// does not counts as a flip (rejection sampling gives another sample, so its
// flips are expected). Progress: one stderr line per repeat and prompt.
InterleavedRuns run_interleaved(const BenchInputs& in, const std::vector<int>& Ks, int n,
                                int repeat);

// A one-slot engine for runs of n new tokens after any of in.prompts (its
// context fits the longest), speculating as `spec` says (no sources: plain).
// The benches keep one per configuration across prompts and repeats, as a
// process serving many requests keeps its engine.
std::unique_ptr<Scheduler> bench_engine(const BenchInputs& in, int n, const SpecOptions& spec);

// The tokens a generation's tok/s counts: generated − 1 (docs/SEMANTICS.md).
double generated_steps(const GenerateResult& r);
// tokens / seconds, 0 when no time passed.
inline double rate(double tokens, double seconds) { return seconds > 0 ? tokens / seconds : 0; }

// Mean teacher-forced accuracy per module over token sequences.
std::vector<double> tf_accuracy(const BenchInputs& in, const std::vector<std::vector<int32_t>>& seqs);

struct BenchResult {
  int K = 0;
  double baseline_tok_s = 0, spec_tok_s = 0, speedup = 0;  // generation only
  // Same outputs, wall time with prompt processing (the target's prefill, and
  // the drafter's modules over the prompt) included: plain / speculative.
  double end_to_end_speedup = 0;
  speculative::Spread spread;
  std::vector<double> acceptance_live, acceptance_tf_corpus, acceptance_tf_own;
  std::string acceptance_tf_corpus_note;  // why acceptance_tf_corpus is empty
  double tokens_per_cycle = 0;
  std::vector<double> verify_multiplier;  // [q - 1]
  std::vector<double> drafter_cost;       // [k], per cycle, relative to a decode
  double predicted_speedup = 0, cycle_cost = 0, other_fraction = 0;
  std::optional<double> break_even;
  long flips = 0;                         // runs whose speculative output differed
  double target_distinct_2 = 0;           // diversity of the target's own continuations
  // bench --temps: the same runs per temperature and speculative sampling mode.
  struct ByTemperature {
    double temperature = 0;
    std::string mode;  // "coupled" | "rejection" ("greedy" at 0)
    std::vector<double> acceptance;
    double tokens_per_cycle = 0, speedup = 0;
    long flips = 0;  // outputs differing from plain (coupled and greedy: must be 0)
  };
  std::vector<ByTemperature> by_temperature;

  // The --json schema (stable keys); from_json reads what to_json wrote
  // (FormatError naming the key otherwise) — the demo reads bench's output so.
  nlohmann::json to_json() const;
  static BenchResult from_json(const nlohmann::json& j);
};


// The whole default bench at draft length K: interleaved runs, teacher-forced
// accuracy on the target's own outputs and (when `corpus` is given) on those
// sequences, m(q) at a typical context, the drafter's cost, predicted speedup
// and break-even. corpus_note says why there is no corpus accuracy.
BenchResult measure_bench(const BenchInputs& in, int K, int n, int repeat,
                          const std::vector<std::vector<int32_t>>* corpus,
                          const std::string& corpus_note);

// `bench --cycle-cost`: one row per draft length K.
struct CycleCostRow {
  int k = 0;
  speculative::CycleCost cost;  // relative to one plain decode step
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

  // Keys: model, drafter, threads, decode_step_s, baseline_tok_s, flips,
  // cycle_cost: [{k, cycle_rel_decode, draft_rel, verify_rel, other_rel,
  // other_fraction, draft_forward_rel, tokens_per_cycle, acceptance_live,
  // cycles, spec_tok_s}].
  nlohmann::json to_json() const;
};

// --cycle-cost: cycles for K = 1..k_hi, split draft / verify / other,
// relative to one plain decode step measured interleaved.
CycleCostResult measure_cycle_cost(const BenchInputs& in, int k_hi, int n, int repeat);

// bench --temps: interleaved runs at draft length K for each temperature and
// mode (temperature 0 once, as "greedy"), the other sampling options from in.
std::vector<BenchResult::ByTemperature> measure_temperatures(
    const BenchInputs& in, int K, int n, int repeat, const std::vector<float>& temps,
    const std::vector<SpecSampling>& modes);

}  // namespace mtp::speculative
