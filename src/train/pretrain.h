// `mtpspec pretrain`, the libtorch half: trains a Llama-architecture target from
// scratch on the token streams the main binary prepared
// (MODEL_DIR/pretrain/tokens.safetensors, io/pretrain_data.h) and writes a
// Hugging Face directory the engine loads like any other checkpoint:
// config.json (LlamaForCausalLM) and model.safetensors (F32, HF names), beside
// the tokenizer the main binary put there. Plain C++ interface (no torch types).
//
// Training: fp32, next-token cross-entropy over windows of seq_len + 1 tokens
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

namespace mtp::train {

// Model sizes. The vocabulary is the tokenizer's (`vocab` only sizes the
// tokenizer `mtpspec pretrain` trains); seq_len is also the model's context
// (max_position_embeddings).
struct PretrainPreset {
  const char* name;
  int d_model, n_layers, n_heads, n_kv_heads, head_dim, ffn;
  int vocab, seq_len, batch;
  long steps;
  double lr;
  const char* about;
};

// Header-only so the main binary (no libtorch) resolves presets too.
inline const std::vector<PretrainPreset>& pretrain_presets() {
  static const std::vector<PretrainPreset> p = {
      {"tiny", 320, 6, 5, 5, 64, 896, 4096, 256, 4, 600, 1e-3,
       "10.2 M parameters (41 MB fp32): ~7 minutes on 2 free cores for 0.6 M tokens; weights "
       "larger than a typical L3 cache, so decoding is memory-bound"},
      {"small", 576, 8, 9, 3, 64, 1664, 8192, 512, 16, 2000, 6e-4,
       "~40 M parameters (158 MB fp32, GQA 9/3): for corpora of 10 MB and more, on a GPU "
       "(--device cuda); about half a day on 2 CPU cores"},
      {"micro", 64, 2, 4, 2, 16, 160, 512, 64, 8, 200, 2e-3, "~0.15 M parameters: smoke tests"},
  };
  return p;
}

inline const PretrainPreset& pretrain_preset(const std::string& name) {
  std::string names;
  for (const auto& p : pretrain_presets()) {
    if (name == p.name) return p;
    names += (names.empty() ? "" : ", ") + std::string(p.name);
  }
  fail<InputError>("unknown preset '{}' (known: {})", name, names);
}

struct PretrainOptions {
  std::string model_dir;  // holds pretrain/tokens.safetensors; receives the model
  std::string preset = "tiny";
  long steps = 0;              // 0 = the preset's
  int seq_len = 0, batch = 0;  // 0 = the preset's
  double lr = 0;               // 0 = the preset's
  double min_lr_ratio = 0.1, weight_decay = 0.1, clip = 1.0;
  double beta1 = 0.9, beta2 = 0.95, adam_eps = 1e-8;
  long warmup = -1;            // -1 = min(100, steps / 10)
  int threads = 0;             // 0 = physical cores
  std::string device = "cpu";  // cpu | cuda
  uint64_t seed = 0;
  bool resume = false;
  long eval_every = 0;    // 0 = steps / 10 (at least 1)
  long save_every = 0;    // 0 = eval_every
  int eval_windows = 32;  // held-out windows per evaluation (0 = all)
  long stop_after = 0;    // stop (checkpointed, no model written) after this step
  bool progress = true;
  std::string command_line;
};
// As JSON: how `mtpspec pretrain` hands the options to mtpspec-train.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(PretrainOptions, model_dir, preset, steps, seq_len,
                                                batch, lr, min_lr_ratio, weight_decay, clip, beta1,
                                                beta2, adam_eps, warmup, threads, device, seed,
                                                resume, eval_every, save_every, eval_windows,
                                                stop_after, progress, command_line)

struct PretrainReport {
  long steps_done = 0, final_step = 0, total_steps = 0;
  double seconds = 0, tokens_per_s = 0;  // over time in steps (not evals or saves)
  double train_loss = 0;                 // the last step's
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

}  // namespace mtp::train
