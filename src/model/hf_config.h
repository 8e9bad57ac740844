// Hugging Face config.json (+ generation_config.json) -> ModelConfig.
//
// Families: the family table's (model/family.h): Llama, Qwen2, Qwen3, Gemma 2,
// Gemma 3 and Gemma 4 (with their multimodal checkpoints, whose text model
// is read from "text_config"; the towers are ignored), Mistral. The family is
// architectures[0] (a list, or one class name as a string), else model_type.
//
// Defaults follow the transformers config classes of each family (the
// table's), because real checkpoints rely on them (Gemma 3 multimodal
// text_configs omit the head counts, head_dim and vocab_size). A key that is
// present but null means None in transformers: no softcap, no sliding
// window, no rope scaling. Always required: hidden_size, intermediate_size,
// num_hidden_layers; also num_attention_heads and vocab_size except where
// the family has defaults.
//
// Anything that would change the computation and that the decoder does not
// implement is a ConfigError naming the key and value (unknown architecture,
// rope_scaling type, activation, attention/mlp biases on Llama, Qwen's
// use_sliding_window, unknown layer_types, mixture-of-experts blocks); so is
// an EOS or BOS id outside the vocabulary.
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
