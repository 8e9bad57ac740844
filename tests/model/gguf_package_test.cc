// GGUF files written by the `gguf` PyPI package — llama.cpp's own writer, its
// architecture names, tensor-name table and keys (tests/python/gguf_fixture.py)
// — from the random Hugging Face checkpoint of each family we load give
// logits bitwise equal to that checkpoint: the names and conventions the
// loader expects are llama.cpp's, not only those of our own test writer
// (tests/gguf_util.h). Skipped with a message when the test venv is absent.
#include <gtest/gtest.h>

#include <random>

#include "checkpoint_util.h"
#include "cli_util.h"
#include "model/forward.h"
#include "model/loader.h"
#include "model_util.h"
#include "test_util.h"
#include "venv_util.h"

namespace mtp::model {
namespace {

class GgufPackageModel : public ::testing::TestWithParam<Arch> {};

TEST_P(GgufPackageModel, LogitsEqualTheCheckpoint) {
  MTP_REQUIRE_VENV(py, "test", "scripts/install-test-venv.sh");
  test::RandomSpec s = test::RandomSpec::for_arch(GetParam());
  s.dtype = DType::F32;
  s.seed = 11;
  const std::string dir = test::random_hf_checkpoint("gguf-pkg", s);
  const std::string gguf = test::temp_dir("gguf-pkg-out") + "/model.gguf";
  std::string log;
  ASSERT_EQ(test::run_python(py, test::shell_quote(std::string(MTPSPEC_SOURCE_DIR) +
                                                   "/tests/python/gguf_fixture.py") +
                                     " model " + test::shell_quote(dir) + " " +
                                     test::shell_quote(gguf),
                             &log),
            0)
      << log;
  const Hold f32{kernels::WeightType::F32};
  const LoadedModel hf = load_hf(dir, {f32});
  const LoadedModel gg = load_model(gguf, {f32});
  EXPECT_EQ(gg.config.source, "gguf");
  std::mt19937 rng(5);
  const auto tokens = test::random_tokens(rng, 20, hf.config.vocab);
  const std::vector<float> out[2] = {test::logits_of(hf, tokens, {1, 4, 7}),
                                     test::logits_of(gg, tokens, {1, 4, 7})};
  ASSERT_EQ(out[0].size(), out[1].size());
  EXPECT_EQ(test::first_bit_difference(out[0], out[1]), -1);
}

INSTANTIATE_TEST_SUITE_P(Families, GgufPackageModel,
                         ::testing::Values(Arch::Llama, Arch::Qwen2, Arch::Qwen3, Arch::Gemma2,
                                           Arch::Gemma3),
                         [](const auto& info) { return std::string(arch_name(info.param)); });

}  // namespace
}  // namespace mtp::model
