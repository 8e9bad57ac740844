// What a drafter trains on: the target's capture hidden of whole sequences
// (docs/SEMANTICS.md "capture"), with the tokens and the loss mask. ONE
// function computes it on the engine's forward — precompute (shards on disk,
// measure/precompute.h) and online training (mtpspec-train, train/online_data.h)
// both call capture_jobs, so a shard and an online batch hold the same bits.
//
// A job is a plain sequence (its capture only) or, for self-distillation, a
// prompt the target continues with up to `gen` tokens (chosen by the caller's
// token rule from the target's logits: greedy or sampled), ending early at a
// stop token or at seq_len. The capture is Model::forward's `hidden`, the
// residual after the last decoder layer (invariant 2), rows of several
// sequences per call (invariant 1 makes the batch invisible).
#pragma once
#include <algorithm>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/thread_pool.h"
#include "io/pretrain_data.h"
#include "model/forward.h"

namespace mtp::drafter {

struct CaptureJob {
  std::vector<int32_t> tokens;  // the sequence (plain) or the prompt (self-distillation)
  int gen = 0;                  // tokens to generate after it (0 = plain)
  long id = 0;                  // global index of the job: seeds its token choices
};

struct Captured {
  std::vector<int32_t> tokens;     // [n] the sequence (prompt + generated tokens)
  std::vector<float> hidden;       // [n, d] capture hidden, fp32 as the forward computed it
  std::vector<uint8_t> loss_mask;  // [n] see capture_loss_mask
};

// The next token of job `b` (its index in the span given to capture_jobs) from
// its logits row [V] at sequence position `pos` (the index the token will have).
using ChooseToken = std::function<int32_t(size_t b, const float* logits, size_t V, int64_t pos)>;

struct CaptureOptions {
  int seq_len = 0;               // no sequence grows past it
  std::vector<int32_t> stops;    // sorted: a chosen stop token ends the generation (not kept)
  ChooseToken choose;            // needed when a job generates
  int rows_per_call = 64;        // rows of one sequence per forward call
};

// Runs every job through m (one KV cache for the batch). Jobs with gen > 0
// are prefilled, then continued one token per step, all of them per call.
std::vector<Captured> capture_jobs(const model::Model& m,
                                   std::span<const CaptureJob* const> jobs,
                                   const CaptureOptions& o, ThreadPool* pool);

// The generation rule of a batch of jobs, for every forward that continues
// them (capture_jobs here, the libtorch target in mtpspec-train): which jobs
// still generate, and what a chosen token does.
class Continuations {
 public:
  explicit Continuations(std::span<const CaptureJob* const> jobs);
  bool any() const;
  bool active(size_t b) const { return active_[b]; }
  // Token t chosen for job b, whose sequence is seq: a stop token or a spent
  // budget ends the job (t not kept); else t is appended, and the job ends
  // when its budget or the sequence (seq_len) is full.
  void accept(size_t b, int32_t t, std::vector<int32_t>& seq, const CaptureOptions& o);

 private:
  std::vector<bool> active_;
  std::vector<int> budget_;
};

// The loss mask of a sequence of n tokens whose first `prompt` tokens are the
// job's (the whole prompt of a self-distilled job; a plain job masks its first
// token: BOS, or a token nothing precedes): 0 there, 1 after.
std::vector<uint8_t> capture_loss_mask(size_t n, size_t prompt_tokens, bool self_distilled);

// Self-distillation: tokens to generate after a prompt of `prompt_len` tokens in
// sequences of seq_len (gen_tokens > 0 caps it; 0 = fill the sequence).
inline int self_distill_gen(int prompt_len, int seq_len, int gen_tokens) {
  const int room = seq_len - prompt_len;
  return gen_tokens > 0 ? std::min(gen_tokens, room) : room;
}

// The sampling seed of job `id` of a self-distillation seeded with `seed`
// (reproducible per job, whatever batch it is computed in, and on resume).
inline uint64_t self_distill_seed(uint64_t seed, long id) {
  return seed * 1000003ull + uint64_t(id);
}

// How the jobs of an online training run are captured: written by `mtpspec`
// (which has the tokenizer) into the jobs file's info["capture"], read by
// mtpspec-train (docs/FORMATS.md "Online training jobs").
struct CaptureSpec {
  int seq_len = 0;
  bool self_distill = false;
  int gen_tokens = 0;           // self_distill_gen's cap (0 = fill the sequence)
  float temp = 0.f;             // the token rule: 0 = greedy, else sampled (self_distill_seed)
  std::vector<int32_t> stops;   // sorted
  nlohmann::json to_json() const;
  // FormatError naming `where` and the field.
  static CaptureSpec from_json(const nlohmann::json& j, const std::string& where);
};

// The jobs of one split of a jobs file: document i of the stream is job
// first_id + i (its prompt, or its sequence), gen by self_distill_gen.
std::vector<CaptureJob> jobs_of_stream(const io::TokenStream& s, long first_id,
                                       const CaptureSpec& spec);

}  // namespace mtp::drafter
