// `mtpspec-train pretrain-model`: the libtorch half of `mtpspec pretrain`
// (train/pretrain.h). `mtpspec pretrain` trains or copies the tokenizer,
// tokenizes the corpus into MODEL_DIR/pretrain/tokens.safetensors and then
// execs this with its resolved options as JSON (train::PretrainOptions), so the
// flags are declared once, in cmd_pretrain.cc.
#include <CLI/CLI.hpp>
#include <memory>

#include "cli/train_commands.h"
#include "train_cli/commands.h"
#include "core/error.h"
#include "core/json.h"
#include "train/pretrain.h"

namespace mtp::train_cli {

void add_pretrain_model(CLI::App& root) {
  auto options = std::make_shared<std::string>();
  CLI::App* cmd = root.add_subcommand(
      cli::kPretrainModel.name, cli::kPretrainModel.help);
  cmd->add_option("--options", *options,
                  "train::PretrainOptions as JSON (model_dir, preset, steps, ...; see "
                  "`mtpspec pretrain --help` for their meaning)")
      ->required();
  cmd->callback([options] {
    const nlohmann::json j = parse_json(*options, "pretrain-model --options");
    if (!j.is_object()) fail<InputError>("pretrain-model: --options is not a JSON object");
    train::PretrainOptions o;
    try {
      o = j.get<train::PretrainOptions>();
    } catch (const nlohmann::json::exception& e) {
      fail<InputError>("pretrain-model: bad --options: {}", e.what());
    }
    train::run_pretrain(o);
  });
}

}  // namespace mtp::train_cli
