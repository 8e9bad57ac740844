// Invariant 1 for quantized targets: with the matrices requantized at load
// (--weights q8_0 ... q6_k), a q-token forward gives, row for row, the same
// bits as q one-token forwards — every family, every block type, 1 and 2
// threads, every SIMD target the host executes.
#include <gtest/gtest.h>

#include <vector>

#include "bit_exact.h"
#include "checkpoint_util.h"
#include "kernels/matmul.h"
#include "kernels/simd.h"
#include "model/loader.h"
#include "model_util.h"
#include "test_util.h"

namespace mtp::test {
namespace {

constexpr kernels::WeightType kQuant[] = {
    kernels::WeightType::Q8_0, kernels::WeightType::Q4_0, kernels::WeightType::Q5_0,
    kernels::WeightType::Q4_K, kernels::WeightType::Q5_K, kernels::WeightType::Q6_K};

model::Model load(const std::string& path, kernels::WeightType wt) {
  model::LoadOptions o;
  o.weights = wt;
  return model::Model(model::load_model(path, o));
}

class BitExactQuant : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    kernels::set_simd_target(GetParam());
    prev_ = kernels::detail::set_parallel_min_work(0);
  }
  void TearDown() override {
    kernels::set_simd_target("");
    kernels::detail::set_parallel_min_work(prev_);
  }
  size_t prev_ = 0;
};
INSTANTIATE_TEST_SUITE_P(Simd, BitExactQuant,
                         ::testing::ValuesIn(kernels::available_simd_targets()),
                         [](const auto& info) { return info.param; });

// Widths that are multiples of 256, so every K type is held as itself. The
// targets without integer kernels (sse4, scalar) run the scalar reference,
// which tests/kernels proves bit-identical to the SIMD kernels; they check one
// family here to keep the suite fast.
TEST_P(BitExactQuant, EveryArchitectureEveryType) {
  std::vector<model::Arch> archs = {model::Arch::Llama, model::Arch::Qwen2, model::Arch::Qwen3,
                                    model::Arch::Gemma2, model::Arch::Gemma3};
  if (GetParam() == "sse4" || GetParam() == "scalar") archs = {model::Arch::Llama};
  for (model::Arch a : archs) {
    test::RandomSpec spec = test::RandomSpec::for_arch(a);
    spec.d_model = 256, spec.n_heads = 4, spec.n_kv_heads = 2, spec.head_dim = 64, spec.ffn = 256;
    spec.n_layers = 1;
    if (a == model::Arch::Gemma2 || a == model::Arch::Gemma3) spec.sliding_window = 6;
    const std::string dir = test::random_hf_checkpoint("bitexact-quant", spec);
    for (auto wt : kQuant) {
      model::Model m = load(dir, wt);
      ASSERT_EQ(m.weights().layers[0].w_down.hold(), wt);
      for (int threads : {1, 2}) {
        SCOPED_TRACE(testing::Message() << model::arch_name(a) << " "
                                        << kernels::weight_type_name(wt) << " threads=" << threads);
        check_bit_exact(m, threads, 17 * threads + int(wt), 20);
      }
    }
  }
}

// The default small widths (64, ffn 96): K types fall back to Q5_0 / Q8_0
// rows, as llama-quantize does; llama2c with an unshared head.
TEST_P(BitExactQuant, FallbackWidthsLlama2c) {
  const std::string path = temp_dir("bitexact-quant") + "/random.bin";
  write_random_llama2c(path, 64, 96, 2, 4, 2, -300, 128, 12);
  for (auto wt : {kernels::WeightType::Q4_K, kernels::WeightType::Q6_K}) {
    model::Model m = load(path, wt);
    for (int threads : {1, 2}) {
      SCOPED_TRACE(testing::Message() << kernels::weight_type_name(wt) << " threads=" << threads);
      check_bit_exact(m, threads, 5 + threads, 24);
    }
  }
}

}  // namespace
}  // namespace mtp::test
