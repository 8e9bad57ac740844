// `mtpspec demo --arch qwen35` end to end: a tiny Qwen3.5 target pretrained
// here (Gated DeltaNet and gated full-attention layers) with its native MTP
// head, then self-distillation, a K = 2 drafter of our own, parity, plain vs
// speculative bench and drift, and a bench with the native head drafting.
//   - DemoQwen35E2E.SmokeRun (ctest label `e2e`, in the default run): tiny
//     budgets on a corpus written here, under 2 minutes; speculative output
//     equals plain output with both drafters, drift flips nothing, a rerun
//     reuses every stage.
//   - DemoQwen35E2E.HeavyFullRun (label `heavy`): the demo's own budgets on
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

// Lossless with both drafters (export and the parity stage would have failed
// the demo otherwise), live acceptance per position for each, the target a
// hybrid Qwen3.5 with its native head.
void expect_lossless_qwen35(const json& s, const std::string& workdir) {
  EXPECT_EQ(s["outputs_differing"], 0) << "speculative output differs from plain";
  EXPECT_EQ(s["drift_flipped_prompts"], 0);
  EXPECT_EQ(s["drift_max_abs_dlogit"].get<double>(), 0.0);
  ASSERT_EQ(s["acceptance_live"].size(), 2u) << s.dump();
  ASSERT_TRUE(s.contains("native_head")) << s.dump();
  EXPECT_EQ(s["native_head"]["outputs_differing"], 0) << "native-head output differs from plain";
  ASSERT_EQ(s["native_head"]["acceptance_live"].size(), 2u) << s.dump();
  const model::ModelConfig c = model::read_model_config(workdir + "/model");
  ASSERT_EQ(c.arch, model::Arch::Qwen35);
  EXPECT_EQ(c.mtp_layers, 1);
  bool recurrent = false, full = false;
  for (int l = 0; l < c.n_layers; ++l) (c.is_recurrent(l) ? recurrent : full) = true;
  EXPECT_TRUE(recurrent && full);
}

TEST(DemoQwen35E2E, SmokeRun) {
  const std::string tmp = temp_dir("demo-q35");
  const std::string corpus = write_demo_corpus(tmp), w = tmp + "/work";
  const std::string args = "demo --arch qwen35 --preset micro --corpus " + shell_quote(corpus) +
                           " --workdir " + shell_quote(w) +
                           " --threads 2 --pretrain-steps 40 --distill-prompts 100 "
                           "--train-steps 30 -n 16 --repeat 1 --json";
  const json s = demo_summary(run_cli(args), "demo --arch qwen35");
  ASSERT_TRUE(s.contains("stages")) << s.dump();
  expect_lossless_qwen35(s, w);

  // Rerun: nothing pretrained, trained or exported again; still lossless.
  const json again = demo_summary(run_cli(args), "demo rerun");
  for (const auto& st : again["stages"]) {
    if (st["stage"] == "pretrain" || st["stage"] == "train") {
      EXPECT_TRUE(st["skipped"].get<bool>()) << st.dump();
    }
    EXPECT_NE(st["stage"], "export") << "the rerun exported again";
  }
  expect_lossless_qwen35(again, w);
}

TEST(DemoQwen35E2E, HeavyFullRun) {
  if (!fs::is_directory("/usr/share/games/fortunes")) {
    GTEST_SKIP() << "Debian's fortunes package is not installed (the demo's corpus)";
  }
  const std::string w = temp_dir("demo-q35-full") + "/work";
  const json s = demo_summary(run_cli("demo --arch qwen35 --workdir " + shell_quote(w) +
                                      " --threads 2 --json"),
                              "demo --arch qwen35");
  ASSERT_TRUE(s.contains("stages")) << s.dump();
  expect_lossless_qwen35(s, w);
  std::printf("demo --arch qwen35: %.0f s, speedup %.2f, live acceptance %s; native head: %s\n",
              s["seconds"].get<double>(), s["speedup"].get<double>(),
              s["acceptance_live"].dump().c_str(), s["native_head"].dump().c_str());
}

}  // namespace
}  // namespace mtp::test
