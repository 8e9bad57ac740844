// The training device (train/torch_mtp.h training_device): `--device cuda`
// on a libtorch without CUDA, or without a visible CUDA device, is a user
// error naming the setting, from the library and through the CLI (exit 2,
// the flag named, before any capture or training). Skipped where CUDA works.
#include <gtest/gtest.h>

#include <fstream>

#include "cli_util.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "core/setting.h"
#include "test_util.h"
#include "train/torch_mtp.h"

namespace mtp::train {
namespace {

const char* no_cuda_reason() {
  return at::globalContext().hasCUDART() ? "has CUDA but sees no CUDA device"
                                         : "this libtorch build has no CUDA";
}

TEST(TrainingDevice, CudaWithoutCudaNamesTheSetting) {
  if (torch::cuda::is_available()) GTEST_SKIP() << "CUDA is available here";
  try {
    training_device("cuda", 1);
    FAIL() << "cuda accepted";
  } catch (const InputError& e) {
    EXPECT_STREQ(setting_of(e), "device");
    EXPECT_NE(std::string(e.what()).find(no_cuda_reason()), std::string::npos) << e.what();
  }
  EXPECT_EQ(training_device("cpu", 3), torch::Device(torch::kCPU));
  test::expect_error<InputError>([] { training_device("gpu"); }, {"cpu or cuda", "'gpu'"});
}

TEST(TrainingDevice, CliOnlineTrainingOnCudaWithoutCudaExitsTwoNamingTheFlag) {
  if (torch::cuda::is_available()) GTEST_SKIP() << "CUDA is available here";
  MTP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  MTP_REQUIRE_SHARED(corpus, "corpora/gutenberg-en-16MB.txt");
  const std::string dir = test::temp_dir("device_cuda");
  std::ofstream(dir + "/c.txt") << read_file(corpus).substr(0, 8 * 1024);
  const test::CliResult r = test::run_cli(
      "train --online -m " + test::shell_quote(model) + " --corpus " +
      test::shell_quote(dir + "/c.txt") + " -o " + test::shell_quote(dir + "/run") +
      " --seq-len 32 --steps 2 --batch 2 --threads 1 --no-progress --device cuda");
  EXPECT_EQ(r.status, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("error: --device: the device cuda"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(no_cuda_reason()), std::string::npos) << r.err;
}

}  // namespace
}  // namespace mtp::train
