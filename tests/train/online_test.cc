// Online training (`mtpspec train --online`: the frozen target captures each
// batch as training runs) against offline training on the shards `mtpspec
// precompute` writes, from the same corpus, flags and seed, on the real
// stories260K: the same batches make the same losses, held-out metrics, Adam
// moments and weights bit for bit after N steps; both exports pass the parity
// gate; both drafters give the same live acceptance. Plain sequences and
// self-distillation sampled at T = 0.7 (the token rule and its per-job seed
// are part of what must agree). Runs the CLI as a user would.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_util.h"
#include "core/mapped_file.h"
#include "model_util.h"
#include "test_util.h"
#include "train/checkpoint.h"

namespace mtp::train {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::shell_quote;

// A slice of the shared English corpus (the documents of its first 48 KB).
std::string corpus_slice(const std::string& corpus) {
  const std::string dir = test::temp_dir("online_corpus");
  const std::string text = read_file(corpus).substr(0, 48 * 1024);
  const std::string path = dir + "/slice.txt";
  std::ofstream(path) << text.substr(0, text.rfind("\n\n"));
  return path;
}

// metrics.jsonl without the timings (and the parity records, which name paths).
std::vector<json> metrics(const std::string& run) {
  std::vector<json> out;
  std::ifstream in(run + "/metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    json j = json::parse(line);
    if (j["kind"] == "parity") continue;
    j.erase("elapsed_s");
    j.erase("tokens_per_s");
    out.push_back(j);
  }
  return out;
}

// Accepted and drafted tokens of module 0 over the prompts, every cycle drafting.
std::pair<long, long> live_acceptance(const std::string& model, const std::string& drafter,
                                      const std::string& prompts) {
  test::CliResult g =
      test::run_cli("generate -m " + shell_quote(model) + " --drafter " + shell_quote(drafter) +
                    " --prompts " + shell_quote(prompts) + " -n 32 --no-gate --json --threads 1");
  EXPECT_EQ(g.status, 0) << g.err;
  long accepted = 0, drafted = 0;
  std::istringstream lines(g.out);
  for (std::string line; std::getline(lines, line);) {
    const json s = json::parse(line)["stats"]["speculation"];
    accepted += s["accepted"][0].get<long>();
    drafted += s["drafted"][0].get<long>();
  }
  return {accepted, drafted};
}

void online_equals_offline(const std::string& tag, const std::string& capture_flags) {
  MTP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  MTP_REQUIRE_SHARED(corpus, "corpora/gutenberg-en-16MB.txt");
  const std::string text = corpus_slice(corpus), dir = test::temp_dir("online_" + tag);
  const std::string m = " -m " + shell_quote(model);
  const std::string train_flags =
      " --k 2 --steps 40 --batch 4 --lr 3e-3 --warmup 4 --seed 5 --eval-every 20 --threads 1 "
      "--no-progress";
  // precompute's --seed is the sampling seed (self-distillation only); train's is the training
  // seed.
  const bool self_distill = capture_flags.find("--self-distill") != std::string::npos;
  const std::string shards = dir + "/shards", offline = dir + "/offline", online = dir + "/online";
  test::CliResult pre = test::run_cli(
      "precompute" + m + " --corpus " + shell_quote(text) + " -o " + shell_quote(shards) +
      capture_flags + (self_distill ? " --seed 5" : "") + " --threads 1 --no-progress");
  ASSERT_EQ(pre.status, 0) << pre.err;
  test::CliResult off = test::run_cli("train --shards " + shell_quote(shards) + m + " -o " +
                                      shell_quote(offline) + train_flags);
  ASSERT_EQ(off.status, 0) << off.err;
  test::CliResult on = test::run_cli("train --online" + m + " --corpus " + shell_quote(text) +
                                     capture_flags + " -o " + shell_quote(online) + train_flags);
  ASSERT_EQ(on.status, 0) << on.err;
  EXPECT_NE(on.out.find("online capture (engine (cpu))"), std::string::npos) << on.out;
  // Nothing of the capture reached the disk: the run folder holds the jobs (tokens).
  EXPECT_FALSE(fs::exists(online + "/shards"));
  EXPECT_LT(fs::file_size(online + "/online/jobs.safetensors"),
            fs::file_size(shards + "/shard-00000.safetensors") / 8);

  const std::vector<json> a = metrics(offline), b = metrics(online);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], b[i]) << "metrics line " << i;
  Checkpoint ca = load_checkpoint(checkpoint_path(offline));
  Checkpoint cb = load_checkpoint(checkpoint_path(online));
  EXPECT_EQ(ca.state["step"], 40);
  EXPECT_EQ(test::first_bit_difference(ca.params, cb.params), -1);
  EXPECT_EQ(test::first_bit_difference(ca.adam_m, cb.adam_m), -1);
  EXPECT_EQ(test::first_bit_difference(ca.adam_v, cb.adam_v), -1);
  EXPECT_EQ(test::first_bit_difference(ca.ema, cb.ema), -1);
  EXPECT_EQ(cb.state["online"]["target_forward"], "engine (cpu)");

  // Both exports pass the parity gate (the online one on its own capture).
  for (const std::string& run : {offline, online}) {
    test::CliResult ex = test::run_cli("export --run " + shell_quote(run) + " -o " +
                                       shell_quote(run + "/drafter.safetensors") + " --threads 1");
    ASSERT_EQ(ex.status, 0) << ex.out << ex.err;
    EXPECT_NE(ex.out.find("parity: PASS"), std::string::npos) << ex.out;
    test::CliResult pa =
        test::run_cli("parity" + m + " --drafter " + shell_quote(run + "/drafter.safetensors") +
                      " --run " + shell_quote(run) + " --threads 1");
    EXPECT_EQ(pa.status, 0) << pa.out << pa.err;
  }
  EXPECT_NE(
      test::run_cli("parity" + m + " --drafter " + shell_quote(online + "/drafter.safetensors") +
                    " --run " + shell_quote(online) + " --threads 1")
          .out.find("online capture"),
      std::string::npos);

  // Live acceptance on the held-out prompts: the weights are the same bits,
  // so the live runs accept the same drafts.
  const std::string prompts = online + "/online/heldout_prompts.jsonl";
  ASSERT_TRUE(fs::exists(prompts));
  const auto [acc_off, n_off] = live_acceptance(model, offline + "/drafter.safetensors", prompts);
  const auto [acc_on, n_on] = live_acceptance(model, online + "/drafter.safetensors", prompts);
  EXPECT_GT(n_off, 0);
  EXPECT_EQ(acc_off, acc_on);
  EXPECT_EQ(n_off, n_on);
}

TEST(OnlineTraining, PlainCorpusEqualsShardsBitForBit) {
  online_equals_offline("plain", " --seq-len 64 --max-tokens 6000");
}

TEST(OnlineTraining, SampledSelfDistillationEqualsShardsBitForBit) {
  online_equals_offline("distill",
                        " --seq-len 64 --max-tokens 4000 --self-distill --prompt-tokens 12 "
                        "--prompt-tokens-min 3 --temp 0.7");
}

// A second `train --online` into the same run folder with other capture flags
// would orphan its checkpoint's jobs: refused before anything is written.
TEST(OnlineTraining, RunFolderWithOtherJobsIsRefused) {
  MTP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  MTP_REQUIRE_SHARED(corpus, "corpora/gutenberg-en-16MB.txt");
  const std::string text = corpus_slice(corpus), run = test::temp_dir("online_refuse") + "/run";
  const std::string base = "train --online -m " + shell_quote(model) + " --corpus " +
                           shell_quote(text) + " -o " + shell_quote(run) +
                           " --k 1 --steps 2 --batch 2 --threads 1 --no-progress --no-parity";
  ASSERT_EQ(test::run_cli(base + " --seq-len 32 --max-tokens 1000").status, 0);
  const std::string before = read_file(run + "/online/jobs.safetensors");
  test::CliResult again = test::run_cli(base + " --seq-len 48 --max-tokens 1000");
  EXPECT_EQ(again.status, 2);
  EXPECT_NE(again.err.find("online jobs differ"), std::string::npos) << again.err;
  EXPECT_EQ(read_file(run + "/online/jobs.safetensors"), before);
  // The same flags resume (the jobs are reused).
  test::CliResult resume = test::run_cli(base + " --seq-len 32 --max-tokens 1000 --resume");
  EXPECT_EQ(resume.status, 0) << resume.err;
}

// --jobs-only writes the jobs and prints the mtpspec-train command that trains
// them (on another machine); that command, run as printed, trains.
TEST(OnlineTraining, JobsOnlyPrintsTheTrainingCommand) {
  MTP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  MTP_REQUIRE_SHARED(corpus, "corpora/gutenberg-en-16MB.txt");
  const std::string text = corpus_slice(corpus), run = test::temp_dir("online jobs only") + "/run";
  test::CliResult r = test::run_cli("train --online --jobs-only -m " + shell_quote(model) +
                                    " --corpus " + shell_quote(text) + " -o " + shell_quote(run) +
                                    " --seq-len 32 --max-tokens 1000 --k 1 --steps 2 --batch 2 "
                                    "--threads 1 --no-parity");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(fs::exists(run + "/online/jobs.safetensors"));
  EXPECT_FALSE(fs::exists(checkpoint_path(run)));
  const size_t at = r.out.find("mtpspec-train train --online-jobs ");
  ASSERT_NE(at, std::string::npos) << r.out;
  std::string cmd = r.out.substr(at + std::string("mtpspec-train").size());
  cmd = cmd.substr(0, cmd.find('\n'));
  EXPECT_NE(cmd.find("--steps 2"), std::string::npos) << cmd;
  EXPECT_NE(cmd.find("'" + run + "/online/jobs.safetensors'"), std::string::npos) << cmd;
  const int st = std::system((std::string(MTPSPEC_TRAIN_BIN_PATH) + cmd + " > /dev/null").c_str());
  EXPECT_EQ(st, 0) << cmd;
  EXPECT_TRUE(fs::exists(checkpoint_path(run)));
}

}  // namespace
}  // namespace mtp::train
