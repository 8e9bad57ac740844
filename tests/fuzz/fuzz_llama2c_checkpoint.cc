// llama2.c checkpoint: header checks against the file size, the weights, and
// one forward of the loaded model.
#include "fuzz_util.h"
#include "model/forward.h"
#include "model/loader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string p = mtp::fuzz::write_input("x.bin", data, size);
  mtp::fuzz::expect_typed([&] {
    mtp::model::ModelConfig c = mtp::model::read_llama2c_config(p);
    // Only small models are run (the fuzzer must stay fast); the header
    // check above already saw every field.
    if (size > (1u << 20)) return;
    mtp::model::Model m(mtp::model::load_llama2c(p, {}));
    auto kv = m.make_cache(1, 4);
    std::vector<float> logits(size_t(c.vocab));
    std::vector<mtp::model::Row> rows = {{0, 0, 0}};
    m.forward(rows, kv, {logits.data(), nullptr, nullptr}, nullptr);
  });
  return 0;
}
