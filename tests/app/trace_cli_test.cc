// `--trace FILE` replays: one JSON line per verify cycle per sequence, and
// feeding each cycle's committed prefix to teacher forcing gives the drafts
// and scores it recorded, bit for bit (live ≡ teacher-forced, checked from
// the file alone) — through `generate --prompts --parallel` with the drafter
// and the lookups beside it; a trace file that cannot be written is an error.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "drafter/drafter.h"
#include "drafter/teacher_forced.h"
#include "model/fingerprint.h"
#include "model/loader.h"
#include "test_util.h"

namespace mtp::test {
namespace {

TEST(TraceCli, TheTraceReplaysAgainstTeacherForcing) {
  MTP_REQUIRE_SHARED(model_path, "models/stories260K/stories260K.bin");
  const std::string dir = temp_dir("trace-cli");
  const std::string drafter_path = dir + "/drafter.safetensors";
  ASSERT_EQ(run_cli("init-drafter -m " + model_path + " -o " + drafter_path + " --k 3").status, 0);
  {
    std::ofstream p(dir + "/p.jsonl");
    for (const char* t : {"Once upon a time", "Lily had a cat. Lily had a cat.", "The sun", "Tom"}) {
      p << nlohmann::json{{"prompt", t}}.dump() << "\n";
    }
  }
  const std::string trace = dir + "/trace.jsonl";
  const CliResult r = run_cli("generate -m " + shell_quote(model_path) + " --drafter " +
                              shell_quote(drafter_path) + " --prompts " +
                              shell_quote(dir + "/p.jsonl") + " --parallel 2 -n 40 --json " +
                              "--no-gate --lookup prompt --trace " + shell_quote(trace));
  ASSERT_EQ(r.status, 0) << r.err;
  // The final text of every sequence: request ids are 1 + the prompt's index.
  std::map<uint64_t, std::vector<int32_t>> text;
  std::istringstream out(r.out);
  for (std::string line; std::getline(out, line);) {
    const auto j = nlohmann::json::parse(line);
    std::vector<int32_t> seq = j["prompt_ids"].get<std::vector<int32_t>>();
    for (int32_t t : j["token_ids"].get<std::vector<int32_t>>()) seq.push_back(t);
    text[j["id"].get<uint64_t>() + 1] = seq;
  }
  ASSERT_EQ(text.size(), 4u);
  const model::LoadedModel lm = model::load_model(model_path, {});
  const std::string fp = model::target_fingerprint(lm, false);
  const model::Model m{model::load_model(model_path, {})};
  const drafter::Drafter d =
      drafter::Drafter::load(drafter_path, m.config(), fp, kernels::WeightType::F32);
  std::map<uint64_t, drafter::TeacherForced> tf;
  for (const auto& [id, seq] : text) tf[id] = drafter::teacher_forced(m, d, seq, nullptr);
  std::ifstream in(trace);
  long cycles = 0, mtp_checked = 0, lookup_cycles = 0;
  for (std::string line; std::getline(in, line); ++cycles) {
    const auto c = nlohmann::json::parse(line);
    const uint64_t id = c["seq"].get<uint64_t>();
    ASSERT_TRUE(text.count(id)) << line;
    const std::vector<int32_t>& seq = text[id];
    const int N = c["committed"].get<int>();
    const auto tokens = c["tree"]["tokens"].get<std::vector<int32_t>>();
    const auto sources = c["tree"]["sources"].get<std::vector<std::string>>();
    const auto scores = c["tree"]["scores"].get<std::vector<double>>();
    const int accepted = c["accepted"].get<int>();
    ASSERT_EQ(c["choices"].size(), tokens.size() + 1) << line;
    // The committed prefix is the final text's: the cycle's accepted drafts
    // and its choice are the next tokens.
    ASSERT_LE(size_t(N), seq.size());
    for (int j = 0; j < accepted && N + j < int(seq.size()); ++j) {
      EXPECT_EQ(tokens[size_t(j)], seq[size_t(N + j)]) << line;
    }
    if (tokens.empty()) continue;
    if (sources[0] != "mtp0") {
      ++lookup_cycles;
      continue;
    }
    // Module j's draft and score at the committed prefix: teacher forcing's
    // row N - 2 (drafts past a rejection were drafted from rejected text).
    ASSERT_EQ(scores.size(), tokens.size()) << line;
    for (int j = 0; j < int(tokens.size()) && j <= accepted; ++j) {
      if (N + j - 1 >= int(seq.size())) break;  // generation ended inside the cycle
      const auto& t = tf[id];
      ASSERT_LT(size_t(N - 2), t.argmax[size_t(j)].size()) << line;
      EXPECT_EQ(tokens[size_t(j)], t.argmax[size_t(j)][size_t(N - 2)]) << line;
      EXPECT_EQ(float_bits(float(scores[size_t(j)])),
                float_bits(t.max_logit[size_t(j)][size_t(N - 2)])) << line;
      ++mtp_checked;
    }
  }
  EXPECT_GT(cycles, 20);
  EXPECT_GT(mtp_checked, 20);
  EXPECT_GT(lookup_cycles, 0) << "the lookup's proposals never reached the trace";
  // An unwritable trace is an error naming it, not a silent success.
  const CliResult bad = run_cli("generate -m " + shell_quote(model_path) + " --drafter " +
                                shell_quote(drafter_path) + " -p Once -n 8 --trace /dev/full");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.err.find("/dev/full"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace mtp::test
