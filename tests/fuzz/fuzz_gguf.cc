// GGUF files: io::GgufFile (header, every value type, nested arrays, tensor
// infos, alignment, offsets), then on what opens: every tensor's bytes read
// (a view past the map would be an ASan report), the model config
// (model::gguf_model_config), the tokenizer (io::load_gguf_tokenizer, with an
// encode + decode) and, for inputs up to 1 MiB, the whole model load.
#include "fuzz_util.h"
#include "io/gguf.h"
#include "tokenizer/tokenizer_gguf.h"
#include "model/loader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string p = mtp::fuzz::write_input("x.gguf", data, size);
  mtp::fuzz::expect_typed([&] {
    mtp::io::GgufFile f(p);
    volatile uint8_t sink = 0;
    for (const auto& t : f.tensors()) {
      if (t.nbytes != 0 && !t.data) std::abort();
      for (size_t i = 0; i < t.nbytes; ++i) sink ^= t.data[i];
    }
    for (const auto& entry : f.metadata()) {  // no structured binding: clang 14 cannot capture one
      const std::string& k = entry.first;
      mtp::fuzz::expect_typed([&] { (void)f.get_int(k); });
      mtp::fuzz::expect_typed([&] { (void)f.get_float(k); });
      mtp::fuzz::expect_typed([&] { (void)f.get_string(k); });
      (void)entry.second.describe();
    }
    mtp::fuzz::expect_typed([&] { (void)mtp::model::gguf_model_config(f); });
    mtp::fuzz::expect_typed([&] {
      auto tok = mtp::io::load_gguf_tokenizer(f);
      const auto ids = tok->encode("Hello world \xC3\xA9 12");
      (void)tok->decode(ids);
      for (int32_t id : {-1, 0, tok->vocab_size() - 1, tok->vocab_size()}) (void)tok->token_bytes(id, -1);
    });
    if (size <= (1u << 20)) {
      mtp::fuzz::expect_typed([&] { (void)mtp::model::load_gguf(p, {}); });
    }
  });
  return 0;
}
