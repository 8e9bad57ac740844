// Training Gemma 4's assistant against the exact target the engine serves:
// `mtpspec train --drafter-arch gemma4-assistant` / `mtpspec
// train-assistant` (train_cli/cmd_train_assistant.cc).
//
// Online against the engine: every step takes `batch` sequences, runs the
// target through the ENGINE (any checkpoint it loads: Hugging Face, GGUF,
// quantized — the capture is the served target's) for the assistant's
// inputs (train/assistant_torch.h engine_capture: the post-norm capture of
// train/post_norm_capture.h and the K/V of the layers it reads), and trains
// draft steps 1..K jointly in libtorch (TorchAssistant::chain: the state
// carried from step to step at the position the engine's runner uses). Row
// t of a sequence (N = t + 1 committed tokens) at step j is fed the
// committed text's token tok[t+j-1] (step 1: the last committed token;
// later: the token an accepted draft would have been in that text — teacher
// forcing) and trained, by cross-entropy over every token (the full tied
// head), to draft the target's own argmax after tok[0..t+j-1]; a sequence's
// loss = Σ_j w_j · mean over the rows that have one (t + j - 1 within it), w
// as per_step_loss_weights (×0.8 per step beyond those given); a step's loss
// is the mean over its sequences.
//
// The sequences, from one of:
// - a pretraining tokens file (`tokens`, io/pretrain_data.h): windows of
//   seq_len tokens at random offsets of its train stream (seeded by seed);
// - the jobs `mtpspec train-assistant --corpus|--prompts` (or `mtpspec train
//   --online`) tokenized (`online_jobs`, train/online_data.h): the jobs'
//   sequences — self-distilled ones continued by the target exactly as the
//   K-module's online trainer continues them (the same seed, the same token
//   rule) — visited in the K-module trainer's order (DataOrder(seed): step s
//   takes the sequences s·batch .. s·batch + batch - 1 of it). With the same
//   jobs file, seed, batch and steps, the two trainers see the same
//   sequences. A sequence ends at its last token with loss mask 1 (a
//   self-distilled job's generated tail; the prompt's rows train too, on the
//   target's own argmax); one shorter than 2 tokens trains nothing.
//
// Start: an initial gemma4_assistant directory (init_from: Google's, to
// fine-tune it to a quantized target, or any other), whose config it keeps;
// or from scratch (init_from empty): an assistant of `shape` for the target
// (train/assistant_init.h), weights initialised as pretraining's.
// The centroid head: its clusters and token_ordering are kept from the
// initial directory, not learned, and a scratch assistant has the full head.
// The trainer scores every token (the full head is what every draft step's
// argmax is taken over), so no gradient reaches the centroids; learning
// them would need a second objective (which cluster holds the target's
// token) and a balanced clustering of the vocabulary, which this trainer
// does not build. Keeping them keeps the published layout's meaning (the
// engine drafts with them), and the full head drafts exactly what the
// centroid head approximates (llama.cpp's converter keeps only the full
// head).
//
// The output is a gemma4_assistant directory (fp32) every engine loads as
// Google's, recording the target's fingerprint and the capture point
// (drafter::AssistantRecord: the engine refuses it for another target), and
// on request llama.cpp's GGUF of it (drafter/assistant_gguf.h). Before it is
// final the parity gate (train/assistant_parity.h) runs steps 1..K of the
// engine's assistant, loaded from that directory, against the libtorch twin
// on a held-out window: a failure throws (Error) and the directory stays,
// marked by the report.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "train/assistant_init.h"

namespace mtp::model {
class Model;
}

namespace mtp::train {

struct AssistantTrainOptions {
  std::string target;     // the served target (any format the engine loads)
  std::string init_from;  // a gemma4_assistant directory ("" = from scratch, of `shape`)
  AssistantShape shape;   // from scratch only
  std::string tokens;       // a pretraining tokens file (io/pretrain_data.h): its train stream
  std::string online_jobs;  // or the jobs file of an online run (train/online_data.h)
  std::string out;        // the gemma4_assistant directory written
  std::string gguf;       // also llama.cpp's gemma4-assistant GGUF of it ("" = none)
  int steps = 100, seq_len = 64;  // seq_len: the token stream's windows (jobs: their own)
  int batch = 1;                   // sequences per optimizer step
  int threads = 0;                 // libtorch and engine threads (0 = physical cores)
  int K = 1;                                       // draft steps trained jointly
  std::vector<double> loss_weights = {1.0, 0.8};  // per step (per_step_loss_weights)
  double lr = 1e-4;
  uint64_t seed = 0;
  bool parity = true;
  // Tests only: TorchAssistant::chain's planted step-position shift (the
  // gate must fail on 1).
  int step_shift = 0;
};

struct AssistantTrainResult {
  std::vector<double> losses;  // per optimizer step, the weighted sum over steps
  bool parity_ran = false, parity_passed = false;
  std::string parity_text;     // the gate's table
};

// InputError for options out of range, the loaders' errors for a target or
// assistant that does not load or fit; Error when the parity gate fails.
AssistantTrainResult train_assistant(const AssistantTrainOptions& o);

// The sequences train_assistant visits at steps 0..o.steps-1, `o.batch` per
// step (tests): [steps][batch][tokens].
std::vector<std::vector<std::vector<int32_t>>> assistant_sequences(const AssistantTrainOptions& o,
                                                                   const model::Model& target);

}  // namespace mtp::train
