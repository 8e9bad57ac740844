// End to end: `mtpspec demo` on a reduced budget (ctest label `e2e`; run it alone
// with `ctest --test-dir build -L e2e`). The target is the real pretrained
// stories260K from ../shared (pretraining itself is covered by pretrain_test.cc),
// so the checks are about the pipeline: self-distill -> train K = 2 -> export
// (parity gate) -> parity -> bench -> drift, and the demo's verdicts:
//   - speculative output equals plain output, drift flips nothing;
//   - the target's output is not degenerate (distinct-2 above a floor);
//   - live acceptance of module 0 is above a floor that the trained drafter
//     reaches and a random drafter for the same target does not.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "test_util.h"

namespace mtp::test {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// A 2-module drafter trained for 100 steps on 500 self-distilled continuations
// accepts about half of its first drafts on stories260K; a random one
// accepts ~1/vocab. The floor sits well between the two.
constexpr double kAcceptanceFloor = 0.25;
// Greedy stories260K text repeats some phrases but is far from a loop
// (distinct-2 ≈ 0.5–0.7); a target stuck in a loop scores < 0.1.
constexpr double kDistinct2Floor = 0.2;

json parse_or_fail(const CliResult& r, const std::string& what) {
  EXPECT_EQ(r.status, 0) << what << " failed:\n" << r.err;
  try {
    return json::parse(r.out);
  } catch (const json::exception& e) {
    ADD_FAILURE() << what << ": stdout is not JSON (" << e.what() << "):\n" << r.out << r.err;
    return json::object();
  }
}

TEST(DemoE2E, ReducedBudgetDemoIsLosslessAndTrainedDrafterBeatsRandom) {
  MTP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  MTP_REQUIRE_SHARED(corpus, "corpora/gutenberg-en-16MB.txt");
  const std::string w = temp_dir("demo-e2e");
  const std::string common = " --model " + shell_quote(model) + " --corpus " + shell_quote(corpus) +
                             " --workdir " + shell_quote(w) + " --threads 2 --json";
  json s = parse_or_fail(
      run_cli("demo" + common + " --distill-prompts 500 --train-steps 100 -n 48 --repeat 1"),
      "demo");
  ASSERT_TRUE(s.contains("acceptance_live")) << s.dump();

  // Parity passed: export and the parity stage would have failed the demo otherwise.
  EXPECT_TRUE(fs::exists(fs::path(w) / "drafter.safetensors"));
  EXPECT_EQ(s["outputs_differing"], 0) << "speculative output differs from plain";
  EXPECT_EQ(s["drift_flipped_prompts"], 0);
  EXPECT_EQ(s["drift_max_abs_dlogit"].get<double>(), 0.0);
  ASSERT_TRUE(s["target_distinct_2"].is_number()) << s.dump();
  EXPECT_GT(s["target_distinct_2"].get<double>(), kDistinct2Floor);
  ASSERT_EQ(s["acceptance_live"].size(), 2u);
  const double trained = s["acceptance_live"][0].get<double>();
  // The demo's drafter is stored in bf16 and drafts among a draft vocabulary.
  EXPECT_EQ(s["drafter"]["stored"], "BF16") << s.dump();
  ASSERT_TRUE(s["drafter"]["draft_vocab"].is_object()) << s.dump();
  EXPECT_GT(s["drafter"]["draft_vocab"]["size"].get<long>(), 0);
  EXPECT_GT(trained, kAcceptanceFloor) << s.dump();

  // A random drafter for the same target, measured the same way, stays below.
  const std::string rnd = w + "/random.safetensors";
  ASSERT_EQ(run_cli("init-drafter -m " + shell_quote(model) + " -o " + shell_quote(rnd) +
                    " --k 2 --seed 7").status, 0);
  json b = parse_or_fail(run_cli("bench -m " + shell_quote(model) + " --drafter " + shell_quote(rnd) +
                                 " --prompts " + shell_quote(w + "/prompts.jsonl") +
                                 " -n 48 --repeat 1 --threads 2 --json"),
                         "bench (random drafter)");
  ASSERT_TRUE(b.contains("acceptance_live")) << b.dump();
  EXPECT_LT(b["acceptance_live"][0].get<double>(), kAcceptanceFloor);
  EXPECT_EQ(b["flips"], 0);

  // Rerun: finished stages are reused (no retraining), results still lossless;
  // and the human-readable summary prints.
  CliResult text = run_cli("demo --model " + shell_quote(model) + " --corpus " + shell_quote(corpus) +
                           " --workdir " + shell_quote(w) + " --threads 2 --distill-prompts 500 "
                           "--train-steps 100 -n 16 --repeat 1");
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.out.find("speedup"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("distinct-2"), std::string::npos) << text.out;
  json again = parse_or_fail(run_cli("demo" + common + " --distill-prompts 500 --train-steps 100 "
                                     "-n 16 --repeat 1"),
                             "demo rerun");
  bool train_reused = false;
  for (const auto& st : again["stages"]) {
    if (st["stage"] == "train") train_reused = st["skipped"].get<bool>();
    EXPECT_NE(st["stage"], "export") << "the rerun exported again";
  }
  EXPECT_TRUE(train_reused) << again.dump();
  EXPECT_EQ(again["outputs_differing"], 0);
}

TEST(DemoE2E, BadInputGivesClearErrors) {
  const std::string w = temp_dir("demo-bad");
  CliResult r = run_cli("demo --model " + shell_quote(w + "/nope.bin") + " --corpus " +
                        shell_quote(w + "/none.txt") + " --workdir " + shell_quote(w));
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("nope.bin"), std::string::npos) << r.err;  // names the bad path
  EXPECT_FALSE(std::filesystem::exists(w + "/shards")) << "a stage ran despite the bad input";
}

}  // namespace
}  // namespace mtp::test
