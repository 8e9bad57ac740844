// The libtorch target (train/torch_target.h, what online training runs on a
// GPU) against the engine's capture on random checkpoints of every family the
// engine loads, in fp32 on the CPU: within the tolerance derived from the
// dimensions (capture_gap). The gate can fail: the post-norm hidden and the
// penultimate layer's output (the seed's capture-point mistakes) are outside
// it. Gemma 4 with per-layer embeddings, shared K/V, both layer kinds and a
// prompt longer than its sliding window; Qwen3.5's Gated DeltaNet layers.
// Greedy self-distillation through it (its K/V and recurrent-state cache)
// continues prompts as the engine does. A Q8_0 target's gap is reported, and
// `mtpspec train --online --target-forward torch` trains a tiny Gemma 4.
#include "train/torch_target.h"

#include <gtest/gtest.h>

#include <fstream>
#include <random>

#include "checkpoint_util.h"
#include "cli_util.h"
#include "core/error.h"
#include "drafter/capture.h"
#include "gguf_util.h"
#include "kernels/matmul.h"
#include "model_util.h"
#include "test_util.h"
#include "train/checkpoint.h"
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
  std::printf("[ gap ] %s: %s\n", tag.c_str(), gap.to_json().dump().c_str());
  EXPECT_TRUE(gap.within()) << tag << ": " << gap.to_json().dump();
  EXPECT_GT(gap.ref, 0);
  const CaptureGap normed = capture_gap(tt, tokens, post_norm(*t.model, h));
  EXPECT_FALSE(normed.within()) << tag << " post-norm: " << normed.to_json().dump();
  const CaptureGap early = capture_gap(tt, tokens, tt.capture(tokens, spec.n_layers - 1));
  std::printf("[ gap ] %s controls: post-norm %.3e, penultimate %.3e\n", tag.c_str(),
              normed.max_abs, early.max_abs);
  EXPECT_FALSE(early.within()) << tag << " penultimate layer: " << early.to_json().dump();
}

TEST(TorchTarget, CaptureWithinToleranceAndNegativeControlsFailEveryFamily) {
  // Gemma 4's spec: PLE, the last two layers reading layers 3 (sliding) and 2
  // (full), window 6 < the 48 tokens. Qwen3.5's: three Gated DeltaNet layers.
  for (model::Arch a : test::every_arch()) {
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
  // Gemma 4's full layers with V = K's projection (attention_k_eq_v).
  test::RandomSpec kv = test::RandomSpec::for_arch(model::Arch::Gemma4);
  kv.k_eq_v = true;
  check_torch_target("gemma4_k_eq_v", kv);
}

// Greedy continuations through the libtorch target (cached decoding, several
// sequences per step, prompts of different lengths) are the engine's.
void expect_greedy_as_engine(const model::Model& m, const std::vector<drafter::CaptureJob>& jobs,
                             int seq_len, std::vector<int32_t> stops) {
  std::unique_ptr<TargetCapture> torch_side = torch_capture(m, torch::kCPU);
  std::unique_ptr<TargetCapture> engine_side = engine_capture(m, 1);
  std::vector<const drafter::CaptureJob*> batch;
  for (const auto& j : jobs) batch.push_back(&j);
  drafter::CaptureOptions o;
  o.seq_len = seq_len;
  o.stops = std::move(stops);
  o.choose = [](size_t, const float* logits, size_t V, int64_t) {
    return int32_t(std::max_element(logits, logits + V) - logits);
  };
  const auto a = torch_side->capture(batch, o), b = engine_side->capture(batch, o);
  for (size_t i = 0; i < jobs.size(); ++i) {
    EXPECT_EQ(a[i].tokens, b[i].tokens) << "job " << i;
    EXPECT_EQ(a[i].loss_mask, b[i].loss_mask);
    EXPECT_EQ(torch_side->gap(b[i].tokens)["within"], true) << torch_side->gap(b[i].tokens).dump();
  }
}

TEST(TorchTarget, GreedySelfDistillationOfGemma4AndQwen35ContinuesAsTheEngine) {
  for (model::Arch a : {model::Arch::Gemma4, model::Arch::Qwen35}) {
    SCOPED_TRACE(model::arch_name(a));
    test::Target t = test::load_target(test::random_hf_checkpoint(
        std::string("torch_target_sd_") + model::arch_name(a), test::RandomSpec::for_arch(a)));
    // Prompts of 4, 9 and 1 tokens; continuations well past the window (6).
    const std::vector<drafter::CaptureJob> jobs = {
        {{5, 77, 140, 9}, 28, 0}, {{3, 30, 42, 44, 42, 41, 44, 7, 100}, 25, 1}, {{35}, 30, 2}};
    expect_greedy_as_engine(*t.model, jobs, 32, {});
  }
}

// A random Gemma 4 or Qwen3.5 as a GGUF (F32, or Q8_0 matrices) with its own
// vocabulary; Gemma 4's per-layer embeddings 32 wide (Q8_0 rows: whole blocks).
std::string gguf_target(model::Arch a, uint32_t matrix_type) {
  test::RandomSpec spec = test::RandomSpec::for_arch(a);
  if (a == model::Arch::Gemma4) spec.ple_dim = 32;
  const std::string gguf = test::temp_dir("torch_target_gguf") + "/t.gguf";
  test::GgufConvert conv;
  conv.matrix_type = matrix_type;
  test::convert_hf_to_gguf(test::random_hf_checkpoint("torch_target_gguf_hf", spec), gguf, conv);
  return gguf;
}

// A block-quantized target (Q8_0): the engine multiplies int8-quantized
// activations, the libtorch target the exact dequantized weights in fp32. The
// gap is measured and reported; it is beyond the fp32 bound (the run refuses
// it unless --force: below) and below the penultimate layer's.
TEST(TorchTarget, QuantizedTargetGapIsReported) {
  for (model::Arch a : {model::Arch::Gemma4, model::Arch::Qwen35}) {
    SCOPED_TRACE(model::arch_name(a));
    test::Target t = test::load_target(gguf_target(a, 8 /* Q8_0 */));
    ASSERT_TRUE(kernels::weight_type_quantized(t.model->weights().layers[0].w_down.hold()));
    TorchTarget tt(*t.model, torch::kCPU);
    std::mt19937 rng(5);
    std::vector<int32_t> tokens;
    for (int i = 0; i < 40; ++i) tokens.push_back(int32_t(rng() % uint32_t(t.model->config().vocab)));
    const CaptureGap gap = capture_gap(tt, tokens, tt.capture(tokens));
    const CaptureGap early =
        capture_gap(tt, tokens, tt.capture(tokens, t.model->config().n_layers - 1));
    std::printf("[ gap ] %s Q8_0: %s (penultimate layer %.3e)\n", model::arch_name(a),
                gap.to_json().dump().c_str(), early.max_abs);
    RecordProperty(std::string("q8_0_gap_") + model::arch_name(a), gap.to_json().dump());
    EXPECT_FALSE(gap.within());
    EXPECT_LT(gap.max_abs, early.max_abs);
  }
}

// Greedy continuations of stories260K prompts: a real target's.
TEST(TorchTarget, GreedySelfDistillationContinuesAsTheEngine) {
  MTP_REQUIRE_SHARED(path, "models/stories260K/stories260K.bin");
  test::Target t = test::load_target(path);
  expect_greedy_as_engine(
      *t.model,
      {{{1, 410, 460, 420}, 28, 0}, {{1, 307, 426, 446, 426, 410, 447}, 25, 1}, {{1, 350}, 30, 2}},
      32, {2});
}

// `mtpspec train --online --target-forward torch --device cpu` on `gguf`:
// self-distillation through the twin, a few steps.
test::CliResult train_online_through_twin(const std::string& gguf, const std::string& run,
                                          const std::string& extra = "") {
  const std::string corpus = test::temp_dir("torch_target_corpus") + "/corpus.txt";
  {
    std::ofstream out(corpus);
    for (int i = 0; i < 40; ++i) out << "The cat walked to the river number " << i << ".\n\n";
  }
  return test::run_cli(
      "train --online -m " + test::shell_quote(gguf) + " --corpus " + test::shell_quote(corpus) +
      " -o " + test::shell_quote(run) +
      " --self-distill --prompt-tokens 6 --gen-tokens 10 --seq-len 24 --max-tokens 600 "
      "--target-forward torch --device cpu --k 1 --batch 2 --steps 3 --warmup 1 --threads 1 "
      "--no-progress --no-parity " + extra);
}

// A tiny Gemma 4 and Qwen3.5 (F32): the capture gap measured and within its
// bound before training; the run trains on the twin's capture.
TEST(TorchTarget, OnlineTrainingOnGemma4AndQwen35TargetsThroughTheTwin) {
  for (model::Arch a : {model::Arch::Gemma4, model::Arch::Qwen35}) {
    SCOPED_TRACE(model::arch_name(a));
    const std::string run = test::temp_dir("torch_target_online") + "/run";
    test::CliResult r = train_online_through_twin(gguf_target(a, 0 /* F32 */), run);
    ASSERT_EQ(r.status, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("capture gap of the libtorch (cpu, fp32) target"), std::string::npos)
        << r.out;
    Checkpoint c = load_checkpoint(checkpoint_path(run));
    EXPECT_EQ(c.state["step"], 3);
    EXPECT_EQ(c.state["online"]["target_forward"], "libtorch (cpu, fp32)") << c.state.dump();
  }
}

// A Q8_0 Gemma 4: the gap beyond the bound refuses the run (exit 2, both
// numbers named); --force trains anyway.
TEST(TorchTarget, OnlineTrainingRefusesAQuantizedTwinBeyondItsBoundUnlessForced) {
  const std::string gguf = gguf_target(model::Arch::Gemma4, 8 /* Q8_0 */);
  const std::string dir = test::temp_dir("torch_target_refuse");
  test::CliResult r = train_online_through_twin(gguf, dir + "/refused");
  EXPECT_EQ(r.status, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("beyond the bound"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("force"), std::string::npos) << r.err;
  test::CliResult f = train_online_through_twin(gguf, dir + "/forced", "--force");
  ASSERT_EQ(f.status, 0) << f.out << f.err;
  EXPECT_EQ(load_checkpoint(checkpoint_path(dir + "/forced")).state["step"], 3);
}

}  // namespace
}  // namespace mtp::train
