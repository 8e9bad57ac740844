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
  const ShardSet& data;
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

// Forward/backward of this rank's micro-batches of step `step`, gradient
// combination across ranks, clipping, AdamW at `lr`, EMA. Updates st in place.
StepResult train_step(const StepContext& c, OptimState& st, DataOrder& order, long step,
                      double lr);

// Held-out metrics of the weights `flat`: {"loss": [K], "acc": [K], "joint": [K],
// "cond": [K], "E", "rows": [K], "sequences"}.
nlohmann::json evaluate(const StepContext& c, const torch::Tensor& flat);

}  // namespace mtp::train
