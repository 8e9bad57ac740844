// GGUF files for tests, written with io::write_gguf: a Hugging Face checkpoint
// converted the way llama.cpp's convert_hf_to_gguf.py does it (so the
// loader's inverse of each convention is what the tests check), and a tiny
// SentencePiece-style vocabulary to make the file self-contained.
//
// Conventions applied (as the Feb 2025 converter, read not copied):
// - names: model.embed_tokens -> token_embd, model.norm -> output_norm,
//   lm_head -> output (dropped when tied), layers -> blk.N.* (gguf-py's map);
// - Llama: q_proj / k_proj rows permuted per head for llama.cpp's
//   interleaved RoPE (LlamaModel.permute); rope_scaling llama3 written as the
//   rope_freqs.weight factors (original context from the top-level
//   original_max_position_embeddings, default 8192, as the converter reads it);
// - Gemma: every *norm.weight stored as 1 + w, computed in fp32 (in fp16,
//   rounded, when the checkpoint is F16: torch adds in the tensor's dtype);
// - 1-D tensors and norms F32; matrices in the requested type (F32/F16/BF16,
//   from fp32 with round-to-nearest-even);
// - dims reversed (ggml order).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "io/gguf.h"
#include "model/config.h"

namespace mtp::test {

struct GgufConvert {
  uint32_t matrix_type = 0;      // ggml id of the matrices: 0 F32, 1 F16, 30 BF16, or a
                                 // block type (Q8_0 ... Q6_K: rows quantized with
                                 // kernels::quantize_row, mtpspec's own quantizer)
  // Per-tensor override of the type by GGUF name (-1 = matrix_type); vectors
  // and norms stay F32 whatever it says.
  std::function<int(const std::string& gguf_name)> type_of;
  bool with_tokenizer = true;    // add a byte-fallback "llama" vocabulary of vocab tokens
  uint32_t alignment = 0;        // 0 = default (no general.alignment key)
  uint32_t version = 3;
  // Last look at the file before it is written (tests of the reader).
  std::function<void(io::GgufMetadata&, std::vector<io::GgufWriteTensor>&)> edit;
};

// Converts the Hugging Face folder `hf_dir` into the GGUF file `out`.
void convert_hf_to_gguf(const std::string& hf_dir, const std::string& out, const GgufConvert& opt);

// Converts the gemma4_assistant folder `hf_dir` (tied head) into llama.cpp's
// gemma4-assistant GGUF `out`, as Gemma4AssistantModel does: Gemma 4's keys
// under "gemma4-assistant.", embedding_length_out = backbone_hidden_size,
// nextn_predict_layers = block_count, the projections as
// nextn.{pre,post}_projection.weight, the centroid head dropped.
void convert_assistant_to_gguf(const std::string& hf_dir, const std::string& out,
                               const GgufConvert& opt);

// The GGUF name convert_hf_to_gguf gives the Hugging Face tensor `hf` of a
// checkpoint whose config is c (Qwen3.5's mtp.* included).
std::string hf_to_gguf_name(const model::ModelConfig& c, const std::string& hf);

// A SentencePiece-style vocabulary of `n` tokens (>= 259): <unk>, <s>, </s>,
// the 256 byte pieces <0x00>..<0xFF>, then normal pieces "▁a", "b", ...
// with descending scores, as tokenizer.ggml.* metadata (model "llama").
void add_test_vocab(io::GgufMetadata& kv, int n);

}  // namespace mtp::test
