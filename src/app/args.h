// Flag groups shared by the subcommands, each declared once with its help
// text and validated once (gemma.cpp's args structs, llama.cpp's common/arg):
// a flag that means the same in generate, bench and drift is added by the same
// add_*_flags call and checked by the same function, so its range and its
// error message cannot drift apart between commands.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "drafter/drafter.h"  // TargetMismatch
#include "measure/precompute.h"
#include "speculative/cycle/sampler.h"
#include "speculative/policy/tree_shape.h"

namespace CLI {
class App;
}

namespace mtp::app {

// --weights values: auto (model::Hold: as stored), then the
// kernels::weight_type_name spellings, in --help order.
inline const std::vector<std::string> kWeightTypeNames{"auto", "fp32", "bf16", "fp16", "q8_0", "q4_0",
                                                       "q4_1", "q5_0", "q5_1", "q4_k", "q5_k", "q6_k"};

// The target model: -m/--model, --tokenizer, --weights, --threads.

// --tied-head's default (every command that loads a target): model::TiedHead::Auto.
inline constexpr const char* kTiedHeadDefault = "auto";

struct ModelArgs {
  std::string model;      // -m
  std::string tokenizer;  // --tokenizer ("" = the one beside the model)
  std::string weights = "auto";
  std::string tied_head = kTiedHeadDefault;  // --tied-head (model::TiedHead)
  int threads = 0;        // 0 = physical cores
};

// Adds -m/--model (required), --tokenizer, --weights, --tied-head and --threads.
void add_model_flags(CLI::App* cmd, ModelArgs& a);
// --tied-head into `mode` (auto | packed | mapped | mapped-blocks: model::parse_tied_head).
void add_tied_head_flag(CLI::App* cmd, std::string& mode);

// What the target captures for training (precompute's shards, online
// training): --corpus or --prompts, --seq-len, --max-tokens, --heldout,
// --self-distill with --prompt-tokens, --prompt-tokens-min, --gen-tokens, --temp.
void add_capture_flags(CLI::App* cmd, speculative::PrecomputeOptions& o);

// Speculation: --drafter, --draft-k, --draft-p-min, --no-spec.
struct DrafterArgs {
  std::string drafter;       // --drafter ("" = drafter.safetensors beside the model, if any)
  int draft_k = 0;           // --draft-k, when draft_k_given
  bool draft_k_given = false;
  float p_min = 0.f;         // --draft-p-min
  bool no_spec = false;      // --no-spec
  // --drafter-target-mismatch refuse|warn: a drafter made for another target
  // fingerprint (e.g. the bf16 checkpoint of this GGUF) is refused, or run
  // with a warning. Taken wherever --drafter is.
  drafter::TargetMismatch target_mismatch = drafter::TargetMismatch::Refuse;
  std::string tree;     // --tree W1,W2,...|auto ("" = chains)
  int tree_budget = 0;  // --tree-budget N (0 = off)
};

// Which of DrafterArgs' flags a command takes.
enum DrafterFlag : unsigned {
  kFlagDrafter = 1u,
  kFlagDraftK = 2u,
  kFlagDraftPMin = 4u,
  kFlagNoSpec = 8u,
  kAllDrafterFlags = 15u,
  kFlagTree = 16u,  // --tree, --tree-budget (commands that run the engine: not bench's sweeps)
};

// Adds the flags in `which`. drafter_help / draft_k_help replace the default
// help texts where a command gives the flag a different default (drift's
// oracle, bench's --cycle-cost sweep); the rule checked stays the same.
void add_drafter_flags(CLI::App* cmd, DrafterArgs& a, unsigned which,
                       const std::string& drafter_help = "", const std::string& draft_k_help = "");

// THE check of --draft-k: given, it must lie in 1..k_max, where k_max is the
// proposer's largest draft length (a drafter's K; `k_max_what` names it, e.g.
// "the drafter's K"); InputError otherwise, the same message from every
// command. Returns --draft-k, or `k_default` when it was not given.
int resolve_draft_k(const DrafterArgs& a, int k_max, const std::string& k_max_what, int k_default);

// THE check of --tree / --tree-budget (exclusive): the tree shape for a
// drafter of `drafter_k` modules (a static tree deeper than it is refused);
// InputError naming the flag and value.
speculative::TreeOptions resolve_tree(const DrafterArgs& a, int drafter_k);

// Draft sources (speculative/sources/draft_source.h) and the budget:
// --draft-source, --lookup, --lookup-ngram-max, --lookup-max-draft,
// --lookup-corpus, --history-mb, --no-gate.
struct LookupArgs {
  std::vector<std::string> sources;  // --draft-source: registered names
  std::vector<std::string> lookup;   // subset of {prompt, history}
  int ngram_max = 4;
  int max_draft = 8;
  std::string corpus;      // --lookup-corpus (text or .jsonl): the history's datastore
  double history_mb = 64;  // --history-mb
  bool no_gate = false;    // --no-gate
  bool has(const std::string& s) const;
  // A flag that only matters when speculating was given (--lookup,
  // --lookup-corpus, --no-gate): refused beside --no-spec.
  bool any() const { return !lookup.empty() || !corpus.empty() || no_gate; }
};
void add_lookup_flags(CLI::App* cmd, LookupArgs& a);

// Sampling: --temp, --top-k, --top-p, --min-p, --seed, --spec-sampling.
struct SamplingArgs {
  float temp = 0.f;
  int top_k = 0;
  float top_p = 1.f;
  float min_p = 0.f;
  int64_t seed = 0;  // -1 = a random seed, printed (and in --json)
  std::string spec_sampling = "coupled";
};

// with_mode: also --spec-sampling (bench takes a list of modes instead).
void add_sampling_flags(CLI::App* cmd, SamplingArgs& a, bool with_mode = true);
// THE check of the sampling flags (speculative::SamplerOptions::validate: finite,
// temp >= 0, top-k >= 0, top-p in (0, 1], min-p in [0, 1); a seed >= 0 or -1);
// InputError naming the flag and value. Resolves --seed -1 to a random seed,
// stored back into a.seed and printed to stderr so the run can be repeated.
speculative::SamplerOptions sampler_options(SamplingArgs& a);
speculative::SpecSampling spec_sampling_mode(const SamplingArgs& a);
// The resolved sampling settings, for --json output.
nlohmann::json sampling_json(const SamplingArgs& a);

}  // namespace mtp::app
