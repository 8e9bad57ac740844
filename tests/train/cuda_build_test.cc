// The CUDA build (docs/TRAINING.md "CUDA"): scripts/build-train-cuda.sh
// builds mtpspec-train against the torch of the Python in
// MTPSPEC_TORCH_PYTHON (a CUDA wheel: 3–4 GB, never CI; skipped when unset)
// into MTPSPEC_CUDA_BUILD_DIR (default build-cuda beside build/). That
// binary, on online jobs `mtpspec` wrote: two Gloo ranks equal one process
// accumulating two micro-batches, bit for bit (torch 2.x's c10d), and
// --device cuda trains when a GPU is visible, else is refused naming the flag.
// Label heavy (a full build, tens of minutes on 2 cores).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "cli_util.h"
#include "core/mapped_file.h"
#include "model_util.h"
#include "test_util.h"
#include "train/checkpoint.h"

namespace mtp::train {
namespace {

namespace fs = std::filesystem;
using test::shell_quote;

// Runs `cmd` through the shell; its status and its stdout+stderr.
std::pair<int, std::string> shell(const std::string& cmd, const std::string& log) {
  const int st = std::system((cmd + " > " + shell_quote(log) + " 2>&1").c_str());
  return {WIFEXITED(st) ? WEXITSTATUS(st) : 128, read_file(log)};
}

TEST(HeavyCudaBuild, BuildsAgainstAPythonTorchAndMatchesOneProcessOnItsCpuPath) {
  const char* py = std::getenv("MTPSPEC_TORCH_PYTHON");
  if (!py || !*py) GTEST_SKIP() << "MTPSPEC_TORCH_PYTHON (a Python with torch) is not set";
  MTP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  MTP_REQUIRE_SHARED(corpus, "corpora/gutenberg-en-16MB.txt");
  const char* bd = std::getenv("MTPSPEC_CUDA_BUILD_DIR");
  const std::string build =
      bd && *bd ? bd
                : (fs::path(MTPSPEC_TRAIN_BIN_PATH).parent_path().parent_path().parent_path() /
                   "build-cuda")
                      .string();
  const std::string dir = test::temp_dir("cuda_build");
  auto [st, out] = shell(std::string(MTPSPEC_SOURCE_DIR) + "/scripts/build-train-cuda.sh " +
                             shell_quote(py) + " " + shell_quote(build),
                         dir + "/build.log");
  ASSERT_EQ(st, 0) << out;
  const std::string bin = build + "/bin/mtpspec-train";
  ASSERT_TRUE(fs::exists(bin)) << out;

  std::ofstream(dir + "/c.txt") << read_file(corpus).substr(0, 24 * 1024);
  const std::string m = " -m " + shell_quote(model);
  test::CliResult jobs =
      test::run_cli("train --online --jobs-only" + m + " --corpus " + shell_quote(dir + "/c.txt") +
                    " -o " + shell_quote(dir + "/jobs") + " --seq-len 48 --max-tokens 3000");
  ASSERT_EQ(jobs.status, 0) << jobs.err;
  const std::string base = shell_quote(bin) + " train --online-jobs " +
                           shell_quote(dir + "/jobs/online/jobs.safetensors") + m +
                           " --k 2 --steps 6 --batch 2 --lr 3e-3 --warmup 1 --ema 0.9 --threads 1 "
                           "--seed 4 --eval-every 3 --no-progress --no-parity -o ";
  auto [s1, o1] = shell(base + shell_quote(dir + "/one") + " --accum 2", dir + "/one.log");
  ASSERT_EQ(s1, 0) << o1;
  auto [s2, o2] = shell(base + shell_quote(dir + "/two") + " --nproc 2", dir + "/two.log");
  ASSERT_EQ(s2, 0) << o2;
  const Checkpoint a = load_checkpoint(checkpoint_path(dir + "/one"));
  const Checkpoint b = load_checkpoint(checkpoint_path(dir + "/two"));
  EXPECT_EQ(test::first_bit_difference(a.params, b.params), -1);
  EXPECT_EQ(test::first_bit_difference(a.adam_m, b.adam_m), -1);
  EXPECT_EQ(test::first_bit_difference(a.adam_v, b.adam_v), -1);
  EXPECT_EQ(test::first_bit_difference(a.ema, b.ema), -1);

  auto [sg, og] = shell(base + shell_quote(dir + "/gpu") + " --device cuda", dir + "/gpu.log");
  if (og.find("sees no CUDA device") != std::string::npos) {
    EXPECT_EQ(sg, 2) << og;
    EXPECT_NE(og.find("error: --device: the device cuda: this libtorch build has CUDA"),
              std::string::npos)
        << og;
  } else {
    EXPECT_EQ(sg, 0) << og;  // a visible GPU: it trains there
    EXPECT_TRUE(fs::exists(checkpoint_path(dir + "/gpu"))) << og;
  }
}

}  // namespace
}  // namespace mtp::train
