// `mtpspec generate` on a Qwen3.5 target (Gated DeltaNet layers: every
// rejected draft rolls the recurrent state back): speculating with the
// prompt lookup and history sources, or with the checkpoint's own MTP head
// (--draft-source native-mtp), prints plain generation's tokens, greedy and
// sampled; the head's drafts are verified and some accepted. A GGUF written as
// llama.cpp's converter writes it (the head as block n_layers' nextn tensors).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "checkpoint_util.h"
#include "cli_util.h"
#include "gguf_util.h"
#include "test_util.h"

namespace mtp::test {
namespace {

std::string qwen35_gguf() {
  RandomSpec s = RandomSpec::for_arch(model::Arch::Qwen35);
  s.seed = 17;
  s.mtp = true;
  const std::string hf = random_hf_checkpoint("q35-cli", s);
  const std::string gguf = temp_dir("q35-cli") + "/model.gguf";
  convert_hf_to_gguf(hf, gguf, GgufConvert{});
  return gguf;
}

TEST(Qwen35Cli, SpeculationPrintsPlainGenerationsTokens) {
  const std::string gguf = qwen35_gguf();
  for (const char* sampling : {"--temp 0", "--temp 0.8 --seed 3"}) {
    const std::string common = "generate -m " + shell_quote(gguf) +
                               " -p 'abc de abc de abc' -n 24 --threads 1 --json " + sampling;
    const CliResult plain = run_cli(common + " --no-spec");
    ASSERT_EQ(plain.status, 0) << plain.err;
    const auto want = nlohmann::json::parse(plain.out)["token_ids"];
    ASSERT_EQ(want.size(), 24u);
    for (const char* spec : {"--lookup prompt,history --no-gate", "--draft-source native-mtp --no-gate",
                             "--draft-source native-mtp --no-gate --draft-k 2"}) {
      SCOPED_TRACE(std::string(sampling) + " " + spec);
      const CliResult r = run_cli(common + " " + spec);
      ASSERT_EQ(r.status, 0) << r.err;
      const auto j = nlohmann::json::parse(r.out);
      EXPECT_EQ(j["token_ids"], want);
      if (std::string(spec).find("native-mtp") != std::string::npos) {
        EXPECT_GT(j["stats"]["drafted"][0].get<long>(), 0) << j["stats"].dump();
        // --draft-k: the head's longest chain (default 3).
        const size_t depth = std::string(spec).find("--draft-k 2") != std::string::npos ? 2 : 3;
        EXPECT_EQ(j["stats"]["drafted"].size(), depth) << j["stats"].dump();
      }
    }
  }
  // Beyond the head's longest chain: refused naming the flag (exit 2).
  const CliResult r = run_cli("generate -m " + shell_quote(gguf) +
                              " -p 'abc' -n 4 --draft-source native-mtp --draft-k 17");
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("--draft-k 17"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace mtp::test
