// `mtpspec bench --json` and `mtpspec drift --json`: the keys users script
// against stay stable, and the numbers are consistent with each other; bench
// on a random target (no tokenizer) and its --cycle-cost table.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "test_util.h"

namespace mtp::test {
namespace {

TEST(BenchCli, JsonSchemaIsStable) {
  MTP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  std::string dir = temp_dir("bench-cli");
  std::string drafter = dir + "/d.safetensors";
  ASSERT_EQ(run_cli("init-drafter -m " + shell_quote(model) + " -o " + shell_quote(drafter) +
                    " --k 2").status, 0);
  std::string prompts = std::string(MTPSPEC_SOURCE_DIR) + "/bench/prompts.jsonl";
  CliResult r = run_cli("bench -m " + shell_quote(model) + " --drafter " + shell_quote(drafter) +
                        " --prompts " + shell_quote(prompts) +
                        " -n 12 --repeat 2 --max-prompts 2 --threads 1 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  for (const char* k : {"baseline_tok_s", "spec_tok_s", "speedup", "speedup_spread",
                        "acceptance_live", "tokens_per_cycle", "acceptance_tf_corpus",
                        "acceptance_tf_own", "verify_multiplier", "drafter_cost",
                        "predicted_speedup", "break_even_acceptance", "target_distinct_2",
                        "end_to_end_speedup"}) {
    EXPECT_TRUE(j.contains(k)) << k;
  }
  EXPECT_EQ(j["flips"], 0);
  EXPECT_GT(j["target_distinct_2"].get<double>(), 0.0);
  EXPECT_LE(j["target_distinct_2"].get<double>(), 1.0);
  EXPECT_EQ(j["acceptance_live"].size(), 2u);
  EXPECT_EQ(j["verify_multiplier"].size(), 8u);
  EXPECT_DOUBLE_EQ(j["verify_multiplier"][0].get<double>(), 1.0);
  for (const char* k : {"min", "max", "stdev"}) EXPECT_TRUE(j["speedup_spread"].contains(k));
  EXPECT_NEAR(j["speedup"].get<double>(),
              j["spec_tok_s"].get<double>() / j["baseline_tok_s"].get<double>(), 1e-9);
  EXPECT_EQ(j["acceptance_tf_corpus_note"], "no --corpus given");
  EXPECT_GT(j["end_to_end_speedup"].get<double>(), 0.0);
  // A --corpus with nothing to measure on is refused, not reported as 0 of 0.
  std::ofstream(dir + "/empty.txt") << "\n\nhi\n";
  CliResult e = run_cli("bench -m " + shell_quote(model) + " --drafter " + shell_quote(drafter) +
                        " --prompts " + shell_quote(prompts) + " -n 4 --max-prompts 1 --threads 1 " +
                        "--corpus " + shell_quote(dir + "/empty.txt"));
  EXPECT_EQ(e.status, 2) << e.err;
  EXPECT_NE(e.err.find("no document of at least 4 tokens"), std::string::npos) << e.err;
  // --cycle-cost with a drafter file: one row per K up to the drafter's K = 2.
  CliResult c = run_cli("bench -m " + shell_quote(model) + " --drafter " + shell_quote(drafter) +
                        " --prompts " + shell_quote(prompts) +
                        " --cycle-cost -n 8 --repeat 1 --max-prompts 1 --threads 1 --json");
  ASSERT_EQ(c.status, 0) << c.err;
  auto jc = nlohmann::json::parse(c.out);
  EXPECT_EQ(jc["flips"], 0);
  ASSERT_EQ(jc["cycle_cost"].size(), 2u);
  EXPECT_EQ(jc["cycle_cost"][1]["k"], 2);
}

// --cycle-cost on a random target: rows K = 1..4 (the random drafter's K),
// each split draft / verify / other that adds up to the cycle, and outputs
// identical to plain generation.
TEST(BenchCli, CycleCostOnRandomTarget) {
  CliResult r = run_cli("bench --random tiny --cycle-cost -n 10 --repeat 1 --max-prompts 2 "
                        "--threads 1 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  for (const char* k : {"model", "drafter", "threads", "decode_step_s", "baseline_tok_s", "flips",
                        "cycle_cost"}) {
    EXPECT_TRUE(j.contains(k)) << k;
  }
  EXPECT_EQ(j["flips"], 0);
  EXPECT_EQ(j["threads"], 1);
  EXPECT_GT(j["decode_step_s"].get<double>(), 0.0);
  ASSERT_EQ(j["cycle_cost"].size(), 4u);
  for (int i = 0; i < 4; ++i) {
    const auto& row = j["cycle_cost"][i];
    SCOPED_TRACE(row.dump());
    EXPECT_EQ(row["k"], i + 1);
    const double cycle = row["cycle_rel_decode"], draft = row["draft_rel"],
                 verify = row["verify_rel"], other = row["other_rel"], frac = row["other_fraction"];
    EXPECT_GT(draft, 0.0);
    EXPECT_GT(verify, 0.0);
    EXPECT_GE(other, 0.0);
    EXPECT_NEAR((draft + verify + other) / cycle, 1.0, 1e-9);
    EXPECT_NEAR(frac, other / cycle, 1e-12);
    EXPECT_LT(frac, 1.0);
    EXPECT_GT(row["draft_forward_rel"].get<double>(), 0.0);
    EXPECT_LE(row["draft_forward_rel"].get<double>(), draft);
    EXPECT_EQ(row["acceptance_live"].size(), size_t(i + 1));
    EXPECT_GE(row["tokens_per_cycle"].get<double>(), 1.0);
    EXPECT_GT(row["cycles"].get<long>(), 0);
  }
  // --draft-k bounds the sweep.
  CliResult k2 = run_cli("bench --random tiny --cycle-cost --draft-k 2 -n 6 --repeat 1 "
                         "--max-prompts 1 --threads 1 --json");
  ASSERT_EQ(k2.status, 0) << k2.err;
  EXPECT_EQ(nlohmann::json::parse(k2.out)["cycle_cost"].size(), 2u);
}

// The default bench on a random target: token-id prompts, no corpus accuracy
// (null, with the reason).
TEST(BenchCli, RandomTargetSkipsTextMeasures) {
  CliResult r = run_cli("bench --random tiny -n 10 --repeat 1 --max-prompts 2 --threads 1 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["flips"], 0);
  EXPECT_EQ(j["draft_k"], 4);
  EXPECT_TRUE(j["acceptance_tf_corpus"].is_null());
  EXPECT_NE(j["acceptance_tf_corpus_note"].get<std::string>().find("tokenizer"), std::string::npos);
  EXPECT_EQ(j["acceptance_tf_own"].size(), 4u);
  // What the numbers were measured at: a random target is generated in fp32,
  // so auto holds it as fp32; --weights bf16 rounds it.
  EXPECT_EQ(j["held"], "fp32 100%");
  CliResult b = run_cli("bench --random tiny --weights bf16 -n 4 --repeat 1 --max-prompts 1 "
                        "--threads 1 --json");
  ASSERT_EQ(b.status, 0) << b.err;
  EXPECT_EQ(nlohmann::json::parse(b.out)["held"], "bf16 100%");
}

TEST(BenchCli, BadTargetFlagsGiveClearErrors) {
  auto fails_with = [](const std::string& args, const std::string& msg) {
    CliResult r = run_cli(args);
    EXPECT_NE(r.status, 0) << args;
    EXPECT_NE(r.err.find(msg), std::string::npos) << args << ": " << r.err;
  };
  fails_with("bench --random huge -n 2", "unknown random model preset 'huge'");
  fails_with("bench --random tiny --prompts x.jsonl -n 2", "cannot be combined with --prompts");
  fails_with("bench --random tiny -m x.bin -n 2", "cannot be combined with -m");
  fails_with("bench -n 2", "bench needs a target");
  fails_with("bench --random-seed 3 -n 2", "--random");
  fails_with("bench --random tiny --draft-k 5 --cycle-cost --report r.md", "--report is not used");
}

// bench-kernels --in-cache: one copy per matrix, said in the JSON; every
// (dtype, q) row timed.
TEST(BenchKernelsCli, InCacheJson) {
  CliResult r = run_cli("bench-kernels --in-cache --dtype q8_0,bf16 --shapes 64x512 --q-max 2 "
                        "--reps 3 --threads 1 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["in_cache"], true);
  ASSERT_EQ(j["rows"].size(), 4u);
  for (const auto& row : j["rows"]) EXPECT_GT(row["time_s"].get<double>(), 0.0);
  EXPECT_EQ(j["rows"][0]["shape"][1], 512);
}

TEST(DriftCli, JsonSchemaIsStable) {
  MTP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  std::string prompts = std::string(MTPSPEC_SOURCE_DIR) + "/bench/prompts.jsonl";
  CliResult r = run_cli("drift -m " + shell_quote(model) + " --prompts " + shell_quote(prompts) +
                        " -n 16 --threads 1 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j.contains("prompts") && j.contains("summary"));
  for (const auto& p : j["prompts"]) {
    for (const char* k : {"prompt", "first_flip", "flip_rate", "max_abs_dlogit"}) {
      EXPECT_TRUE(p.contains(k)) << k;
    }
    EXPECT_TRUE(p["first_flip"].is_null());
  }
  for (const char* k : {"prompts", "flipped", "max_abs_dlogit"}) EXPECT_TRUE(j["summary"].contains(k));
  EXPECT_EQ(j["summary"]["flipped"], 0);
  EXPECT_EQ(j["summary"]["max_abs_dlogit"], 0.0);
}

}  // namespace
}  // namespace mtp::test
