// Gemma 4's assistant written as llama.cpp's gemma4-assistant GGUF, as its
// converter (convert_hf_to_gguf.py's Gemma4AssistantModel) writes one from a
// gemma4_assistant directory: docs/FORMATS.md "Gemma 4 assistant". Reading
// is Gemma4Assistant::load_gguf (assistant_gguf.cc).
#pragma once
#include <string>

namespace mtp::drafter {

// The gemma4_assistant directory `dir` (config.json + model.safetensors, a
// tied head) -> the GGUF file `out`: Gemma 4's keys under gemma4-assistant.,
// embedding_length_out = backbone_hidden_size, nextn_predict_layers =
// block_count, rope_freqs.weight for the full layers' proportional RoPE,
// matrices in their stored float type, norms and vectors F32; the centroid
// head is dropped, as llama.cpp's converter drops it (llama.cpp scores with
// the full head). ConfigError for an untied head (llama.cpp has none).
void write_assistant_gguf(const std::string& dir, const std::string& out);

}  // namespace mtp::drafter
