// Hugging Face config.json (+ generation_config.json) -> ModelConfig.
//
// Families: LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM,
// Gemma2ForCausalLM, Gemma3ForCausalLM and Gemma3ForConditionalGeneration (the
// multimodal checkpoint; its text model is read from "text_config" and the
// vision tower is ignored). The family is architectures[0], else model_type.
//
// Defaults follow the transformers config classes of each family, because real
// checkpoints rely on them (Gemma 3 multimodal text_configs omit the head
// counts, head_dim and vocab_size). A key that is present but null means None
// in transformers: no softcap, no sliding window, no rope scaling.
// Always required: hidden_size, intermediate_size, num_hidden_layers; also
// num_attention_heads and vocab_size except for Gemma 3.
//
// Anything that would change the computation and that the decoder does not
// implement is a ConfigError naming the key and value (unknown architecture,
// rope_scaling type, activation, attention/mlp biases on Llama, Qwen's
// use_sliding_window, unknown layer_types).
#pragma once
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "model/config.h"

namespace mtp::model {

// `generation_config` may be null (no generation_config.json). `where` names the
// config file in messages. Returns a validated config with source = "hf".
ModelConfig parse_hf_config(const nlohmann::json& config, const nlohmann::json* generation_config,
                            const std::string& where = "config.json");

// Reads dir/config.json and, when present, dir/generation_config.json.
// IoError when config.json is missing; FormatError when either is not JSON.
ModelConfig read_hf_config(const std::string& dir);

}  // namespace mtp::model
