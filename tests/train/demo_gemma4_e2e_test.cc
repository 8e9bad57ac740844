// `mtpspec demo --arch gemma4` end to end: a tiny Gemma 4 target pretrained
// here (per-layer embeddings, K/V sharing, sliding and full layers), then
// self-distillation, a K = 2 drafter whose modules are Gemma 4 sliding
// layers, parity, plain vs speculative bench and drift.
//   - DemoGemma4E2E.SmokeRun (ctest label `e2e`, in the default run): tiny
//     budgets on a corpus written here, well under 2 minutes; speculative
//     output equals plain output, drift flips nothing, a rerun reuses every
//     stage, and a workdir of another family is refused.
//   - DemoGemma4E2E.HeavyFullRun (label `heavy`): the demo's own budgets on
//     Debian's fortunes, as a user runs it.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "demo_util.h"
#include "model/loader.h"
#include "test_util.h"

namespace mtp::test {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// The verdicts every run must give: lossless, parity passed (export and the
// parity stage would have failed the demo), the target a Gemma 4 with every
// feature the pretraining gives it.
void expect_lossless_gemma4(const json& s, const std::string& workdir) {
  EXPECT_EQ(s["outputs_differing"], 0) << "speculative output differs from plain";
  EXPECT_EQ(s["drift_flipped_prompts"], 0);
  EXPECT_EQ(s["drift_max_abs_dlogit"].get<double>(), 0.0);
  ASSERT_EQ(s["acceptance_live"].size(), 2u) << s.dump();
  EXPECT_TRUE(fs::exists(fs::path(workdir) / "drafter.safetensors"));
  const model::ModelConfig c = model::read_model_config(workdir + "/model");
  ASSERT_EQ(c.arch, model::Arch::Gemma4);
  EXPECT_GT(c.ple_dim, 0);
  bool shared = false, sliding = false, full = false;
  for (int l = 0; l < c.n_layers; ++l) {
    shared |= !c.layer_kind(l).owns_kv();
    (c.is_sliding(l) ? sliding : full) = true;
  }
  EXPECT_TRUE(shared && sliding && full);
}

TEST(DemoGemma4E2E, SmokeRun) {
  const std::string tmp = temp_dir("demo-g4");
  const std::string corpus = write_demo_corpus(tmp), w = tmp + "/work";
  const std::string args = "demo --arch gemma4 --preset micro --corpus " + shell_quote(corpus) +
                           " --workdir " + shell_quote(w) +
                           " --threads 2 --pretrain-steps 60 --distill-prompts 100 "
                           "--train-steps 30 -n 16 --repeat 1 --json";
  const json s = demo_summary(run_cli(args), "demo --arch gemma4");
  ASSERT_TRUE(s.contains("stages")) << s.dump();
  expect_lossless_gemma4(s, w);

  // Rerun: every stage reused (nothing pretrained, trained or exported
  // again), still lossless.
  const json again = demo_summary(run_cli(args), "demo rerun");
  for (const auto& st : again["stages"]) {
    if (st["stage"] == "pretrain" || st["stage"] == "train") {
      EXPECT_TRUE(st["skipped"].get<bool>()) << st.dump();
    }
    EXPECT_NE(st["stage"], "export") << "the rerun exported again";
  }
  expect_lossless_gemma4(again, w);

  // Another family in the same workdir would reuse this target's stages.
  CliResult r = run_cli("demo --arch llama --corpus " + shell_quote(corpus) + " --workdir " +
                        shell_quote(w) + " --threads 2");
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("holds a gemma4 target"), std::string::npos) << r.err;
  r = run_cli("demo --arch gemma4 --model " + shell_quote(w + "/model") + " --workdir " +
              shell_quote(tmp + "/other"));
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("--model"), std::string::npos) << r.err;
}

TEST(DemoGemma4E2E, HeavyFullRun) {
  if (!fs::is_directory("/usr/share/games/fortunes")) {
    GTEST_SKIP() << "Debian's fortunes package is not installed (the demo's corpus)";
  }
  const std::string w = temp_dir("demo-g4-full") + "/work";
  const json s = demo_summary(run_cli("demo --arch gemma4 --workdir " + shell_quote(w) +
                                    " --threads 2 --json"),
                            "demo --arch gemma4");
  ASSERT_TRUE(s.contains("stages")) << s.dump();
  expect_lossless_gemma4(s, w);
  std::printf("demo --arch gemma4: %.0f s, speedup %.2f, live acceptance %s\n",
              s["seconds"].get<double>(), s["speedup"].get<double>(),
              s["acceptance_live"].dump().c_str());
}

}  // namespace
}  // namespace mtp::test
