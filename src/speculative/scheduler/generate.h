// Generation, plain or speculative, with docs/SEMANTICS.md's semantics (stop
// tokens, -n, stop strings, context; see token_sink.h) and timings:
// generation tok/s = (generated − 1) / (time from the first to the last
// generated token); prompt processing — the target's prefill and the
// drafter's pass over the prompt (MtpProposer::prefill) — is timed separately.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "drafter/drafter.h"
#include "tokenizer/tokenizer.h"
#include "model/forward.h"
#include "speculative/policy/gate.h"
#include "speculative/sources/history.h"
#include "speculative/sources/lookup.h"
#include "speculative/cycle/sampler.h"
#include "speculative/cycle/spec_loop.h"
#include "speculative/cycle/token_sink.h"
#include "speculative/policy/tree_shape.h"

namespace mtp::speculative {

struct GenerateOptions {
  int n_new = 128;
  SamplerOptions sampler;
  std::vector<std::string> stop;  // stop strings
  int ctx = 0;                    // 0 = the model's maximum (capped by memory)
  TokenCallback on_token;         // per-token events (token_sink.h); may cancel
};

struct SpecOptions {
  const drafter::Drafter* drafter = nullptr;  // null = plain generation
  int draft_k = 0;                            // 0 = the drafter's K
  float p_min = 0.f;                          // --draft-p-min
  // At temperature > 0: coupled (output == plain sampling's for the seed) or
  // rejection sampling (same distribution, another sample); see sampler.h.
  SpecSampling mode = SpecSampling::Coupled;
  bool record_trace = false;
  // The union (union_proposer.h): lookup sources beside or instead of the
  // drafter, one chain per cycle chosen by live gain per second. It runs when
  // a lookup source is on or `gate` is set (then also for the drafter alone:
  // a drafter below break-even costs only its probes).
  bool lookup_prompt = false;             // --lookup prompt
  const HistoryStore* history = nullptr;  // --lookup history (read only here)
  LookupOptions lookup;                   // --lookup-ngram-max, --lookup-max-draft
  bool gate = false;                      // skip sources below break-even (--no-gate: off)
  GateOptions gate_options;               // .enabled is set from `gate`
  // The union's gate shared across generations (gate.h GateMemory: it keeps
  // learning, so a source below break-even is explored once per process, not
  // once per generation), or null: each generation starts from the prior.
  GateMemory* gate_memory = nullptr;
  // Draft trees from the drafter (tree_shape.h; Chain = chains). A tree
  // replaces the union: no lookups, no gate (auto chooses its shape from the
  // measured m(q) curve and live acceptance instead).
  TreeOptions tree;
  // --tree auto's chooser: shared across generations (it keeps learning), or
  // null: generate makes one, timing the target's m(q) first (prompt time).
  TreeChooser* tree_chooser = nullptr;
  // Seconds of a q-row verify, q = 1..; absent: timed at the start on the
  // prompt's last rows (prefill_timed; dummy rows, ~3 decode steps, after a
  // prompt too short for that), counted as prompt processing.
  std::optional<CostModel> cost;
  bool uses_union() const { return lookup_prompt || history || gate; }
  bool speculates() const { return drafter || lookup_prompt || history; }
  // The longest chain a cycle may verify: the drafter's length and the lookups'.
  int max_draft() const;
};

struct Timings {
  int n_prompt = 0, n_gen = 0;
  double prompt_s = 0, gen_s = 0;
  double prompt_tok_s() const { return prompt_s > 0 ? n_prompt / prompt_s : 0; }
  double gen_tok_s() const { return n_gen > 1 && gen_s > 0 ? (n_gen - 1) / gen_s : 0; }
};

struct GenerateResult {
  std::vector<int32_t> prompt_ids, token_ids;
  std::string text;  // continuation only
  std::string finish_reason;
  Timings timings;
  std::optional<SpecStats> stats;  // set when speculation ran
  std::vector<CycleTrace> trace;   // when SpecOptions::record_trace
  std::string notice;              // e.g. why speculation was switched off
};

// Tokens that end generation for this model/tokenizer pair.
std::vector<int32_t> stop_token_ids(const model::ModelConfig& c, const io::Tokenizer* tok);

// Context length to use: requested (if > 0, at most the model's maximum and
// what memory holds), else `needed` (0: unknown) capped by the model's maximum
// and a memory budget. The KV cache is allocated for this many positions.
int resolve_ctx(const model::ModelConfig& c, int requested, int64_t needed = 0);

// --tree auto's chooser for a drafter of draft length draft_k: times the
// target's m(q) at q = 1..4 now and larger q (up to 1 + t.max_nodes) when
// a choice first needs them (TreeChooser's timer).
TreeChooser make_tree_chooser(const model::Model& m, const TreeOptions& t, int draft_k,
                              ThreadPool* pool);

// tok may be null only in tests (no text). With spec.drafter the speculative
// loop runs, at every temperature: greedy and coupled sampling give exactly
// the tokens plain generation gives (for the same seed); rejection sampling
// the same distribution.
GenerateResult generate(const model::Model& m, const io::Tokenizer* tok,
                        const std::vector<int32_t>& prompt_ids, const GenerateOptions& opt,
                        ThreadPool* pool, const TextCallback& on_text = nullptr,
                        const SpecOptions& spec = {});

}  // namespace mtp::speculative
