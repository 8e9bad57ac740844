// drift: our kernels give 0 flips and max |Δlogit| = 0 on every architecture
// (Qwen3.5's recurrent state included);
// the harness detects an injected protocol fault and a non-invariant verify.
#include <gtest/gtest.h>

#include <random>

#include "checkpoint_util.h"
#include "kernels/matmul_blas.h"
#include "model/loader.h"
#include "model_util.h"
#include "measure/drift.h"
#include "test_util.h"

namespace mtp::speculative {
namespace {

std::vector<std::vector<int32_t>> prompts(const model::ModelConfig& c, int n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<std::vector<int32_t>> out;
  for (int i = 0; i < n; ++i) out.push_back(test::random_tokens(rng, 1 + i * 3, c.vocab));
  return out;
}

void expect_no_drift(const model::Model& m, int n, int threads) {
  ThreadPool pool(threads);
  for (int k : {1, 3, 5}) {
    for (const auto& p : prompts(m.config(), 3, unsigned(k))) {
      DriftOptions o;
      o.n = n;
      o.draft_k = k;
      DriftResult r = drift_one(m, p, o, threads > 1 ? &pool : nullptr);
      EXPECT_FALSE(r.first_flip.has_value()) << "K=" << k << " flipped at " << *r.first_flip;
      EXPECT_EQ(r.max_abs_dlogit, 0.0) << "K=" << k;
      EXPECT_EQ(r.compared, n);
      EXPECT_GT(r.stats.cycles, 0);
    }
  }
}

TEST(Drift, Stories260KHasNoDrift) {
  MTP_REQUIRE_SHARED(path, "models/stories260K/stories260K.bin");
  model::Model m(model::load_model(path, {}));
  expect_no_drift(m, 48, 1);
  expect_no_drift(m, 48, 2);
}

TEST(Drift, EveryArchitectureHasNoDriftInBothPrecisions) {
  for (model::Arch a : {model::Arch::Llama, model::Arch::Qwen2, model::Arch::Qwen3,
                        model::Arch::Gemma2, model::Arch::Gemma3, model::Arch::Qwen35}) {
    SCOPED_TRACE(model::arch_name(a));
    test::RandomSpec spec = test::RandomSpec::for_arch(a);
    if (a == model::Arch::Gemma2 || a == model::Arch::Gemma3) spec.sliding_window = 6;
    std::string dir = test::random_hf_checkpoint("drift", spec);
    for (auto wt : {kernels::WeightType::F32, kernels::WeightType::BF16}) {
      model::LoadOptions lo;
      lo.weights = wt;
      model::Model m(model::load_model(dir, lo));
      expect_no_drift(m, 24, 1);
    }
  }
}

TEST(Drift, DetectsTheStaleKvProtocolFault) {
  MTP_REQUIRE_SHARED(path, "models/stories260K/stories260K.bin");
  model::Model m(model::load_model(path, {}));
  DriftOptions o;
  o.n = 48;
  o.stale_kv_fault = true;
  DriftResult r = drift_one(m, {1, 400, 300}, o, nullptr);
  EXPECT_TRUE(r.first_flip.has_value());
  EXPECT_GT(r.flip_rate, 0.0);
}

// On a recurrent target (Qwen3.5) the fault also leaves the rejected drafts
// in the recurrent state: the harness must see it there too.
TEST(Drift, DetectsTheStaleStateFaultOnARecurrentTarget) {
  test::RandomSpec spec = test::RandomSpec::for_arch(model::Arch::Qwen35);
  model::Model m(model::load_model(test::random_hf_checkpoint("drift-q35", spec), {}));
  DriftOptions o;
  o.n = 32;
  o.draft_k = 3;
  o.stale_kv_fault = true;
  DriftResult r = drift_one(m, {5, 9, 7}, o, nullptr);
  EXPECT_TRUE(r.first_flip.has_value());
  EXPECT_GT(r.flip_rate, 0.0);
}

TEST(Drift, DetectsANonInvariantVerify) {
  MTP_REQUIRE_SHARED(path, "models/stories260K/stories260K.bin");
  model::Model m(model::load_model(path, {}));
  try {
    kernels::set_backend(kernels::Backend::BlasForBatches);
  } catch (const std::exception& e) {
    GTEST_SKIP() << "OpenBLAS not loadable: " << e.what();
  }
  DriftOptions o;
  o.n = 32;
  DriftResult r = drift_one(m, {1, 400, 300, 20}, o, nullptr);
  kernels::set_backend(kernels::Backend::Invariant);
  EXPECT_GT(r.max_abs_dlogit, 0.0);
}

}  // namespace
}  // namespace mtp::speculative
