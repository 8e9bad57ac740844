// Kill anywhere, lose nothing (issue 12 item 4): precompute, train and
// pretrain are killed with SIGKILL at several random moments, resumed each
// time, and their final files equal an uninterrupted run's byte for byte.
//
// Excluded from the comparison, because they record time and nothing else:
//   metrics.jsonl: "tokens_per_s", "elapsed_s" (training and pretraining);
//   run.json:      not compared (it holds the run's start and thread timing);
//   the exported drafter's metadata "created" (its export time).
// Everything else — shards, manifest, plan, checkpoint, model, config,
// tokenizer, exported drafter — must be identical.
//
// The kill moments are random (std::random_device, printed on failure) in
// [2 %, 95 %] of the uninterrupted run's duration; a SIGKILL during a write
// must leave the previous state usable (atomic renames).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "core/mapped_file.h"
#include "test_util.h"

namespace mtp::test {
namespace {

namespace fs = std::filesystem;

// Runs `cmd` through /bin/sh (exec: the shell becomes the command, so the
// kill reaches it); output discarded. Returns the pid.
pid_t spawn(const std::string& cmd) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    const std::string line = "exec " + cmd + " >/dev/null 2>&1";
    ::execl("/bin/sh", "sh", "-c", line.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

int wait_status(pid_t pid) {
  int st = 0;
  ::waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// Seconds one uninterrupted run of cmd takes (it must succeed).
double timed_run(const std::string& cmd) {
  const auto t0 = std::chrono::steady_clock::now();
  const int rc = wait_status(spawn(cmd));
  EXPECT_EQ(rc, 0) << cmd;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Kills `cmd` `kills` times at random moments, then lets it finish.
void kill_and_resume(const std::string& cmd, double full_s, int kills, std::mt19937& rng) {
  std::uniform_real_distribution<double> when(0.02 * full_s, 0.95 * full_s);
  for (int i = 0; i < kills; ++i) {
    const double t = when(rng);
    const pid_t pid = spawn(cmd);
    std::this_thread::sleep_for(std::chrono::duration<double>(t));
    ::kill(pid, SIGKILL);
    wait_status(pid);  // 0 when it had already finished: fine
  }
  ASSERT_EQ(wait_status(spawn(cmd)), 0) << "the resumed run failed: " << cmd;
}

// metrics.jsonl without the keys that record time.
std::string metrics_without_time(const std::string& path) {
  std::ifstream in(path);
  std::string line, out;
  while (std::getline(in, line)) {
    nlohmann::json j = nlohmann::json::parse(line);
    j.erase("tokens_per_s");
    j.erase("elapsed_s");
    out += j.dump() + "\n";
  }
  return out;
}

// Every file under a and b (relative names) equal, except run.json and the
// time keys of metrics.jsonl; temporary files of killed writes are ignored.
void expect_same_tree(const std::string& a, const std::string& b) {
  size_t compared = 0;
  for (const auto& e : fs::recursive_directory_iterator(a)) {
    if (!e.is_regular_file()) continue;
    const fs::path rel = fs::relative(e.path(), a);
    const std::string name = rel.filename().string();
    if (name == "run.json" || name.find(".tmp") != std::string::npos) continue;
    const fs::path other = fs::path(b) / rel;
    ASSERT_TRUE(fs::exists(other)) << rel << " missing after the killed runs";
    if (name == "metrics.jsonl") {
      std::istringstream la(metrics_without_time(e.path())), lb(metrics_without_time(other));
      std::string x, y;
      int line = 0;
      while (std::getline(la, x)) {
        ++line;
        const bool more = static_cast<bool>(std::getline(lb, y));
        ASSERT_TRUE(more) << rel << ": line " << line << " missing after the killed runs";
        ASSERT_EQ(x, y) << rel << ": line " << line << " differs";
      }
      EXPECT_FALSE(std::getline(lb, y)) << rel << ": extra line after the killed runs: " << y;
    } else {
      EXPECT_TRUE(read_file(e.path()) == read_file(other.string())) << rel << " differs";
    }
    ++compared;
  }
  EXPECT_GT(compared, 0u);
}

// A safetensors file as (header without __metadata__.created, data bytes).
std::pair<nlohmann::json, std::string> without_created(const std::string& bytes) {
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | uint8_t(bytes.at(size_t(i)));
  nlohmann::json h = nlohmann::json::parse(bytes.substr(8, n));
  if (h.contains("__metadata__")) h["__metadata__"].erase("created");
  return {h, bytes.substr(8 + n)};
}

std::string write_corpus(const std::string& dir, int docs) {
  const char* who[] = {"The cat", "A dog", "Lily", "The old man", "Tom", "A little bird"};
  const char* did[] = {"walked to", "looked at", "played with", "ran past", "found", "liked"};
  const char* what[] = {"the park.", "a big tree.", "the red ball.", "her mom.", "a toy.", "the sun."};
  std::mt19937 rng(5);
  std::string text;
  for (int i = 0; i < docs; ++i) {
    text += std::string(who[rng() % 6]) + " " + did[rng() % 6] + " " + what[rng() % 6] + " " +
            who[rng() % 6] + " was happy.\n";
  }
  const std::string path = dir + "/corpus.txt";
  std::ofstream(path) << text;
  return path;
}

struct KillRng {
  unsigned seed = std::random_device{}();
  std::mt19937 rng{seed};
};

// Runs cmd (which writes `out`) uninterrupted, moves its result to out + ".ref",
// then runs it again into `out` killed `kills` times and resumed, and compares
// the two trees. The same path both times: files that record their own
// command line or folder (manifest.json, the drafter's metadata) must match.
void check_kill_anywhere(const std::string& cmd, const std::string& out, int kills,
                         std::mt19937& rng) {
  const double full_s = timed_run(cmd);
  fs::rename(out, out + ".ref");
  kill_and_resume(cmd, full_s, kills, rng);
  expect_same_tree(out + ".ref", out);
}

TEST(KillAnywhere, PrecomputeTrainAndExportLoseNothing) {
  MTP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  KillRng k;
  SCOPED_TRACE("kill-moment seed " + std::to_string(k.seed));
  const std::string tmp = temp_dir("kill-anywhere");
  const std::string corpus = write_corpus(tmp, 600);
  const std::string mtpspec = MTPSPEC_BIN, train = MTPSPEC_TRAIN_BIN_PATH;

  // Precompute: many small shards, so kills land between and inside them.
  const std::string shards = tmp + "/shards";
  check_kill_anywhere(mtpspec + " precompute -m " + model + " --corpus " + corpus + " -o " +
                          shards + " --seq-len 64 --shard-tokens 512 --threads 1 --no-progress",
                      shards, 3, k.rng);

  // Train with frequent checkpoints; --resume continues the last one (or
  // starts afresh when a kill came before the first).
  const std::string run = tmp + "/run";
  check_kill_anywhere(train + " train --shards " + shards + " -m " + model + " -o " + run +
                          " --k 2 --steps 24 --batch 4 --save-every 2 --eval-every 6 "
                          "--threads 1 --resume --no-progress",
                      run, 3, k.rng);

  // The exported drafters of both runs are the same file (export reads the
  // run folder by the same path).
  const std::string export_cmd =
      train + " export --run " + run + " -o " + tmp + "/drafter.safetensors --threads 1";
  ASSERT_EQ(wait_status(spawn(export_cmd)), 0) << export_cmd;
  const std::string killed = read_file(tmp + "/drafter.safetensors");
  fs::rename(run, run + ".killed");
  fs::rename(run + ".ref", run);
  ASSERT_EQ(wait_status(spawn(export_cmd)), 0) << export_cmd;
  const auto a = without_created(read_file(tmp + "/drafter.safetensors"));
  const auto b = without_created(killed);
  EXPECT_EQ(a.first, b.first);
  EXPECT_TRUE(a.second == b.second) << "the drafters' tensors differ";
}

TEST(KillAnywhere, PretrainLosesNothing) {
  KillRng k;
  SCOPED_TRACE("kill-moment seed " + std::to_string(k.seed));
  const std::string tmp = temp_dir("kill-anywhere-pretrain");
  const std::string corpus = write_corpus(tmp, 300);
  const std::string out = tmp + "/model";
  check_kill_anywhere(std::string(MTPSPEC_BIN) + " pretrain --corpus " + corpus + " -o " + out +
                          " --preset micro --vocab 300 --threads 1 --seq-len 32 --batch 2 "
                          "--heldout 0.1 --steps 16 --save-every 2 --eval-every 4 --resume "
                          "--no-progress",
                      out, 3, k.rng);
}

}  // namespace
}  // namespace mtp::test
