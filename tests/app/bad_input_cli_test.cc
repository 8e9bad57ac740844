// Hostile use of the binary (issue 60), one test per class: failed writes to
// stdout / stderr exit 2 (never 0 with the output lost, never an abort); an
// output never replaces a device nor writes through a link left at a
// temporary name; numbers are decimal with no empty value; deep JSON in every
// reader is exit 2 naming the file; prompts larger than the context can use
// are refused before they are read whole; prompt sets keep the user's ids; a
// drafter that overflows fp32 leaves the output unchanged and is named.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <set>
#include <string>

#include "cli_util.h"
#include "core/dtype.h"
#include "core/mapped_file.h"
#include "io/safetensors.h"
#include "test_util.h"

namespace mtp::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

// Runs `script` with bash (the binary is $M), its stderr captured.
CliResult run_bash(const std::string& script) {
  const std::string dir = temp_dir("bash");
  const std::string full = "M=" + shell_quote(MTPSPEC_BIN) + "; " + script;
  const std::string cmd = "bash -c " + shell_quote(full) + " 2>" + shell_quote(dir + "/err");
  CliResult r;
  const int st = std::system(cmd.c_str());
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  r.err = read_file(dir + "/err");
  return r;
}

// Class 4: `generate`, `generate --json`, `generate --prompts`, `tokenize`
// to /dev/full or under `ulimit -f` exited 0 with the output lost; a user
// error with stderr unwritable aborted (134).
TEST(WriteFailures, ExitNonZeroWithTheCauseNamed) {
  MTP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  MTP_REQUIRE_SHARED(tok, "models/stories260K/tok512.bin");
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  const std::string dir = temp_dir("write-failures");
  std::ofstream(dir + "/p.jsonl") << "{\"prompt\": \"Once\"}\n{\"prompt\": \"Lily\"}\n";
  const std::string m = shell_quote(model);
  for (const std::string& args :
       {"generate -m " + m + " -p Once -n 8", "generate -m " + m + " -p Once -n 8 --json",
        "generate -m " + m + " --prompts " + dir + "/p.jsonl -n 4 --json",
        "tokenize --tokenizer " + shell_quote(tok) + " -p 'Once upon a time'"}) {
    const CliResult r = run_bash("$M " + args + " > /dev/full");
    EXPECT_EQ(r.status, 2) << args << "\n" << r.err;
    EXPECT_NE(r.err.find("cannot write to standard output"), std::string::npos) << args << "\n" << r.err;
  }
  // A file-size limit on stdout redirected to a file (1 KiB; the ids of a
  // 3 KB text are longer).
  const std::string text(3000, 'a');
  CliResult r = run_bash("ulimit -f 1; $M tokenize --tokenizer " + shell_quote(tok) + " -p " +
                         text + " > " + dir + "/ids.txt");
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("File too large"), std::string::npos) << r.err;
  // stderr unwritable: a plain user error still exits 2.
  for (const std::string& args : {"generate -m /no/such/model -p hi", "generate --temp x"}) {
    r = run_bash("$M " + args + " 2> /dev/full");
    EXPECT_EQ(r.status, 2) << args;
  }
}

// Class 5: outputs never replace a device, never write through a stale link
// at a temporary name, and refuse a socket.
TEST(OutputTargets, DevicesLinksAndSocketsAreSafe) {
  MTP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  const std::string dir = temp_dir("output-targets");
  const std::string victim = dir + "/prompts.jsonl", out = dir + "/d.safetensors";
  std::ofstream(victim) << "{\"prompt\": \"keep me\"}\n";
  fs::create_symlink(victim, out + ".tmp");
  CliResult r = run_cli("init-drafter -m " + shell_quote(model) + " -o " + out);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(read_file(victim), "{\"prompt\": \"keep me\"}\n");
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(out)));
  // A character device is written in place: /dev/null stays a device.
  r = run_cli("init-drafter -m " + shell_quote(model) + " -o /dev/null");
  EXPECT_EQ(r.status, 0) << r.err;
  struct stat st{};
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  // A socket is refused before any work, and kept.
  const std::string sock = dir + "/s";
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path, sock.c_str(), sock.size() + 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  r = run_cli("init-drafter -m " + shell_quote(model) + " -o " + sock);
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("socket"), std::string::npos) << r.err;
  ASSERT_EQ(::stat(sock.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  ::close(fd);
}

// Class 7: one number parser for every numeric flag.
TEST(NumberFlags, EmptyOctalHexAndJunkAreRefused) {
  for (const char* args :
       {"generate -m x -p hi --temp ''", "generate -m x -p hi --top-k ''",
        "generate -m x -p hi --min-p ''", "generate -m x -p hi --ctx ''",
        "generate -m x -p hi --draft-k ''", "generate -m x -p hi -n 0x10",
        "generate -m x -p hi -n 5x", "generate -m x -p hi --temp 1e",
        "generate -m x -p hi --top-p .", "bench --random tiny --repeat ''",
        "serve -m x --port ''", "precompute -m x --corpus c -o o --batch 0x2"}) {
    const CliResult r = run_cli(args);
    EXPECT_EQ(r.status, 2) << args << "\n" << r.err;
    EXPECT_NE(r.err.find("must be"), std::string::npos) << args << "\n" << r.err;
  }
#ifdef MTPSPEC_HAVE_TRAIN_BIN
  const CliResult t = run_cli_binary(MTPSPEC_TRAIN_BIN_PATH, "train --lr '' --shards s -m m -o o");
  EXPECT_EQ(t.status, 2) << t.err;
#endif
}

TEST(NumberFlags, LeadingZerosAreDecimal) {
  MTP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  // -n 010 is ten tokens (it was octal 8); the same run as -n 10.
  const CliResult a = run_cli("generate -m " + shell_quote(model) + " -p Once -n 010 --json --no-spec");
  const CliResult b = run_cli("generate -m " + shell_quote(model) + " -p Once -n 10 --json --no-spec");
  ASSERT_EQ(a.status, 0) << a.err;
  ASSERT_EQ(b.status, 0) << b.err;
  const json ja = json::parse(a.out), jb = json::parse(b.out);
  EXPECT_EQ(ja["token_ids"], jb["token_ids"]);
  if (ja["finish_reason"] == "length") EXPECT_EQ(ja["token_ids"].size(), 10u);
}

// Class 1 through the binary: a deep prompts line and a deep tokenizer.json.
TEST(DeepJsonCli, ReadersRefuseNamingTheFile) {
  MTP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  const std::string dir = temp_dir("deep-cli");
  std::ofstream(dir + "/p.jsonl") << "{\"prompt\": \"x\", \"kind\": " << std::string(500000, '[')
                                   << "\n";
  CliResult r = run_cli("generate -m " + shell_quote(model) + " --prompts " + dir + "/p.jsonl");
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find(dir + "/p.jsonl:1"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("deeper than"), std::string::npos) << r.err;
  std::ofstream(dir + "/tokenizer.json")
      << "{\"model\": {\"type\": \"BPE\", \"vocab\": {}, \"merges\": []}, \"decoder\": "
      << std::string(300000, '[') << "\n";
  r = run_cli("tokenize --tokenizer " + dir + "/tokenizer.json -p hi");
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("tokenizer.json"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("deeper than"), std::string::npos) << r.err;
}

// Class 10: a 50 MB prompt for a 64-token context is refused before it is
// tokenized (it took 35 s and 1.3 GB); a never-ending FIFO is read only to
// what the context can use.
TEST(PromptBounds, ReadsStopAtWhatTheContextCanUse) {
  MTP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  const std::string dir = temp_dir("prompt-bounds");
  {
    std::ofstream f(dir + "/big.txt");
    const std::string line(1023, 'a');
    for (int i = 0; i < 50 * 1024; ++i) f << line << '\n';
  }
  auto t0 = Clock::now();
  CliResult r = run_cli("generate -m " + shell_quote(model) + " -f " + dir + "/big.txt --ctx 64 -n 1");
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find(dir + "/big.txt"), std::string::npos) << r.err;
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(10));
  t0 = Clock::now();
  r = run_bash("$M generate -m " + shell_quote(model) + " -f <(yes) --ctx 64 -n 1");
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("64 tokens"), std::string::npos) << r.err;
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(10));
  // In a prompts file, the prompt is named by its id.
  std::ofstream(dir + "/p.jsonl") << "{\"prompt\": \"" << std::string(200000, 'b')
                                  << "\", \"id\": \"huge-one\"}\n";
  r = run_cli("generate -m " + shell_quote(model) + " --prompts " + dir + "/p.jsonl --ctx 64 -n 1");
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("huge-one"), std::string::npos) << r.err;
}

// Class 11: generate --prompts echoes the user's "id" (string or number).
TEST(PromptIds, GenerateEchoesThem) {
  MTP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  const std::string dir = temp_dir("prompt-ids");
  std::ofstream(dir + "/p.jsonl") << "{\"prompt\": \"Once\", \"id\": \"req-a\"}\n"
                                  << "{\"prompt\": \"Lily\"}\n"
                                  << "{\"prompt\": \"Tom\", \"id\": 907}\n";
  const CliResult r = run_cli("generate -m " + shell_quote(model) + " --prompts " + dir +
                              "/p.jsonl -n 3 --json --no-spec");
  ASSERT_EQ(r.status, 0) << r.err;
  std::set<std::string> ids;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) ids.insert(json::parse(line)["id"].dump());
  EXPECT_EQ(ids, (std::set<std::string>{"\"req-a\"", "1", "907"}));
}

// Class 9: one all-3e38 matrix in the drafter. Sampled generation (coupled
// and rejection) gives plain generation's output (coupled: the same tokens),
// exit 0, and one warning names the drafter — not "cancelled", not token -1,
// not the target's weights blamed.
TEST(OverflowingDrafterCli, OutputUnchangedAndTheDrafterNamed) {
  MTP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  const std::string dir = temp_dir("overflow-cli");
  const std::string good = dir + "/d.safetensors", bad = dir + "/bad.safetensors";
  ASSERT_EQ(run_cli("init-drafter -m " + shell_quote(model) + " -o " + good + " --k 2 --dtype fp32").status, 0);
  {
    io::TensorSet ts = io::TensorSet::open_file(good);
    std::vector<std::vector<float>> keep;
    std::vector<io::TensorView> views;
    for (const auto& n : ts.names()) {
      io::TensorView v = ts.get(n);
      if (n.find("eh_proj") != std::string::npos && v.dtype == DType::F32) {
        keep.emplace_back(v.numel(), 3e38f);
        v.data = keep.back().data();
      }
      views.push_back(v);
    }
    ASSERT_FALSE(keep.empty()) << "no F32 eh_proj in the drafter";
    io::write_safetensors(bad, views, ts.metadata());
  }
  const std::string base = "generate -m " + shell_quote(model) + " -p Once -n 24 --json --temp 0.8 --seed 7";
  const CliResult plain = run_cli(base + " --no-spec");
  ASSERT_EQ(plain.status, 0) << plain.err;
  const CliResult coupled = run_cli(base + " --drafter " + bad);
  ASSERT_EQ(coupled.status, 0) << coupled.err;
  EXPECT_EQ(json::parse(coupled.out)["token_ids"], json::parse(plain.out)["token_ids"]);
  EXPECT_NE(coupled.err.find(bad), std::string::npos) << coupled.err;
  EXPECT_NE(coupled.err.find("non-finite"), std::string::npos) << coupled.err;
  const CliResult rejection = run_cli(base + " --drafter " + bad + " --spec-sampling rejection");
  EXPECT_EQ(rejection.status, 0) << rejection.err;
  EXPECT_EQ(json::parse(rejection.out)["finish_reason"], json::parse(plain.out)["finish_reason"]);
}

}  // namespace
}  // namespace mtp::test
