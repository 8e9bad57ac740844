// Writes the C API test's tiny model into a folder (argv[1]):
//   model.bin        a random llama2.c checkpoint, vocabulary 39;
//   tokenizer.bin    its llama2.c tokenizer: <unk>, <s>, </s>, then byte
//                    pieces — four 3-byte UTF-8 lead bytes (E3..E6) and 32
//                    continuation bytes (80..9F) — so generated text often
//                    splits a character over tokens, and any lead followed by
//                    two continuations is a valid character;
//   drafter.safetensors  a random 2-module drafter made for it.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "drafter/drafter.h"
#include "model/fingerprint.h"
#include "model/loader.h"
#include "model_util.h"

namespace {

void write_tokenizer(const std::string& path) {
  std::vector<std::string> pieces = {"<unk>", "\n<s>\n", "\n</s>\n"};
  char buf[8];
  for (int b = 0xE3; b <= 0xE6; ++b) std::snprintf(buf, sizeof buf, "<0x%02X>", b), pieces.push_back(buf);
  for (int b = 0x80; b <= 0x9F; ++b) std::snprintf(buf, sizeof buf, "<0x%02X>", b), pieces.push_back(buf);
  std::ofstream f(path, std::ios::binary);
  const int32_t max_len = 8;
  f.write(reinterpret_cast<const char*>(&max_len), 4);
  for (const std::string& p : pieces) {
    const float score = 0.f;
    const int32_t n = int32_t(p.size());
    f.write(reinterpret_cast<const char*>(&score), 4);
    f.write(reinterpret_cast<const char*>(&n), 4);
    f.write(p.data(), n);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  std::filesystem::create_directories(dir);
  const std::string model = (dir / "model.bin").string();
  mtp::test::write_random_llama2c(model, 32, 64, 2, 4, 4, 39, 256, 17);
  write_tokenizer((dir / "tokenizer.bin").string());
  mtp::model::LoadedModel lm = mtp::model::load_model(model, {});
  mtp::drafter::DrafterConfig dc;
  dc.K = 2;
  mtp::drafter::write_drafter((dir / "drafter.safetensors").string(), lm.config,
                              mtp::model::target_fingerprint(lm, false), dc,
                              mtp::drafter::random_drafter_tensors(lm.config, dc, 3),
                              {{"kind", "test"}});
  return 0;
}
