// `--drafter DIR|FILE` with Gemma 4's assistant (a gemma4_assistant directory
// or llama.cpp's gemma4-assistant GGUF):
// `generate` drafts with it and prints the plain output (one prompt, and
// --prompts --parallel), --json reports its cost per draft step; an
// assistant that does not fit the target, or a malformed one, exits 2
// naming the field and both values; --tree drafts trees (output = plain).
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "assistant_util.h"
#include "cli_util.h"
#include "core/mapped_file.h"
#include "gguf_util.h"
#include "io/gguf.h"
#include "test_util.h"

namespace mtp::test {
namespace {

struct Dirs {
  std::string target, tokenizer, assistant;
};

// A random Gemma 4 target, a tokenizer for its 384 ids (a GGUF holding only
// the test vocabulary) and an assistant with the centroid head.
Dirs dirs(const AssistantSpec& a = {.ordered = true, .centroids = 8, .top_k = 2}) {
  const RandomSpec t = assistant_target_spec(384);
  Dirs d;
  d.target = random_hf_checkpoint("g4a-cli", t);
  d.tokenizer = temp_dir("g4a-cli-tok") + "/tokenizer.gguf";
  io::GgufMetadata kv;
  kv.push_back({"general.architecture", io::GgufValue::str("llama")});
  add_test_vocab(kv, 384);
  io::write_gguf(d.tokenizer, kv, {});
  d.assistant = random_assistant("g4a-cli-a", t, a);
  return d;
}

std::string base(const Dirs& d) {
  return "generate -m " + shell_quote(d.target) + " --tokenizer " + shell_quote(d.tokenizer) +
         " --threads 1 --json";
}

TEST(AssistantCli, GenerateEqualsPlainAndReportsTheCost) {
  const Dirs d = dirs();
  const std::string args = base(d) + " -p 'abc de' -n 24 --temp 0";
  const CliResult plain = run_cli(args + " --no-spec");
  ASSERT_EQ(plain.status, 0) << plain.err;
  const CliResult spec = run_cli(args + " --drafter " + shell_quote(d.assistant) + " --draft-k 3");
  ASSERT_EQ(spec.status, 0) << spec.err;
  const nlohmann::json p = nlohmann::json::parse(plain.out), s = nlohmann::json::parse(spec.out);
  EXPECT_EQ(s["token_ids"], p["token_ids"]);
  EXPECT_EQ(s["drafter"], d.assistant);
  ASSERT_TRUE(s.contains("assistant")) << spec.out;
  EXPECT_GT(s["assistant"]["step_s"].get<double>(), 0);
  EXPECT_TRUE(s["assistant"]["centroid_head"].get<bool>());
  EXPECT_GT(s["stats"]["sources"]["gemma4-assistant"]["proposed"].get<long>(), 0) << spec.out;
  // Coupled sampling too, and the engine with several slots.
  const std::string sampled = base(d) + " -p 'abc de' -n 24 --temp 0.8 --seed 3";
  const CliResult ps = run_cli(sampled + " --no-spec");
  const CliResult ss = run_cli(sampled + " --drafter " + shell_quote(d.assistant));
  ASSERT_EQ(ss.status, 0) << ss.err;
  EXPECT_EQ(nlohmann::json::parse(ss.out)["token_ids"], nlohmann::json::parse(ps.out)["token_ids"]);
  const std::string prompts = temp_dir("g4a-cli-p") + "/p.jsonl";
  write_file_atomic(prompts, "{\"prompt\": \"abc\"}\n{\"prompt\": \"de fg\"}\n{\"prompt\": \"a\"}\n");
  const std::string batch = "generate -m " + shell_quote(d.target) + " --tokenizer " +
                            shell_quote(d.tokenizer) + " --threads 1 --json -n 16 --temp 0 "
                            "--prompts " + prompts + " --parallel 3";
  const CliResult bp = run_cli(batch + " --no-spec");
  const CliResult bs = run_cli(batch + " --drafter " + shell_quote(d.assistant));
  ASSERT_EQ(bs.status, 0) << bs.err;
  auto by_id = [](const std::string& out) {
    std::map<std::string, nlohmann::json> m;
    std::istringstream in(out);
    for (std::string line; std::getline(in, line);) {
      const auto j = nlohmann::json::parse(line);
      m[j["id"].dump()] = j["token_ids"];
    }
    return m;
  };
  EXPECT_EQ(by_id(bs.out), by_id(bp.out));
}

// bench --cycle-cost with the assistant: a row per draft length with the
// live acceptance per position and the assistant's forwards per cycle, the
// outputs equal to plain; what needs the K-module drafter exits 2.
TEST(AssistantCli, TreesEqualPlain) {
  const Dirs d = dirs();
  const std::string args = base(d) + " -p 'abc de' -n 24 --temp 0";
  const CliResult plain = run_cli(args + " --no-spec");
  ASSERT_EQ(plain.status, 0) << plain.err;
  for (const char* tree : {"--tree 2,2,1,1,1", "--tree-budget 6"}) {
    SCOPED_TRACE(tree);
    const CliResult spec =
        run_cli(args + " " + tree + " --drafter " + shell_quote(d.assistant));
    ASSERT_EQ(spec.status, 0) << spec.err;
    const nlohmann::json p = nlohmann::json::parse(plain.out), s = nlohmann::json::parse(spec.out);
    EXPECT_EQ(s["token_ids"], p["token_ids"]);
    EXPECT_GT(s["stats"]["sources"]["gemma4-assistant"]["proposed"].get<long>(), 0) << spec.out;
  }
}

TEST(AssistantCli, BenchCycleCostReportsAcceptancePerPosition) {
  const Dirs d = dirs();
  const std::string prompts = temp_dir("g4a-cli-bp") + "/p.jsonl";
  write_file_atomic(prompts, "{\"prompt\": \"abc de\"}\n{\"prompt\": \"fg h\"}\n");
  const std::string args = "bench -m " + shell_quote(d.target) + " --tokenizer " +
                           shell_quote(d.tokenizer) + " --threads 1 --prompts " + prompts +
                           " -n 12 --repeat 1 --drafter " + shell_quote(d.assistant);
  const CliResult r = run_cli(args + " --cycle-cost --draft-k 3 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["flips"], 0);
  EXPECT_EQ(j["drafter"], d.assistant);
  ASSERT_EQ(j["cycle_cost"].size(), 3u) << r.out;
  for (size_t k = 0; k < 3; ++k) {
    const nlohmann::json& row = j["cycle_cost"][k];
    EXPECT_EQ(row["k"], int(k) + 1);
    EXPECT_EQ(row["acceptance_live"].size(), k + 1) << row;
    EXPECT_GT(row["draft_forward_rel"].get<double>(), 0) << row;
    EXPECT_GT(row["cycles"].get<long>(), 0) << row;
  }
  EXPECT_NE(r.err.find("live acceptance per position"), std::string::npos) << r.err;
  const CliResult plain = run_cli(args);
  EXPECT_EQ(plain.status, 2);
  EXPECT_NE(plain.err.find("is Gemma 4's assistant: bench measures it with --cycle-cost"),
            std::string::npos) << plain.err;
}

TEST(AssistantCli, LlamaCppGgufDraftsAndMisfitExits2) {
  const Dirs d = dirs({});
  const std::string gguf = temp_dir("g4a-cli-g") + "/assistant.gguf";
  convert_assistant_to_gguf(d.assistant, gguf, {});
  const std::string args = base(d) + " -p 'abc de' -n 24 --temp 0";
  const CliResult plain = run_cli(args + " --no-spec");
  const CliResult spec = run_cli(args + " --drafter " + shell_quote(gguf) + " --draft-k 3");
  ASSERT_EQ(spec.status, 0) << spec.err;
  const nlohmann::json s = nlohmann::json::parse(spec.out);
  EXPECT_EQ(s["token_ids"], nlohmann::json::parse(plain.out)["token_ids"]);
  EXPECT_FALSE(s["assistant"]["centroid_head"].get<bool>());
  EXPECT_GT(s["stats"]["sources"]["gemma4-assistant"]["proposed"].get<long>(), 0) << spec.out;
  GgufConvert bad;
  bad.edit = [](io::GgufMetadata& kv, std::vector<io::GgufWriteTensor>&) {
    for (auto& [k, v] : kv) {
      if (k == "gemma4-assistant.embedding_length_out") v = io::GgufValue::u32(48);
    }
  };
  convert_assistant_to_gguf(d.assistant, gguf, bad);
  const CliResult r = run_cli(base(d) + " -p 'abc' -n 4 --drafter " + shell_quote(gguf));
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("'gemma4-assistant.embedding_length_out' (the backbone hidden size) is 48"),
            std::string::npos) << r.err;
}

TEST(AssistantCli, MisfitAndMalformedAssistantsExit2NamingTheField) {
  struct Case {
    AssistantSpec spec;
    std::string words;
  };
  std::vector<Case> cases;
  AssistantSpec a;
  a.config_patch = {{"backbone_hidden_size", 48}};
  cases.push_back({a, "backbone_hidden_size is 48, but the target's hidden size is 64"});
  a.config_patch = {{"text_config", {{"vocab_size", 320}}}};
  cases.push_back({a, "vocab_size is 320, but the target's vocabulary is 384"});
  a = {};
  a.ordered = true;
  a.centroids = 5;
  cases.push_back({a, "num_centroids 5 does not divide the vocabulary of 384"});
  a.centroids = 8;
  for (int64_t i = 0; i < 384; ++i) a.ordering.push_back(i == 7 ? 6 : i);
  cases.push_back({a, "entry 7 is 6"});
  for (const Case& c : cases) {
    SCOPED_TRACE(c.words);
    const Dirs d = dirs(c.spec);
    const CliResult r = run_cli(base(d) + " -p 'abc' -n 4 --drafter " + shell_quote(d.assistant));
    EXPECT_EQ(r.status, 2) << r.err;
    EXPECT_NE(r.err.find(c.words), std::string::npos) << r.err;
  }
  const Dirs d = dirs();
  const CliResult k = run_cli(base(d) + " -p 'abc' -n 4 --draft-k 17 --drafter " +
                              shell_quote(d.assistant));
  EXPECT_EQ(k.status, 2);
  EXPECT_NE(k.err.find("--draft-k 17 is outside 1..16"), std::string::npos) << k.err;
}

// An assistant recording another target's fingerprint exits 2 naming both
// fingerprints (as a K-module drafter does), runs with
// --drafter-target-mismatch warn (output = plain); one with no record
// (Google's) runs with a note saying it was accepted unchecked.
TEST(AssistantCli, AnotherTargetsAssistantExits2NamingBothFingerprints) {
  const std::string other(64, 'c');
  AssistantSpec a;
  a.config_patch = {{"mtpspec",
                     {{"target_fingerprint", other},
                      {"capture", "target hidden after the final norm at the position before the "
                                  "last committed token, with the K/V of the target's last "
                                  "K/V-owning layer of each attention kind"}}}};
  const Dirs d = dirs(a);
  const std::string args = base(d) + " -p 'abc' -n 8 --temp 0 --drafter " + shell_quote(d.assistant);
  const CliResult r = run_cli(args);
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("was trained for target " + other), std::string::npos) << r.err;
  const size_t at = r.err.find("this target is ");
  ASSERT_NE(at, std::string::npos) << r.err;
  EXPECT_EQ(r.err.substr(at + 15, 64).find_first_not_of("0123456789abcdef"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("--drafter-target-mismatch"), std::string::npos) << r.err;
  const CliResult warned = run_cli(args + " --drafter-target-mismatch warn");
  ASSERT_EQ(warned.status, 0) << warned.err;
  const CliResult plain = run_cli(base(d) + " -p 'abc' -n 8 --temp 0 --no-spec");
  ASSERT_EQ(plain.status, 0) << plain.err;
  EXPECT_EQ(nlohmann::json::parse(warned.out)["token_ids"],
            nlohmann::json::parse(plain.out)["token_ids"]);
  const Dirs g = dirs({});
  const CliResult google = run_cli(base(g) + " -p 'abc' -n 4 --drafter " + shell_quote(g.assistant));
  ASSERT_EQ(google.status, 0) << google.err;
  EXPECT_NE(google.err.find("records no target"), std::string::npos) << google.err;
}

}  // namespace
}  // namespace mtp::test
