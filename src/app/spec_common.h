// Drafter discovery and loading, and speculative stats printing, shared by the
// subcommands that speculate (generate, bench, drift).
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "app/common.h"
#include "drafter/drafter.h"
#include "drafter/gemma4_assistant.h"
#include <nlohmann/json.hpp>
#include "speculative/scheduler/generate.h"
#include "speculative/sources/history.h"
#include "speculative/scheduler/scheduler.h"
#include "speculative/cycle/spec_loop.h"

namespace mtp::app {

// d.drafter if given, else drafter.safetensors beside the model if it exists,
// else null. A drafter made for another target is refused (ConfigError) or,
// with d.target_mismatch == Warn, loaded with a warning. Null too when
// d.drafter is Gemma 4's assistant (open_assistant loads that).
std::unique_ptr<drafter::Drafter> open_drafter(const ModelArgs& a, const DrafterArgs& d,
                                               const model::Model& m);
// d.drafter when it is a gemma4_assistant directory or llama.cpp's
// gemma4-assistant GGUF (drafter::is_assistant): Gemma 4's assistant
// for target m (refused, ConfigError naming the field and values, when it
// does not fit), its matrices held as --weights (as stored by default);
// null otherwise. One trained for another target is refused or warned about
// as a K-module drafter is (drafter/target_record.h); one with no record
// (Google's) is accepted with a note on stderr.
std::shared_ptr<const drafter::Gemma4Assistant> open_assistant(const ModelArgs& a,
                                                               const DrafterArgs& d,
                                                               const model::Model& m);
// The assistant's longest draft (--draft-k's range with an assistant).
inline constexpr int kAssistantMaxSteps = 16;

// A random drafter with K modules (drafter::random_drafter_tensors, the
// init-drafter weights) for target `m`, stored as bf16 (as init-drafter
// writes them) and held as `hold`; built in memory.
std::unique_ptr<drafter::Drafter> random_drafter(const model::Model& m, int K, uint64_t seed,
                                                 kernels::WeightType hold);

// --lookup-corpus's documents as token ids (empty without the flag; a
// corpus needs a tokenizer: InputError naming the flag otherwise).
std::vector<std::vector<int32_t>> lookup_corpus(const LookupArgs& a, const io::Tokenizer* tok);
// --no-spec turns every draft source off: a source flag beside it would be
// ignored, so it is refused (InputError naming both).
void refuse_lookups_without_spec(const DrafterArgs& d, const LookupArgs& a);
// THE mapping of the speculation flags to the engine's options, for every
// command that runs the engine (generate, generate --prompts, serve): the
// sources (--draft-source, else the drafter if any; plus --lookup), their
// settings and the history store (--lookup-corpus, --history-mb), the
// budget (--no-gate), trees (--tree, --tree-budget), the drafter's draft
// length (--draft-k); parallel and ctx as given. --no-spec: none of it.
// With Gemma 4's assistant (open_assistant) it is the priced source instead
// of a drafter (--draft-k: its draft steps, 1..kAssistantMaxSteps).
speculative::SchedulerOptions engine_options(
    const DrafterArgs& d, const LookupArgs& a, const drafter::Drafter* drafter,
    const io::Tokenizer* tok, int parallel, int ctx,
    std::shared_ptr<const drafter::Gemma4Assistant> assistant = nullptr);
// Flag combinations no engine could honour, refused before any work
// (InputError naming the flags): --tree/--tree-budget beside --no-spec, or
// with rejection sampling at --temp > 0 (trees verify greedy or coupled).
void check_speculation_flags(const DrafterArgs& d, const SamplingArgs& s);
// The engine for these options; its refusals (memory, sources) name the
// flags that set them (`flags`, e.g. "--parallel 4 --ctx 2048").
std::unique_ptr<speculative::Scheduler> make_engine(const Session& s, const drafter::Drafter* dr,
                                                    const speculative::SchedulerOptions& so,
                                                    const std::string& flags);
// A request's speculation settings from the same flags (the draft length,
// --draft-p-min, --spec-sampling).
void apply_request_flags(const DrafterArgs& d, const SamplingArgs& s,
                         const drafter::Drafter* drafter, speculative::Request& r,
                         const drafter::Gemma4Assistant* assistant = nullptr);

// Gemma 4's assistant in --json: its parameters, its cost per draft step as
// measured at start (one row, and each further row) and, from a run's
// stats, as drafted live at each depth (seconds / drafts verified there).
nlohmann::json assistant_json(const drafter::Gemma4Assistant& a,
                              const speculative::Scheduler& engine,
                              const speculative::SpecStats* stats);
// One line about the assistant to stderr: its shape and parameters.
void print_assistant(const drafter::Gemma4Assistant& a);

// Human-readable stats to stderr (and one line per draft source).
void print_spec_stats(const speculative::SpecStats& s);
// A source's acceptance at each draft position, "0.79 0.61 ..." (summaries, reports).
std::string acceptance_by_position(const speculative::DepthCounts& c);

}  // namespace mtp::app
