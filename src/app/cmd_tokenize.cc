// `mtpspec tokenize`: print the token ids of a text.
#include <CLI/CLI.hpp>
#include <fmt/core.h>
#include <fmt/ranges.h>

#include <memory>
#include <nlohmann/json.hpp>

#include "app/commands.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "core/setting.h"
#include "tokenizer/tokenizer.h"

namespace mtp::app {

namespace {
struct TokenizeArgs {
  std::string tokenizer, text, file;
  bool no_special = false, json = false;
};

void run_tokenize(const TokenizeArgs& a) {
  std::string text = a.file.empty() ? a.text : read_file(a.file);
  auto tok = about_setting("tokenizer", [&] { return io::load_tokenizer(a.tokenizer); });
  std::vector<int32_t> ids = tok->encode(text, !a.no_special);
  if (a.json) {
    fmt::print("{}\n", nlohmann::json{{"ids", ids}}.dump());
  } else {
    fmt::print("{}\n", fmt::join(ids, " "));
  }
}
}  // namespace

void add_tokenize(CLI::App& root) {
  auto a = std::make_shared<TokenizeArgs>();
  CLI::App* cmd = root.add_subcommand("tokenize", "Print the token ids of a text");
  cmd->add_option("--tokenizer", a->tokenizer,
                  "tokenizer.json, SentencePiece .model, llama2.c .bin, GPT-2 encoder.json, a GGUF "
                  "file, or a model directory")
      ->required();
  auto* p = cmd->add_option("-p,--prompt", a->text, "Text to tokenize");
  auto* f = cmd->add_option("-f,--file", a->file, "Read the text from a file");
  p->excludes(f);
  cmd->add_flag("--no-special", a->no_special, "Do not add BOS/EOS");
  cmd->add_flag("--json", a->json, "Print {\"ids\": [...]}");
  cmd->callback([a, p, f] {
    if (p->count() == 0 && f->count() == 0) fail<InputError>("tokenize needs -p TEXT or -f FILE");
    run_tokenize(*a);
  });
}

}  // namespace mtp::app
