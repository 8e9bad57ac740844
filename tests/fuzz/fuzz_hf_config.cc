// Hugging Face config.json -> ModelConfig (read_hf_config: JSON, family
// defaults, rope scaling, Gemma layer types, validate()). A config that parses
// must also describe a decoder whose per-layer tables fit the declared sizes.
#include <fstream>
#include <nlohmann/json.hpp>

#include "fuzz_util.h"
#include "model/hf_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  mtp::fuzz::write_input("config.json", data, size);
  mtp::fuzz::expect_typed([&] {
    mtp::model::ModelConfig c = mtp::model::read_hf_config(mtp::fuzz::work_dir());
    // What validate() promises the rest of the engine.
    if (c.d_model <= 0 || c.n_layers <= 0 || c.n_heads <= 0 || c.n_kv_heads <= 0 ||
        c.head_dim <= 0 || c.ffn <= 0 || c.vocab <= 0 || c.max_position <= 0 ||
        c.n_heads % c.n_kv_heads != 0 || !(c.norm_eps > 0) || !(c.rope_theta > 0)) {
      std::abort();
    }
    (void)c.to_json().dump();
  });
  return 0;
}
