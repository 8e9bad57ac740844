// `mtpspec init-drafter`: a randomly initialised drafter for a target (tests,
// debugging, and the starting point the trainer can also use).
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <memory>

#include "cli/checks.h"
#include "app/commands.h"
#include "app/common.h"
#include "core/error.h"
#include "drafter/drafter.h"
#include "model/fingerprint.h"
#include "model/loader.h"

namespace mtp::app {

namespace {
struct InitArgs {
  std::string model, tokenizer, out;
  int k = 2, window = 0;
  uint64_t seed = 0;
  std::string dtype = "fp32";
};

void run_init(const InitArgs& a) {
  model::LoadedModel lm = model::load_model(a.model, {});
  drafter::DrafterConfig dc;
  dc.K = a.k;
  dc.window = a.window;
  const std::string fp = model::target_fingerprint(lm);
  auto tensors = drafter::random_drafter_tensors(lm.config, dc, a.seed);
  nlohmann::json training = {{"kind", "random-init"}, {"seed", a.seed}};
  drafter::write_drafter(a.out, lm.config, fp, dc, tensors, training,
                         drafter::DrafterStorage::parse(a.dtype));
  fmt::print("wrote random K={} drafter for target {} ({}) to {}\n", a.k, fp.substr(0, 16),
             model::arch_name(lm.config.arch), a.out);
}
}  // namespace

void add_init_drafter(CLI::App& root) {
  auto a = std::make_shared<InitArgs>();
  CLI::App* cmd =
      root.add_subcommand("init-drafter", "Write a randomly initialised MTP drafter for a target");
  cmd->add_option("-m,--model", a->model, "Target model (Hugging Face directory, GGUF file or llama2.c .bin)")
      ->required();
  cmd->add_option("--tokenizer", a->tokenizer, "Accepted for symmetry; the drafter needs none");
  cmd->add_option("-o,--output", a->out, "Drafter file to write (.safetensors)")->required()
      ->check(cli::OutputFile);
  cmd->add_option("--k", a->k, "Number of MTP modules K")->check(cli::Range(1, 16));
  cmd->add_option("--seed", a->seed, "Random seed")->check(cli::kSeedRange);
  cmd->add_option("--window", a->window, "Module attention window (0 = unlimited)")
      ->check(cli::NonNegative);
  cmd->add_option("--dtype", a->dtype,
                  "Stored precision of the tensors: fp32, bf16, or the matrices as ggml blocks "
                  "q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k (norms F32; docs/FORMATS.md)")
      ->check(CLI::IsMember(drafter::kDrafterStorageNames))
      ->capture_default_str();
  cmd->callback([a] { run_init(*a); });
}

}  // namespace mtp::app
