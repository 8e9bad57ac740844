// Loading a target checkpoint into (config, weights).
#pragma once
#include <memory>
#include <string>

#include "kernels/matmul.h"
#include "model/config.h"
#include "model/weights.h"

namespace mtp::model {

struct LoadOptions {
  // --weights: fp32 | bf16, or a ggml block type (q8_0 ... q6_k) the matrices
  // are requantized to at load (PackedMatrix::pack); norms stay fp32 and the
  // embedding table is used as stored.
  kernels::WeightType weights = kernels::WeightType::F32;
};

struct LoadedModel {
  ModelConfig config;
  ModelWeights weights;
  std::string path;       // what was loaded (file or directory)
  std::string tokenizer;  // default tokenizer path found beside it ("" if none)
};

// Dispatches on what `path` is: a directory with config.json -> Hugging Face;
// a file (llama2.c .bin) -> llama2.c. Throws IoError / FormatError / ConfigError.
LoadedModel load_model(const std::string& path, const LoadOptions& opt);

// llama2.c checkpoint: 7 int32 header fields (dim, hidden_dim, n_layers, n_heads,
// n_kv_heads, vocab_size, seq_len; negative vocab_size = unshared classifier),
// fp32 weights; interleaved RoPE. Tokenizer: tokenizer.bin or tok*.bin beside it.
LoadedModel load_llama2c(const std::string& path, const LoadOptions& opt);

// The config alone, without reading the weights (dispatch as load_model):
// read_hf_config for a Hugging Face folder, the header for llama2.c.
ModelConfig read_model_config(const std::string& path);
ModelConfig read_llama2c_config(const std::string& path);

// Hugging Face directory: config.json (+ generation_config.json) and
// model.safetensors or model.safetensors.index.json shards.
LoadedModel load_hf(const std::string& dir, const LoadOptions& opt);

}  // namespace mtp::model
