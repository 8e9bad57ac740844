// `mtpspec train`: trains the K MTP modules against a frozen target on
// precomputed shards or online (the target computing each batch's capture as
// training runs: train/online_data.h) (libtorch, fp32). Plain C++ interface
// (no torch types).
//
// Rows (docs/SEMANTICS.md): module k at row t takes h_{k-1}[t] (h_{-1} = the capture
// from the shard) and embed(tok[t+k+1]) and is trained on tok[t+k+2], where
// loss_mask[t+k+2] = 1. Loss = Σ_k w_k · mean cross-entropy of module k over its
// rows of the micro-batch; the head (final norm, lm_head, soft-cap) is the
// target's and frozen; the cross-entropy is computed in chunks of rows so a
// 262,144-token head never materialises logits for every position at once.
//
// Step s: global batch = world · accum micro-batches of `batch` sequences;
// micro-batch m = rank · accum + a takes training sequences (s·W·A + m)·B + b
// of the seeded epoch order (train/data.h). Gradients: per micro-batch, summed
// in micro-batch order, combined across ranks in rank order, divided by W·A;
// clipped to a global norm; AdamW (decoupled decay on matrices only); LR: linear
// warmup then cosine to min_lr_ratio·lr; EMA after each step with decay
// min(ema, (1 + s)/(10 + s)).
//
// Eval every eval_every steps and at the end on the held-out split: per module
// loss and top-1 accuracy, joint accuracy j_k = P(modules 0..k all right at a
// row) and E[tokens/cycle] = 1 + Σ_k j_k (= 1 + a0 + a0·a1 + … with conditional
// a_k); raw weights and EMA weights. Metrics go to RUN_DIR/metrics.jsonl.
//
// Checkpoints (train/checkpoint.h) every save_every steps and at the end; with
// resume, a run continues bit for bit as if uninterrupted (same thread count).
// Data parallel: rank 0 alone writes RUN_DIR (checkpoint, metrics, run.json)
// and runs eval and the parity gate; every rank reads RUN_DIR's checkpoint on
// resume, so give all ranks the same -o on a shared file system.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mtp::train {

struct TrainOptions {
  std::string shards_dir, model_path, run_dir;
  // Online training (train/online_data.h) instead of shards: the jobs file
  // `mtpspec train --online` wrote; the capture rounded to hidden_dtype
  // ("bf16" | "fp16" | "fp32"); the target's forward: "engine" (CPU, the
  // inference bits), "torch" (train/torch_target.h, on the training device),
  // or "auto" (the engine on cpu, libtorch on cuda).
  std::string online_jobs;
  std::string hidden_dtype = "bf16";
  std::string target_forward = "auto";
  // Run even when the budget (core/run_budget.h) says the memory does not fit.
  bool force = false;
  int K = 2;
  long steps = 0;          // total optimizer steps; 0 = from epochs
  double epochs = 0;       // used when steps == 0 (default 1 epoch)
  int batch = 8;           // sequences per micro-batch
  int accum = 1;           // micro-batches per rank per step
  double lr = 3e-4, min_lr_ratio = 0.1, weight_decay = 0.01;
  double beta1 = 0.9, beta2 = 0.95, adam_eps = 1e-8, clip = 1.0;
  long warmup = -1;        // -1 = min(100, steps / 10)
  std::vector<double> loss_weights = {1.0, 0.8};  // extended by ×0.8 per extra module
  // Per-module loss: "ce" (cross-entropy against the shards' token labels),
  // "kl" (KL(target ‖ module) at temperature kl_temp against the target's own
  // distribution at the same position, computed from the shards' capture
  // through the frozen final norm + head: no extra storage, T² scaled), or
  // "ce+kl" (their sum). KL trains the module's whole distribution, which is
  // what sampling at T > 0 (coupled or rejection) accepts against.
  std::string loss = "ce";
  double kl_temp = 1.0;
  double ema = 0.999;      // 0 = off
  int threads = 0;         // 0 = physical cores
  std::string device = "cpu";  // cpu | cuda
  bool resume = false;
  long eval_every = 0;     // 0 = steps / 10 (at least 1)
  long save_every = 0;     // 0 = eval_every
  int eval_sequences = 128;  // held-out sequences per eval (0 = all)
  uint64_t seed = 0;
  int window = -1;         // module attention window; -1 = shards' seq_len, 0 = unlimited
  // Data parallel (train/dist.h); 0 / -1 / "" = from the environment.
  int world_size = 0, rank = -1, master_port = 0, dist_timeout_s = 1800;
  std::string dist_file, master_addr;
  long stop_after = 0;     // stop (with a checkpoint) after this step, as if killed
  bool progress = true;    // the progress line (summaries and parity are always printed)
  bool parity = true;      // run the parity gate at the end (rank 0)
  std::string command_line;
  // TEST ONLY: shifts module k's rows to embed(tok[t+k+1+s]) -> tok[t+k+2+s].
  // s = -1 reproduces the reference story's indexing bug (shared/seed: module 0
  // learns the lm_head's own t+1 task); tests/train/indexing_test.cc shows it is caught.
  int offset_shift = 0;
};

struct TrainReport {
  long steps_done = 0;        // by this invocation
  long final_step = 0;
  double seconds = 0;
  double tokens_per_s = 0, steps_per_s = 0;  // over time spent in steps (not eval/saves);
                                             // tokens = real tokens of all ranks' sequences
  double capture_tokens_per_s = 0;  // online: this rank's capture (0 with shards)
  double capture_seconds = 0;       // online: of the time in steps, this rank's capture
  nlohmann::json last_eval;   // the final evaluation (empty if none)
  bool parity_ran = false, parity_passed = false;
};

// Throws mtp::Error subclasses (bad options, mismatched shards/target, a
// failed parity gate).
TrainReport run_training(const TrainOptions& o);

// The loss weight of each of K draft steps (modules, or the assistant's
// steps): `given` (at least one, each finite and >= 0: InputError for the
// setting loss_weights), the missing ones continuing ×0.8, cut to K.
std::vector<double> per_step_loss_weights(const std::vector<double>& given, int K);

}  // namespace mtp::train
