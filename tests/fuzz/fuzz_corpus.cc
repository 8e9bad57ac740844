// Corpus JSON Lines (io::read_corpus on a .jsonl file: {"text": ...} per line).
#include "fuzz_util.h"
#include "io/corpus.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string p = mtp::fuzz::write_input("corpus.jsonl", data, size);
  mtp::fuzz::expect_typed([&] {
    std::vector<std::string> docs;
    (void)mtp::io::read_corpus(p, docs);
  });
  return 0;
}
