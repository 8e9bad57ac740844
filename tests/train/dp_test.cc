// Data-parallel training (c10d ProcessGroupGloo): 2 local ranks (1 thread each,
// FileStore rendezvous in a temp dir, a timeout) end with bitwise the same
// weights, Adam moments and EMA as 1 process accumulating the same 2
// micro-batches per step. Runs the real CLI, as a user would.
// Also: train -> export -> parity through the CLI, and parity's non-zero exit
// for a drafter whose weights are not the run's.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <random>

#include "checkpoint_util.h"
#include "cli_util.h"
#include "core/mapped_file.h"
#include "drafter/drafter.h"
#include "io/safetensors.h"
#include "model_util.h"
#include "test_util.h"
#include "train/checkpoint.h"
#include "train_fixture.h"

namespace mtp::train {
namespace {

using test::shell_quote;

struct DpData {
  std::string model, shards;
};

const DpData& setup() {
  static DpData s = [] {
    DpData s;
    test::RandomSpec spec = test::RandomSpec::for_arch(model::Arch::Gemma2);
    spec.n_layers = 2;
    s.model = test::random_hf_checkpoint("dp_model", spec);
    test::Target t = test::load_target(s.model);
    std::mt19937 rng(2);
    std::vector<std::vector<int32_t>> train, held;
    for (int i = 0; i < 20; ++i) train.push_back(test::random_tokens(rng, 12 + int(rng() % 9), spec.vocab));
    for (int i = 0; i < 4; ++i) held.push_back(test::random_tokens(rng, 20, spec.vocab));
    s.shards = test::temp_dir("dp_shards");
    test::write_shards(s.shards, t, train, held, 20);
    return s;
  }();
  return s;
}

std::string train_cmd(const DpData& s, const std::string& run, const std::string& extra) {
  return "train --shards " + shell_quote(s.shards) + " -m " + shell_quote(s.model) + " -o " +
         shell_quote(run) +
         " --k 2 --steps 4 --batch 2 --lr 3e-3 --warmup 1 --ema 0.9 --threads 1 --eval-every 2 "
         "--no-progress --no-parity " + extra;
}

TEST(DataParallel, TwoRanksEqualOneProcessAccumulatingTwoMicroBatches) {
  const DpData& s = setup();
  const std::string dir = test::temp_dir("dp_runs");
  // The ranks share one run folder (as on a shared file system); rank 0 writes it.
  const std::string single = dir + "/single", shared = dir + "/dp";
  test::CliResult one = test::run_cli(train_cmd(s, single, "--accum 2"));
  ASSERT_EQ(one.status, 0) << one.err;

  // Both ranks in the background of one shell; each killed after 300 s.
  const std::string store = shell_quote(dir + "/store");
  const std::string bin = shell_quote(MTPSPEC_BIN);
  std::string two =
      "timeout 300 " + bin + " " + train_cmd(s, shared, "--world-size 2 --rank 1 --dist-file " + store) +
      " > " + shell_quote(dir + "/rank1.log") + " 2>&1 & pid=$!; timeout 300 " + bin + " " +
      train_cmd(s, shared, "--world-size 2 --rank 0 --dist-file " + store) +
      "; st=$?; wait $pid; st1=$?; cat " + shell_quote(dir + "/rank1.log") +
      " >&2; test $st = 0 -a $st1 = 0";
  int status = std::system(("bash -c " + shell_quote(two) + " > " + shell_quote(dir + "/dp.log") +
                            " 2>&1").c_str());
  std::string log = read_file(dir + "/dp.log");
  ASSERT_EQ(status, 0) << log;

  Checkpoint a = load_checkpoint(checkpoint_path(single));
  Checkpoint b = load_checkpoint(checkpoint_path(shared));
  EXPECT_EQ(a.state["step"], 4);
  EXPECT_EQ(b.state["step"], 4);
  EXPECT_EQ(b.state["trajectory"]["world"], 2);
  EXPECT_EQ(test::first_bit_difference(a.params, b.params), -1);
  EXPECT_EQ(test::first_bit_difference(a.adam_m, b.adam_m), -1);
  EXPECT_EQ(test::first_bit_difference(a.adam_v, b.adam_v), -1);
  EXPECT_EQ(test::first_bit_difference(a.ema, b.ema), -1);
  EXPECT_EQ(a.state["last_eval"], b.state["last_eval"]);
  // Rank 1 prints nothing: summaries come from rank 0 only.
  EXPECT_EQ(read_file(dir + "/rank1.log"), "");
}

TEST(DataParallel, CliTrainExportParity) {
  const DpData& s = setup();
  const std::string run = test::temp_dir("cli_run") + "/run";
  test::CliResult tr = test::run_cli(
      "train --shards " + shell_quote(s.shards) + " -m " + shell_quote(s.model) + " -o " +
      shell_quote(run) + " --k 2 --steps 3 --batch 2 --threads 1 --no-progress");
  ASSERT_EQ(tr.status, 0) << tr.out << tr.err;
  EXPECT_NE(tr.out.find("parity: PASS"), std::string::npos) << tr.out;
  const std::string drafter = run + "/d.safetensors";
  test::CliResult ex = test::run_cli("export --run " + shell_quote(run) + " --ema -o " +
                                     shell_quote(drafter) + " --threads 1");
  ASSERT_EQ(ex.status, 0) << ex.out << ex.err;
  EXPECT_NE(ex.out.find("parity: PASS"), std::string::npos) << ex.out;
  io::TensorSet ts = io::TensorSet::open_file(drafter);
  auto training = nlohmann::json::parse(ts.metadata().at("training"));
  EXPECT_EQ(training["weights"], "ema");
  EXPECT_EQ(training["steps"], 3);
  EXPECT_TRUE(training.contains("simd_target"));
  EXPECT_TRUE(training["metrics"].contains("ema"));

  test::CliResult pa = test::run_cli("parity -m " + shell_quote(s.model) + " --drafter " +
                                     shell_quote(drafter) + " --run " + shell_quote(run) +
                                     " --json --threads 1");
  ASSERT_EQ(pa.status, 0) << pa.out << pa.err;
  EXPECT_TRUE(nlohmann::json::parse(pa.out)["passed"].get<bool>());

  // A drafter that is not this run's weights (raw instead of the EMA the file
  // claims): parity exits non-zero.
  test::Target t = test::load_target(s.model);
  const std::string other = run + "/other.safetensors";
  drafter::write_drafter(other, t.model->config(), t.fingerprint,
                         drafter::DrafterConfig::from_json(nlohmann::json::parse(ts.metadata().at("config"))),
                         checkpoint_tensors(load_checkpoint(checkpoint_path(run)), false), training);
  test::CliResult bad = test::run_cli("parity -m " + shell_quote(s.model) + " --drafter " +
                                      shell_quote(other) + " --run " + shell_quote(run) +
                                      " --threads 1");
  EXPECT_NE(bad.status, 0) << bad.out;
  EXPECT_NE(bad.err.find("parity gate FAILED"), std::string::npos) << bad.err;

  // A build without the libtorch part (no mtpspec-train): a clear error.
  test::CliResult none = test::run_cli(
      "--version > /dev/null; MTPSPEC_TRAIN_BIN=/nonexistent " MTPSPEC_BIN " train --help");
  EXPECT_EQ(none.status, 2);
  EXPECT_NE(none.err.find("built without libtorch"), std::string::npos) << none.err;
}

}  // namespace
}  // namespace mtp::train
