// Gemma 4's assistant in libtorch (train/assistant_torch.h) against the
// engine's (drafter::AssistantRunner) on the same inputs — the target's
// post-norm hidden and K/V from one engine forward:
// - steps 1 and 2 of every committed length agree within the derived fp32
//   tolerance, with the same argmax wherever the top two are apart;
// - the comparison FAILS on a planted one-position shift of the captured K/V;
// - trained a few steps against the exact target's next tokens (its loss
//   falls), exported as a gemma4_assistant directory, the engine loads the
//   export and drafts what the trainer's forward drafts.
#include <gtest/gtest.h>

#include <random>

#include "assistant_compare.h"
#include "assistant_util.h"
#include "core/error.h"
#include "drafter/assistant_runner.h"
#include "drafter/gemma4_assistant.h"
#include "model/fingerprint.h"
#include "model/loader.h"
#include "model_util.h"
#include "python_util.h"
#include "venv_util.h"
#include "core/mapped_file.h"
#include "test_util.h"
#include "io/pretrain_data.h"
#include "train/assistant_torch.h"
#include "train/assistant_train.h"

namespace mtp::train {
namespace {

using test::AssistantSpec;
using test::RandomSpec;

constexpr int kT = 14;

struct Fixture {
  RandomSpec t = test::assistant_target_spec();
  std::string adir;
  model::Model m;
  drafter::Gemma4Assistant g;
  std::vector<int32_t> tokens;
  Fixture()
      : adir(test::random_assistant("g4a-torch-a", t, {})),
        m(model::load_model(test::random_hf_checkpoint("g4a-torch-t", t), {})),
        g(drafter::Gemma4Assistant::load(adir, m.config())) {
    std::mt19937 rng(5);
    tokens = test::random_tokens(rng, kT, t.vocab);
  }
};

// max |torch - engine| / tolerance over steps 1..2 of rows t = 1..T-1 (the
// engine's chain for N = t + 1); argmax must agree where decided when
// `expect_tokens`.
double compare(const Fixture& f, const drafter::Gemma4Assistant& g, const TorchAssistant& ta,
               const std::vector<torch::Tensor>& p, const AssistantCapture& cap,
               bool expect_tokens) {
  const auto eng = drafter::assistant_teacher_forced(f.m, g, f.tokens, 2, 2, nullptr, true);
  auto [l1, s1] = ta.step(p, ta.embed(f.tokens), TorchAssistant::step1_state(cap.post_norm), cap.kv);
  std::vector<int32_t> d1(f.tokens.size(), 0);
  auto a1 = l1.argmax(-1).squeeze(0);
  for (size_t t = 0; t < d1.size(); ++t) d1[t] = a1[int64_t(t)].item<int32_t>();
  auto [l2, s2] = ta.step(p, ta.embed(d1), s1, cap.kv);
  double worst = 0;
  for (int step = 0; step < 2; ++step) {
    const std::vector<float> L = to_host((step == 0 ? l1 : l2).squeeze(0));
    const size_t V = size_t(f.t.vocab);
    for (size_t t = 1; t < f.tokens.size(); ++t) {
      const drafter::AssistantDraft& e = eng[t - 1][size_t(step)];
      if (step == 1 && eng[t - 1][0].token != d1[t]) continue;  // another step-1 draft fed in
      double scale = 0;
      for (float v : e.logits) scale = std::max(scale, double(std::abs(v)));
      const double tol = test::fp32_forward_tolerance(256, 9, scale);
      std::vector<float> sorted = e.logits;
      std::nth_element(sorted.begin(), sorted.begin() + 1, sorted.end(), std::greater<>());
      for (size_t k = 0; k < V; ++k) {
        worst = std::max(worst, std::abs(double(L[t * V + k]) - double(e.logits[k])) / tol);
      }
      if (expect_tokens && sorted[0] - sorted[1] > 2 * tol) {
        const int32_t mine = int32_t(std::max_element(L.begin() + long(t * V),
                                                      L.begin() + long((t + 1) * V)) -
                                     (L.begin() + long(t * V)));
        EXPECT_EQ(mine, e.token) << "row " << t << " step " << step + 1;
      }
    }
  }
  return worst;
}

TEST(TorchAssistant, StepsEqualTheEngine) {
  const Fixture f;
  const torch::Device cpu(torch::kCPU);
  const TorchAssistant ta(f.m, f.g.config(), cpu);
  const auto flat = ta.layout().to_flat(ta.read_dir(f.adir), cpu);
  const auto p = ta.layout().views(flat, false);
  const AssistantCapture cap = engine_capture(f.m, f.g.config(), f.tokens, cpu);
  const double worst = compare(f, f.g, ta, p, cap, true);
  EXPECT_LE(worst, 1.0);
  std::printf("  max |torch - engine| / tol = %.3g\n", worst);
}

TEST(TorchAssistant, ParityFailsOnAOnePositionShiftOfTheCapturedKV) {
  const Fixture f;
  const torch::Device cpu(torch::kCPU);
  const TorchAssistant ta(f.m, f.g.config(), cpu);
  const auto p = ta.layout().views(ta.layout().to_flat(ta.read_dir(f.adir), cpu), false);
  AssistantCapture cap = engine_capture(f.m, f.g.config(), f.tokens, cpu);
  for (auto& [layer, kv] : cap.kv) {  // position j's K/V where j + 1's should be
    kv.first = torch::roll(kv.first, 1, 2);
    kv.second = torch::roll(kv.second, 1, 2);
  }
  const double bad = compare(f, f.g, ta, p, cap, false);
  EXPECT_GT(bad, 1.0) << "a shifted K/V capture was not detected";
  std::printf("  shifted K/V: max |torch - engine| / tol = %.3g\n", bad);
}

TEST(TorchAssistant, TrainedExportReloadsAndDraftsAsTheTrainer) {
  const Fixture f;
  const torch::Device cpu(torch::kCPU);
  const TorchAssistant ta(f.m, f.g.config(), cpu);
  torch::Tensor flat = ta.layout().to_flat(ta.read_dir(f.adir), cpu);
  const AssistantCapture cap = engine_capture(f.m, f.g.config(), f.tokens, cpu);
  // Row t (t >= 1) drafts the target's next token after tok[0..t].
  auto labels = torch::tensor(std::vector<int64_t>(cap.target_argmax.begin(),
                                                   cap.target_argmax.end())).narrow(0, 1, kT - 1);
  const auto e = ta.embed(f.tokens);
  const auto s = TorchAssistant::step1_state(cap.post_norm);
  // The views share flat's storage: the optimizer's in-place steps train it.
  std::vector<torch::Tensor> leaves = ta.layout().views(flat, true);
  torch::optim::Adam opt(leaves, torch::optim::AdamOptions(1e-2));
  std::vector<double> losses;
  for (int it = 0; it < 8; ++it) {
    opt.zero_grad();
    auto logits = ta.step(leaves, e, s, cap.kv).first.squeeze(0).narrow(0, 1, kT - 1);
    auto loss = torch::nn::functional::cross_entropy(logits, labels);
    loss.backward();
    opt.step();
    losses.push_back(loss.item<double>());
  }
  EXPECT_LT(losses.back(), losses.front()) << "training did not lower the loss";
  const std::vector<float> trained = to_host(flat);
  const std::string out = test::temp_dir("g4a-torch-export") + "/assistant";
  nlohmann::json config = test::assistant_config_json(f.t, {});
  ta.write_dir(out, config, trained);
  const drafter::Gemma4Assistant back = drafter::Gemma4Assistant::load(out, f.m.config());
  const auto p = ta.layout().views(ta.layout().to_flat(trained, cpu), false);
  const double worst = compare(f, back, ta, p, cap, true);
  EXPECT_LE(worst, 1.0);
  std::printf("  losses %.4f -> %.4f; exported: max |torch - engine| / tol = %.3g\n",
              losses.front(), losses.back(), worst);
}

// train-assistant's loop: online against the engine's target, from an
// initial directory, its loss falls and its output loads in the engine.
TEST(TorchAssistant, TrainAssistantFineTunesAgainstTheEngineTarget) {
  const Fixture f;
  io::PretrainData d;
  std::mt19937 rng(9);
  d.train.add_document(test::random_tokens(rng, 40, f.t.vocab), -1, -1);
  d.info = {{"vocab", f.t.vocab}, {"bos_id", -1}, {"eos_id", -1}};
  AssistantTrainOptions o;
  o.target = test::random_hf_checkpoint("g4a-torch-t", f.t);
  o.init_from = f.adir;
  o.tokens = test::temp_dir("g4a-train-tok") + "/tokens.safetensors";
  io::write_pretrain_data(o.tokens, d);
  o.out = test::temp_dir("g4a-train-out") + "/assistant";
  o.gguf = test::temp_dir("g4a-train-gguf") + "/assistant.gguf";
  o.steps = 16;
  o.seq_len = 12;
  o.lr = 1e-2;
  const AssistantTrainResult r = train_assistant(o);
  ASSERT_EQ(r.losses.size(), 16u);
  const double first = (r.losses[0] + r.losses[1] + r.losses[2]) / 3;
  const double last = (r.losses[13] + r.losses[14] + r.losses[15]) / 3;
  EXPECT_LT(last, first);
  // It records the exact target (the engine refuses it for another) and so
  // does its GGUF.
  const drafter::ServedTarget served{model::target_fingerprint(f.m.loaded()),
                                     drafter::TargetMismatch::Refuse};
  const drafter::Gemma4Assistant back =
      drafter::Gemma4Assistant::load(o.out, f.m.config(), {}, &served);
  EXPECT_EQ(back.record().target_fingerprint, served.fingerprint);
  EXPECT_EQ(drafter::Gemma4Assistant::load(o.gguf, f.m.config(), {}, &served).record().capture,
            drafter::kAssistantCapture);
  EXPECT_EQ(back.parameters(), f.g.parameters());
  // Its GGUF drafts as the directory does (both F32: bit for bit).
  const drafter::Gemma4Assistant gg = drafter::Gemma4Assistant::load(o.gguf, f.m.config());
  const auto want = drafter::assistant_teacher_forced(f.m, back, f.tokens, 2, 2, nullptr, true);
  const auto got = drafter::assistant_teacher_forced(f.m, gg, f.tokens, 2, 2, nullptr, true);
  for (size_t i = 0; i < want.size(); ++i) {
    for (size_t j = 0; j < want[i].size(); ++j) EXPECT_EQ(got[i][j].logits, want[i][j].logits);
  }
  std::printf("  train-assistant: loss %.3f -> %.3f\n", first, last);
  AssistantTrainOptions bad = o;
  bad.seq_len = 2;
  EXPECT_THROW(train_assistant(bad), InputError);
}

// transformers (PyPI, CPU; label `reference`) loads an exported directory
// (the initial weights moved off by N(0, 0.01): not the checkpoint writer's
// bits; its config carrying the target record) as it loads Google's and drafts, on the same random target, what
// the engine drafts from it: every score within 2× the fp32 tolerance, the
// chosen tokens equal wherever the top two are apart.
TEST(TransformersAssistantExport, TrainedExportDraftsAsTransformers) {
  std::string why;
  const std::string py = test::ref_python({"torch", "transformers"}, &why);
  if (py.empty()) GTEST_SKIP() << why;
  const Fixture f;
  const torch::Device cpu(torch::kCPU);
  const TorchAssistant ta(f.m, f.g.config(), cpu);
  torch::Tensor flat = ta.layout().to_flat(ta.read_dir(f.adir), cpu);
  torch::manual_seed(1);
  flat.add_(torch::randn({flat.size(0)}, torch::TensorOptions().dtype(torch::kFloat32)) * 0.01);
  const std::string out = test::temp_dir("g4a-hf-export") + "/assistant";
  // With the record of its target, as train-assistant writes it (transformers
  // must keep loading it as Google's).
  nlohmann::json config = test::assistant_config_json(f.t, {});
  config[drafter::kAssistantRecordKey] =
      drafter::AssistantRecord{model::target_fingerprint(f.m.loaded()), "gemma4",
                               drafter::kAssistantCapture}
          .to_json();
  ta.write_dir(out, config, to_host(flat));
  const drafter::Gemma4Assistant back = drafter::Gemma4Assistant::load(out, f.m.config());
  constexpr int kN0 = 2, kSteps = 3;
  const auto eng = drafter::assistant_teacher_forced(f.m, back, f.tokens, kN0, kSteps, nullptr, true);
  std::string list;
  for (int32_t x : f.tokens) list += (list.empty() ? "" : ",") + std::to_string(x);
  const std::string tdir = test::random_hf_checkpoint("g4a-torch-t", f.t);
  const std::string res = test::temp_dir("g4a-hf-export-out") + "/hf.json";
  std::string log;
  ASSERT_EQ(test::run_python(py, std::string(MTPSPEC_SOURCE_DIR) + "/tests/drafter/assistant_transformers.py",
                             {tdir, out, list, std::to_string(kN0), std::to_string(kSteps), res}, &log),
            0) << log;
  const nlohmann::json hf = nlohmann::json::parse(read_file(res)).at("chains");
  long tokens = 0;
  const double worst = test::compare_with_transformers(hf, eng, &tokens);
  EXPECT_LE(worst, 2.0);
  EXPECT_GT(tokens, 10);
  std::printf("  exported: max |engine - transformers| / tol = %.3g over %ld drafts\n", worst, tokens);
}

}  // namespace
}  // namespace mtp::train
