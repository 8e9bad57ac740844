// Flags and set-up shared by the subcommands that run a model.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "app/args.h"
#include "core/thread_pool.h"
#include "tokenizer/tokenizer.h"
#include "model/forward.h"

namespace mtp::app {

struct Session {
  std::unique_ptr<model::Model> model;
  std::unique_ptr<io::Tokenizer> tokenizer;
  std::unique_ptr<ThreadPool> pool;
};

// Loads the model, its tokenizer (checks the vocabularies agree) and a pool.
Session open_session(const ModelArgs& a);

// A random target generated in memory (model::random_model: "1b" | "tiny";
// InputError if unknown), held as a.weights (auto: fp32, the values are
// generated in fp32), with a.threads; no tokenizer
// (Session::tokenizer is null) — for benchmarks on token ids only.
Session open_random_session(const std::string& preset, const ModelArgs& a, uint64_t seed);

// What a prompt may hold for a context of `ctx` tokens (0: the model's
// maximum): io::max_prompt_bytes of the session's tokenizer. A longer prompt
// is refused before it is read whole or tokenized.
struct PromptBound {
  int64_t ctx = 0;
  size_t max_bytes = 0;
};
PromptBound prompt_bound(const Session& s, int ctx);
// The -f prompt file, read only up to the bound (a never-ending FIFO stops
// there).
std::string read_prompt_file(const std::string& path, const PromptBound& b);
// `text` tokenized after its bytes are checked against the bound (`what`
// names it in the refusal: "the prompt", "--prompts 'p.jsonl' prompt 3").
std::vector<int32_t> encode_prompt(const Session& s, const std::string& text, bool add_special,
                                   const PromptBound& b, const std::string& what);

kernels::WeightType parse_weight_type(const std::string& s);

// The weight matrices one decode step streams (not the embedding: one row).
std::vector<const kernels::PackedMatrix*> streamed_matrices(const model::Model& m);
// The types the streamed matrices are held in, by share of their bytes
// ("bf16 100%", "q4_k 79%, q6_k 21%"): what --weights (or auto) chose, and
// what a GGUF's block types are. Benchmarks print it beside their numbers.
std::string held_types(const model::Model& m);
// --weights s as a load option: "auto" -> nullopt (as stored), else the type.
model::Hold parse_hold(const std::string& s);
// The hold of the drafter's matrices for --weights s: the same, except that a
// quantized target (q8_0 ... q6_k) keeps a bf16 drafter (drafters are trained
// and parity-checked against bf16/fp32 weights) and auto is fp32 (the
// drafter holds matrices stored as BF16 in bf16 whatever this says).
kernels::WeightType drafter_weight_type(const std::string& s);

}  // namespace mtp::app
