// Generation, plain or speculative, of one prompt: the engine (scheduler.h)
// with one slot — not a second implementation. docs/SEMANTICS.md's semantics
// (stop tokens, -n, stop strings, context; token_sink.h) and timings
// (Timings: generation tok/s from the first to the last generated token;
// prompt processing — the target's prefill and the drafter's pass over the
// prompt — apart).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "drafter/drafter.h"
#include "model/forward.h"
#include "speculative/scheduler/params.h"
#include "speculative/scheduler/scheduler.h"
#include "tokenizer/tokenizer.h"

namespace mtp::speculative {

struct GenerateOptions {
  int n_new = 128;
  SamplerOptions sampler;
  std::vector<std::string> stop;  // stop strings
  int ctx = 0;                    // 0 = what the generation needs (capped by memory)
  TokenCallback on_token;         // per-token events (token_sink.h); may cancel
};

struct SpecOptions {
  const drafter::Drafter* drafter = nullptr;  // the MTP drafter (the source "mtp")
  int draft_k = 0;                            // its longest draft (0: its K)
  float p_min = 0.f;                          // a model source stops below this top probability
  // At temperature > 0: coupled (output == plain sampling's for the seed) or
  // rejection sampling (same distribution, another sample); see sampler.h.
  SpecSampling mode = SpecSampling::Coupled;
  bool record_trace = false;  // GenerateResult::trace
  // The draft sources by name (sources/draft_source.h); empty: "mtp" with a
  // drafter, "gemma4-assistant" with an assistant, none without (plain
  // generation).
  std::vector<std::string> sources;
  LookupOptions lookup;                   // the lookups' ngram_max and max_draft
  std::shared_ptr<HistoryStore> history;  // the "history" source's store (null: its own)
  // Gemma 4's assistant (the source "gemma4-assistant"; null: none).
  std::shared_ptr<const drafter::Gemma4Assistant> assistant;
  // The budget (the engine's `adaptive`): drafts sized by measured gain per
  // second, sources below break-even skipped and re-probed. false (the
  // library's default; the CLI turns it on unless --no-gate): every cycle
  // verifies the best option at full length.
  bool gate = false;
  TreeOptions tree;               // draft trees (Chain = chains)
  std::optional<CostCurve> cost;  // m(q) (absent: timed when the engine starts)
  TraceFn trace;                  // one record per cycle (scheduler.h)
  bool speculates() const { return drafter || assistant || !sources.empty(); }
};

struct GenerateResult {
  std::vector<int32_t> prompt_ids, token_ids;
  std::string text;  // continuation only
  std::string finish_reason;
  Timings timings;
  std::optional<SpecStats> stats;  // set when speculation ran
  std::vector<CycleTrace> trace;   // when SpecOptions::record_trace
};

// The one-slot engine's options for a generation of `needed` positions
// (prompt + new tokens + the longest draft; the context is resolved here).
SchedulerOptions engine_options(const model::ModelConfig& c, const GenerateOptions& opt,
                                const SpecOptions& spec, int64_t needed);

// tok may be null only in tests (no text). Makes a one-slot engine for this
// generation (timing m(q) and the drafter's cost first when it speculates)
// and runs the prompt through it: greedy and coupled sampling give exactly
// the tokens plain generation gives (for the same seed); rejection sampling
// the same distribution.
GenerateResult generate(const model::Model& m, const io::Tokenizer* tok,
                        const std::vector<int32_t>& prompt_ids, const GenerateOptions& opt,
                        ThreadPool* pool, const TextCallback& on_text = nullptr,
                        const SpecOptions& spec = {});

// The same on an engine the caller keeps (idle; what its policy learned —
// costs, acceptance — carries over from one generation to the next: bench,
// the tests of the policy). spec's per-request fields (draft_k, p_min, mode,
// record_trace) apply; the engine's sources are its own.
GenerateResult generate(Scheduler& engine, const std::vector<int32_t>& prompt_ids,
                        const GenerateOptions& opt, const TextCallback& on_text = nullptr,
                        const SpecOptions& spec = {});

}  // namespace mtp::speculative
