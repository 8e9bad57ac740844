// `mtpspec bench --json` and `mtpspec drift --json`: the keys users script
// against stay stable, and the numbers are consistent with each other.
#include <gtest/gtest.h>

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
                        "predicted_speedup", "break_even_acceptance"}) {
    EXPECT_TRUE(j.contains(k)) << k;
  }
  EXPECT_EQ(j["flips"], 0);
  EXPECT_EQ(j["acceptance_live"].size(), 2u);
  EXPECT_EQ(j["verify_multiplier"].size(), 8u);
  EXPECT_DOUBLE_EQ(j["verify_multiplier"][0].get<double>(), 1.0);
  for (const char* k : {"min", "max", "stdev"}) EXPECT_TRUE(j["speedup_spread"].contains(k));
  EXPECT_NEAR(j["speedup"].get<double>(),
              j["spec_tok_s"].get<double>() / j["baseline_tok_s"].get<double>(), 1e-9);
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
