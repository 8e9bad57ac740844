// One optimizer step and one evaluation pass (see trainer.h for the rules).
// Internal to the train layer (torch types).
#pragma once
#include <torch/torch.h>

#include <vector>

#include <nlohmann/json.hpp>

#include "train/data.h"
#include "train/dist.h"
#include "train/torch_mtp.h"
#include "train/trainer.h"

namespace mtp::train {

// Flat fp32 vectors [P] on the training device.
struct OptimState {
  torch::Tensor params, m, v, ema;  // ema undefined when EMA is off
  torch::Tensor decay_mask;         // 1 where weight decay applies (built on first use)
};

struct StepContext {
  const TorchMtp& tm;
  const TrainData& data;
  const std::vector<double>& loss_weights;  // [K]
  const TrainOptions& o;
  DistGroup& dist;
  long total, warmup;
};

struct StepResult {
  double objective = 0;              // mean over this rank's micro-batches of Σ_k w_k·CE_k
  std::vector<double> module_loss;   // [K] mean CE per module (this rank)
  double grad_norm = 0;              // global, before clipping
  long tokens = 0;                   // real tokens of this rank's sequences
};

// AdamW hyper-parameters (decoupled weight decay on the layout's `decay`
// tensors) and the gradient-norm clip threshold (0 = off).
struct AdamWOptions {
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weight_decay = 0.01, clip = 1.0;
};

// One optimizer step (0-based `step`) on st.params, st.m, st.v with gradient g
// (clipped in place to the global norm `clip`); builds st.decay_mask on first
// use. Returns the gradient norm before clipping; Error when it is not finite.
// The EMA is the caller's.
double optimizer_step(OptimState& st, torch::Tensor& g, const FlatLayout& layout, double lr,
                      long step, const AdamWOptions& h);

// Linear warm-up over `warmup` steps, then cosine from lr to min_lr_ratio·lr at `total`.
double cosine_lr(double lr, double min_lr_ratio, long step, long total, long warmup);

// Forward/backward of this rank's micro-batches of step `step`, gradient
// combination across ranks, clipping, AdamW at `lr`, EMA. Updates st in place.
StepResult train_step(const StepContext& c, OptimState& st, DataOrder& order, long step,
                      double lr);

// Held-out metrics of the weights `flat`: {"loss": [K], "acc": [K], "joint": [K],
// "cond": [K], "E", "rows": [K], "sequences"}.
nlohmann::json evaluate(const StepContext& c, const torch::Tensor& flat);

}  // namespace mtp::train
