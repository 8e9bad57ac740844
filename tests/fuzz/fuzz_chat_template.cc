// tokenizer_config.json as `serve` reads it: the chat template recognised by
// family (serve/chat_template.h), its literal default system prompt, and the
// special tokens.
#include <filesystem>

#include "fuzz_util.h"
#include "serve/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string dir = mtp::fuzz::work_dir() + "/chat";
  std::filesystem::create_directories(dir);
  mtp::fuzz::write_input("chat/tokenizer_config.json", data, size);
  mtp::fuzz::expect_typed([&] { (void)mtp::serve::load_chat_template(dir, ""); });
  mtp::fuzz::expect_typed([&] {
    (void)mtp::serve::recognise_template(std::string(reinterpret_cast<const char*>(data), size),
                                         "input");
  });
  return 0;
}
