// Online training on several processes (`--nproc 2`: two local ranks, torch
// c10d Gloo, each capturing its own micro-batches): the same weights, Adam
// moments and EMA as one process accumulating the same global batch (the
// ranks' gradients are summed in rank order, train/dist.h: bit for bit, within
// any fp32 reduction tolerance). A rank killed mid-run makes the other exit
// non-zero with a message, well within the collective timeout.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "cli_util.h"
#include "core/mapped_file.h"
#include "model_util.h"
#include "test_util.h"
#include "train/checkpoint.h"

namespace mtp::train {
namespace {

namespace fs = std::filesystem;
using test::shell_quote;

std::string dp_corpus() {
  const std::string path = test::temp_dir("online_dp_corpus") + "/c.txt";
  const std::string text =
      read_file(test::shared_path("corpora/gutenberg-en-16MB.txt")).substr(0, 24 * 1024);
  std::ofstream(path) << text.substr(0, text.rfind("\n\n"));
  return path;
}

std::string online_cmd(const std::string& model, const std::string& corpus, const std::string& run,
                       const std::string& extra) {
  return "train --online -m " + shell_quote(model) + " --corpus " + shell_quote(corpus) + " -o " +
         shell_quote(run) +
         " --seq-len 48 --max-tokens 3000 --k 2 --batch 2 --lr 3e-3 --warmup 1 --ema 0.9 "
         "--threads 1 --seed 4 --no-progress --no-parity " +
         extra;
}

TEST(OnlineDataParallel, TwoLocalRanksEqualOneProcessWithTheSameGlobalBatch) {
  MTP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  MTP_REQUIRE_SHARED(corpus_file, "corpora/gutenberg-en-16MB.txt");
  const std::string corpus = dp_corpus(), dir = test::temp_dir("online_dp");
  test::CliResult one =
      test::run_cli(online_cmd(model, corpus, dir + "/one", "--steps 6 --eval-every 3 --accum 2"));
  ASSERT_EQ(one.status, 0) << one.err;
  test::CliResult two =
      test::run_cli(online_cmd(model, corpus, dir + "/two", "--steps 6 --eval-every 3 --nproc 2"));
  ASSERT_EQ(two.status, 0) << two.out << two.err;
  EXPECT_NE(two.out.find("x 2 rank(s)"), std::string::npos) << two.out;
  Checkpoint a = load_checkpoint(checkpoint_path(dir + "/one"));
  Checkpoint b = load_checkpoint(checkpoint_path(dir + "/two"));
  EXPECT_EQ(b.state["trajectory"]["world"], 2);
  EXPECT_EQ(b.state["step"], 6);
  EXPECT_EQ(test::first_bit_difference(a.params, b.params), -1);
  EXPECT_EQ(test::first_bit_difference(a.adam_m, b.adam_m), -1);
  EXPECT_EQ(test::first_bit_difference(a.adam_v, b.adam_v), -1);
  EXPECT_EQ(test::first_bit_difference(a.ema, b.ema), -1);
  EXPECT_EQ(a.state["last_eval"], b.state["last_eval"]);
  // The launcher's FileStore is gone.
  for (const auto& e : fs::directory_iterator(dir + "/two")) {
    EXPECT_EQ(e.path().filename().string().rfind("dist-store", 0), std::string::npos) << e.path();
  }
}

TEST(OnlineDataParallel, KilledRankStopsTheOtherWithAMessage) {
  MTP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  MTP_REQUIRE_SHARED(corpus_file, "corpora/gutenberg-en-16MB.txt");
  const std::string corpus = dp_corpus(), dir = test::temp_dir("online_dp_kill");
  const std::string run = dir + "/run", err = dir + "/err.txt";
  // A long run with a 120 s collective timeout. Rank 1 is killed once both
  // ranks train (rank 0 wrote its first held-out metrics: past the rendezvous,
  // where a missing rank is only noticed at the timeout).
  const std::string cmd = std::string(MTPSPEC_BIN) + " " +
                          online_cmd(model, corpus, run,
                                     "--steps 1000000 --eval-every 2 "
                                     "--nproc 2 --dist-timeout 120");
  const std::string script =
      "(" + cmd + ") > /dev/null 2> " + shell_quote(err) +
      " & launcher=$!; "
      "for i in $(seq 600); do test -s " +
      shell_quote(run + "/metrics.jsonl") +
      " && break; "
      "kill -0 $launcher 2>/dev/null || break; sleep 0.1; done; "
      "pid=$(pgrep -f -- '[-]-rank 1 --dist-file " +
      run +
      "/'); "
      // No rank found (the launcher failed early): stop it rather than wait on it.
      "if test -n \"$pid\"; then kill -9 $pid; else kill $launcher; fi; "
      "start=$(date +%s); wait $launcher; st=$?; end=$(date +%s); "
      "echo \"status $st seconds $((end - start))\" >> " +
      shell_quote(err);
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(std::system(("bash -c " + shell_quote(script)).c_str()), 0);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::string log = read_file(err);
  EXPECT_NE(log.find("rank 1 of 2 exited with status 137"), std::string::npos) << log;
  EXPECT_NE(log.find("failed on rank 0 (another rank stopped"), std::string::npos) << log;
  EXPECT_NE(log.find("status 2 seconds"), std::string::npos) << log;
  EXPECT_LT(secs, 100.0) << log;  // well within the 120 s timeout: no hang
}

}  // namespace
}  // namespace mtp::train
