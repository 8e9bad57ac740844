// What `mtpspec pretrain` (main binary: tokenizer, data) hands to
// `mtpspec-train pretrain-model` (libtorch: training): the model-size presets
// both halves resolve and the training options, passed as JSON. Header-only and
// below the fork of the two executables (model layer), so neither includes the
// other's code.
#pragma once
#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"

namespace mtp::model {

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

inline const std::vector<PretrainPreset>& pretrain_presets() {
  static const std::vector<PretrainPreset> p = {
      {"tiny", 320, 6, 5, 5, 64, 896, 4096, 256, 4, 600, 1e-3,
       "10.2 M parameters (41 MB fp32): ~7 minutes on 2 free cores for 0.6 M tokens; weights "
       "larger than a typical L3 cache, so decoding is memory-bound"},
      {"small", 576, 8, 9, 3, 64, 1664, 8192, 512, 16, 2000, 6e-4,
       "~40 M parameters (158 MB fp32, GQA 9/3): for corpora of 10 MB and more, on a CUDA "
       "GPU; about half a day on 2 CPU cores"},
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

// The families pretraining builds (train/pretrain_target.h): "llama" (untied
// LlamaForCausalLM), "gemma4" (Gemma4ForCausalLM, train/gemma4_torch.h) and
// "qwen35" (Qwen3_5ForCausalLM with its native MTP head, train/qwen35_torch.h).
inline constexpr std::array<const char*, 3> kPretrainArchs = {"llama", "gemma4", "qwen35"};

struct PretrainOptions {
  std::string model_dir;  // holds pretrain/tokens.safetensors; receives the model
  std::string arch = "llama";  // one of kPretrainArchs
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
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(PretrainOptions, model_dir, arch, preset, steps,
                                                seq_len, batch, lr, min_lr_ratio, weight_decay,
                                                clip, beta1, beta2, adam_eps, warmup, threads,
                                                device, seed, resume, eval_every, save_every,
                                                eval_windows, stop_after, progress, command_line)

}  // namespace mtp::model
