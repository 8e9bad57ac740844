// Bad input by class, through the binaries as a user meets it (issue 12):
//  - numbers: every out-of-range value exits 2 with the range in words (no
//    309-digit bounds, NaN and infinities refused), in both executables;
//  - output paths: a directory where a file is wanted, a missing folder, a file
//    where a folder is wanted, an output that is an input are refused before
//    any work and leave nothing;
//    a file-size limit ends a write with a clear error and no partial file;
//    a refused or killed precompute does not block the corrected rerun;
//  - defaults in --help, the --threads oversubscription warning, and the
//    self-distillation progress line counting the tokens actually made.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <algorithm>
#include <fstream>
#include <sstream>
#include <regex>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "checkpoint_util.h"
#include "cli_util.h"
#include "gguf_util.h"
#include "test_util.h"

namespace mtp::test {
namespace {

namespace fs = std::filesystem;

// Names of the entries of a folder (to check that nothing was left behind).
std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void expect_readable_refusal(const CliResult& r, const std::string& what) {
  EXPECT_EQ(r.status, 2) << what << "\n" << r.err;
  EXPECT_NE(r.err.find("must be"), std::string::npos) << what << "\n" << r.err;
  // Bounds as a user writes them: never a 20-digit number (but the value given).
  const std::string given = what.substr(what.rfind(' ') + 1);
  std::string err = r.err;
  for (size_t at; (at = err.find(given)) != std::string::npos;) err.erase(at, given.size());
  EXPECT_FALSE(std::regex_search(err, std::regex("[0-9]{20}"))) << what << "\n" << r.err;
}

TEST(BadNumbers, RefusedWithTheRangeInWords) {
  // Values other than the issue's examples; NaN and infinity included.
  for (const char* args :
       {"generate -m x -p hi -n -1", "generate -m x -p hi --threads -7",
        "bench --random tiny -n 0",
        "bench --random tiny --repeat 0", "drift -m x --prompts p -n 0",
        "precompute -m x --corpus c -o o --heldout 1.5",
        "precompute -m x --corpus c -o o --shard-tokens 0",
        "precompute -m x --corpus c -o o --batch -1",
        "precompute -m x --corpus c -o o --max-tokens -9",
        "init-drafter -m x -o /tmp/y.safetensors --k 99",
        "generate -m x -p hi --top-p nan", "generate -m x -p hi --temp inf",
        // accepted before: negative thread counts and positions, a history
        // bound whose byte count overflowed (undefined) or rounded to 0
        "bench-decode --random tiny --threads -1", "bench-decode --random tiny --pos -1",
        "generate -m x -p hi --lookup history --history-mb 1e20",
        "generate -m x -p hi --lookup history --history-mb 1e-7",
        // seeds that wrapped (-1 -> 2^64 - 1) or were clamped (-> 2^63 - 1)
        "init-drafter -m x -o /tmp/y.safetensors --seed -1",
        "init-drafter -m x -o /tmp/y.safetensors --seed 99999999999999999999",
        "generate -m x -p hi --seed 18446744073709551615"}) {
    expect_readable_refusal(run_cli(args), args);
  }
#ifdef MTPSPEC_HAVE_TRAIN_BIN
  const std::string train = MTPSPEC_TRAIN_BIN_PATH;
  for (const char* flag : {"--lr nan", "--lr -1", "--clip -0.5", "--ema 2", "--ema inf",
                           "--weight-decay -1", "--min-lr-ratio 3", "--master-port 70000",
                           "--dist-timeout 0", "--stop-after -1", "--warmup -2",
                           "--eval-sequences -4", "--batch 0",
                           // each ran the default before (one epoch, the shards' window)
                           "--steps -1", "--epochs nan", "--epochs -1", "--window -5",
                           "--save-every -3"}) {
    const std::string args = std::string("train --shards s -m m -o /tmp/run ") + flag;
    expect_readable_refusal(run_cli_binary(train, args), args);
  }
#endif
}

TEST(BadOutputPaths, RefusedBeforeAnyWorkLeavingNothing) {
  const std::string dir = temp_dir("bad-output");
  fs::create_directories(dir + "/existing");
  std::ofstream(dir + "/a-file") << "x";
  const std::string model = random_hf_checkpoint("bad-output-model", RandomSpec{});
  const auto before = entries(dir);
  struct Case {
    std::string args, expect;
  };
  const std::vector<Case> cases = {
      {"init-drafter -m " + model + " -o " + dir + "/existing", "is a directory"},
      {"init-drafter -m " + model + " -o " + dir + "/existing/", "is a directory"},
      {"init-drafter -m " + model + " -o " + dir + "/no-such/d.safetensors", "does not exist"},
      {"bench --random tiny --drafter d --report " + dir + "/existing", "is a directory"},
      {"bench --random tiny --drafter d --plot " + dir + "/existing", "is a directory"},
      {"precompute -m " + model + " --corpus c -o " + dir + "/a-file", "not a folder"},
      {"widen -m " + model + " --shape tiny -o " + dir + "/a-file", "not a folder"},
      {"pretrain --corpus c -o " + dir + "/a-file/below", "below a file"},
  };
  for (const auto& c : cases) {
    CliResult r = run_cli(c.args);
    EXPECT_EQ(r.status, 2) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << c.args << "\n" << r.err;
  }
#ifdef MTPSPEC_HAVE_TRAIN_BIN
  CliResult e = run_cli_binary(MTPSPEC_TRAIN_BIN_PATH, "export --run r -o " + dir + "/existing");
  EXPECT_EQ(e.status, 2) << e.err;
  EXPECT_NE(e.err.find("is a directory"), std::string::npos) << e.err;
  CliResult t = run_cli_binary(MTPSPEC_TRAIN_BIN_PATH,
                               "train --shards s -m m -o " + dir + "/a-file");
  EXPECT_EQ(t.status, 2) << t.err;
  EXPECT_NE(t.err.find("not a folder"), std::string::npos) << t.err;
#endif
  EXPECT_EQ(entries(dir), before);
  EXPECT_TRUE(fs::is_empty(dir + "/existing"));
}

// An output that is one of the command's inputs is refused, and the input
// is left as it was: each of these replaced or broke the user's file (a
// target overwritten by a drafter, a model folder half-widened in place, the
// prompts replaced by the report, the training checkpoint by the export).
TEST(BadOutputPaths, AnInputIsNeverOverwritten) {
  const std::string dir = temp_dir("output-over-input");
  const std::string model = dir + "/model";
  write_random_hf_checkpoint(model, RandomSpec{});
  const std::string drafter = dir + "/d.safetensors", prompts = dir + "/p.jsonl";
  ASSERT_EQ(run_cli("init-drafter -m " + model + " -o " + drafter).status, 0);
  std::ofstream(prompts) << "{\"prompt\": \"hi\"}\n";
  const std::vector<std::string> kept = {model + "/model.safetensors", model + "/config.json",
                                         prompts, drafter};
  std::vector<std::string> before;
  for (const auto& f : kept) before.push_back(read_bytes(f));
  struct Case {
    std::string args, expect;
  };
  const std::vector<Case> cases = {
      {"init-drafter -m " + model + " -o " + model + "/model.safetensors", "reading it"},
      {"init-drafter -m " + model + " -o " + model + "/./model.safetensors", "reading it"},
      {"widen -m " + model + " --shape tiny -o " + model, "is the -m input"},
      {"widen -m " + model + " --shape tiny -o " + model + "/", "is the -m input"},
      {"widen -m " + model + "/config.json --shape tiny -o " + model, "holds the -m input"},
      {"widen -m " + model + " --drafter " + drafter + " --shape tiny -o " + dir,
       "holds the --drafter input"},
      {"bench -m " + model + " --drafter " + drafter + " --prompts " + prompts +
           " -n 2 --repeat 1 --report " + prompts, "is the --prompts input"},
      {"bench -m " + model + " --drafter " + drafter + " --prompts " + prompts +
           " -n 2 --repeat 1 --plot " + drafter, "is the --drafter input"},
  };
  for (const auto& c : cases) {
    CliResult r = run_cli(c.args);
    EXPECT_EQ(r.status, 2) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << c.args << "\n" << r.err;
  }
#ifdef MTPSPEC_HAVE_TRAIN_BIN
  const std::string run = dir + "/run";
  fs::create_directories(run);
  std::ofstream(run + "/checkpoint.safetensors") << "a checkpoint";
  CliResult e = run_cli_binary(MTPSPEC_TRAIN_BIN_PATH,
                               "export --run " + run + " -o " + run + "/checkpoint.safetensors");
  EXPECT_EQ(e.status, 2) << e.err;
  EXPECT_NE(e.err.find("is the --run checkpoint input"), std::string::npos) << e.err;
  EXPECT_EQ(read_bytes(run + "/checkpoint.safetensors"), "a checkpoint");
#endif
  for (size_t i = 0; i < kept.size(); ++i) EXPECT_EQ(read_bytes(kept[i]), before[i]) << kept[i];
  EXPECT_FALSE(fs::exists(model + "/tokenizer.model.tmp")) << "nothing written into the model";
}

TEST(BadOutputPaths, ReadOnlyFolderRefused) {
  if (::geteuid() == 0) GTEST_SKIP() << "running as root: every folder is writable";
  const std::string dir = temp_dir("read-only-output");
  fs::permissions(dir, fs::perms::owner_read | fs::perms::owner_exec);
  const std::string model = random_hf_checkpoint("read-only-model", RandomSpec{});
  CliResult r = run_cli("init-drafter -m " + model + " -o " + dir + "/d.safetensors");
  fs::permissions(dir, fs::perms::owner_all);
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("permission denied"), std::string::npos) << r.err;
}

TEST(BadOutputPaths, FileSizeLimitGivesAClearErrorAndNoPartialFile) {
  // RLIMIT_FSIZE of 8 KiB (ulimit -f counts 1024-byte blocks): the drafter of
  // this model is larger, so its write fails part-way.
  const std::string dir = temp_dir("fsize-output");
  const std::string model = random_hf_checkpoint("fsize-model", RandomSpec{});
  const std::string cmd = "bash -c " + shell_quote("ulimit -f 8 && exec " +
                                                   std::string(MTPSPEC_BIN) + " init-drafter -m " +
                                                   model + " -o " + dir + "/d.safetensors");
  CliResult r = run_cli_binary("/usr/bin/env", cmd);
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("d.safetensors"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("File too large"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::is_empty(dir)) << "left: " << testing::PrintToString(entries(dir));
  // And without the limit the same command works (the limit was the cause).
  CliResult ok = run_cli("init-drafter -m " + model + " -o " + dir + "/d.safetensors");
  EXPECT_EQ(ok.status, 0) << ok.err;
}

TEST(BadOutputPaths, PrecomputeWithoutShardsDoesNotBlockTheRerun) {
  MTP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  const std::string dir = temp_dir("precompute-rerun");
  const std::string corpus = dir + "/c.txt";
  std::ofstream(corpus) << "Once upon a time there was a little cat.\nThe dog ran home.\n";
  const std::string out = dir + "/shards";
  // A run killed (or refused) after writing its plan but before any shard.
  fs::create_directories(out);
  std::ofstream(out + "/plan.json") << R"({"plan_id": "other", "identity": {"seq_len": 7}})";
  const std::string base = "precompute -m " + model + " --corpus " + corpus + " -o " + out;
  CliResult r = run_cli(base + " --seq-len 64");
  ASSERT_EQ(r.status, 0) << r.err;
  // With shards present, other settings are refused naming what differs.
  CliResult d = run_cli(base + " --seq-len 32");
  EXPECT_EQ(d.status, 2) << d.err;
  EXPECT_NE(d.err.find("seq_len"), std::string::npos) << d.err;
  // The same settings resume (nothing to do).
  CliResult again = run_cli(base + " --seq-len 64");
  EXPECT_EQ(again.status, 0) << again.err;
}

TEST(CausesNamed, ADirectoryWhereAFileIsReadIsRefused) {
  MTP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  const std::string dir = temp_dir("dir-as-file");
  for (const std::string& args :
       {"generate -m " + model + " -f " + dir + " -n 2",
        "precompute -m " + model + " --corpus " + dir + " -o " + dir + "/shards"}) {
    CliResult r = run_cli(args);
    EXPECT_EQ(r.status, 2) << args << "\n" << r.err;
    EXPECT_NE(r.err.find(dir), std::string::npos) << args << "\n" << r.err;
    EXPECT_EQ(r.err.find("filesystem error"), std::string::npos) << r.err;
  }
}

// The self-distillation settings of precompute without --self-distill would
// run a plain corpus precompute and ignore them: refused, naming both flags.
TEST(CausesNamed, SelfDistillSettingsNeedSelfDistill) {
  for (const char* flag : {"--gen-tokens 8", "--prompt-tokens 4", "--prompt-tokens-min 2",
                           "--temp 0.7", "--seed 3"}) {
    CliResult r = run_cli(std::string("precompute -m x --corpus c -o /tmp/never ") + flag);
    EXPECT_EQ(r.status, 2) << flag << "\n" << r.err;
    EXPECT_NE(r.err.find("--self-distill"), std::string::npos) << flag << "\n" << r.err;
  }
}

// An empty item in a comma-separated list is a typo CLI11 would drop (the run
// would use a shorter list than the one written): refused, naming the flag.
TEST(CausesNamed, AnEmptyListItemIsRefused) {
  for (const char* args : {"bench --random tiny --temps 0,,1", "bench-kernels --threads 1,",
                           "bench-kernels --shapes=,64x64", "generate -m x -p hi --lookup prompt,,history",
                           "bench-decode --random tiny --threads ,1"}) {
    CliResult r = run_cli(args);
    EXPECT_EQ(r.status, 2) << args << "\n" << r.err;
    EXPECT_NE(r.err.find("an empty item"), std::string::npos) << args << "\n" << r.err;
  }
}

TEST(SelfDistillProgress, CountsTheTokensActuallyMade) {
  MTP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  const std::string dir = temp_dir("distill-progress");
  const std::string corpus = dir + "/c.txt";
  std::ofstream(corpus) << "Once upon a time there was a little cat.\nThe dog ran home.\n"
                        << "Lily had a red ball.\n";
  // A large budget: generations end early at EOS, so planned > made.
  CliResult r = run_cli("precompute -m " + model + " --corpus " + corpus + " -o " + dir +
                        "/s --self-distill --prompt-tokens 4 --max-tokens 4000 --heldout 0");
  ASSERT_EQ(r.status, 0) << r.err;
  std::smatch made, total;
  ASSERT_TRUE(std::regex_search(r.err, made, std::regex("([0-9]+) tok made"))) << r.err;
  const std::string all = r.out + r.err;
  ASSERT_TRUE(std::regex_search(all, total, std::regex("sequences, ([0-9]+) tokens"))) << all;
  EXPECT_EQ(made[1].str(), total[1].str()) << r.err;
}

TEST(HelpDefaults, EveryValueFlagShowsItsDefault) {
  auto check = [](const std::string& binary, const std::vector<std::string>& commands) {
    for (const auto& c : commands) {
      CliResult h = run_cli_binary(binary, c + " --help");
      ASSERT_EQ(h.status, 0) << c;
      std::istringstream lines(h.out);
      std::string line;
      const std::regex value_flag(R"(^\s+(-\w,)?--[\w-]+ (INT|FLOAT|UINT)\b)");
      while (std::getline(lines, line)) {
        if (!std::regex_search(line, value_flag) || line.find("REQUIRED") != std::string::npos)
          continue;
        EXPECT_NE(line.find('='), std::string::npos) << c << ": no default shown in\n" << line;
      }
    }
  };
  check(MTPSPEC_BIN, {"generate", "bench", "bench-decode", "bench-kernels", "precompute",
                      "drift", "init-drafter", "demo", "pretrain", "widen", "serve"});
#ifdef MTPSPEC_HAVE_TRAIN_BIN
  check(MTPSPEC_TRAIN_BIN_PATH, {"train", "export", "parity", "train-assistant", "train-native-head"});
#endif
}

// KV caches beyond the address-space limit (ulimit -v) are refused before any
// allocation, naming the limit — not a std::bad_alloc half-way (exit 4), as
// when only MemAvailable was consulted. The same run with room for it works.
TEST(MemoryLimits, KvCachesBeyondUlimitAreRefusedNamingIt) {
  std::ifstream meminfo("/proc/meminfo");
  double avail_kb = 0;
  for (std::string key; meminfo >> key;) {
    if (key == "MemAvailable:") {
      meminfo >> avail_kb;
      break;
    }
  }
  constexpr long kLimitKb = 2L << 20;  // 2 GiB of address space
  if (avail_kb < 2.0 * kLimitKb) GTEST_SKIP() << "needs MemAvailable above 4 GiB (the limit must bind)";
  RandomSpec spec;
  spec.n_layers = 8;
  spec.max_position = 2048;
  const std::string dir = temp_dir("ulimit-kv");
  const std::string model = dir + "/model.gguf";
  convert_hf_to_gguf(random_hf_checkpoint("ulimit-kv-hf", spec), model, GgufConvert{});
  std::ofstream(dir + "/p.jsonl") << "{\"prompt\": \"abc\"}\n{\"prompt\": \"de\"}\n";
  // Per position (8 layers x 2 KV heads x 16 x K, V + the 64-wide hidden row)
  // x 4 bytes = 2.25 KiB: 1024 slots of 2048 positions need 4.5 GiB.
  const auto run = [&](int parallel) {
    const std::string cmd = fmt::format(
        "ulimit -v {} && exec {} generate -m {} --prompts {} -n 4 --threads 1 --ctx 2048 "
        "--parallel {}", kLimitKb, MTPSPEC_BIN, shell_quote(model), shell_quote(dir + "/p.jsonl"),
        parallel);
    return run_cli_binary("/usr/bin/env", "bash -c " + shell_quote(cmd));
  };
  const CliResult big = run(1024);
  EXPECT_EQ(big.status, 2) << big.err;
  EXPECT_NE(big.err.find("--parallel 1024"), std::string::npos) << big.err;
  EXPECT_NE(big.err.find("(ulimit -v)"), std::string::npos) << big.err;
  const CliResult small = run(2);
  EXPECT_EQ(small.status, 0) << small.err;
}

TEST(Threads, FarAboveTheCpuCountWarns) {
  MTP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  const long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
  CliResult r = run_cli("generate -m " + model + " -p hi -n 2 --threads " +
                        std::to_string(cpus + 3));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("warning: --threads"), std::string::npos) << r.err;
  CliResult q = run_cli("generate -m " + model + " -p hi -n 2 --threads 1");
  EXPECT_EQ(q.err.find("warning: --threads"), std::string::npos) << q.err;
}

}  // namespace
}  // namespace mtp::test
