#include "train/pretrain_target.h"

#include <cmath>
#include <random>

#include "core/error.h"
#include "train/gemma4_torch.h"
#include "train/llama_torch.h"
#include "train/qwen35_torch.h"

namespace mtp::train {

namespace {
bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
}  // namespace

std::vector<float> init_flat_params(const FlatLayout& layout, int n_layers, uint64_t seed,
                                    const std::vector<std::string>& residual) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  const float sd = 0.02f, sd_residual = 0.02f / std::sqrt(2.0f * float(n_layers));
  std::vector<float> flat(size_t(layout.total));
  for (const auto& e : layout.entries) {
    float* p = flat.data() + e.offset;
    if (ends_with(e.name, "norm.weight") || ends_with(e.name, "layer_scalar")) {
      std::fill(p, p + e.numel, 1.0f);
      continue;
    }
    const bool res = std::any_of(residual.begin(), residual.end(),
                                 [&](const std::string& r) { return ends_with(e.name, r); });
    const float s = res ? sd_residual : sd;
    for (int64_t i = 0; i < e.numel; ++i) p[i] = s * normal(rng);
  }
  return flat;
}

std::unique_ptr<PretrainTarget> make_pretrain_target(const model::ModelConfig& c, torch::Device dev) {
  switch (c.arch) {
    case model::Arch::Llama: return std::make_unique<TorchLlama>(c, dev);
    case model::Arch::Gemma4: return std::make_unique<TorchGemma4>(c, dev);
    case model::Arch::Qwen35: return std::make_unique<TorchQwen35>(c, dev);
    default:
      fail<ConfigError>("pretraining builds Llama, Gemma 4 and Qwen3.5 models, not {}",
                        model::arch_name(c.arch));
  }
}

}  // namespace mtp::train
