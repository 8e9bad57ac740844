// The CLI's names for the library's settings. Library layers name values in
// words and tag an error or warning with the setting it is about
// (core/setting.h: "tree", "temperature"); both executables print it after
// the flag that gives that setting in the command that ran:
//   error: --tree: a tree shape "2,0": widths are whole numbers >= 1 ...
//   warning: --threads: a thread count of 12 is more than ...
// A setting the command has no flag for (pretrain-model reads its options
// from a file) is printed as the library words it. One table for both
// executables: a flag is spelt the same in every command that has it.
#pragma once
#include <CLI/CLI.hpp>

#include <cstring>
#include <exception>
#include <string>
#include <utility>

#include "core/setting.h"

namespace mtp::cli {

// {library setting, flag}.
inline constexpr std::pair<const char*, const char*> kSettingFlags[] = {
    {"threads", "--threads"},
    {"arch", "--arch"},
    {"ctx", "--ctx"},
    {"verify_kernels", "--verify-kernels"},
    {"tied_head", "--tied-head"},
    {"tokenizer", "--tokenizer"},
    {"vocab", "--vocab"},
    {"widen_shape", "--shape"},
    {"allow_inexact", "--allow-inexact"},
    {"hidden_dtype", "--hidden-dtype"},
    {"draft_vocab", "--draft-vocab"},
    {"drafter_target_mismatch", "--drafter-target-mismatch"},
    {"tree", "--tree"},
    {"tree_budget", "--tree-budget"},
    {"tree_shapes", "--trees"},
    {"lookup_ngram_max", "--lookup-ngram-max"},
    {"lookup_max_draft", "--lookup-max-draft"},
    {"history_bytes", "--history-mb"},
    {"temperature", "--temp"},
    {"top_k", "--top-k"},
    {"top_p", "--top-p"},
    {"min_p", "--min-p"},
    {"corpus", "--corpus"},
    {"seq_len", "--seq-len"},
    {"heldout", "--heldout"},
    {"batch", "--batch"},
    {"tokens", "--tokens"},
    {"prompt_tokens", "--prompt-tokens"},
    {"prompt_tokens_min", "--prompt-tokens-min"},
    {"gen_tokens", "--gen-tokens"},
    {"K", "--k"},
    {"accum", "--accum"},
    {"steps", "--steps"},
    {"lr", "--lr"},
    {"ema", "--ema"},
    {"loss", "--loss"},
    {"loss_weights", "--loss-weights"},
    {"kl_temp", "--kl-temp"},
    {"device", "--device"},
    {"resume", "--resume"},
    {"shards", "--shards"},
    {"force", "--force"},
    {"assistant_layers", "--assistant-layers"},
    {"assistant_hidden", "--assistant-hidden"},
    {"assistant_heads", "--assistant-heads"},
    {"assistant_ffn", "--assistant-ffn"},
};

// The flag of `setting` when the command that ran (the deepest parsed
// subcommand of app) has it, else "".
inline std::string flag_for(const CLI::App& app, const char* setting) {
  if (!setting) return "";
  const CLI::App* at = &app;
  while (!at->get_subcommands().empty()) at = at->get_subcommands().front();
  for (const auto& [name, flag] : kSettingFlags) {
    if (std::strcmp(name, setting) == 0 && at->get_option_no_throw(flag)) return flag;
  }
  return "";
}

// "--flag: " for a message about a setting the command has a flag for, else "".
inline std::string flag_prefix(const CLI::App& app, const char* setting) {
  const std::string flag = flag_for(app, setting);
  return flag.empty() ? flag : flag + ": ";
}
inline std::string flag_prefix(const CLI::App& app, const std::exception& e) {
  return flag_prefix(app, setting_of(e));
}

// While alive, library warnings print as "warning: --flag: message".
class FlagWarnings {
 public:
  explicit FlagWarnings(const CLI::App& app) {
    set_warning_sink([&app](const char* setting, const std::string& message) {
      fmt::print(stderr, "warning: {}{}\n", flag_prefix(app, setting), message);
    });
  }
  ~FlagWarnings() { set_warning_sink(nullptr); }
  FlagWarnings(const FlagWarnings&) = delete;
  FlagWarnings& operator=(const FlagWarnings&) = delete;
};

}  // namespace mtp::cli
