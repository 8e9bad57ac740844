// Draft-tree flags through the binary (issue 16's bad input): malformed
// --tree values, zero widths, a tree deeper than the drafter's K, --tree with
// --tree-budget, budgets out of range, trees where only chains are verified
// (rejection sampling at T > 0, --prompts) — each exits 2 naming the flag and
// value; a valid shape runs and reports its tree.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "test_util.h"

namespace mtp::test {
namespace {

void expect_refused(const std::string& args, const std::string& what) {
  const CliResult r = run_cli(args);
  EXPECT_EQ(r.status, 2) << args << "\n" << r.err;
  EXPECT_NE(r.err.find(what), std::string::npos) << args << "\n" << r.err;
}

// bench --random tiny brings a random target with a K = 4 drafter: no files.
TEST(TreeFlags, BadShapesExit2WithAClearMessage) {
  const std::string b = "bench --random tiny -n 4 --max-prompts 1 --repeat 1 --trees ";
  expect_refused(b + "2,,1", "widths are whole numbers");
  expect_refused(b + "0", "widths are whole numbers");
  expect_refused(b + "2,x", "'x' is not");
  expect_refused(b + "8,8", "at most 63");
  expect_refused(b + "2,2,2,2,2", "5 deep; the drafter has K = 4");
  expect_refused(b + "budget=0", "--trees: a tree budget must be between 1 and 63");
  expect_refused(b + "budget=x", "budget=N takes a whole number");
  expect_refused(b + "chain --cycle-cost", "--trees runs its own comparison");
}

TEST(TreeFlags, GenerateRefusesWhatItCannotVerify) {
  MTP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  const std::string dir = temp_dir("tree-cli");
  const std::string drafter = dir + "/drafter.safetensors";
  ASSERT_EQ(run_cli("init-drafter -m " + model + " -o " + drafter + " --k 2").status, 0);
  const std::string g = "generate -m " + model + " --drafter " + drafter + " -p Once -n 8 ";
  expect_refused(g + "--tree 2,2,2", "--tree 2,2,2 is 3 deep; the drafter drafts 2 deep at most");
  expect_refused(g + "--tree 2,0", "--tree: a tree shape \"2,0\": widths are whole numbers");
  expect_refused(g + "--tree ''", "--tree");  // ran a chain, exit 0, before
  expect_refused(g + "--tree 2 --tree-budget 4", "excludes");
  expect_refused(g + "--tree-budget 64", "--tree-budget: a tree budget must be between 1 and 63");
  expect_refused(g + "--tree 2,2 --temp 0.8 --spec-sampling rejection",
                 "--tree needs --spec-sampling coupled");
  expect_refused("generate -m " + model + " -p Once -n 8 --tree 2", "need a drafter");
  expect_refused(g + "--tree 2 --no-spec", "--no-spec turned it off");
  const CliResult ok = run_cli(g + "--tree 3,2 --json");
  ASSERT_EQ(ok.status, 0) << ok.err;
  EXPECT_NE(ok.out.find("\"tree\":\"3,2\""), std::string::npos) << ok.out;
  const CliResult plain = run_cli("generate -m " + model + " -p Once -n 8 --json");
  ASSERT_EQ(plain.status, 0) << plain.err;
  auto ids = [](const std::string& json) {
    const size_t a = json.find("\"token_ids\":"), e = json.find(']', a);
    return json.substr(a, e - a);
  };
  EXPECT_EQ(ids(ok.out), ids(plain.out));
}

// Trees at the end of the context: a static tree, a budget and auto, with a
// --ctx that ends the generation a few tokens after the prompt (the trees
// clipped to the positions left) — the same tokens and finish reason as plain.
TEST(TreeFlags, TreesAtTheEndOfTheContextMatchPlain) {
  MTP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  const std::string dir = temp_dir("tree-ctx");
  const std::string drafter = dir + "/drafter.safetensors";
  ASSERT_EQ(run_cli("init-drafter -m " + model + " -o " + drafter + " --k 3").status, 0);
  for (int ctx : {4, 5, 6, 7, 9, 12}) {
    const std::string base = "generate -m " + model + " -p 'Once upon' -n 20 --json --ctx " +
                             std::to_string(ctx);
    const CliResult plain = run_cli(base + " --no-spec");
    ASSERT_EQ(plain.status, 0) << plain.err;
    const auto jp = nlohmann::json::parse(plain.out);
    for (const char* shape : {"--tree 3,2,2", "--tree-budget 12", "--tree auto"}) {
      SCOPED_TRACE(std::string(shape) + " --ctx " + std::to_string(ctx));
      const CliResult t = run_cli(base + " --drafter " + drafter + " " + shape);
      ASSERT_EQ(t.status, 0) << t.err;
      const auto jt = nlohmann::json::parse(t.out);
      EXPECT_EQ(jt["token_ids"], jp["token_ids"]);
      EXPECT_EQ(jt["finish_reason"], jp["finish_reason"]);
    }
  }
}

// Trees under batching: `generate --prompts --parallel 4` with a static tree,
// auto, and a tree beside the lookups gives each prompt exactly the tokens of
// its solo plain run, greedy and coupled T 0.8 (speculation never changes
// the output; the sequences share each forward).
TEST(TreeFlags, ParallelPromptsWithTreesMatchTheirSoloRuns) {
  MTP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  const std::string dir = temp_dir("tree-parallel");
  const std::string drafter = dir + "/drafter.safetensors";
  ASSERT_EQ(run_cli("init-drafter -m " + model + " -o " + drafter + " --k 2").status, 0);
  const std::vector<std::string> prompts = {"Once upon a time", "The dog", "Lily", "Tom and Sam"};
  {
    std::ofstream f(dir + "/p.jsonl");
    for (const auto& p : prompts) f << nlohmann::json{{"prompt", p}}.dump() << "\n";
  }
  for (const std::string sampling : {"--temp 0", "--temp 0.8 --seed 5"}) {
    const std::string common = "generate -m " + shell_quote(model) + " -n 32 --json --threads 1 " + sampling;
    std::vector<nlohmann::json> solo;
    for (const auto& p : prompts) {
      const CliResult one = run_cli(common + " --no-spec -p " + shell_quote(p));
      ASSERT_EQ(one.status, 0) << one.err;
      solo.push_back(nlohmann::json::parse(one.out)["token_ids"]);
    }
    for (const std::string shape : {"--tree 2,1", "--tree auto", "--tree 2,1 --lookup prompt,history"}) {
      SCOPED_TRACE(sampling + " " + shape);
      const CliResult r = run_cli(common + " --drafter " + shell_quote(drafter) + " " + shape +
                                  " --prompts " + shell_quote(dir + "/p.jsonl") + " --parallel 4");
      ASSERT_EQ(r.status, 0) << r.err;
      std::istringstream lines(r.out);
      std::string line;
      size_t n = 0;
      long accepted = 0;
      while (std::getline(lines, line)) {
        const auto j = nlohmann::json::parse(line);
        const int id = j["id"];
        ASSERT_TRUE(id >= 0 && id < int(prompts.size())) << line;
        EXPECT_EQ(j["token_ids"], solo[size_t(id)]) << "prompt " << id;
        ASSERT_TRUE(j["stats"].contains("speculation")) << "it did not speculate: " << line;
        for (long a : j["stats"]["speculation"]["accepted"]) accepted += a;
        ++n;
      }
      EXPECT_EQ(n, prompts.size());
      // The random drafter is hardly ever right; beside the lookups some
      // drafts are accepted, so the accepted paths' commits are exercised.
      if (shape.find("--lookup") != std::string::npos) EXPECT_GT(accepted, 0);
    }
  }
}

}  // namespace
}  // namespace mtp::test
