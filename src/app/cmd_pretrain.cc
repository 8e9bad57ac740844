// `mtpspec pretrain`: a small Llama or Gemma 4 target from scratch, as a
// Hugging Face directory the engine loads like any other checkpoint.
//
// This half (main binary: tokenizers, libsentencepiece) prepares the data:
//   1. the tokenizer in MODEL_DIR: a SentencePiece BPE model trained on the
//      corpus (byte fallback, so any text round-trips; <unk> 0, <s> 1, </s> 2,
//      identity normalisation, whitespace kept), or a copy of --tokenizer PATH;
//   2. the corpus tokenized with the engine's own tokenizer (io/tokenizer.h on
//      MODEL_DIR) into MODEL_DIR/pretrain/tokens.safetensors (io/pretrain_data.h),
//      documents split train / held-out by a hash of their text;
// both reused when the corpus, --heldout and the tokenizer are unchanged. Then
// it execs `mtpspec-train pretrain-model` (train/pretrain.h), the libtorch half,
// which trains and writes config.json + model.safetensors.
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/checks.h"
#include "app/commands.h"
#include "app/train_forward.h"
#include "cli/train_commands.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "core/progress.h"
#include "core/thread_pool.h"
#include "io/corpus.h"
#include "io/pretrain_data.h"
#include "tokenizer/sentencepiece_trainer.h"
#include "tokenizer/tokenizer.h"
#include "model/fingerprint.h"
#include "model/pretrain_options.h"

namespace mtp::app {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kTokenizerFiles[] = {"tokenizer.json", "tokenizer.model",
                                           "tokenizer_config.json", "special_tokens_map.json"};
// 256 byte pieces + <unk>, <s>, </s>: a byte-fallback vocabulary has at least these.
constexpr int kMinVocab = 260;

struct PretrainArgs {
  std::vector<std::string> corpus;
  std::string tokenizer = "train";
  int vocab = 0;
  double heldout = 0.02;
  model::PretrainOptions o;  // the training half's (o.model_dir = -o)
};

void remove_tokenizer_files(const fs::path& dir) {
  for (const char* f : kTokenizerFiles) fs::remove(dir / f);
}

void train_tokenizer(const std::vector<const std::string*>& docs, int vocab, int threads,
                     uint64_t seed, const fs::path& out, const std::vector<std::string>& corpus) {
  std::string names;
  for (const std::string& c : corpus) names += (names.empty() ? "'" : ", '") + c + "'";
  const std::string proto = io::train_sentencepiece_bpe(docs, vocab, threads, seed, names);
  remove_tokenizer_files(out);
  write_file_atomic((out / "tokenizer.model").string(), proto);
}

// --tokenizer PATH: a SentencePiece .model, a tokenizer.json, or a folder with
// either; tokenizer_config.json beside it comes along. (name in MODEL_DIR, bytes).
using Files = std::vector<std::pair<std::string, std::string>>;
Files tokenizer_files(const fs::path& src) {
  std::vector<std::pair<fs::path, std::string>> files;  // source, name in MODEL_DIR
  const fs::path dir = fs::is_directory(src) ? src : src.parent_path();
  if (fs::is_directory(src)) {
    for (const char* f : {"tokenizer.json", "tokenizer.model"}) {
      if (fs::exists(src / f)) files.push_back({src / f, f});
    }
  } else if (src.extension() == ".model" || src.extension() == ".json") {
    if (!fs::exists(src)) fail<IoError>("tokenizer '{}' does not exist", src.string());
    files.push_back({src, src.extension() == ".model" ? "tokenizer.model" : "tokenizer.json"});
  }
  if (files.empty()) {
    fail<InputError>(
        "--tokenizer '{}': expected a SentencePiece .model, a Hugging Face "
        "tokenizer.json, or a folder holding one",
        src.string());
  }
  for (const char* f : {"tokenizer_config.json", "special_tokens_map.json"}) {
    if (fs::exists(dir / f)) files.push_back({dir / f, f});
  }
  Files out;
  for (auto& [from, name] : files) out.push_back({name, read_file(from.string())});
  return out;
}

// Tokenizer + tokens.safetensors in a.o.model_dir (reused when unchanged).
void prepare_data(const PretrainArgs& a, const model::PretrainPreset& preset, bool resuming) {
  const fs::path out(a.o.model_dir);
  std::vector<std::string> docs;
  json corpus = json::array(), identity_corpus = json::array();
  for (const auto& p : a.corpus) {
    io::CorpusFile f = io::read_corpus(p, docs);
    corpus.push_back({{"path", fs::absolute(p).string()},
                      {"sha256", f.sha256},
                      {"bytes", f.bytes},
                      {"documents", f.documents}});
    identity_corpus.push_back({{"sha256", f.sha256}, {"bytes", f.bytes}});
  }
  if (docs.empty()) {
    fail<InputError>(
        "the corpus has no documents ({}: plain text with documents separated by "
        "blank lines, or .jsonl with a \"text\" field)",
        fmt::join(a.corpus, ", "));
  }
  std::vector<const std::string*> train_docs;
  std::vector<uint8_t> held(docs.size());
  for (size_t i = 0; i < docs.size(); ++i) {
    held[i] = io::is_heldout_document(docs[i], a.heldout);
    if (!held[i]) train_docs.push_back(&docs[i]);
  }
  if (train_docs.empty()) {
    fail<InputError>("all {} documents fell into the held-out split; lower --heldout", docs.size());
  }
  const int threads = resolve_threads(a.o.threads);
  const int vocab = a.vocab > 0 ? a.vocab : preset.vocab;
  const bool trained = a.tokenizer == "train";
  Files given;  // --tokenizer PATH: its identity is its bytes
  std::string given_bytes;
  if (!trained) {
    given = tokenizer_files(a.tokenizer);
    for (auto& [name, bytes] : given) given_bytes += name + '\0' + bytes + '\0';
  }
  const json tok_id = trained ? json{{"train", "sentencepiece-bpe-byte-fallback-v1"},
                                     {"vocab", vocab},
                                     {"seed", a.o.seed}}
                              : json{{"files_sha256", model::sha256_hex(given_bytes)}};
  const json identity = {{"format_version", 1},
                         {"corpus", identity_corpus},
                         {"heldout", a.heldout},
                         {"tokenizer", tok_id}};
  const std::string id_hash = model::sha256_hex(identity.dump());
  const std::string tokens_path = io::pretrain_tokens_path(a.o.model_dir);
  const json old = io::read_pretrain_info(tokens_path);
  if (!old.is_null() && old.value("identity_hash", "") == id_hash &&
      (fs::exists(out / "tokenizer.model") || fs::exists(out / "tokenizer.json"))) {
    fmt::print("reusing the tokenizer and the tokenized corpus in {}\n",
               io::pretrain_dir(a.o.model_dir));
    return;
  }
  if (resuming) {
    fail<InputError>(
        "cannot resume '{}': its corpus, --heldout or tokenizer differ from this "
        "run's (choose a new -o folder)",
        a.o.model_dir);
  }
  fs::create_directories(out);
  if (trained) {
    fmt::print("training a {}-piece SentencePiece BPE tokenizer on {} documents...\n", vocab,
               train_docs.size());
    train_tokenizer(train_docs, vocab, threads, a.o.seed, out, a.corpus);
  } else {
    remove_tokenizer_files(out);
    for (auto& [name, bytes] : given) write_file_atomic((out / name).string(), bytes);
  }
  std::unique_ptr<io::Tokenizer> tok = io::load_tokenizer(out.string());
  io::PretrainData d;
  const int32_t bos = tok->adds_bos() ? tok->bos_id() : -1;
  const std::vector<int32_t> eos_ids = tok->eos_ids();
  const int32_t eos = eos_ids.empty() ? -1 : eos_ids.front();
  Progress prog("tokenize", double(docs.size()), "doc", a.o.progress);
  for (size_t i = 0; i < docs.size(); ++i) {
    (held[i] ? d.heldout : d.train).add_document(tok->encode(docs[i], false), bos, eos);
    prog.update(double(i + 1));
  }
  prog.finish();
  d.info = {{"identity", identity},
            {"identity_hash", id_hash},
            {"vocab", tok->vocab_size()},
            {"bos_id", bos},
            {"eos_id", eos},
            {"tokenizer", tok->kind()},
            {"corpus", corpus},
            {"counts",
             {{"train_documents", d.train.starts.size()},
              {"train_tokens", d.train.tokens.size()},
              {"heldout_documents", d.heldout.starts.size()},
              {"heldout_tokens", d.heldout.tokens.size()}}}};
  io::write_pretrain_data(tokens_path, d);
  fmt::print("tokenized {} documents: {} training tokens, {} held-out tokens (vocab {})\n",
             docs.size(), d.train.tokens.size(), d.heldout.tokens.size(), tok->vocab_size());
}

void run(const PretrainArgs& a) {
  const model::PretrainPreset& preset = model::pretrain_preset(a.o.preset);
  require_train_binary("pretrain");
  if (!(a.heldout >= 0 && a.heldout < 1)) fail<InputError>("--heldout must be in [0, 1)");
  if (a.tokenizer != "train" && a.vocab > 0) {
    fail<InputError>("--vocab sizes a tokenizer trained here; --tokenizer '{}' brings its own",
                     a.tokenizer);
  }
  if (a.tokenizer == "train" && a.vocab > 0 && a.vocab < kMinVocab) {
    fail<InputError>(
        "--vocab {} is too small: a byte-fallback tokenizer needs 256 byte pieces, "
        "<unk>, <s>, </s> and the corpus's characters (use 512 or more)",
        a.vocab);
  }
  const fs::path out(a.o.model_dir);
  if (fs::exists(out / "config.json") && !fs::exists(io::pretrain_dir(a.o.model_dir))) {
    fail<InputError>(
        "'{}' holds a model that `mtpspec pretrain` did not make; choose a new -o "
        "folder",
        a.o.model_dir);
  }
  const bool has_ckpt =
      fs::exists(fs::path(io::pretrain_dir(a.o.model_dir)) / "checkpoint.safetensors");
  if (has_ckpt && !a.o.resume) {
    fail<InputError>(
        "'{}' already holds a pretraining checkpoint; pass --resume to continue it, "
        "or choose a new -o folder",
        a.o.model_dir);
  }
  prepare_data(a, preset, has_ckpt);

  exec_train(cli::kPretrainModel.name, {"--options", nlohmann::json(a.o).dump()});
}

}  // namespace

void add_pretrain(CLI::App& root) {
  auto a = std::make_shared<PretrainArgs>();
  std::string presets;
  for (const auto& p : model::pretrain_presets()) {
    presets += fmt::format(
        "\n  {}: d {}, {} layers, {}/{} heads, ffn {}, vocab {}, seq {}, {} "
        "steps x {} windows: {}",
        p.name, p.d_model, p.n_layers, p.n_heads, p.n_kv_heads, p.ffn, p.vocab, p.seq_len, p.steps,
        p.batch, p.about);
  }
  CLI::App* cmd = root.add_subcommand(
      "pretrain",
      "Train a small Llama or Gemma 4 model from scratch (libtorch) and write a Hugging Face "
      "folder (config.json, model.safetensors, tokenizer.model) that every other "
      "command loads with -m");
  cmd->add_option("--corpus", a->corpus,
                  "Text files: plain text (documents separated by blank lines) or .jsonl "
                  "(\"text\" field)")
      ->required()
      ->expected(1, -1);
  cmd->add_option("-o,--output", a->o.model_dir,
                  "Model folder to write (also holds pretrain/: tokens, "
                  "checkpoint, metrics.jsonl)")
      ->required()
      ->check(cli::OutputDir);
  cmd->add_option("--arch", a->o.arch,
                  "Architecture: llama (LlamaForCausalLM), gemma4 (Gemma4ForCausalLM: the "
                  "preset's sizes with per-layer embeddings, K/V sharing, sliding and full "
                  "layers, at least 4 layers) or qwen35 (Qwen3_5ForCausalLM: Gated DeltaNet "
                  "layers with a gated full-attention layer every 4th and last, trained with its "
                  "native MTP head mtp.*)")
      ->check(CLI::IsMember(std::vector<std::string>(model::kPretrainArchs.begin(),
                                                     model::kPretrainArchs.end())));
  cmd->add_option("--preset", a->o.preset, "Model size:" + presets);
  cmd->add_option("--tokenizer", a->tokenizer,
                  "'train' (a SentencePiece BPE tokenizer trained on the corpus) or PATH: a "
                  "SentencePiece .model, a tokenizer.json, or a folder with one");
  cmd->add_option("--vocab", a->vocab,
                  "Pieces of the trained tokenizer (default: the preset's; "
                  "fewer when the corpus cannot fill them)");
  cmd->add_option("--steps", a->o.steps, "Optimizer steps (default: the preset's)")
      ->check(cli::NonNegative);
  cmd->add_option("--seq-len", a->o.seq_len,
                  "Tokens per training window, also the model's "
                  "context length (default: the preset's)")
      ->check(cli::NonNegative);
  cmd->add_option("--batch", a->o.batch, "Windows per step (default: the preset's)")
      ->check(cli::NonNegative);
  cmd->add_option("--lr", a->o.lr,
                  "Peak learning rate: AdamW, warm-up then cosine to 10% "
                  "(default: the preset's)")
      ->check(cli::NonNegative);
  cmd->add_option("--device", a->o.device, "Training device (cuda needs a CUDA build of libtorch)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->add_option("--threads", a->o.threads,
                  "Threads for the tokenizer and libtorch (0 = "
                  "physical cores)")
      ->check(cli::NonNegative);
  cmd->add_option("--seed", a->o.seed,
                  "Seed of the tokenizer, the initial weights and the data "
                  "order")
      ->check(cli::kSeedRange);
  cmd->add_option("--heldout", a->heldout,
                  "Fraction of documents held out for the evaluation "
                  "loss (by a hash of their text)")
      ->check(cli::Range(0, 1));
  cmd->add_flag("--resume", a->o.resume,
                "Continue the checkpoint in the folder bit for bit (same "
                "corpus and flags; starts afresh when there is none)");
  cmd->add_option("--eval-every", a->o.eval_every,
                  "Held-out evaluation period in steps "
                  "(default: steps/10)")
      ->check(cli::NonNegative);
  cmd->add_option("--save-every", a->o.save_every,
                  "Checkpoint period in steps (default: "
                  "--eval-every)")
      ->check(cli::NonNegative);
  cmd->add_option("--stop-after", a->o.stop_after,
                  "Stop (checkpointed) after this step; "
                  "continue later with --resume")
      ->check(cli::NonNegative);
  cmd->add_flag("!--no-progress", a->o.progress, "No progress lines");
  cmd->callback([a, cmd] {
    std::string line = "mtpspec pretrain";
    for (const auto& r : cmd->get_options()) {
      for (const auto& v : r->results()) line += " " + r->get_name() + " " + v;
    }
    a->o.command_line = line;
    run(*a);
  });
}

}  // namespace mtp::app
