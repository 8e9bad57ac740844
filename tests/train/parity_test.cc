// The parity gate (docs/INVARIANTS.md invariant 5) on random drafters for random targets
// of every family: the libtorch modules (train/torch_mtp.cc) reproduce the
// engine's modules (drafter::MtpRunner) within the derived tolerance with 100 %
// argmax agreement on decided positions — and the gate FAILS when a single
// engine-side weight differs, so it can catch a real mismatch.
#include <gtest/gtest.h>

#include <algorithm>

#include "checkpoint_util.h"
#include "gguf_util.h"
#include "kernels/matmul.h"
#include "model_util.h"
#include "test_util.h"
#include "train/parity.h"
#include "train_fixture.h"

namespace mtp::train {
namespace {

struct Case {
  const char* name;
  model::Arch arch;
  bool llama2c;
  int window;  // drafter window (0 = unlimited)
};

std::string make_target(const Case& c) {
  if (c.llama2c) {
    std::string path = test::temp_dir("parity_l2c") + "/model.bin";
    test::write_random_llama2c(path, 64, 96, 2, 4, 2, 320, 256, 7);
    return path;
  }
  test::RandomSpec s = test::RandomSpec::for_arch(c.arch);
  if (c.arch != model::Arch::Gemma3 && c.arch != model::Arch::Gemma4) s.n_layers = 2;
  s.seed = 11;
  return test::random_hf_checkpoint(std::string("parity_") + c.name, s);
}

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

// Passed, deciding most positions, every decided argmax equal, with real
// headroom on the logits (not a tolerance that barely passes).
void expect_passed_with_headroom(const ParityReport& r) {
  EXPECT_TRUE(r.passed);
  for (const auto& m : r.modules) {
    EXPECT_GT(m.decided, m.positions / 2);
    EXPECT_EQ(m.agreed, m.decided);
    EXPECT_LT(m.max_dlogit, 0.1 * m.tol_logit);
  }
}

class ParityFamilies : public ::testing::TestWithParam<Case> {};

TEST_P(ParityFamilies, RandomDrafterPassesAndPerturbedEngineFails) {
  const Case& c = GetParam();
  test::Target t = test::load_target(make_target(c));
  drafter::DrafterConfig dc;
  dc.K = 2;
  dc.window = c.window;
  auto tensors = drafter::random_drafter_tensors(t.model->config(), dc, 5);
  // Norm weights at their identity would hide a family's norm style: move them.
  std::mt19937 rng(3);
  std::normal_distribution<float> n01(0.f, 1.f);
  for (auto& [name, v] : tensors) {
    if (name.find("norm") != std::string::npos || name.find(".bias") != std::string::npos) {
      for (auto& x : v) x += 0.1f * n01(rng);
    }
  }
  const std::string dir = test::temp_dir(std::string("parity_d_") + c.name);
  drafter::Drafter eng = test::engine_drafter(t, dc, tensors, dir + "/ok.safetensors");
  ParityOptions po;
  po.random_sequences = 2;
  po.random_len = 40;  // > window, so sliding modules really slide
  ThreadPool pool(1);
  ParityReport ok = run_parity(*t.model, eng, tensors, po, &pool);
  SCOPED_TRACE(ok.text());
  std::printf("%s: %s", c.name, ok.text().c_str());
  EXPECT_TRUE(ok.passed);
  ASSERT_EQ(ok.modules.size(), 2u);
  for (const auto& m : ok.modules) {
    EXPECT_GT(m.positions, 70);
    EXPECT_GT(m.decided, m.positions / 2);  // the gate decides most positions
    EXPECT_EQ(m.agreed, m.decided);
    // Real headroom, not a tolerance that barely passes.
    EXPECT_LT(m.max_dh, 0.1 * m.tol_h);
    EXPECT_LT(m.max_dlogit, 0.1 * m.tol_logit);
  }

  // One engine-side weight of module 1's MLP, nudged by 1e-3 (relative to a
  // typical weight of ~0.1): the torch side keeps the original.
  auto bad = tensors;
  bad["mtp.1.block.mlp.down_proj.weight"][5] += 1e-3f;
  drafter::Drafter eng_bad = test::engine_drafter(t, dc, bad, dir + "/bad.safetensors");
  ParityReport fail = run_parity(*t.model, eng_bad, tensors, po, &pool);
  SCOPED_TRACE(fail.text());
  std::printf("perturbed: %s", fail.text().c_str());
  EXPECT_FALSE(fail.passed);
  EXPECT_TRUE(fail.modules[0].passed);   // module 0 untouched
  EXPECT_FALSE(fail.modules[1].passed);
  EXPECT_GT(fail.modules[1].max_dh, fail.modules[1].tol_h);
}

INSTANTIATE_TEST_SUITE_P(
    Families, ParityFamilies,
    ::testing::Values(Case{"llama", model::Arch::Llama, false, 0},
                      Case{"llama2c", model::Arch::Llama, true, 0},
                      Case{"qwen2", model::Arch::Qwen2, false, 0},
                      Case{"qwen3", model::Arch::Qwen3, false, 16},
                      Case{"gemma2", model::Arch::Gemma2, false, 0},
                      Case{"gemma3", model::Arch::Gemma3, false, 12},
                      Case{"gemma3_full", model::Arch::Gemma3, false, 0},
                      // Modules of a Gemma 4 target: its sliding layer (own
                      // K/V, no per-layer input, single-width MLP), windowed
                      // by the drafter's window or, at 0, by the target's (6).
                      Case{"gemma4", model::Arch::Gemma4, false, 12},
                      Case{"gemma4_target_window", model::Arch::Gemma4, false, 0}),
    [](const auto& info) { return std::string(info.param.name); });

// What `export --dtype bf16 --draft-vocab N` writes: modules stored (and so
// held) in BF16, drafting among some tokens. The torch side uses the same
// rounded values and the full head; the gate compares the draft vocabulary's
// logits and its restricted argmax, and passes with real headroom.
TEST(Parity, Bf16DrafterWithDraftVocabularyPasses) {
  for (model::Arch arch : {model::Arch::Llama, model::Arch::Gemma2}) {
    SCOPED_TRACE(model::arch_name(arch));
    test::RandomSpec s = test::RandomSpec::for_arch(arch);
    s.seed = 4;
    test::Target t = test::load_target(test::random_hf_checkpoint("parity_dv", s));
    drafter::DrafterConfig dc;
    dc.K = 2;
    for (int32_t v = 3; v < t.model->config().vocab; v += 7) dc.draft_vocab.push_back(v);
    auto tensors = drafter::random_drafter_tensors(t.model->config(), dc, 13);
    for (auto& [name, v] : tensors) round_to(DType::BF16, v.data(), v.size());
    const std::string path = test::temp_dir("parity_dv_d") + "/d.safetensors";
    drafter::write_drafter(path, t.model->config(), t.fingerprint, dc, tensors, {}, DType::BF16);
    drafter::Drafter eng =
        drafter::Drafter::load(path, t.model->config(), t.fingerprint, kernels::WeightType::F32);
    ASSERT_EQ(eng.modules()[1].block.w_down.hold(), kernels::WeightType::BF16);
    ParityOptions po;
    ParityReport r = run_parity(*t.model, eng, tensors, po, nullptr);
    SCOPED_TRACE(r.text());
    expect_passed_with_headroom(r);
    for (const auto& m : r.modules) {
      for (int32_t a : m.engine_argmax) {
        EXPECT_TRUE(std::binary_search(dc.draft_vocab.begin(), dc.draft_vocab.end(), a)) << a;
      }
    }
  }
}

// A block-quantized target (a GGUF whose matrices, the head included, are
// Q8_0 or Q4_0): the engine runs such a head on activations quantized to int8
// per block; the gate compares the head's exact dequantized values (parity.cc
// with_float_head), as libtorch trains on them. A random drafter passes with
// real headroom on an untied (Llama) and a tied (Gemma 2) head, and a nudged
// engine-side weight still fails. Before, training against a Q8_0 GGUF ended
// "parity: FAIL" (max|dlogit| 2e-2 against a tolerance of 7e-4).
TEST(Parity, QuantizedTargetIsComparedOnItsDequantizedHead) {
  for (model::Arch arch : {model::Arch::Llama, model::Arch::Gemma2}) {
    for (uint32_t type : {8u /* Q8_0 */, 2u /* Q4_0 */}) {
      SCOPED_TRACE(std::string(model::arch_name(arch)) + " ggml type " + std::to_string(type));
      test::RandomSpec s = test::RandomSpec::for_arch(arch);
      s.seed = 21;
      const std::string dir = test::temp_dir("parity_quant");
      const std::string gguf = dir + "/t.gguf";
      test::GgufConvert conv;
      conv.matrix_type = type;
      test::convert_hf_to_gguf(test::random_hf_checkpoint("parity_quant_hf", s), gguf, conv);
      test::Target t = test::load_target(gguf);
      ASSERT_TRUE(kernels::weight_type_quantized(t.model->weights().lm_head.hold()));
      drafter::DrafterConfig dc;
      dc.K = 2;
      auto tensors = drafter::random_drafter_tensors(t.model->config(), dc, 17);
      drafter::Drafter eng = test::engine_drafter(t, dc, tensors, dir + "/ok.safetensors");
      ParityOptions po;
      ThreadPool pool(1);
      ParityReport ok = run_parity(*t.model, eng, tensors, po, &pool);
      SCOPED_TRACE(ok.text());
      expect_passed_with_headroom(ok);
      auto bad = tensors;
      bad["mtp.1.block.mlp.down_proj.weight"][5] += 1e-3f;
      drafter::Drafter eng_bad = test::engine_drafter(t, dc, bad, dir + "/bad.safetensors");
      EXPECT_FALSE(run_parity(*t.model, eng_bad, tensors, po, &pool).passed);
    }
  }
}

// The report's machine-readable and human-readable forms.
TEST(Parity, ReportsJsonAndText) {
  test::RandomSpec s = test::RandomSpec::for_arch(model::Arch::Llama);
  test::Target t = test::load_target(test::random_hf_checkpoint("parity_json", s));
  drafter::DrafterConfig dc;
  dc.K = 1;
  auto tensors = drafter::random_drafter_tensors(t.model->config(), dc, 9);
  drafter::Drafter eng =
      test::engine_drafter(t, dc, tensors, test::temp_dir("parity_json_d") + "/d.safetensors");
  ParityOptions po;
  ParityReport r = run_parity(*t.model, eng, tensors, po, nullptr);
  EXPECT_TRUE(r.passed);
  auto j = r.to_json();
  EXPECT_EQ(j["modules"].size(), 1u);
  EXPECT_TRUE(j["passed"].get<bool>());
  EXPECT_NE(r.text().find("PASS"), std::string::npos);
}

}  // namespace
}  // namespace mtp::train
