// bin/mtpspec-train's subcommands (libtorch). Each add_* registers one on the
// root CLI11 app; `mtpspec train|export|parity|pretrain` exec this binary.
#pragma once

namespace CLI {
class App;
}

namespace mtp::train_cli {

void add_train(CLI::App& root);           // cmd_train.cc
void add_export(CLI::App& root);          // cmd_export.cc
void add_parity(CLI::App& root);          // cmd_parity.cc
void add_pretrain_model(CLI::App& root);  // cmd_pretrain_model.cc
void add_train_assistant(CLI::App& root); // cmd_train_assistant.cc
void add_train_native_head(CLI::App& root);  // cmd_train_native_head.cc

}  // namespace mtp::train_cli
