// `-m file.gguf` through the binary: generate from a GGUF equals generate from
// the Hugging Face checkpoint it was converted from (same tokens, same text),
// the GGUF is its own default tokenizer, and a drafter made for the HF
// checkpoint is refused on the GGUF copy (another fingerprint) unless
// --drafter-target-mismatch warn, which runs it with a warning and leaves the
// output unchanged.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "checkpoint_util.h"
#include "cli_util.h"
#include "gguf_util.h"
#include "test_util.h"

namespace mtp::test {
namespace {

struct Pair {
  std::string hf, gguf;
};

Pair pair(model::Arch arch) {
  RandomSpec s = RandomSpec::for_arch(arch);
  s.seed = 11;
  const std::string hf = random_hf_checkpoint("gguf-cli", s);
  const std::string gguf = temp_dir("gguf-cli") + "/model.gguf";
  convert_hf_to_gguf(hf, gguf, GgufConvert{});
  return {hf, gguf};
}

nlohmann::json generate(const std::string& args) {
  CliResult r = run_cli("generate " + args + " -p 'abc de' -n 16 --temp 0 --threads 1 --json");
  EXPECT_EQ(r.status, 0) << r.err;
  return r.status == 0 ? nlohmann::json::parse(r.out) : nlohmann::json();
}

TEST(GgufCli, GenerateFromGgufEqualsTheHfCheckpoint) {
  for (model::Arch arch : {model::Arch::Llama, model::Arch::Gemma2}) {
    const Pair p = pair(arch);
    const auto g = generate("-m " + shell_quote(p.gguf) + " --no-spec");
    const auto h = generate("-m " + shell_quote(p.hf) + " --tokenizer " + shell_quote(p.gguf));
    ASSERT_FALSE(g.is_null() || h.is_null());
    EXPECT_EQ(g["prompt_ids"], h["prompt_ids"]);
    EXPECT_EQ(g["token_ids"], h["token_ids"]) << model::arch_name(arch);
    EXPECT_EQ(g["text"], h["text"]);
    EXPECT_EQ(g["token_ids"].size(), 16u);
  }
}

TEST(GgufCli, DrafterOfTheHfCheckpointIsRefusedOnItsGgufCopyUnlessWarn) {
  const Pair p = pair(model::Arch::Llama);
  const std::string drafter = temp_dir("gguf-cli") + "/drafter.safetensors";
  CliResult init = run_cli("init-drafter -m " + shell_quote(p.hf) + " -o " + shell_quote(drafter) +
                           " --k 2");
  ASSERT_EQ(init.status, 0) << init.err;
  const std::string base = "generate -m " + shell_quote(p.gguf) + " --drafter " +
                           shell_quote(drafter) + " -p 'abc de' -n 16 --temp 0 --threads 1 --json";
  CliResult refused = run_cli(base);
  EXPECT_EQ(refused.status, 2);
  EXPECT_NE(refused.err.find("stored bytes"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("--drafter-target-mismatch warn"), std::string::npos) << refused.err;
  CliResult warned = run_cli(base + " --drafter-target-mismatch warn");
  ASSERT_EQ(warned.status, 0) << warned.err;
  EXPECT_NE(warned.err.find("warning"), std::string::npos) << warned.err;
  const auto plain = generate("-m " + shell_quote(p.gguf) + " --no-spec");
  EXPECT_EQ(nlohmann::json::parse(warned.out)["token_ids"], plain["token_ids"]);
  CliResult bad = run_cli(base + " --drafter-target-mismatch maybe");
  EXPECT_EQ(bad.status, 2);
}

}  // namespace
}  // namespace mtp::test
