// Parameters every entry point resolves the same way (the CLI, the server and
// the C API call these; none computes them itself): the context, the number
// of new tokens, the stop tokens, a draft length.
#pragma once
#include <cstdint>
#include <vector>

#include "model/config.h"

namespace mtp::drafter {
class Drafter;
}
#include "tokenizer/tokenizer.h"

namespace mtp::speculative {

// Tokens that end generation for this model/tokenizer pair (config.json's EOS
// ids ∪ the tokenizer's; llama2.c: BOS, as its runner stops on it).
std::vector<int32_t> stop_token_ids(const model::ModelConfig& c, const io::Tokenizer* tok);

// Bytes one sequence of `ctx` positions holds (the memory estimate of every
// entry point): the target's K/V for its attention layers and the recurrent
// storage of its Gated DeltaNet layers (model::KVCache::bytes_for, q_max 64:
// a prefill chunk or verify at most), the captured hidden rows [ctx,
// d_model]; with a drafter, its K modules' caches and output rows.
double slot_bytes(const model::ModelConfig& c, int ctx, const drafter::Drafter* d = nullptr);

// Positions per sequence: `requested` (> 0; at most the model's maximum and
// what memory holds), else `needed` (0: unknown) capped by the model's
// maximum and a memory budget. InputError naming the value and the limit.
int resolve_ctx(const model::ModelConfig& c, int requested, int64_t needed = 0);

// New tokens for a request: max_tokens (> 0), clipped to what the context
// leaves after the prompt; 0 or absent: until the context is full.
int resolve_n_new(int max_tokens, int prompt_tokens, int ctx);

// A draft length: `requested` (> 0) must lie in 1..k_max (InputError naming
// `what`, the source whose longest draft k_max is); 0: k_max.
int resolve_draft_k(int requested, int k_max, const char* what);

}  // namespace mtp::speculative
