// Drafter discovery and loading, and speculative stats printing, shared by the
// subcommands that speculate (generate, bench, drift).
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "app/common.h"
#include "drafter/drafter.h"
#include "speculative/scheduler/generate.h"
#include "speculative/sources/history.h"
#include "speculative/scheduler/scheduler.h"
#include "speculative/cycle/spec_loop.h"

namespace mtp::app {

// d.drafter if given, else drafter.safetensors beside the model if it exists,
// else null. A drafter made for another target is refused (ConfigError) or,
// with d.target_mismatch == Warn, loaded with a warning.
std::unique_ptr<drafter::Drafter> open_drafter(const ModelArgs& a, const DrafterArgs& d,
                                               const model::Model& m);

// A random drafter with K modules (drafter::random_drafter_tensors, the
// init-drafter weights) for target `m`, stored as bf16 (as init-drafter
// writes them) and held as `hold`; built in memory.
std::unique_ptr<drafter::Drafter> random_drafter(const model::Model& m, int K, uint64_t seed,
                                                 kernels::WeightType hold);

// --lookup-corpus's documents as token ids (empty without the flag; a
// corpus needs a tokenizer: InputError naming the flag otherwise).
std::vector<std::vector<int32_t>> lookup_corpus(const LookupArgs& a, const io::Tokenizer* tok);
// The history datastore of --lookup history (null without it): the corpus.
std::unique_ptr<speculative::HistoryStore> open_history(const LookupArgs& a,
                                                        const io::Tokenizer* tok);
// The lookup flags into SpecOptions (history: the store, may be null).
void apply_lookup_args(const LookupArgs& a, const speculative::HistoryStore* history,
                       speculative::SpecOptions& so);
// --no-spec turns every draft source off: a lookup flag beside it would be
// ignored, so it is refused (InputError naming both).
void refuse_lookups_without_spec(const DrafterArgs& d, const LookupArgs& a);
// The same for the batching scheduler (generate --prompts, serve): the
// history store (opened from the flags) and the lookups; --no-gate is
// refused naming what it needs (the scheduler always sizes drafts from its
// cost curve). Without --lookup nothing changes.
void apply_lookup_args(const LookupArgs& a, const io::Tokenizer* tok,
                       speculative::SchedulerOptions& so, const char* no_gate_needs);

// Human-readable stats to stderr (and one line per draft source).
void print_spec_stats(const speculative::SpecStats& s);
// A source's acceptance at each draft position, "0.79 0.61 ..." (summaries, reports).
std::string acceptance_by_position(const speculative::DepthCounts& c);

}  // namespace mtp::app
