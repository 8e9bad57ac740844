// Drafter file: __metadata__ (format, version, target, config) and its
// agreement with the tensors, for a fixed tiny target (d 8, 2 heads, 1 kv
// head, head_dim 4, ffn 16, vocab 16, 1 layer) with fingerprint "fp". The
// seed corpus holds valid K = 1 and K = 2 drafters for it.
#include "drafter/drafter.h"
#include "fuzz_util.h"

namespace {
mtp::model::ModelConfig target() {
  mtp::model::ModelConfig c;
  c.source = "hf";
  c.d_model = 8;
  c.n_layers = 1;
  c.n_heads = 2;
  c.n_kv_heads = 1;
  c.head_dim = 4;
  c.ffn = 16;
  c.vocab = 16;
  c.max_position = 64;
  c.validate();
  return c;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const mtp::model::ModelConfig t = target();
  const std::string p = mtp::fuzz::write_input("drafter.safetensors", data, size);
  mtp::fuzz::expect_typed([&] {
    mtp::drafter::Drafter d =
        mtp::drafter::Drafter::load(p, t, "fp", mtp::kernels::WeightType::F32);
    if (d.config().K < 1 || d.config().K > 16) std::abort();
  });
  return 0;
}
