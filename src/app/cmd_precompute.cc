// `mtpspec precompute`: corpus → training shards (see measure/precompute.h).
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <memory>

#include "app/commands.h"
#include "cli/checks.h"
#include "app/common.h"
#include "core/error.h"
#include "model/fingerprint.h"
#include "measure/precompute.h"

namespace mtp::app {

namespace {
struct PrecomputeArgs {
  ModelArgs model;
  speculative::PrecomputeOptions o;
  std::string hidden_dtype = "bf16";
};

void run_precompute(PrecomputeArgs a, const std::string& cmdline) {
  Session s = open_session(a.model);
  a.o.hidden_dtype = a.hidden_dtype == "fp16" ? DType::F16
                     : a.hidden_dtype == "fp32" ? DType::F32
                                                : DType::BF16;
  a.o.model_path = a.model.model;
  a.o.tokenizer_path = a.model.tokenizer.empty() ? s.model->loaded().tokenizer : a.model.tokenizer;
  a.o.command_line = cmdline;
  const std::string fp = model::target_fingerprint(s.model->loaded());
  speculative::PrecomputeReport r = speculative::precompute(*s.model, *s.tokenizer, fp, a.o, s.pool.get());
  fmt::print("precompute: {} shards written ({} already complete), {} sequences, {} tokens in "
             "{:.1f} s ({:.0f} tok/s, {} threads) -> {}\n",
             r.shards, r.shards_skipped, r.sequences, r.tokens, r.seconds, r.tokens_per_s(),
             s.pool->size(), a.o.out_dir);
}
}  // namespace

void add_precompute(CLI::App& root) {
  auto a = std::make_shared<PrecomputeArgs>();
  CLI::App* cmd = root.add_subcommand(
      "precompute", "Run the target over a corpus and write training shards (tokens + capture hidden)");
  add_model_flags(cmd, a->model);
  add_capture_flags(cmd, a->o);
  cmd->add_option("-o,--output", a->o.out_dir, "Shards folder (created; resumable)")->required()
      ->check(cli::OutputDir);
  cmd->add_option("--shard-tokens", a->o.shard_tokens, "Positions per shard file")
      ->check(cli::Positive);
  cmd->add_option("--hidden-dtype", a->hidden_dtype, "Storage type of the capture hidden")
      ->check(CLI::IsMember({"bf16", "fp16", "fp32"}));
  cmd->add_option("--batch", a->o.batch, "Sequences per forward call")
      ->check(cli::Positive);
  CLI::Option* sd = cmd->get_option("--self-distill");
  cmd->add_option("--seed", a->o.seed, "Self-distillation: random seed")
      ->check(cli::kSeedRange)
      ->needs(sd);
  cmd->add_flag("--force", a->o.force,
                "Write the shards even when the budget says they do not fit the free disk");
  cmd->add_flag("!--no-progress", a->o.progress, "Do not show a progress line");
  cmd->callback([a, cmd] {
    std::string line = "mtpspec precompute";
    for (const auto& r : cmd->get_options()) {
      for (const auto& v : r->results()) line += " " + r->get_name() + " " + v;
    }
    run_precompute(*a, line);
  });
}

}  // namespace mtp::app
