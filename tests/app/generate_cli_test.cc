// `mtpspec generate` end to end through the binary, as a user runs it
// (llama2.c, and GGUF against the Hugging Face checkpoint it came from).
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <nlohmann/json.hpp>

#include "checkpoint_util.h"
#include "cli_util.h"
#include "gguf_util.h"
#include "core/mapped_file.h"
#include "model_util.h"
#include "test_util.h"

namespace mtp::test {
namespace {

// The golden test: the llama2.c reference runner's greedy output for an empty
// prompt (BOS only), temperature 0, 200 new tokens, byte for byte.
TEST(GenerateCli, Stories260KGoldenGreedy) {
  MTP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  MTP_REQUIRE_SHARED(expected_path, "models/stories260K/greedy-200.expected.txt");
  std::string expected = read_file(expected_path);
  for (const char* w : {"fp32"}) {
    CliResult r = run_cli("generate -m " + shell_quote(model) + " -p '' -n 200 --temp 0 " +
                          "--threads 1 --weights " + w);
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, expected);
  }
}

TEST(GenerateCli, JsonOutputAndStopString) {
  MTP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  CliResult r = run_cli("generate -m " + shell_quote(model) +
                        " -p 'Once upon a time' -n 60 --json --threads 1");
  ASSERT_EQ(r.status, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j.contains("text") && j.contains("token_ids") && j.contains("prompt_ids"));
  EXPECT_EQ(j["prompt_ids"][0], 1);  // BOS
  EXPECT_EQ(j["finish_reason"], "length");
  EXPECT_EQ(j["token_ids"].size(), 60u);
  std::string text = j["text"];
  // Stop at the first "." : the text must end right before it.
  size_t dot = text.find('.');
  ASSERT_NE(dot, std::string::npos);
  CliResult s = run_cli("generate -m " + shell_quote(model) +
                        " -p 'Once upon a time' -n 60 --json --threads 1 --stop .");
  ASSERT_EQ(s.status, 0) << s.err;
  auto js = nlohmann::json::parse(s.out);
  EXPECT_EQ(js["finish_reason"], "stop");
  EXPECT_EQ(js["text"], text.substr(0, dot));
  // An empty stop string could never match: refused, not ignored.
  CliResult e = run_cli("generate -m " + shell_quote(model) + " -p hi -n 4 --stop ''");
  EXPECT_EQ(e.status, 2);
  EXPECT_NE(e.err.find("--stop"), std::string::npos) << e.err;
  EXPECT_NE(e.err.find("must not be empty"), std::string::npos) << e.err;
}

TEST(GenerateCli, BadInputsGiveClearErrors) {
  MTP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  std::string dir = temp_dir("cli-bad");
  // Missing model.
  CliResult r = run_cli("generate -m " + shell_quote(dir + "/nope.bin") + " -p hi -n 1");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("nope.bin"), std::string::npos) << r.err;
  // Truncated checkpoint.
  std::string data = read_file(model);
  for (size_t cut : {size_t(10), size_t(28), data.size() / 2, data.size() - 4}) {
    std::string p = dir + "/trunc.bin";
    std::ofstream(p, std::ios::binary).write(data.data(), std::streamsize(cut));
    CliResult t = run_cli("generate -m " + shell_quote(p) + " --tokenizer " +
                          shell_quote(shared_path("models/stories260K/tok512.bin")) + " -p hi -n 1");
    EXPECT_EQ(t.status, 2) << "cut at " << cut;
    EXPECT_NE(t.err.find("truncated"), std::string::npos) << t.err;
  }
  // Prompt longer than the context: the context named by where it comes from.
  CliResult l = run_cli("generate -m " + shell_quote(model) + " -p 'a b c d e f g h' --ctx 4 -n 1");
  EXPECT_EQ(l.status, 2);
  EXPECT_NE(l.err.find("the context is 4 (--ctx)"), std::string::npos) << l.err;
  // ... and in a prompts file, which prompt (it said only "request: ...").
  const std::string prompts = dir + "/p.jsonl";
  std::ofstream(prompts) << "{\"prompt\": \"hi\"}\n{\"prompt\": \"a b c d e f g h\"}\n";
  CliResult pl = run_cli("generate -m " + shell_quote(model) + " --prompts " + prompts +
                         " --ctx 4 -n 1");
  EXPECT_EQ(pl.status, 2);
  EXPECT_NE(pl.err.find("prompt 2 of 2"), std::string::npos) << pl.err;
  EXPECT_NE(pl.err.find(prompts), std::string::npos) << pl.err;
  // Invalid UTF-8.
  CliResult u = run_cli("generate -m " + shell_quote(model) + " -p \"$(printf '\\377\\376')\" -n 1");
  EXPECT_EQ(u.status, 2);
  EXPECT_NE(u.err.find("UTF-8"), std::string::npos) << u.err;
}

TEST(GenerateCli, NanWeightsRejected) {
  std::string dir = temp_dir("cli-nan");
  std::string p = dir + "/m.bin";
  write_random_llama2c(p, 32, 64, 1, 4, 4, 100, 64, 3);
  {
    std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(28 + 100 * 32 * 4 + 8);  // first norm weights
    float nan = std::numeric_limits<float>::quiet_NaN();
    f.write(reinterpret_cast<char*>(&nan), 4);
  }
  MTP_REQUIRE_SHARED(tok, "models/stories260K/tok512.bin");
  CliResult r = run_cli("generate -m " + shell_quote(p) + " --tokenizer " + shell_quote(tok) +
                        " -p hi -n 1");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("non-finite"), std::string::npos) << r.err;
}

// ---------------------------------------------------------------- GGUF
// `-m file.gguf` through the binary: generate from a GGUF equals generate from
// the Hugging Face checkpoint it was converted from (same tokens, same text),
// the GGUF is its own default tokenizer, and a drafter made for the HF
// checkpoint is refused on the GGUF copy (another fingerprint) unless
// --drafter-target-mismatch warn, which runs it with a warning and leaves the
// output unchanged.

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
  EXPECT_NE(refused.err.find("error: --drafter-target-mismatch: "), std::string::npos)
      << refused.err;
  EXPECT_NE(refused.err.find("policy to warn"), std::string::npos) << refused.err;
  CliResult warned = run_cli(base + " --drafter-target-mismatch warn");
  ASSERT_EQ(warned.status, 0) << warned.err;
  EXPECT_NE(warned.err.find("warning: --drafter-target-mismatch: "), std::string::npos)
      << warned.err;
  const auto plain = generate("-m " + shell_quote(p.gguf) + " --no-spec");
  EXPECT_EQ(nlohmann::json::parse(warned.out)["token_ids"], plain["token_ids"]);
  CliResult bad = run_cli(base + " --drafter-target-mismatch maybe");
  EXPECT_EQ(bad.status, 2);
}

// A drafter stored as ggml blocks (init-drafter --dtype q8_0 / q4_k) on a
// quantized GGUF target: the output is the target's, token for token, greedy
// and sampled.
TEST(GgufCli, QuantizedDrafterOnAQuantizedTargetKeepsThePlainOutput) {
  RandomSpec s = RandomSpec::for_arch(model::Arch::Llama);
  s.seed = 13;
  const std::string hf = random_hf_checkpoint("gguf-qdrafter", s);
  const std::string dir = temp_dir("gguf-qdrafter");
  const std::string gguf = dir + "/model.gguf";
  GgufConvert c;
  c.matrix_type = 8;  // Q8_0
  convert_hf_to_gguf(hf, gguf, c);
  for (const char* dtype : {"q8_0", "q4_k"}) {
    const std::string drafter = dir + "/drafter-" + dtype + ".safetensors";
    CliResult init = run_cli("init-drafter -m " + shell_quote(gguf) + " -o " + shell_quote(drafter) +
                             " --k 2 --dtype " + dtype);
    ASSERT_EQ(init.status, 0) << init.err;
    for (const char* sampling : {"--temp 0", "--temp 0.8 --seed 3"}) {
      const std::string common = std::string("generate -m ") + shell_quote(gguf) +
                                 " -p 'abc de' -n 24 --threads 1 --json " + sampling;
      CliResult spec = run_cli(common + " --no-gate --drafter " + shell_quote(drafter));
      CliResult plain = run_cli(common + " --no-spec");
      ASSERT_EQ(spec.status, 0) << spec.err;
      ASSERT_EQ(plain.status, 0) << plain.err;
      const auto a = nlohmann::json::parse(spec.out), b = nlohmann::json::parse(plain.out);
      EXPECT_EQ(a["token_ids"], b["token_ids"]) << dtype << " " << sampling;
      ASSERT_GE(a["token_ids"].size(), 1u);
      // The blocks drafter ran (--no-gate: every cycle).
      EXPECT_GT(a["stats"]["drafted"][0].get<long>(), 0) << a["stats"].dump();
    }
  }
  CliResult bad = run_cli("init-drafter -m " + shell_quote(gguf) + " -o " +
                          shell_quote(dir + "/x.safetensors") + " --dtype q3_k");
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("q3_k"), std::string::npos) << bad.err;
}

// bench-decode says what the matrices are held in: a GGUF file's quantized
// tensors run as stored, whatever --weights (which applies to float tensors).
TEST(GgufCli, BenchDecodeNamesTheHeldTypesOfAQuantizedFile) {
  RandomSpec s = RandomSpec::for_arch(model::Arch::Llama);
  s.seed = 12;
  const std::string hf = random_hf_checkpoint("gguf-held", s);
  const std::string gguf = temp_dir("gguf-held") + "/model.gguf";
  GgufConvert c;
  c.matrix_type = 8;  // Q8_0
  c.type_of = [](const std::string& n) { return n.find("ffn_down") != std::string::npos ? 2 : -1; };  // Q4_0
  convert_hf_to_gguf(hf, gguf, c);
  CliResult r = run_cli("bench-decode -m " + shell_quote(gguf) + " --threads 1 --q-max 2 --reps 1 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("matrices held as q8_0 "), std::string::npos) << r.err;
  const auto j = nlohmann::json::parse(r.out);  // --json: stdout is the one object
  const std::string held = j["held"];
  EXPECT_NE(held.find("q8_0"), std::string::npos) << held;
  EXPECT_NE(held.find("q4_0"), std::string::npos) << held;
  EXPECT_EQ(held.find("bf16"), std::string::npos) << held;
  EXPECT_EQ(j["weights"], "bf16");
}

}  // namespace
}  // namespace mtp::test

namespace mtp::test {
namespace {

// `generate --prompts --parallel`: one JSON line per prompt, each equal to the
// prompt's own `generate -p` output (greedy and coupled T > 0), also with the
// scheduler's lookup sources (no drafter: they are its only source).
TEST(GenerateCli, PromptsThroughTheSchedulerEqualOnePromptAtATime) {
  MTP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  const std::string dir = temp_dir("cli-prompts");
  const std::vector<std::string> prompts = {"Once upon a time", "The dog", "Lily", "Tom and Sam"};
  {
    std::ofstream f(dir + "/p.jsonl");
    for (const auto& p : prompts) f << nlohmann::json{{"prompt", p}}.dump() << "\n";
  }
  for (const std::string sampling :
       {"--temp 0", "--temp 0.8 --seed 5", "--temp 0 --lookup prompt,history --lookup-max-draft 4"}) {
    const std::string common = "generate -m " + shell_quote(model) + " -n 40 --json --threads 1 " +
                               sampling;
    CliResult r = run_cli(common + " --prompts " + shell_quote(dir + "/p.jsonl") + " --parallel 3");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.err.find("KV memory"), std::string::npos) << r.err;
    std::istringstream lines(r.out);
    std::string line;
    std::set<int> seen;
    while (std::getline(lines, line)) {
      auto j = nlohmann::json::parse(line);
      const int id = j["id"];
      ASSERT_TRUE(id >= 0 && id < int(prompts.size()));
      seen.insert(id);
      ASSERT_TRUE(j.contains("stats") && j["stats"].contains("generation_tok_s"));
      if (sampling.find("--lookup") != std::string::npos) {
        ASSERT_TRUE(j["stats"].contains("speculation")) << "the lookups did not speculate";
      }
      CliResult one = run_cli("generate -m " + shell_quote(model) + " -n 40 --json --threads 1 " +
                              sampling.substr(0, sampling.find(" --lookup")) + " -p " +
                              shell_quote(prompts[size_t(id)]));
      ASSERT_EQ(one.status, 0) << one.err;
      auto o = nlohmann::json::parse(one.out);
      EXPECT_EQ(j["token_ids"], o["token_ids"]) << sampling << " prompt " << id;
      EXPECT_EQ(j["text"], o["text"]);
      EXPECT_EQ(j["finish_reason"], o["finish_reason"]);
    }
    EXPECT_EQ(seen.size(), prompts.size());
  }
  CliResult bad = run_cli("generate -m " + shell_quote(model) + " --prompts " +
                          shell_quote(dir + "/missing.jsonl"));
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("missing.jsonl"), std::string::npos) << bad.err;
  // Every speculation flag works with --prompts as with one prompt (one engine).
  CliResult ng = run_cli("generate -m " + shell_quote(model) + " --prompts " +
                         shell_quote(dir + "/p.jsonl") + " -n 2 --no-gate");
  EXPECT_EQ(ng.status, 0) << ng.err;
  // --no-spec turns the lookups off too: a lookup flag beside it is refused.
  for (const std::string where : {std::string(" -p hi"), " --prompts " + shell_quote(dir + "/p.jsonl")}) {
    CliResult ns = run_cli("generate -m " + shell_quote(model) + where + " -n 2 --no-spec "
                           "--lookup prompt");
    EXPECT_EQ(ns.status, 2) << where;
    EXPECT_NE(ns.err.find("--no-spec"), std::string::npos) << where << ": " << ns.err;
  }
}

}  // namespace
}  // namespace mtp::test
