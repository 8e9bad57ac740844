// `mtpspec train --online` and `mtpspec train-assistant --corpus|--prompts`:
// the main binary's half of online training. It has
// the tokenizer, so it tokenizes the corpus (or the prompts) and cuts it into
// capture jobs exactly as precompute does (speculative::plan_capture), writes
// them to RUN_DIR/online/jobs.safetensors (the pretraining token file format,
// io/pretrain_data.h: one document per job; info["capture"] says how to capture
// them, drafter::CaptureSpec) with the held-out prompts beside it, and hands
// mtpspec-train the rest of the command with --online-jobs PATH. The frozen
// target then computes every batch's capture as training runs: no shards.
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>

#include "app/common.h"
#include "app/train_forward.h"
#include "cli/checks.h"
#include "cli/train_commands.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "core/setting.h"
#include "drafter/capture.h"
#include "io/pretrain_data.h"
#include "measure/precompute.h"
#include "model/fingerprint.h"
#include "speculative/scheduler/params.h"

namespace mtp::app {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct OnlineArgs {
  ModelArgs model;
  speculative::PrecomputeOptions capture;
  std::string run_dir;
  bool force = false;
  bool progress = true;
  bool jobs_only = false;  // write the jobs, print the training command, do not train
};

// A word of a POSIX shell command line: as is when it needs no quoting.
std::string shell_word(const std::string& s) {
  const bool plain = !s.empty() && std::all_of(s.begin(), s.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) ||
           (ch != 0 && std::strchr("_./=:,+-@%", ch));
  });
  if (plain) return s;
  std::string q = "'";
  for (char ch : s) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return q + "'";
}

io::TokenStream stream_of(const std::vector<drafter::CaptureJob>& jobs) {
  io::TokenStream s;
  for (const drafter::CaptureJob& j : jobs) s.add_document(j.tokens, -1, -1);
  return s;
}

// Writes the jobs file (reused when its identity is unchanged) and returns its path.
std::string write_jobs(const OnlineArgs& a) {
  Session s = open_session(a.model);
  const model::ModelConfig& c = s.model->config();
  speculative::PrecomputeOptions o = speculative::resolve_precompute_options(a.capture, c);
  drafter::CaptureSpec spec;
  spec.seq_len = o.seq_len;
  spec.self_distill = o.self_distill;
  spec.gen_tokens = o.gen_tokens;
  spec.temp = o.temp;
  spec.stops = speculative::stop_token_ids(c, s.tokenizer.get());
  std::sort(spec.stops.begin(), spec.stops.end());
  const fs::path dir = fs::path(a.run_dir) / "online";
  const std::string path = (dir / "jobs.safetensors").string();

  speculative::CapturePlan plan = speculative::plan_capture(*s.tokenizer, o);
  json identity_corpus = json::array();
  for (const json& f : plan.corpus) identity_corpus.push_back({{"sha256", f["sha256"]}, {"bytes", f["bytes"]}});
  const json identity = {
      {"format_version", 1},
      {"target_fingerprint", model::target_fingerprint(s.model->loaded())},
      {"tokenizer", {{"kind", s.tokenizer->kind()}, {"vocab", s.tokenizer->vocab_size()}}},
      {"corpus", identity_corpus},
      {"max_tokens", o.max_tokens},
      {"heldout", o.heldout},
      {"prompt_tokens", o.self_distill ? o.prompt_tokens : 0},
      {"prompt_tokens_min", o.self_distill ? o.prompt_tokens_min : 0},
      {"prompts_file", !o.prompts.empty()},
      {"capture", spec.to_json()}};
  const std::string id_hash = model::sha256_hex(identity.dump());
  const json old = io::read_pretrain_info(path);
  if (!old.is_null() && old.value("identity_hash", "") == id_hash) {
    if (a.progress) fmt::print("reusing the online training jobs in {}\n", path);
    return path;
  }
  if (fs::exists(fs::path(a.run_dir) / "checkpoint.safetensors")) {
    fail<InputError>("'{}' holds a training run whose online jobs differ from these (corpus, "
                     "capture flags, tokenizer or target); choose a new -o folder", a.run_dir);
  }
  io::PretrainData d;
  d.train = stream_of(plan.train);
  d.heldout = stream_of(plan.held);
  d.info = {{"kind", "online-capture"},
            {"identity", identity},
            {"identity_hash", id_hash},
            {"capture", spec.to_json()},
            {"vocab", c.vocab},
            {"bos_id", plan.bos ? s.tokenizer->bos_id() : -1},
            {"eos_id", -1},
            {"tokenizer", s.tokenizer->kind()},
            {"corpus", plan.corpus},
            {"planned_tokens", plan.planned},
            {"counts",
             {{"documents", plan.documents},
              {"heldout_documents", plan.documents_held},
              {"train_sequences", plan.train.size()},
              {"heldout_sequences", plan.held.size()}}}};
  io::write_pretrain_data(path, d);
  speculative::write_heldout_prompts(plan.held, *s.tokenizer, plan.bos, o,
                                     (dir / "heldout_prompts.jsonl").string());
  if (a.progress) {
    fmt::print("online training jobs: {} training and {} held-out sequences ({} tokens planned) "
               "-> {}\n", plan.train.size(), plan.held.size(), plan.planned, path);
  }
  return path;
}

}  // namespace

bool wants_online(const std::vector<std::string>& args) {
  return std::find(args.begin(), args.end(), "--online") != args.end();
}

bool wants_corpus(const std::vector<std::string>& args) {
  return std::any_of(args.begin(), args.end(), [](const std::string& s) {
    for (const char* f : {"--corpus", "--prompts"}) {
      if (s == f || s.rfind(std::string(f) + "=", 0) == 0) return true;
    }
    return false;
  });
}

std::vector<std::string> prepare_online_training(const std::vector<std::string>& args,
                                                 OnlineTrainer trainer) {
  const bool assistant = trainer == OnlineTrainer::Assistant;
  for (const std::string& s : args) {
    if (s == "--help" || s == "-h") return args;  // mtpspec-train's help documents the flags
  }
  OnlineArgs a;
  const std::string what = assistant ? "mtpspec train-assistant" : "mtpspec train --online";
  CLI::App p{what};
  p.allow_extras();
  bool online = false;
  p.add_flag("--online", online);
  p.add_option("-m,--model", a.model.model)->required();
  p.add_option("--tokenizer", a.model.tokenizer);
  CLI::Option* threads = p.add_option("--threads", a.model.threads)->check(cli::NonNegative);
  // The assistant's -o is its output directory; the jobs go into OUT/online.
  p.add_option(assistant ? "-o,--out,--output" : "-o,--output", a.run_dir)
      ->required()->check(cli::OutputDir);
  if (!assistant) p.add_flag("--force", a.force);
  p.add_flag("!--no-progress", a.progress);
  p.add_flag("--jobs-only", a.jobs_only);
  add_capture_flags(&p, a.capture);
  std::vector<std::string> argv_s = {what};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<const char*> argv;
  for (const std::string& s : argv_s) argv.push_back(s.c_str());
  p.parse(int(argv.size()), argv.data());
  a.capture.progress = a.progress;

  std::string jobs;
  try {
    jobs = write_jobs(a);
  } catch (const InputError& e) {
    // This parser, not the forwarding command, has --threads: name it here.
    const char* setting = setting_of(e);
    if (setting && std::strcmp(setting, "threads") == 0) throw CLI::ValidationError("--threads", e.what());
    throw;
  }
  std::vector<std::string> out = {"--online-jobs", jobs, "-m", a.model.model, "-o", a.run_dir};
  if (threads->count() > 0) out.insert(out.end(), {"--threads", std::to_string(a.model.threads)});
  if (a.force) out.push_back("--force");
  if (!a.progress && !assistant) out.push_back("--no-progress");
  for (const std::string& s : p.remaining()) out.push_back(s);
  if (a.jobs_only) {
    // For a machine with a CUDA libtorch and no tokenizer side (docs/TRAINING.md "CUDA").
    std::string cmd = std::string("mtpspec-train ") +
                      (assistant ? cli::kTrainAssistant.name : cli::kTrain.name);
    for (const std::string& s : out) cmd += " " + shell_word(s);
    fmt::print("jobs written; train them with:\n{}\n", cmd);
    return {};
  }
  return out;
}

}  // namespace mtp::app
