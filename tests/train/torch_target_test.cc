// The libtorch target (train/torch_target.h, what online training runs on a
// GPU) against the engine's capture on random checkpoints of every family it
// implements, in fp32 on the CPU: within the tolerance derived from the
// dimensions (capture_gap). The gate can fail: the post-norm hidden and the
// penultimate layer's output (the seed's capture-point mistakes) are outside
// it. Gemma 4 is refused by name. Greedy self-distillation through it
// continues a real target's prompts as the engine does.
#include "train/torch_target.h"

#include <gtest/gtest.h>

#include <random>

#include "checkpoint_util.h"
#include "core/error.h"
#include "drafter/capture.h"
#include "model_util.h"
#include "test_util.h"
#include "train_fixture.h"

namespace mtp::train {
namespace {

// The post-norm hidden: rmsnorm(h) · final_norm (the engine's norm weights), per position.
std::vector<float> post_norm(const model::Model& m, std::vector<float> h) {
  const size_t d = size_t(m.config().d_model);
  const auto& w = m.weights().final_norm;
  for (size_t p = 0; p < h.size() / d; ++p) {
    double ss = 0;
    for (size_t i = 0; i < d; ++i) ss += double(h[p * d + i]) * h[p * d + i];
    const float r = float(1.0 / std::sqrt(ss / double(d) + m.config().norm_eps));
    for (size_t i = 0; i < d; ++i) h[p * d + i] = h[p * d + i] * r * w[i];
  }
  return h;
}

void check_torch_target(const std::string& tag, const test::RandomSpec& spec) {
  test::Target t = test::load_target(test::random_hf_checkpoint("torch_target_" + tag, spec));
  TorchTarget tt(*t.model, torch::kCPU);
  std::mt19937 rng(3);
  std::vector<int32_t> tokens;
  for (int i = 0; i < 48; ++i) tokens.push_back(int32_t(rng() % uint32_t(spec.vocab)));
  const std::vector<float> h = tt.capture(tokens);
  const CaptureGap gap = capture_gap(tt, tokens, h);
  EXPECT_TRUE(gap.within()) << tag << ": " << gap.to_json().dump();
  EXPECT_GT(gap.ref, 0);
  const CaptureGap normed = capture_gap(tt, tokens, post_norm(*t.model, h));
  EXPECT_FALSE(normed.within()) << tag << " post-norm: " << normed.to_json().dump();
  const CaptureGap early = capture_gap(tt, tokens, tt.capture(tokens, spec.n_layers - 1));
  EXPECT_FALSE(early.within()) << tag << " penultimate layer: " << early.to_json().dump();
}

TEST(TorchTarget, CaptureWithinToleranceAndNegativeControlsFailEveryFamily) {
  for (model::Arch a : test::every_arch()) {
    // Refused by name (below): their layers are captured by the engine on the CPU.
    if (a == model::Arch::Gemma4 || a == model::Arch::Qwen35) continue;
    check_torch_target(model::arch_name(a), test::RandomSpec::for_arch(a));
  }
  // Llama 3's RoPE scaling (the engine's own tables).
  test::RandomSpec l3 = test::RandomSpec::for_arch(model::Arch::Llama);
  l3.config_patch = {{"rope_scaling",
                      {{"rope_type", "llama3"},
                       {"factor", 8.0},
                       {"low_freq_factor", 1.0},
                       {"high_freq_factor", 4.0},
                       {"original_max_position_embeddings", 32}}}};
  check_torch_target("llama3", l3);
}

TEST(TorchTarget, Gemma4AndQwen35AreRefusedByName) {
  for (model::Arch a : {model::Arch::Gemma4, model::Arch::Qwen35}) {
    test::Target t = test::load_target(test::random_hf_checkpoint(
        std::string("torch_target_") + model::arch_name(a), test::RandomSpec::for_arch(a)));
    test::expect_error<ConfigError>([&] { TorchTarget tt(*t.model, torch::kCPU); },
                                    {"does not implement", "engine's forward on the CPU"});
  }
}

// Greedy continuations of stories260K prompts through the libtorch target
// (K/V-cached decoding, several sequences per step) are the engine's.
TEST(TorchTarget, GreedySelfDistillationContinuesAsTheEngine) {
  MTP_REQUIRE_SHARED(path, "models/stories260K/stories260K.bin");
  test::Target t = test::load_target(path);
  std::unique_ptr<TargetCapture> torch_side = torch_capture(*t.model, torch::kCPU);
  std::unique_ptr<TargetCapture> engine_side = engine_capture(*t.model, 1);
  const std::vector<drafter::CaptureJob> jobs = {
      {{1, 410, 460, 420}, 28, 0}, {{1, 307, 426, 446, 426, 410, 447}, 25, 1}, {{1, 350}, 30, 2}};
  std::vector<const drafter::CaptureJob*> batch;
  for (const auto& j : jobs) batch.push_back(&j);
  drafter::CaptureOptions o;
  o.seq_len = 32;
  o.stops = {2};
  o.choose = [](size_t, const float* logits, size_t V, int64_t) {
    return int32_t(std::max_element(logits, logits + V) - logits);
  };
  const auto a = torch_side->capture(batch, o), b = engine_side->capture(batch, o);
  for (size_t i = 0; i < jobs.size(); ++i) {
    EXPECT_EQ(a[i].tokens, b[i].tokens) << "job " << i;
    EXPECT_EQ(a[i].loss_mask, b[i].loss_mask);
  }
  EXPECT_EQ(torch_side->gap(b[0].tokens)["within"], true) << torch_side->gap(b[0].tokens).dump();
}

}  // namespace
}  // namespace mtp::train
