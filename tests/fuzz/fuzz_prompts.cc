// Prompt JSONL (read_prompts).
#include "fuzz_util.h"
#include "io/prompts.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string p = mtp::fuzz::write_input("prompts.jsonl", data, size);
  mtp::fuzz::expect_typed([&] { (void)mtp::io::read_prompts(p); });
  return 0;
}
