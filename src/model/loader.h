// Loading a target checkpoint into (config, weights).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "kernels/matmul.h"
#include "model/config.h"
#include "model/weights.h"

namespace mtp::model {

struct LoadOptions {
  // --weights: nullopt = auto (each float matrix as stored: bf16 or fp32, see
  // model::Hold), fp32 | bf16, or a ggml block type (q8_0 ... q6_k) the
  // matrices are requantized to at load (PackedMatrix::pack); norms stay fp32
  // and the embedding table is used as stored.
  Hold weights;
  // How a tied head reads the token table (model::TiedHead).
  TiedHead tied_head = TiedHead::Auto;
};

struct LoadedModel {
  ModelConfig config;
  ModelWeights weights;
  std::string path;       // what was loaded (file or directory)
  std::string tokenizer;  // default tokenizer path found beside it ("" if none)
  // The ggml block type ("q4_k") the float matrices were requantized to at
  // load (--weights), "" when they are held as stored (or as fp32/bf16). The
  // fingerprint then covers it: a requantized target computes another
  // function, so a drafter of the original is refused on it by default.
  std::string requantized;
};

// Dispatches on what `path` is: a directory with config.json -> Hugging Face;
// a file starting with the GGUF magic (whatever its extension) -> GGUF; any
// other file (llama2.c .bin) -> llama2.c. Throws IoError / FormatError / ConfigError.
LoadedModel load_model(const std::string& path, const LoadOptions& opt);

// llama2.c checkpoint: 7 int32 header fields (dim, hidden_dim, n_layers, n_heads,
// n_kv_heads, vocab_size, seq_len; negative vocab_size = unshared classifier),
// fp32 weights; interleaved RoPE. Tokenizer: tokenizer.bin or tok*.bin beside it.
LoadedModel load_llama2c(const std::string& path, const LoadOptions& opt);

// The config alone, without reading the weights (dispatch as load_model):
// read_hf_config for a Hugging Face folder, the metadata for GGUF, the header
// for llama2.c.
ModelConfig read_model_config(const std::string& path);
ModelConfig read_llama2c_config(const std::string& path);

// Hugging Face directory: config.json (+ generation_config.json) and
// model.safetensors or model.safetensors.index.json shards.
LoadedModel load_hf(const std::string& dir, const LoadOptions& opt);

// GGUF file (llama.cpp; docs/FORMATS.md "GGUF"): architectures llama, qwen2,
// qwen3, gemma2, gemma3, gemma4, with llama.cpp's conventions undone so that a GGUF
// converted from a Hugging Face checkpoint computes that checkpoint's bits:
// Llama's Q/K rows un-permuted, Gemma's stored 1 + w norms used as they are,
// rope_freqs.weight read as llama3 scaling, llama.cpp's hard-coded Gemma values.
// The tokenizer is the file itself (tokenizer.ggml.*). Throws IoError /
// FormatError (the file), ConfigError (an unsupported architecture, key value
// or weight type, naming the key or tensor), ShapeError (a tensor's shape).
LoadedModel load_gguf(const std::string& path, const LoadOptions& opt);
ModelConfig read_gguf_config(const std::string& path);

}  // namespace mtp::model

namespace mtp::io {
class GgufFile;
}

namespace mtp::model {

// The config a GGUF file's metadata describes (source = "gguf"), validated.
ModelConfig gguf_model_config(const io::GgufFile& f);

// The GGUF name of layer `layer`'s tensor whose Hugging Face name (below
// "model.layers.{layer}.") is `hf`: "self_attn.q_proj.weight" ->
// "blk.{layer}.attn_q.weight" (gguf-py's tensor map for these families).
std::string gguf_layer_tensor_name(const ModelConfig& c, int layer, const std::string& hf);

// The GGUF name of the native MTP head's tensor whose Hugging Face name is
// `hf` (native_mtp_tensors: "mtp.fc.weight", "mtp.layers.0.*", ...): block
// c.n_layers, llama.cpp's nextn names for the head's own tensors
// ("mtp.fc.weight" -> "blk.{n}.nextn.eh_proj.weight") and the layer map for
// its layer. MTP_CHECK for a name that is not the head's.
std::string gguf_native_mtp_name(const ModelConfig& c, const std::string& hf);

// The pieces of load_gguf another GGUF reader (Gemma 4's assistant) shares;
// the tensors must exist, with the shapes the caller checked.
// - A vector (norm weight, bias) as fp32, as stored (Gemma's 1 + w
//   included), after a finiteness check.
std::vector<float> gguf_vector(const io::GgufFile& f, const std::string& name);
// - One matrix, packed as every GGUF matrix is (float types held as `hold`,
//   block types as stored).
kernels::PackedMatrix gguf_matrix(const io::GgufFile& f, const std::string& name, const Hold& hold);
// - A [rows, cols] token table used in place (a tied head reads it as
//   EmbeddingTable::head says): plain float storage, or rows of ggml blocks
//   (looked up a row at a time), after a finiteness check; ConfigError for a
//   block type mtpspec cannot compute with.
EmbeddingTable gguf_table(const io::GgufFile& f, const std::string& name, size_t rows, size_t cols);
// - Layer i of `c` under blk.{block} (block -1: blk.{i}; a layer reading
//   another's K/V: q only).
LayerWeights load_gguf_layer(const io::GgufFile& f, const ModelConfig& c, int i, const Hold& hold,
                             int block = -1);
// - rope_freqs.weight of a proportional-RoPE family (Gemma 4): the rotated
//   fraction of the full layers' head of width full_head_dim (ConfigError
//   for anything else).
float gguf_rope_partial(const io::GgufFile& f, int full_head_dim);

}  // namespace mtp::model
