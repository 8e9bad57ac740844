// precompute: corpus → shards of (tokens, target capture hidden, loss mask).
//
// The capture comes from drafter::capture_jobs on Model::forward — the SAME
// function the speculative engine calls (invariant 2) and online training
// runs — with rows of several sequences per call and the logits skipped.
// Rounded to the hidden dtype when stored (docs/SEMANTICS.md).
//
// Plain mode: every document is tokenized; long documents are cut into
// sequences of seq_len tokens, each starting with BOS when the tokenizer uses
// one. Self-distillation: the first prompt_tokens of each document prompt the
// target, which continues them (sampled at temp, batched across sequences);
// the prompt is masked out of the loss, so the drafter learns the target's own
// distribution — the one it meets live.
//
// Held-out split by document (a hash of its text). Resumable: shards are
// written whole (temp + rename) in a deterministic plan; a restarted run with
// the same arguments skips every complete shard, and a run with different
// arguments into the same folder is refused.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "drafter/capture.h"
#include "tokenizer/tokenizer.h"
#include "model/forward.h"

namespace mtp::speculative {

// The default sequence length, clamped to a shorter model context.
inline constexpr int kDefaultSeqLen = 512;

struct PrecomputeOptions {
  std::vector<std::string> corpus;
  std::string out_dir;
  int seq_len = 0;                // 0 = min(kDefaultSeqLen, the model's context)
  long max_tokens = 0;            // 0 = the whole corpus; self-distill: prompt + generation
                                  // budget (generation may end earlier at a stop token)
  long shard_tokens = 1L << 20;   // capacity of a shard in positions (S · seq_len)
  DType hidden_dtype = DType::BF16;
  double heldout = 0.02;          // fraction of documents held out
  int batch = 8;                  // sequences per forward call
  bool self_distill = false;
  int prompt_tokens = 16;
  // > 0: each prompt takes between prompt_tokens_min and prompt_tokens tokens
  // (a deterministic function of the document), so the drafter also learns the
  // first positions after short prompts. 0 = always prompt_tokens.
  int prompt_tokens_min = 0;
  int gen_tokens = 0;             // 0 = fill the sequence
  // Self-distillation temperature. Default 0 (greedy), matching the default
  // decoding: a drafter used greedily learns greedy continuations best (live
  // acc0 0.86 vs 0.77 for T = 0.7 data on stories260K, docs/lab/performance-history.md
  // "Drafter training on stories260K").
  // Choose the temperature the drafter will be used at when it samples.
  float temp = 0.0f;
  uint64_t seed = 0;
  // Recorded in the manifest.
  std::string model_path, tokenizer_path, command_line;
  bool progress = true;
  // The shards would not fit the free disk: write them anyway (core/run_budget.h).
  bool force = false;
  // A prompts file (io/prompts.h) instead of a corpus: self-distillation from
  // each whole prompt (not its first prompt_tokens); a prompt that leaves
  // fewer than 2 positions to generate is skipped.
  std::string prompts;
};

// The options with their defaults resolved against the model (seq_len) and
// checked (InputError about the setting).
PrecomputeOptions resolve_precompute_options(const PrecomputeOptions& o,
                                             const model::ModelConfig& c);

// The corpus cut into capture jobs, in a deterministic order: training jobs
// (ids 0..) then held-out jobs (ids after them); documents are held out by a
// hash of their text. Plain mode: each document as sequences of seq_len
// tokens, each starting with BOS when the tokenizer uses one; self-
// distillation: one prompt per document and the tokens to generate after it
// (drafter::self_distill_gen). `o` resolved.
struct CapturePlan {
  std::vector<drafter::CaptureJob> train, held;
  long planned = 0;              // positions: sequences, or prompts + generation budgets
  size_t documents = 0, documents_held = 0;
  nlohmann::json corpus;         // per file: path, sha256, bytes, documents
  bool bos = false;              // sequences start with the tokenizer's BOS
};
CapturePlan plan_capture(const io::Tokenizer& tok, const PrecomputeOptions& o);

// Prompts for measuring live acceptance on documents no training sequence came
// from: the opening tokens of each held-out job as text (the self-distillation
// prompt itself, the whole prompt of a prompts file, or a plain sequence's
// first 16 tokens), in the prompts-file format (io/prompts.h).
void write_heldout_prompts(const std::vector<drafter::CaptureJob>& held,
                           const io::Tokenizer& tok, bool bos, const PrecomputeOptions& o,
                           const std::string& path);

// Bytes of the shards of `sequences` sequences (each stored at seq_len
// positions: tokens, loss mask, the hidden in its dtype) of width d.
double shard_bytes(long sequences, int seq_len, int d, DType hidden);

struct PrecomputeReport {
  long sequences = 0, tokens = 0;  // written by this run
  int shards = 0, shards_skipped = 0;
  double seconds = 0;
  double tokens_per_s() const { return seconds > 0 ? tokens / seconds : 0; }
};

PrecomputeReport precompute(const model::Model& m, const io::Tokenizer& tok,
                            const std::string& target_fingerprint, const PrecomputeOptions& o,
                            ThreadPool* pool);

}  // namespace mtp::speculative
