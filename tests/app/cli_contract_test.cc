// The CLI contracts both executables share: one exit-status rule (0 / 2 / 4,
// cli/run_cli.h), one check per flag (the same bad --draft-k gets the same
// exit status and message from every command that takes it), and the
// two-executable split (mtpspec-train links no tokenizer library).
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>

#include <array>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/run_cli.h"
#include "cli_util.h"
#include "core/error.h"
#include "test_util.h"

namespace mtp::test {
namespace {

// Runs a callback as a subcommand through run_cli: its exit status and stderr
// are what either executable would produce.
int run_with(const std::function<void()>& body, const std::vector<std::string>& args) {
  CLI::App app{"test"};
  app.require_subcommand(1);
  int value = 0;
  CLI::App* cmd = app.add_subcommand("cmd", "a command");
  cmd->add_option("--value", value, "a number")->check(CLI::Range(1, 3));
  cmd->callback(body);
  std::vector<std::string> storage = {"prog"};
  storage.insert(storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : storage) argv.push_back(s.data());
  testing::internal::CaptureStderr();
  testing::internal::CaptureStdout();
  const int rc = cli::run_cli(app, int(argv.size()), argv.data());
  testing::internal::GetCapturedStdout();
  testing::internal::GetCapturedStderr();
  return rc;
}

TEST(ExitStatus, OneContractForEveryKindOfFailure) {
  auto ok = [] {};
  EXPECT_EQ(run_with(ok, {"cmd"}), 0);
  EXPECT_EQ(run_with(ok, {"cmd", "--help"}), 0);
  // Flag parsing and validation: CLI11's own codes (105-109, ...) become 2.
  EXPECT_EQ(run_with(ok, {"cmd", "--value", "9"}), 2);      // validation
  EXPECT_EQ(run_with(ok, {"cmd", "--value", "x"}), 2);      // conversion
  EXPECT_EQ(run_with(ok, {"cmd", "--nope"}), 2);            // unknown flag
  EXPECT_EQ(run_with(ok, {}), 2);                           // missing subcommand
  EXPECT_EQ(run_with(ok, {"cmd", "--value"}), 2);           // missing value
  // A user error from the library.
  EXPECT_EQ(run_with([] { fail<InputError>("bad input {}", 1); }, {"cmd"}), 2);
  // A violated invariant: 4, with file and line in the message.
  EXPECT_EQ(run_with([] { MTP_CHECK(1 + 1 == 3, "arithmetic is {}", "broken"); }, {"cmd"}), 4);
  // An exception nobody expected.
  EXPECT_EQ(run_with([] { throw std::bad_alloc(); }, {"cmd"}), 4);
  EXPECT_EQ(run_with([] { throw std::runtime_error("library text"); }, {"cmd"}), 4);
}

TEST(ExitStatus, AnInternalErrorNamesFileAndLine) {
  try {
    MTP_CHECK(false, "value {}", 7);
    FAIL() << "MTP_CHECK(false) did not throw";
  } catch (const InternalError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cli_contract_test.cc:"), std::string::npos) << what;
    EXPECT_NE(what.find("value 7"), std::string::npos) << what;
    EXPECT_NE(what.find("bug"), std::string::npos) << what;
  }
  // An internal error is not a user error: handlers of mtp::Error do not catch it.
  bool caught_as_user_error = false;
  try {
    MTP_CHECK(false, "x");
  } catch (const Error&) {
    caught_as_user_error = true;
  } catch (const InternalError&) {
  }
  EXPECT_FALSE(caught_as_user_error);
}

TEST(ExitStatus, BadFlagValuesExitTwoFromBothExecutables) {
  for (const char* args : {"generate -m x -n abc", "generate --no-such-flag", "frobnicate",
                           "bench --random tiny -n 0", "drift -m x --prompts p -n -3"}) {
    CliResult r = run_cli(args);
    EXPECT_EQ(r.status, 2) << args << "\n" << r.err;
  }
  CliResult v = run_cli("--version");
  EXPECT_EQ(v.status, 0) << v.err;
  CliResult h = run_cli("--help");
  EXPECT_EQ(h.status, 0);
  EXPECT_NE(h.out.find("Exit status: 0 success; 2"), std::string::npos) << h.out;
#ifdef MTPSPEC_HAVE_TRAIN_BIN
  const std::string train = MTPSPEC_TRAIN_BIN_PATH;
  for (const char* args : {"train --shards s -m m -o o --k 0", "export --no-such-flag",
                           "no-such-command", "train --batch abc --shards s -m m -o o"}) {
    CliResult r = run_cli_binary(train, args);
    EXPECT_EQ(r.status, 2) << "mtpspec-train " << args << "\n" << r.err;
  }
  // Through the forwarder in the main binary, too.
  CliResult f = run_cli("train --shards s -m m -o o --k 0");
  EXPECT_EQ(f.status, 2) << f.err;
  CliResult th = run_cli_binary(train, "--help");
  EXPECT_EQ(th.status, 0);
  EXPECT_NE(th.out.find("Exit status: 0 success; 2"), std::string::npos) << th.out;
#endif
}

// The same bad --draft-k from generate, bench and drift: exit 2, one message.
TEST(DraftK, OneCheckAndOneMessageInEveryCommand) {
  MTP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  const std::string dir = temp_dir("draft-k");
  const std::string drafter = dir + "/drafter.safetensors";
  CliResult init = run_cli("init-drafter -m " + shell_quote(model) + " -o " + shell_quote(drafter) +
                           " --k 2");
  ASSERT_EQ(init.status, 0) << init.err;
  const std::string prompts = std::string(MTPSPEC_SOURCE_DIR) + "/bench/prompts.jsonl";
  const std::string common = "-m " + shell_quote(model) + " --drafter " + shell_quote(drafter) +
                             " --threads 1 ";
  const std::array<std::string, 3> commands = {
      "generate " + common + "-p hi -n 4",
      "bench " + common + "--prompts " + shell_quote(prompts) + " -n 4 --repeat 1 --max-prompts 1",
      "drift " + common + "--prompts " + shell_quote(prompts) + " -n 4"};
  for (const char* bad : {"0", "3", "-1"}) {
    std::string first_message;
    for (const std::string& c : commands) {
      CliResult r = run_cli(c + " --draft-k " + bad);
      EXPECT_EQ(r.status, 2) << c << " --draft-k " << bad << "\n" << r.err;
      const std::string want = std::string("--draft-k ") + bad + " is outside 1..2 (the drafter's K)";
      EXPECT_NE(r.err.find(want), std::string::npos) << c << "\n" << r.err;
    }
  }
  // And a good value runs.
  CliResult good = run_cli(commands[0] + " --draft-k 2");
  EXPECT_EQ(good.status, 0) << good.err;
}

// Sampling flags: every out-of-range or NaN value exits 2 naming the flag and value.
TEST(SamplingFlags, BadValuesExitTwoNamingTheValue) {
  MTP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  const std::string base = "generate -m " + shell_quote(model) + " -p hi -n 2 --threads 1 ";
  const std::pair<const char*, const char*> cases[] = {
      {"--temp -1", "--temp"},    {"--temp nan", "--temp"},   {"--top-p 0", "--top-p"},
      {"--top-p 1.5", "--top-p"}, {"--top-k -1", "--top-k"},  {"--min-p 1", "--min-p"},
      {"--min-p -0.2", "--min-p"}, {"--top-p nan", "--top-p"}, {"--seed -2", "--seed"},
      {"--spec-sampling greedy", "--spec-sampling"}};
  for (const auto& [flag, name] : cases) {
    CliResult r = run_cli(base + flag);
    EXPECT_EQ(r.status, 2) << flag << "\n" << r.err;
    EXPECT_NE(r.err.find(name), std::string::npos) << flag << "\n" << r.err;
  }
  // bench --temps: a bad temperature is refused before any run (no model is needed).
  CliResult b = run_cli("bench -m " + shell_quote(model) + " --prompts x --temps 0,-0.5");
  EXPECT_EQ(b.status, 2) << b.err;
  EXPECT_NE(b.err.find("--temp"), std::string::npos) << b.err;
  EXPECT_NE(b.err.find("-0.5"), std::string::npos) << b.err;
  // --seed -1: a random seed, printed, and in --json.
  CliResult r = run_cli(base + "--temp 0.8 --seed -1 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("--seed -1"), std::string::npos) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_GE(j["sampling"]["seed"].get<int64_t>(), 0);
}

// Shards precomputed on a target requantized at load (`precompute --weights
// q8_0`): training loads the checkpoint as stored, another target, and the
// refusal says why (the requantization) and what to do, exit 2.
TEST(TrainCli, ShardsOfARequantizedTargetAreRefusedNamingTheRequantization) {
#ifndef MTPSPEC_HAVE_TRAIN_BIN
  GTEST_SKIP() << "built without libtorch: no mtpspec-train";
#else
  MTP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  MTP_REQUIRE_SHARED(tok, "models/stories260K/tok512.bin");
  const std::string dir = temp_dir("train-requantized");
  const std::string corpus = dir + "/c.txt", shards = dir + "/shards";
  {
    std::FILE* f = std::fopen(corpus.c_str(), "w");
    for (int i = 0; i < 40; ++i) std::fputs("Lily went to the park. She saw a big dog.\n", f);
    std::fclose(f);
  }
  CliResult pre = run_cli("precompute -m " + shell_quote(model) + " --tokenizer " +
                          shell_quote(tok) + " --weights q8_0 --corpus " + shell_quote(corpus) +
                          " -o " + shell_quote(shards) + " --seq-len 32 --threads 1");
  ASSERT_EQ(pre.status, 0) << pre.err;
  CliResult r = run_cli_binary(MTPSPEC_TRAIN_BIN_PATH,
                               "train --shards " + shell_quote(shards) + " -m " + shell_quote(model) +
                                   " -o " + shell_quote(dir + "/run") + " --k 1 --steps 1 --threads 1");
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("requantized to q8_0"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("without requantizing"), std::string::npos) << r.err;
#endif
}

// mtpspec-train must not load libsentencepiece (its bundled protobuf crashes
// next to libtorch's): by construction it links no tokenizer library.
TEST(LinkGraph, TrainExecutableHasNoSentencePieceDependency) {
#ifndef MTPSPEC_HAVE_TRAIN_BIN
  GTEST_SKIP() << "built without libtorch: no mtpspec-train";
#else
  const std::string cmd = std::string("readelf -d ") + MTPSPEC_TRAIN_BIN_PATH + " 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen(cmd.c_str(), "r"), pclose);
  ASSERT_TRUE(p);
  std::string out;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p.get())) > 0) out.append(buf.data(), n);
  ASSERT_NE(out.find("(NEEDED)"), std::string::npos) << "readelf printed no dependencies:\n" << out;
  EXPECT_EQ(out.find("libsentencepiece"), std::string::npos) << out;
  EXPECT_EQ(out.find("libicu"), std::string::npos) << out;
  // The check can fail: the main binary does depend on it.
  const std::string main_cmd = std::string("readelf -d ") + MTPSPEC_BIN + " 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> q(popen(main_cmd.c_str(), "r"), pclose);
  ASSERT_TRUE(q);
  std::string main_out;
  while ((n = fread(buf.data(), 1, buf.size(), q.get())) > 0) main_out.append(buf.data(), n);
  EXPECT_NE(main_out.find("libsentencepiece"), std::string::npos) << main_out;
#endif
}

}  // namespace
}  // namespace mtp::test
