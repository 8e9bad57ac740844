// `mtpspec export`: a training run's checkpoint -> drafter file, gated by the
// parity check (train/export.h). Runs in bin/mtpspec-train; `mtpspec export`
// execs it (app/train_forward.h).
#include <CLI/CLI.hpp>

#include <filesystem>
#include <memory>

#include "cli/checks.h"
#include "cli/train_commands.h"
#include "train_cli/commands.h"
#include "core/error.h"
#include "train/checkpoint.h"
#include "train/export.h"

namespace mtp::train_cli {

void add_export(CLI::App& root) {
  auto o = std::make_shared<train::ExportOptions>();
  auto dtype = std::make_shared<std::string>("fp32");
  auto no_parity = std::make_shared<bool>(false);
  CLI::App* cmd = root.add_subcommand(
      cli::kExport.name, cli::kExport.help);
  cmd->add_option("--run", o->run_dir, "Run folder written by `mtpspec train`")->required();
  cmd->add_option("-o,--output", o->out, "Drafter file to write (.safetensors)")->required()
      ->check(cli::OutputFile);
  cmd->add_flag("--ema", o->ema, "Export the EMA weights instead of the raw ones");
  cmd->add_option("-m,--model", o->model, "Target model (default: the one recorded in the run)");
  cmd->add_option("--shards", o->shards_dir,
                  "Shards for the parity inputs (default: the run's, when present)");
  cmd->add_option("--dtype", *dtype,
                  "Stored precision of the drafter tensors: fp32, bf16, or the matrices as ggml "
                  "blocks q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k (norms F32; the parity gate runs "
                  "on the dequantized values; docs/FORMATS.md)")
      ->check(CLI::IsMember(drafter::kDrafterStorageNames))
      ->capture_default_str();
  cmd->add_option("--draft-vocab", o->draft_vocab,
                  "Let the modules draft only among the N tokens most frequent in the run's "
                  "training labels (reads that part of the target's head per draft; output "
                  "unchanged, the target verifies with its full head). 0 = the whole vocabulary")
      ->check(cli::NonNegative);
  cmd->add_option("--threads", o->threads, "Threads (default: physical cores)")
      ->check(cli::NonNegative);
  cmd->add_flag("--no-parity", *no_parity, "Skip the parity gate");
  cmd->callback([o, dtype, no_parity] {
    // The run's own files are its input (export -o RUN/checkpoint.safetensors
    // replaced the checkpoint, and the run could not be exported again).
    const std::string ckpt = train::checkpoint_path(o->run_dir),
                      run_json = (std::filesystem::path(o->run_dir) / "run.json").string(),
                      metrics = (std::filesystem::path(o->run_dir) / "metrics.jsonl").string();
    cli::refuse_output_over_inputs("-o", o->out, false,
                                   {{"--run checkpoint", &ckpt}, {"--run run.json", &run_json},
                                    {"--run metrics", &metrics}, {"-m", &o->model}});
    o->stored = drafter::DrafterStorage::parse(*dtype);
    o->parity = !*no_parity;
    train::export_drafter(*o);
  });
}

}  // namespace mtp::train_cli
