// `mtpspec generate --lookup` and `mtpspec bench --sources`: per-source stats
// in --json ("stats.sources.<name>" with drafted / accepted per position,
// proposed, verified, chosen, time), output equal to --no-spec, per-kind rows,
// and the flag errors (exit 2).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "test_util.h"

namespace mtp::test {
namespace {

TEST(UnionCli, GenerateReportsEverySourceAndMatchesPlain) {
  MTP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  const std::string dir = temp_dir("union-cli");
  const std::string drafter = dir + "/d.safetensors", corpus = dir + "/c.txt";
  ASSERT_EQ(run_cli("init-drafter -m " + shell_quote(model) + " -o " + shell_quote(drafter) +
                    " --k 2").status, 0);
  {
    std::FILE* f = std::fopen(corpus.c_str(), "w");
    std::fputs("Lily went to the park. She saw a big dog. The dog was happy.\n", f);
    std::fclose(f);
  }
  const std::string base = "generate -m " + shell_quote(model) +
                           " -p 'Lily went to the park. She saw a big dog. Lily went to the' -n 40 --json";
  CliResult plain = run_cli(base + " --no-spec");
  ASSERT_EQ(plain.status, 0) << plain.err;
  CliResult u = run_cli(base + " --drafter " + shell_quote(drafter) +
                        " --lookup prompt,history --lookup-corpus " + shell_quote(corpus));
  ASSERT_EQ(u.status, 0) << u.err;
  const auto jp = nlohmann::json::parse(plain.out), ju = nlohmann::json::parse(u.out);
  EXPECT_EQ(ju["token_ids"], jp["token_ids"]);
  const auto& src = ju["stats"]["sources"];
  for (const char* name : {"prompt", "history"}) {
    ASSERT_TRUE(src.contains(name)) << ju["stats"].dump();
    for (const char* k : {"drafted", "accepted", "acceptance", "proposed", "verified",
                          "accepted_tokens", "chosen", "probes", "time_s"}) {
      EXPECT_TRUE(src[name].contains(k)) << name << "." << k;
    }
    EXPECT_GT(src[name]["proposed"].get<long>(), 0) << name;
  }
  // Bad flag values: exit 2 naming the flag.
  CliResult bad = run_cli(base + " --lookup nope");
  EXPECT_EQ(bad.status, 2);
  bad = run_cli(base + " --lookup prompt --lookup-max-draft 0");
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("--lookup-max-draft"), std::string::npos) << bad.err;
  bad = run_cli(base + " --lookup-corpus " + shell_quote(corpus));
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("--lookup history"), std::string::npos) << bad.err;
}

// The drafter alone without the gate (--no-gate) and as trees: its source
// stats count what it proposed, the cycles it drafted in and its time, as the
// union's do (they read 0 there before: only the union counted them).
TEST(UnionCli, DrafterStatsWithoutTheUnion) {
  MTP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  const std::string dir = temp_dir("union-cli-nogate");
  const std::string drafter = dir + "/d.safetensors";
  ASSERT_EQ(run_cli("init-drafter -m " + shell_quote(model) + " -o " + shell_quote(drafter) +
                    " --k 2").status, 0);
  const std::string base = "generate -m " + shell_quote(model) + " --drafter " +
                           shell_quote(drafter) + " -p 'Lily went to the park.' -n 24 --json";
  for (const char* mode : {" --no-gate", " --tree 2,1", ""}) {
    SCOPED_TRACE(mode);
    CliResult r = run_cli(base + mode);
    ASSERT_EQ(r.status, 0) << r.err;
    const auto st = nlohmann::json::parse(r.out)["stats"];
    ASSERT_TRUE(st["sources"].contains("mtp")) << st.dump();
    const auto& m = st["sources"]["mtp"];
    const long chosen = m["chosen"].get<long>(), verified = m["verified"].get<long>();
    EXPECT_GT(chosen, 0);
    EXPECT_LE(chosen, st["cycles"].get<long>());
    EXPECT_GE(m["proposed"].get<long>(), verified);
    EXPECT_GT(m["time_s"].get<double>(), 0.0);
    if (std::string(mode) != "") {  // every cycle drafts, and every draft is verified
      EXPECT_EQ(chosen, st["cycles"].get<long>());
      EXPECT_EQ(m["proposed"].get<long>(), verified);
    }
  }
}

TEST(UnionCli, BenchSourcesPerKind) {
  MTP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  const std::string dir = temp_dir("union-cli-bench");
  const std::string drafter = dir + "/d.safetensors";
  ASSERT_EQ(run_cli("init-drafter -m " + shell_quote(model) + " -o " + shell_quote(drafter) +
                    " --k 2").status, 0);
  const std::string prompts = std::string(MTPSPEC_SOURCE_DIR) + "/bench/union-prompts.jsonl";
  CliResult r = run_cli("bench -m " + shell_quote(model) + " --drafter " + shell_quote(drafter) +
                        " --prompts " + shell_quote(prompts) +
                        " -n 8 --repeat 1 --threads 1 --sources mtp,prompt,history,union --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  for (const char* kind : {"free", "quote", "structured", "all"}) {
    ASSERT_TRUE(j["kinds"].contains(kind)) << kind;
    for (const char* s : {"mtp", "prompt", "history", "union"}) {
      const auto& x = j["kinds"][kind]["sources"][s];
      EXPECT_EQ(x["flips"], 0) << kind << " " << s;
      EXPECT_TRUE(x["stats"].contains("sources"));
    }
  }
  EXPECT_EQ(j["kinds"]["all"]["prompts"], 24);
  // The readable report has each run's sources in detail, the union's three.
  const std::string detail = "| run | source | chosen (probes) | proposed | verified | accepted | "
                             "acceptance by position | time (ms) |";
  EXPECT_NE(r.err.find(detail), std::string::npos) << r.err;
  for (const char* s : {"| union | mtp |", "| union | prompt |", "| union | history |"}) {
    EXPECT_NE(r.err.find(s), std::string::npos) << s << "\n" << r.err;
  }
  CliResult bad = run_cli("bench -m " + shell_quote(model) + " --drafter " + shell_quote(drafter) +
                          " --prompts " + shell_quote(prompts) + " --lookup prompt");
  EXPECT_EQ(bad.status, 2);
  // Without a drafter: the lookups alone and their union run; mtp is refused.
  const std::string no_drafter = "bench -m " + shell_quote(model) + " --prompts " +
                                 shell_quote(prompts) + " -n 8 --repeat 1 --threads 1";
  r = run_cli(no_drafter + " --sources prompt,history,union --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto l = nlohmann::json::parse(r.out);
  EXPECT_EQ(l["drafter"], "none");
  const auto& u = l["kinds"]["all"]["sources"]["union"];
  EXPECT_EQ(u["flips"], 0);
  EXPECT_FALSE(u["stats"]["sources"].contains("mtp")) << u["stats"]["sources"].dump();
  bad = run_cli(no_drafter + " --sources mtp,union");
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("--sources mtp"), std::string::npos) << bad.err;
  bad = run_cli(no_drafter + " --sources union --draft-k 2");
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("--draft-k needs a drafter"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace mtp::test
