// `mtpspec pretrain`, the libtorch half: trains a Llama, Gemma 4 or Qwen3.5 target
// (PretrainOptions::arch; train/pretrain_target.h) from scratch on the token
// streams the main binary prepared (MODEL_DIR/pretrain/tokens.safetensors,
// io/pretrain_data.h) and writes a Hugging Face directory the engine loads
// like any other checkpoint: config.json (LlamaForCausalLM,
// Gemma4ForCausalLM: train/gemma4_torch.h, or Qwen3_5ForCausalLM with its
// native MTP head's mtp.* tensors: train/qwen35_torch.h) and model.safetensors
// (F32, HF names), beside the tokenizer the main binary put there. Plain C++ interface
// (no torch types).
//
// Training: fp32, next-token cross-entropy (Qwen3.5: plus its native head's
// next-next-token term, PretrainTarget::training_loss) over windows of seq_len + 1 tokens
// of the training stream. Window b of step s starts at the first token (BOS) of
// document order.at(s·batch + b) (train::DataOrder over the documents, seeded)
// and runs on across the following documents, wrapping at the end of the
// stream — so every window starts like a prompt does (BOS at position 0) and
// no token is padding. AdamW (decoupled decay on matrices and embeddings,
// not norms), linear warm-up then cosine to min_lr_ratio·lr, global-norm
// clipping (train/step.h optimizer_step). No dropout.
//
// Held-out loss: every eval_every steps and at the end, over the first
// eval_windows non-overlapping windows of the held-out stream; in
// MODEL_DIR/pretrain/metrics.jsonl with the training records.
//
// Resumable bit for bit (train/checkpoint.h: params and Adam moments in
// MODEL_DIR/pretrain/checkpoint.safetensors every save_every steps; the data
// order is a pure function of (seed, step)); same thread count and device.
// config.json and model.safetensors are written (atomically) only when the
// last step is done, so their presence means a finished model.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "model/pretrain_options.h"

namespace mtp::train {

// The presets and options are shared with the main binary (model/pretrain_options.h).
using model::pretrain_preset;
using model::pretrain_presets;
using model::PretrainOptions;
using model::PretrainPreset;

struct PretrainReport {
  long steps_done = 0, final_step = 0, total_steps = 0;
  double seconds = 0, tokens_per_s = 0;  // over time in steps (not evals or saves)
  double train_loss = 0;                 // the last step's (with the MTP term, Qwen3.5)
  double mtp_loss = -1;                  // the last step's native-head term (-1: none)
  double eval_loss = -1;                 // the last evaluation's (-1: none)
  long parameters = 0;
  bool model_written = false;
};

// Throws mtp::Error subclasses (bad options, missing or mismatched data,
// resume conflicts, divergence).
PretrainReport run_pretrain(const PretrainOptions& o);

// The libtorch model's logits for one sequence (positions 0..T-1) from the
// config.json and model.safetensors in model_dir: [T, vocab] row-major. The
// reference tests compare the engine's forward against.
std::vector<float> torch_logits(const std::string& model_dir, const std::vector<int32_t>& tokens);

// The native MTP head's logits (Qwen3.5, train/qwen35_torch.h) teacher-forced
// on one sequence: row t = 0..T-2 embeds tokens[t + 1] and reads the libtorch
// trunk's post-norm hidden at t, predicting tokens[t + 2]: [T - 1, vocab].
// InputError when the model has no native head.
std::vector<float> torch_mtp_logits(const std::string& model_dir,
                                    const std::vector<int32_t>& tokens);

}  // namespace mtp::train
