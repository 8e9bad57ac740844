// llama2.c tokenizer.bin, then encode and decode.
#include "fuzz_util.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string p = mtp::fuzz::write_input("tokenizer.bin", data, size);
  mtp::fuzz::expect_typed([&] {
    auto tok = mtp::io::load_tokenizer(p);
    const int32_t n = tok->vocab_size();
    for (const char* text : {"Hello world", "\xC3\xA9\xE4\xB8\xAD  x", ""}) {
      mtp::fuzz::expect_typed([&] {
        std::vector<int32_t> ids = tok->encode(text);
        (void)tok->decode(ids);
      });
    }
    for (int32_t id : {-1, 0, 1, 2, n - 1, n}) (void)tok->token_bytes(id, 1);
  });
  return 0;
}
