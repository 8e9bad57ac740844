// `mtpspec demo`: from nothing to a measured, lossless speed-up, in one command.
//
// Stages (each a child `mtpspec <stage>` with its own progress line; finished
// work is reused when the demo is run again):
//   1. corpus      Debian's `fortunes` package (%-separated) -> WORKDIR/corpus.txt
//                  (skipped with --corpus or --model)
//   2. pretrain    a tiny target from scratch, Llama, (--arch gemma4) Gemma 4 or
//                  (--arch qwen35) Qwen3.5 trained with its native MTP head
//                  (skipped with --model)
//   3. precompute  self-distilled shards: the target's own continuations
//   4. train       a K = 2 MTP drafter (libtorch), then export (parity-gated)
//   5. parity      libtorch modules vs engine modules on the same inputs
//   6. bench       plain vs speculative generation, interleaved, live acceptance
//   7. drift       decode-only vs verify-only token streams (flips must be 0)
//   8. bench-native (a target with a native MTP head, Qwen3.5's mtp.*) plain vs
//                  speculative with the head drafting alone (bench --sources native-mtp)
// and a summary: speedup, live acceptance per module, flips, and distinct-2 of
// the target's own output (a degenerate, repetitive target inflates acceptance;
// this makes it visible).
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "cli/checks.h"
#include "app/commands.h"
#include "app/subprocess.h"
#include "core/error.h"
#include "core/json.h"
#include "core/mapped_file.h"
#include "core/progress.h"
#include "io/safetensors.h"
#include "model/hf_config.h"
#include "model/loader.h"
#include "model/pretrain_options.h"
#include "measure/bench.h"
#include "measure/drift.h"
#include "speculative/cycle/draft_tree.h"

namespace mtp::app {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kFortunesDir = "/usr/share/games/fortunes";
constexpr long kDistillSeq = 128;  // tokens per self-distilled sequence (prompt included)

// Openers written for this project (not taken from any corpus), so the target
// continues text it has not seen verbatim.
constexpr const char* kDemoPrompts[] = {
    "The best way to", "A man walked into a bar and", "Never trust a", "You will be",
    "The problem with computers is", "Life is", "If you can't", "There are two kinds of people:",
    "The secret of happiness is", "Q: Why did the chicken", "Do not", "In the beginning",
    "It is better to", "Every man has", "Love is", "A friend is someone who",
    "Money can't", "Today is a good day to", "The only thing worse than", "Always remember that",
    "Some people", "Nothing is", "When in doubt,", "What is the difference between",
};

struct DemoArgs {
  std::string model, workdir = "demo-work", prompts, preset = "tiny", arch;
  std::vector<std::string> corpus;
  int threads = 0, pretrain_steps = 0, train_steps = 150, n = 96, repeat = 2, k = 2;
  int draft_vocab = 1024;
  long distill_prompts = 3000;
  bool json = false;
};

// The fortune files (one fortune per "%"-separated block) as a plain-text corpus:
// one document per fortune, documents separated by a blank line (io/corpus.h).
// Blank lines inside a fortune are dropped so a fortune stays one document.
long write_fortune_corpus(const fs::path& dir, const fs::path& out) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    // Source files have no extension (*.dat are indexes, *.u8 UTF-8 twins).
    if (e.is_regular_file() && !e.path().has_extension()) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  std::string text;
  long docs = 0;
  for (const auto& f : files) {
    std::ifstream in(f);
    std::string line, doc;
    auto flush = [&] {
      if (doc.find_first_not_of(" \t\n") != std::string::npos) {
        text += doc + "\n";
        ++docs;
      }
      doc.clear();
    };
    while (std::getline(in, line)) {
      if (line == "%") {
        flush();
      } else if (line.find_first_not_of(" \t\r") != std::string::npos) {
        doc += line + "\n";
      }
    }
    flush();
  }
  if (docs == 0) fail<InputError>("no fortunes found in {}", dir.string());
  write_file_atomic(out.string(), text);
  return docs;
}

class Demo {
 public:
  explicit Demo(DemoArgs a) : a_(std::move(a)), w_(a_.workdir), self_(self_executable()) {}

  void run() {
    // Check what the user named before any stage runs (minutes of work).
    if (!a_.model.empty() && !fs::exists(a_.model)) fail<InputError>("--model '{}': not found", a_.model);
    if (!a_.model.empty() && !a_.arch.empty()) {
      fail<InputError>("--arch {} chooses the family of the target the demo pretrains; --model "
                       "'{}' brings its own", a_.arch, a_.model);
    }
    for (const auto& c : a_.corpus) {
      if (!fs::is_regular_file(c)) fail<InputError>("--corpus '{}': not a readable file", c);
    }
    if (!a_.prompts.empty() && !fs::is_regular_file(a_.prompts)) {
      fail<InputError>("--prompts '{}': not a readable file", a_.prompts);
    }
    fs::create_directories(w_);
    const double t0 = now();
    corpus();
    const std::string model_dir = target();
    const std::string shards_dir = (w_ / "shards").string(), run_dir = (w_ / "run").string();
    const std::string drafter_path = (w_ / "drafter.safetensors").string();
    const std::string prompts = prompts_file();
    const std::string threads = std::to_string(a_.threads);
    // Greedy self-distillation (--temp 0): the drafter learns exactly what greedy
    // decoding will ask of it (live acceptance 0.86 vs 0.77 for sampled data on
    // stories260K: docs/lab/performance-history.md "Drafter training on
    // stories260K"). Prompts of 2..16 corpus tokens, so the first positions
    // after a short prompt are trained too; sequences of at most
    // kDistillSeq tokens (most continuations end at EOS well before).
    const long seq = std::min(kDistillSeq, long(model::read_model_config(model_dir).max_position));
    stage("precompute",
          {"-m", model_dir, "--threads", threads, "-o", shards_dir, "--self-distill", "--temp", "0",
           "--prompt-tokens", std::to_string(std::min(16L, seq / 2)), "--prompt-tokens-min", "2",
           "--seq-len", std::to_string(seq), "--max-tokens",
           std::to_string(a_.distill_prompts * seq)},
          /*with_corpus=*/true);
    if (!fs::exists(drafter_path)) {
      std::vector<std::string> tr = {"--shards",   shards_dir,
                                     "-m",         model_dir,
                                     "-o",         run_dir,
                                     "--k",        std::to_string(a_.k),
                                     "--steps",    std::to_string(a_.train_steps),
                                     "--batch",    "32",
                                     "--lr",       "2e-3",
                                     "--threads",  threads,
                                     "--no-parity"};
      if (fs::exists(fs::path(run_dir) / "checkpoint.safetensors")) tr.push_back("--resume");
      stage("train", tr);
      // Stored (and so held) in bf16, drafting among the most frequent tokens:
      // the drafter's cost per draft (a K = 2 cycle 2.70 -> 1.63 decodes: docs/lab/
      // performance-history.md "The demo target (tiny preset").
      stage("export", {"--run", run_dir, "--ema", "-o", drafter_path, "--dtype", "bf16",
                       "--draft-vocab", std::to_string(a_.draft_vocab)});
    } else {
      skipped("train", drafter_path + " exists");
    }
    stage("parity",
          {"-m", model_dir, "--drafter", drafter_path, "--run", run_dir, "--shards", shards_dir});
    const std::string n_tokens = std::to_string(a_.n);
    const fs::path bench_json = w_ / "bench.json", drift_json = w_ / "drift.json";
    stage("bench",
          {"-m", model_dir, "--drafter", drafter_path, "--prompts", prompts, "-n", n_tokens,
           "--threads", threads, "--repeat", std::to_string(a_.repeat), "--json", "--report",
           (w_ / "report.md").string(), "--plot", (w_ / "plot.svg").string()},
          false, bench_json.string());
    stage("drift",
          {"-m", model_dir, "--drafter", drafter_path, "--prompts", prompts, "-n", n_tokens,
           "--threads", threads, "--json"},
          false, drift_json.string());
    std::optional<json> native;
    // A config with an MTP layer whose checkpoint holds the head (transformers'
    // save_pretrained drops mtp.*).
    if (model::read_model_config(model_dir).mtp_layers > 0 &&
        model::load_model(model_dir, {}).weights.mtp.present()) {
      const fs::path native_json = w_ / "bench-native.json";
      stage("bench",
            {"-m", model_dir, "--drafter", drafter_path, "--sources", "native-mtp", "--draft-k",
             std::to_string(a_.k), "--prompts", prompts, "-n", n_tokens, "--threads", threads,
             "--repeat", std::to_string(a_.repeat), "--json"},
            false, native_json.string(), "bench-native");
      native = native_head_summary(read_json(native_json), native_json);
    }
    const json drift = read_json(drift_json);
    if (!drift.is_object() || !drift.contains("summary")) {
      fail<FormatError>("{}: no \"summary\" in the drift stage's output", drift_json.string());
    }
    summary(speculative::BenchResult::from_json(read_json(bench_json)),
            speculative::DriftSummary::from_json(drift["summary"]), drafter_info(drafter_path),
            native, now() - t0);
  }

 private:
  static double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }

  // Runs `mtpspec name args...` (plus --corpus files when asked); a failing stage
  // stops the demo with its exit status named.
  // `label`: the stage's name in the log and summary ("" = name).
  void stage(const std::string& name, std::vector<std::string> args, bool with_corpus = false,
             const std::string& stdout_path = "", std::string label = "") {
    if (label.empty()) label = name;
    if (with_corpus) {
      args.push_back("--corpus");
      args.insert(args.end(), corpus_.begin(), corpus_.end());
    }
    std::string line = "mtpspec " + name;
    for (const auto& x : args) line += " " + x;
    fmt::print(stderr, "\n== [{}] {}\n", label, line);
    const double t = now();
    args.insert(args.begin(), name);
    // A stage's human-readable output goes to stderr: our stdout is the summary.
    const int rc = run_process(self_, args,
                               stdout_path.empty() ? ChildStdout{ChildStdout::kStderr, ""}
                                                   : ChildStdout{ChildStdout::kFile, stdout_path});
    const double s = now() - t;
    stages_.push_back({{"stage", label}, {"seconds", s}, {"skipped", false}});
    if (rc != 0) {
      fail<ConfigError>("demo stage `{}` failed (exit status {}); its output is above. Fix it and "
                        "rerun `mtpspec demo` — finished stages are reused", label, rc);
    }
    fmt::print(stderr, "== [{}] done in {}\n", label, format_duration(s));
  }

  void skipped(const std::string& name, const std::string& why) {
    fmt::print(stderr, "\n== [{}] reused: {}\n", name, why);
    stages_.push_back({{"stage", name}, {"seconds", 0.0}, {"skipped", true}});
  }

  void corpus() {
    if (!a_.corpus.empty()) {
      corpus_ = a_.corpus;
      return;
    }
    const fs::path out = w_ / "corpus.txt";
    corpus_ = {out.string()};
    if (fs::exists(out)) return skipped("corpus", out.string() + " exists");
    if (!fs::is_directory(kFortunesDir)) {
      fail<InputError>("the demo's default corpus is Debian's `fortunes` package ({} is missing): "
                       "install it (`apt-get install fortunes`; the README's demo command does) "
                       "or pass --corpus FILE", kFortunesDir);
    }
    const long docs = write_fortune_corpus(kFortunesDir, out);
    fmt::print(stderr, "\n== [corpus] {} fortunes from {} -> {} ({:.1f} MB)\n", docs, kFortunesDir,
               out.string(), double(fs::file_size(out)) / 1e6);
    stages_.push_back({{"stage", "corpus"}, {"seconds", 0.0}, {"skipped", false}});
  }

  // The target: --model, or a tiny Llama pretrained here on the corpus.
  std::string target() {
    if (!a_.model.empty()) return a_.model;
    const fs::path dir = w_ / "model";
    check_target_arch(dir);
    if (fs::exists(dir / "model.safetensors") && fs::exists(dir / "config.json")) {
      skipped("pretrain", dir.string() + " exists");
      return dir.string();
    }
    std::vector<std::string> args = {"-o", dir.string(), "--preset", a_.preset, "--arch", arch(),
                                     "--threads", std::to_string(a_.threads), "--resume"};
    if (a_.pretrain_steps > 0) {
      args.push_back("--steps");
      args.push_back(std::to_string(a_.pretrain_steps));
    }
    stage("pretrain", args, true);
    return dir.string();
  }

  std::string arch() const { return a_.arch.empty() ? "llama" : a_.arch; }

  // The workdir's pretrained target (finished or not) must be of the family
  // asked for: its stages after pretraining would otherwise reuse another
  // target's shards, drafter and results.
  void check_target_arch(const fs::path& dir) const {
    std::string found;
    if (fs::exists(dir / "config.json")) {
      found = model::arch_name(model::read_model_config(dir.string()).arch);
    } else if (fs::exists(dir / "pretrain" / "run.json")) {
      const fs::path run_path = dir / "pretrain" / "run.json";
      const json run = read_json(run_path);
      const json traj = run.is_object() ? run.value("trajectory", json()) : json();
      if (traj.is_object() && traj.contains("config")) {
        found = model::arch_name(
            model::parse_hf_config(traj["config"], nullptr, run_path.string() + " config").arch);
      }
    }
    if (!found.empty() && found != arch()) {
      fail<InputError>("the workdir '{}' holds a {} target; the demo was asked for --arch {}: "
                       "choose another --workdir", w_.string(), found, arch());
    }
  }

  std::string prompts_file() {
    if (!a_.prompts.empty()) return a_.prompts;
    std::string text;
    for (const char* p : kDemoPrompts) text += json{{"prompt", p}, {"lang", "en"}}.dump() + "\n";
    const fs::path out = w_ / "prompts.jsonl";
    write_file_atomic(out.string(), text);
    return out.string();
  }

  static json read_json(const fs::path& p) {
    return parse_json(read_file(p.string()), p.string() + " (the JSON the stage should have written)");
  }

  // The native head's row of a `bench --sources native-mtp --json` result
  // (speculative::SourcesResult::to_json, every prompt kind together).
  static json native_head_summary(const json& j, const fs::path& p) {
    const json* r = nullptr;
    if (j.is_object() && j.contains("kinds") && j["kinds"].contains("all")) {
      const json& src = j["kinds"]["all"]["sources"];
      if (src.contains(speculative::kNativeMtpSource)) r = &src[speculative::kNativeMtpSource];
    }
    if (!r) fail<FormatError>("{}: no native-mtp result for all prompts", p.string());
    return {{"speedup", (*r)["speedup"]},
            {"baseline_tok_s", j["kinds"]["all"]["plain_tok_s"]},
            {"spec_tok_s", (*r)["tok_s"]},
            {"acceptance_live", (*r)["stats"]["acceptance"]},
            {"tokens_per_cycle", (*r)["tokens_per_cycle"]},
            {"outputs_differing", (*r)["flips"]}};
  }

  // What the drafter file says about itself: stored precision and draft vocabulary.
  static json drafter_info(const std::string& path) {
    const io::TensorSet ts = io::TensorSet::open_file(path);
    const auto& meta = ts.metadata();
    json info = {{"stored", nullptr}, {"draft_vocab", nullptr}};
    auto it = meta.find("training");
    if (it == meta.end()) return info;
    json tr;
    try {
      tr = parse_json(it->second, path + ": training");
    } catch (const FormatError&) {
      return info;
    }
    if (!tr.is_object()) return info;
    info["stored"] = tr.value("stored", json());
    info["draft_vocab"] = tr.value("draft_vocab", json());
    return info;
  }

  // native: the bench with the target's native MTP head drafting, if it has one.
  void summary(const speculative::BenchResult& b, const speculative::DriftSummary& drift, const json& drafter,
               const std::optional<json>& native, double seconds) {
    json out = {{"workdir", w_.string()},
                {"seconds", seconds},
                {"stages", stages_},
                {"speedup", b.speedup},
                {"speedup_spread", {{"min", b.spread.min}, {"max", b.spread.max},
                                    {"stdev", b.spread.stdev}}},
                {"end_to_end_speedup", b.end_to_end_speedup},
                {"baseline_tok_s", b.baseline_tok_s},
                {"spec_tok_s", b.spec_tok_s},
                {"acceptance_live", b.acceptance_live},
                {"acceptance_tf_own", b.acceptance_tf_own},
                {"tokens_per_cycle", b.tokens_per_cycle},
                {"break_even_acceptance", b.break_even ? json(*b.break_even) : json(nullptr)},
                {"outputs_differing", b.flips},
                {"drift_flipped_prompts", drift.flipped},
                {"drift_max_abs_dlogit", drift.max_abs_dlogit},
                {"target_distinct_2", b.target_distinct_2},
                {"drafter", drafter}};
    if (native) out["native_head"] = *native;
    if (a_.json) {
      fmt::print("{}\n", out.dump());
      return;
    }
    auto list = [](const std::vector<double>& v) {
      std::string s;
      for (double x : v) s += fmt::format("{}{:.2f}", s.empty() ? "" : " ", x);
      return s;
    };
    fmt::print("\n=== mtpspec demo: summary ({} total; details in {}/report.md)\n",
               format_duration(seconds), w_.string());
    fmt::print("  plain decoding        {:8.1f} tok/s\n", b.baseline_tok_s);
    fmt::print("  speculative (K = {})   {:8.1f} tok/s   speedup {:.2f}x (repeats: {:.2f}..{:.2f}); "
               "end to end with prompt processing {:.2f}x\n",
               b.acceptance_live.size(), b.spec_tok_s, b.speedup, b.spread.min, b.spread.max,
               b.end_to_end_speedup);
    const json& dv = drafter["draft_vocab"];
    fmt::print("  drafter: stored {}; {}\n", drafter["stored"].is_string() ? drafter["stored"].get<std::string>() : "?",
               dv.is_object() ? fmt::format("drafts among the {} most frequent tokens ({:.1f} % of "
                                            "its training labels)", dv.value("size", 0L),
                                            100 * dv.value("coverage", 0.0))
                              : std::string("drafts over the whole vocabulary"));
    fmt::print("  verify multiplier m(q), q = 1..8: {}; drafter cost per module: {}\n",
               list(b.verify_multiplier), list(b.drafter_cost));
    fmt::print("  live acceptance per module position: {}   (teacher-forced on own output: {})\n",
               list(b.acceptance_live), list(b.acceptance_tf_own));
    fmt::print("  tokens per cycle {:.2f}; break-even acceptance {}\n", b.tokens_per_cycle,
               b.break_even ? fmt::format("{:.2f}", *b.break_even)
                            : std::string("none (even perfect drafts cannot pay for a cycle)"));
    fmt::print("  outputs differing from plain: {}; drift: {} of {} prompts flipped, max |dlogit| {}\n",
               b.flips, drift.flipped, drift.prompts, drift.max_abs_dlogit);
    fmt::print("  target output diversity: distinct-2 = {:.3f} (1 = no repeated bigram; a "
               "repetitive target inflates acceptance)\n",
               b.target_distinct_2);
    if (native) {
      const json& h = *native;
      fmt::print("  native MTP head (mtp.*, up to {} drafts): {:.1f} tok/s, speedup {:.2f}x (its "
                 "own plain run {:.1f} tok/s); live acceptance per position: {}; tokens per "
                 "cycle {:.2f}; outputs differing from plain: {}\n",
                 a_.k, h["spec_tok_s"].get<double>(), h["speedup"].get<double>(),
                 h["baseline_tok_s"].get<double>(),
                 list(h["acceptance_live"].get<std::vector<double>>()),
                 h["tokens_per_cycle"].get<double>(), h["outputs_differing"].get<long>());
    }
  }

  DemoArgs a_;
  fs::path w_;
  std::string self_;
  std::vector<std::string> corpus_;
  json stages_ = json::array();
};

}  // namespace

void add_demo(CLI::App& root) {
  auto a = std::make_shared<DemoArgs>();
  CLI::App* cmd = root.add_subcommand(
      "demo", "The whole pipeline on one machine: pretrain a tiny target (or use --model), "
              "self-distill, train a K=2 drafter, parity, then plain vs speculative benchmark "
              "and drift. Finished stages are reused when rerun");
  cmd->add_option("-m,--model", a->model,
                  "Use this target (HF directory or llama2.c .bin) instead of pretraining one");
  cmd->add_option("--workdir", a->workdir, "Folder for every artefact (corpus, model, shards, run, "
                                           "drafter, bench.json, report.md)")
      ->check(cli::OutputDir);
  cmd->add_option("--corpus", a->corpus,
                  "Corpus files (text or .jsonl; default: Debian's fortunes, converted)");
  cmd->add_option("--prompts", a->prompts, "Prompts file for bench and drift (JSONL; default: "
                                           "24 English openers written for the demo)");
  cmd->add_option("--preset", a->preset,
                  "Pretraining preset of the target (see `mtpspec pretrain --help`)");
  cmd->add_option("--arch", a->arch,
                  "Family of the pretrained target: llama (default), gemma4 (per-layer "
                  "embeddings, K/V sharing, sliding and full layers) or qwen35 (Gated DeltaNet "
                  "and gated attention layers, with its native MTP head, which is benchmarked "
                  "too); see `mtpspec pretrain --help`")
      ->check(CLI::IsMember(std::vector<std::string>(model::kPretrainArchs.begin(),
                                                     model::kPretrainArchs.end())));
  cmd->add_option("--pretrain-steps", a->pretrain_steps, "Pretraining steps (0 = the preset's)")
      ->check(cli::NonNegative);
  cmd->add_option("--distill-prompts", a->distill_prompts,
                  "Corpus prompts (2-16 tokens each) the target continues greedily for the "
                  "drafter's training data")
      ->check(cli::Positive);
  cmd->add_option("--draft-vocab", a->draft_vocab,
                  "Draft only among this many most frequent tokens of the training data (0 = "
                  "the whole vocabulary; see `mtpspec export --help`)")
      ->check(cli::NonNegative);
  cmd->add_option("--train-steps", a->train_steps, "Drafter training steps")
      ->check(cli::Positive);
  cmd->add_option("--k", a->k, "MTP modules of the drafter")->check(cli::Range(1, 8));
  cmd->add_option("-n", a->n, "New tokens per generation in bench and drift")
      ->check(cli::Positive);
  cmd->add_option("--repeat", a->repeat, "Bench repeats")->check(cli::Positive);
  cmd->add_option("--threads", a->threads, "Threads for every stage (0 = physical cores)")
      ->check(cli::NonNegative);
  cmd->add_flag("--json", a->json, "Print the summary as one JSON object");
  cmd->callback([a] { Demo(*a).run(); });
}

}  // namespace mtp::app
