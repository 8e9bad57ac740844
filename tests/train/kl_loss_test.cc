// train --loss kl: module k learns the TARGET's distribution for the token its
// row predicts (from the shards' capture through the frozen head), not the
// corpus labels. On a corpus whose labels follow a rule the random target does
// not know, a KL-trained module 0 must agree with the target's own choice at
// position t+1 far more often than a CE-trained one, and the CE-trained one
// with the labels tok[t+2] — so a KL reading the wrong capture row (or the
// labels) fails this test.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "checkpoint_util.h"
#include "core/error.h"
#include "kernels/ops.h"
#include "model_util.h"
#include "test_util.h"
#include "train/export.h"
#include "train_fixture.h"

namespace mtp::train {
namespace {

constexpr int kKlVocab = 40, kKlLen = 32;

struct Scores {
  double target_agreement = 0;  // module 0's guess at row t == the target's argmax at t+1
  double label_accuracy = 0;    // module 0's guess at row t == tok[t+2]
};

Scores train_and_score(const std::string& loss) {
  // The labels follow a rule the random target does not know (train_fixture.h).
  static const test::RuleCorpus setup = test::rule_corpus("kl", kKlVocab, kKlLen, 160, 12, 33, 9);
  const std::string run = test::temp_dir("kl_run_" + loss);
  TrainOptions o = test::module0_options(setup, run, 150);
  o.loss = loss;
  run_training(o);
  const std::string drafter_path = test::export_run(run);
  test::Target t = test::load_target(setup.model);
  drafter::Drafter d = drafter::Drafter::load(drafter_path, t.model->loaded(), kernels::WeightType::F32);
  long n = 0, agree = 0, right = 0;
  for (const auto& seq : setup.heldout) {
    auto pred = test::engine_predictions(t, d, seq)[0];  // [t] guesses tok[t+2]
    model::KVCache kv = t.model->make_cache(1, int(seq.size()));
    test::RowOutputs out = test::run_chunks(*t.model, kv, 0, seq, {8}, nullptr);
    for (size_t i = 0; i + 2 < seq.size(); ++i) {
      const int32_t target_choice =
          int32_t(kernels::argmax(out.logits.data() + (i + 1) * kKlVocab, kKlVocab));
      ++n;
      agree += pred[i] == target_choice;
      right += pred[i] == seq[i + 2];
    }
  }
  return {double(agree) / double(n), double(right) / double(n)};
}

TEST(KlLoss, LearnsTheTargetsDistributionNotTheLabels) {
  const Scores ce = train_and_score("ce");
  const Scores kl = train_and_score("kl");
  std::printf("ce: target agreement %.3f, label accuracy %.3f\n", ce.target_agreement,
              ce.label_accuracy);
  std::printf("kl: target agreement %.3f, label accuracy %.3f\n", kl.target_agreement,
              kl.label_accuracy);
  EXPECT_GT(kl.target_agreement, 0.5);
  EXPECT_GT(kl.target_agreement, ce.target_agreement + 0.2);
  EXPECT_GT(ce.label_accuracy, kl.label_accuracy + 0.2);
}

TEST(KlLoss, BadOptionsAreRefused) {
  TrainOptions o = test::quick_options("x", "y", test::temp_dir("kl_bad"));
  o.loss = "mse";
  EXPECT_THROW(run_training(o), InputError);
  o.loss = "kl";
  o.kl_temp = 0;
  EXPECT_THROW(run_training(o), InputError);
  o.kl_temp = 1;
  o.loss_weights = {1.0, -0.5};
  EXPECT_THROW(run_training(o), InputError);
}

}  // namespace
}  // namespace mtp::train
