// model.safetensors.index.json (io::TensorSet::open_dir): the weight map of a
// sharded checkpoint, read before any shard.
#include <filesystem>

#include "fuzz_util.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string dir = mtp::fuzz::work_dir() + "/sharded";
  std::filesystem::create_directories(dir);
  mtp::fuzz::write_input("sharded/model.safetensors.index.json", data, size);
  mtp::fuzz::expect_typed([&] { (void)mtp::io::TensorSet::open_dir(dir); });
  return 0;
}
