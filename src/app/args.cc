#include "app/args.h"

#include <CLI/CLI.hpp>

#include <cmath>

#include "core/error.h"

namespace mtp::app {

void add_model_flags(CLI::App* cmd, ModelArgs& a) {
  cmd->add_option("-m,--model", a.model,
                  "Target model: a Hugging Face directory (config.json + *.safetensors) or a "
                  "llama2.c .bin checkpoint")
      ->required();
  cmd->add_option("--tokenizer", a.tokenizer,
                  "Tokenizer file or directory (default: the one beside the model)");
  cmd->add_option("--weights", a.weights, "Precision the weight matrices are held in")
      ->check(CLI::IsMember({"fp32", "bf16"}))
      ->capture_default_str();
  cmd->add_option("--threads", a.threads, "Worker threads (default: physical cores)")
      ->check(CLI::NonNegativeNumber);
}

void add_drafter_flags(CLI::App* cmd, DrafterArgs& a, unsigned which,
                       const std::string& drafter_help, const std::string& draft_k_help) {
  if (which & kFlagDrafter) {
    cmd->add_option("--drafter", a.drafter,
                    drafter_help.empty()
                        ? "MTP drafter file (default: drafter.safetensors beside the model, if "
                          "present)"
                        : drafter_help);
  }
  if (which & kFlagDraftK) {
    // Range-checked by resolve_draft_k, which knows the drafter's K.
    cmd->add_option("--draft-k", a.draft_k,
                    draft_k_help.empty() ? "Drafts per cycle, 1..K (default: the drafter's K)"
                                         : draft_k_help)
        ->each([&a](const std::string&) { a.draft_k_given = true; });
  }
  if (which & kFlagDraftPMin) {
    cmd->add_option("--draft-p-min", a.p_min,
                    "Stop drafting at a module whose top probability is below this, in [0, 1] "
                    "(0 = never; with a draft vocabulary, the probability among its tokens)")
        ->capture_default_str()
        ->check([](const std::string& s) -> std::string {
          const double v = std::strtod(s.c_str(), nullptr);
          return std::isfinite(v) && v >= 0 && v <= 1
                     ? ""
                     : "--draft-p-min must be a number in [0, 1], got '" + s + "'";
        });
  }
  if (which & kFlagNoSpec) {
    cmd->add_flag("--no-spec", a.no_spec, "Do not speculate, even if a drafter is present");
  }
}

int resolve_draft_k(const DrafterArgs& a, int k_max, const std::string& k_max_what,
                    int k_default) {
  if (!a.draft_k_given) return k_default;
  if (a.draft_k < 1 || a.draft_k > k_max) {
    fail<InputError>("--draft-k {} is outside 1..{} ({})", a.draft_k, k_max, k_max_what);
  }
  return a.draft_k;
}

void add_sampling_flags(CLI::App* cmd, SamplingArgs& a) {
  cmd->add_option("--temp", a.temp, "Sampling temperature, >= 0 (0 = greedy)")
      ->capture_default_str();
  cmd->add_option("--top-p", a.top_p, "Nucleus sampling mass in (0, 1] (1 = off)")
      ->capture_default_str();
  cmd->add_option("--seed", a.seed, "Random seed for sampling")->capture_default_str();
}

spec::SamplerOptions sampler_options(const SamplingArgs& a) {
  if (!std::isfinite(a.temp) || a.temp < 0) {
    fail<InputError>("--temp must be a finite number >= 0, got {}", a.temp);
  }
  if (!std::isfinite(a.top_p) || !(a.top_p > 0 && a.top_p <= 1)) {
    fail<InputError>("--top-p must be in (0, 1], got {}", a.top_p);
  }
  return {a.temp, a.top_p, a.seed};
}

}  // namespace mtp::app
