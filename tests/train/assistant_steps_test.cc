// Gemma 4's assistant trained beyond draft step 1 and from scratch
// (train/assistant_train.h), and its parity gate (train/assistant_parity.h):
// - the libtorch chain of K = 4 steps (state carried, the same position
//   every step) drafts what the engine's live chain drafts on the same
//   committed text — argmax equal wherever decided, every score within the
//   fp32 tolerance — for both head kinds; a planted off-by-one in the step
//   position (advancing it per draft) fails the gate;
// - train-assistant from scratch (no initial directory: the E2B shape scaled
//   to the target) with K = 3 lowers its loss, passes the gate, records the
//   target and loads in the engine; the planted shift makes it throw;
// - `mtpspec train --drafter-arch gemma4-assistant` without --online exits 2
//   saying why; with --online it runs the same trainer.
#include <gtest/gtest.h>

#include <random>

#include "assistant_util.h"
#include "cli_util.h"
#include "core/error.h"
#include "core/json.h"
#include "core/mapped_file.h"
#include "drafter/gemma4_assistant.h"
#include "io/pretrain_data.h"
#include "model/fingerprint.h"
#include "model/loader.h"
#include "model_util.h"
#include "test_util.h"
#include "train/assistant_parity.h"
#include "train/assistant_torch.h"
#include "train/assistant_train.h"

namespace mtp::train {
namespace {

constexpr int kChainSteps = 4;

struct StepsFixture {
  test::RandomSpec t = test::assistant_target_spec();
  std::string target = test::random_hf_checkpoint("g4a-steps-t", t);
  model::Model m{model::load_model(target, {})};
  std::vector<int32_t> tokens;
  StepsFixture() {
    std::mt19937 rng(3);
    tokens = test::random_tokens(rng, 16, t.vocab);
  }
  // Parity of the K-step chain of an assistant of `spec`.
  AssistantParity parity(const test::AssistantSpec& spec, int step_shift) const {
    const std::string dir = test::random_assistant("g4a-steps-a", t, spec);
    const drafter::Gemma4Assistant g = drafter::Gemma4Assistant::load(dir, m.config());
    const TorchAssistant ta(m, g.config(), torch::kCPU);
    const auto p = ta.layout().views(ta.layout().to_flat(ta.read_dir(dir), torch::kCPU), false);
    return assistant_parity(m, g, ta, p, tokens, kChainSteps, step_shift);
  }
  // A training stream of train_len tokens and 20 held out.
  std::string tokens_file(int train_len = 60) const {
    io::PretrainData d;
    std::mt19937 rng(9);
    d.train.add_document(test::random_tokens(rng, train_len, t.vocab), -1, -1);
    d.heldout.add_document(test::random_tokens(rng, 20, t.vocab), -1, -1);
    d.info = {{"vocab", t.vocab}, {"bos_id", -1}, {"eos_id", -1}};
    const std::string path = test::temp_dir("g4a-steps-tok") + "/tokens.safetensors";
    io::write_pretrain_data(path, d);
    return path;
  }
};

TEST(AssistantSteps, KStepChainEqualsTheEnginesLiveChain) {
  const StepsFixture f;
  for (bool ordered : {false, true}) {
    SCOPED_TRACE(ordered ? "centroid head" : "full head");
    test::AssistantSpec spec;
    spec.ordered = ordered;
    spec.centroids = 8;
    spec.top_k = 3;
    const AssistantParity ok = f.parity(spec, 0);
    std::printf("%s", ok.text().c_str());
    EXPECT_TRUE(ok.passed) << ok.text();
    ASSERT_EQ(ok.steps.size(), size_t(kChainSteps));
    for (const AssistantStepParity& s : ok.steps) EXPECT_GT(s.decided, 5) << ok.text();
    const AssistantParity bad = f.parity(spec, 1);
    EXPECT_FALSE(bad.passed) << "an off-by-one step position passed:\n" << bad.text();
    EXPECT_TRUE(bad.steps[0].passed) << "step 1 has no step position to shift";
  }
}

TEST(AssistantSteps, TrainsKStepsFromScratchAndPassesTheGate) {
  const StepsFixture f;
  AssistantTrainOptions o;
  o.target = f.target;
  o.tokens = f.tokens_file(12);  // one window: every step trains on it, so the loss must fall
  o.out = test::temp_dir("g4a-steps-out") + "/assistant";
  o.K = 3;
  o.steps = 14;
  o.seq_len = 12;
  o.lr = 1e-2;
  o.shape.layers = 2;
  const AssistantTrainResult r = train_assistant(o);
  ASSERT_EQ(r.losses.size(), 14u);
  EXPECT_LT((r.losses[11] + r.losses[12] + r.losses[13]) / 3,
            (r.losses[0] + r.losses[1] + r.losses[2]) / 3);
  EXPECT_TRUE(r.parity_ran && r.parity_passed) << r.parity_text;
  const drafter::ServedTarget served{model::target_fingerprint(f.m.loaded()),
                                     drafter::TargetMismatch::Refuse};
  const drafter::Gemma4Assistant back =
      drafter::Gemma4Assistant::load(o.out, f.m.config(), {}, &served);
  EXPECT_EQ(back.config().block.n_layers, 2);
  EXPECT_EQ(back.config().block.d_model, 32);  // 64 / 6 rounded up to 16s, at least 32
  EXPECT_FALSE(back.config().ordered);
  EXPECT_EQ(back.record().target_fingerprint, served.fingerprint);
  AssistantTrainOptions planted = o;
  planted.out = test::temp_dir("g4a-steps-bad") + "/assistant";
  planted.steps = 2;
  planted.step_shift = 1;
  EXPECT_THROW(train_assistant(planted), Error);
  AssistantTrainOptions shallow = o;
  shallow.seq_len = 4;  // no row for step 3
  EXPECT_THROW(train_assistant(shallow), InputError);
}

TEST(AssistantSteps, TrainDrafterArchGemma4AssistantMapsOntoTheTrainer) {
  const StepsFixture f;
  const std::string out = test::temp_dir("g4a-steps-cli") + "/assistant";
  const std::string args =
      "train --drafter-arch gemma4-assistant -m " + test::shell_quote(f.target) + " --tokens " +
      test::shell_quote(f.tokens_file()) + " -o " + test::shell_quote(out) +
      " --k 2 --steps 3 --seq-len 8 --assistant-layers 1";
  const test::CliResult offline = test::run_cli(args);
  EXPECT_EQ(offline.status, 2) << offline.err;
  EXPECT_NE(offline.err.find("trains online only (--online)"), std::string::npos) << offline.err;
  const test::CliResult online = test::run_cli(args + " --online");
  ASSERT_EQ(online.status, 0) << online.err;
  const nlohmann::json j = parse_json(online.out, "stdout");
  EXPECT_EQ(j.at("losses").size(), 3u);
  EXPECT_EQ(j.at("parity"), true);
  EXPECT_TRUE(drafter::is_assistant_dir(out));
  const test::CliResult help = test::run_cli("train --drafter-arch gemma4-assistant --help");
  ASSERT_EQ(help.status, 0) << help.err;
  EXPECT_NE(help.out.find("--assistant-layers"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("--init-from"), std::string::npos) << help.out;
}

}  // namespace
}  // namespace mtp::train
