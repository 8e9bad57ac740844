// Checkpoints and resume: a run stopped after step s and resumed continues bit
// for bit as if uninterrupted (weights, Adam moments, EMA, metrics), and the
// trainer refuses what would silently break that (another target's shards,
// changed flags, an existing run without --resume).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "checkpoint_util.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "model_util.h"
#include "test_util.h"
#include "train/checkpoint.h"
#include "train_fixture.h"

namespace mtp::train {
namespace {

namespace fs = std::filesystem;

struct ResumeData {
  std::string model, shards;
};

// A small Qwen3 target (q/k norms, GQA) and a random corpus with a held-out split.
const ResumeData& setup() {
  static ResumeData s = [] {
    ResumeData s;
    test::RandomSpec spec = test::RandomSpec::for_arch(model::Arch::Qwen3);
    spec.n_layers = 1;
    s.model = test::random_hf_checkpoint("resume_model", spec);
    test::Target t = test::load_target(s.model);
    std::mt19937 rng(1);
    std::vector<std::vector<int32_t>> train, held;
    for (int i = 0; i < 24; ++i) train.push_back(test::random_tokens(rng, 10 + int(rng() % 15), spec.vocab));
    for (int i = 0; i < 6; ++i) held.push_back(test::random_tokens(rng, 24, spec.vocab));
    s.shards = test::temp_dir("resume_shards");
    test::write_shards(s.shards, t, train, held, 24);
    return s;
  }();
  return s;
}

std::vector<std::string> metric_lines(const std::string& run, const char* kind) {
  std::ifstream in(run + "/metrics.jsonl");
  std::vector<std::string> out;
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    if (j["kind"] == kind) {
      j.erase("tokens_per_s");  // wall-clock numbers differ between runs
      j.erase("elapsed_s");
      out.push_back(j.dump());
    }
  }
  return out;
}

TEST(Resume, StoppedAndResumedRunIsBitIdentical) {
  const ResumeData& s = setup();
  auto opts = [&](const std::string& run) {
    TrainOptions o = test::quick_options(s.shards, s.model, run);
    o.steps = 8;
    o.batch = 3;
    o.lr = 2e-3;
    o.warmup = 2;
    o.ema = 0.9;
    o.eval_every = 2;
    o.save_every = 3;  // the stop below falls between periodic saves
    o.parity = false;
    return o;
  };
  const std::string a = test::temp_dir("resume_a"), b = test::temp_dir("resume_b");
  TrainReport ra = run_training(opts(a));
  EXPECT_EQ(ra.final_step, 8);

  TrainOptions ob = opts(b);
  ob.stop_after = 5;
  TrainReport rb1 = run_training(ob);
  EXPECT_EQ(rb1.final_step, 5);
  EXPECT_EQ(load_checkpoint(checkpoint_path(b)).state["step"].get<long>(), 5);
  ob.stop_after = 0;
  ob.resume = true;
  TrainReport rb2 = run_training(ob);
  EXPECT_EQ(rb2.final_step, 8);
  EXPECT_EQ(rb2.steps_done, 3);

  Checkpoint ca = load_checkpoint(checkpoint_path(a)), cb = load_checkpoint(checkpoint_path(b));
  ASSERT_EQ(ca.params.size(), cb.params.size());
  EXPECT_EQ(test::first_bit_difference(ca.params, cb.params), -1);
  EXPECT_EQ(test::first_bit_difference(ca.adam_m, cb.adam_m), -1);
  EXPECT_EQ(test::first_bit_difference(ca.adam_v, cb.adam_v), -1);
  EXPECT_EQ(test::first_bit_difference(ca.ema, cb.ema), -1);
  EXPECT_EQ(ca.state["last_eval"], cb.state["last_eval"]);
  // The resumed run's metrics equal the uninterrupted ones (no duplicated steps).
  EXPECT_EQ(metric_lines(a, "eval"), metric_lines(b, "eval"));
  EXPECT_EQ(metric_lines(a, "train"), metric_lines(b, "train"));
  // And training did move the weights.
  auto init = drafter::random_drafter_tensors(test::load_target(s.model).model->config(),
                                              drafter::DrafterConfig::from_json(ca.state["drafter_config"]), 0);
  EXPECT_NE(checkpoint_tensors(ca, false).at("mtp.0.eh_proj.weight"), init.at("mtp.0.eh_proj.weight"));
}

TEST(Resume, RefusesWhatWouldBreakIt) {
  const ResumeData& s = setup();
  const std::string run = test::temp_dir("resume_refuse");
  TrainOptions o = test::quick_options(s.shards, s.model, run);
  o.steps = 2;
  o.batch = 2;
  o.parity = false;
  o.stop_after = 1;
  run_training(o);
  // Existing checkpoint without --resume.
  EXPECT_THROW(run_training(o), InputError);
  // Changed flags on resume.
  o.resume = true;
  o.lr = 1e-3;
  try {
    run_training(o);
    ADD_FAILURE() << "resume with another --lr was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("lr"), std::string::npos) << e.what();
  }
  // Shards of another target.
  test::RandomSpec other = test::RandomSpec::for_arch(model::Arch::Qwen3);
  other.n_layers = 1;
  other.seed = 99;
  TrainOptions o2 = test::quick_options(s.shards, test::random_hf_checkpoint("resume_other", other),
                                        test::temp_dir("resume_other_run"));
  o2.steps = 1;
  try {
    run_training(o2);
    ADD_FAILURE() << "shards of another target were accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("precompute"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mtp::train
