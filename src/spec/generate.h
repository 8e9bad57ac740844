// Plain (non-speculative) generation with CONTRACTS.md's semantics:
// - `n_new` counts new tokens; a stop token (EOS, or BOS for llama2.c
//   checkpoints) ends generation and appears in neither text nor token_ids.
// - stop strings end the text before the match (held back while streaming
//   until it is certain no stop string starts in them).
// - finish_reason ∈ length | eos | stop | context.
// - generation tok/s = (generated − 1) / (time from first to last generated
//   token); prompt processing is timed separately.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/thread_pool.h"
#include "io/tokenizer.h"
#include "model/forward.h"
#include "spec/sampler.h"

namespace mtp::spec {

struct GenerateOptions {
  int n_new = 128;
  SamplerOptions sampler;
  std::vector<std::string> stop;  // stop strings
  int ctx = 0;                    // 0 = model's max position (capped by memory)
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
};

// Tokens that end generation for this model/tokenizer pair.
std::vector<int32_t> stop_token_ids(const model::ModelConfig& c, const io::Tokenizer& tok);

// Context length to use: requested (if > 0) capped at the model's maximum.
int resolve_ctx(const model::ModelConfig& c, int requested);

// Holds back streamed text until no stop string can start in it.
class StopStringFilter {
 public:
  explicit StopStringFilter(std::vector<std::string> stops) : stops_(std::move(stops)) {}
  // Adds text; returns what may be emitted now. Sets stopped() on a match.
  std::string push(std::string_view text);
  std::string flush();  // at the end: everything held back
  bool stopped() const { return stopped_; }
  const std::string& full_text() const { return emitted_; }

 private:
  std::vector<std::string> stops_;
  std::string pending_, emitted_;
  bool stopped_ = false;
};

using TextCallback = std::function<void(std::string_view)>;

GenerateResult generate(const model::Model& m, const io::Tokenizer& tok,
                        const std::vector<int32_t>& prompt_ids, const GenerateOptions& opt,
                        ThreadPool* pool, const TextCallback& on_text = nullptr);

}  // namespace mtp::spec
