// The Qwen3.5 parts of the random checkpoint writer (checkpoint_util.cc).
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint_util.h"

namespace mtp::test {

// Qwen3_5ForCausalLM's config keys into c (the common keys already there).
void qwen35_config(const RandomSpec& s, nlohmann::json& c);
// Qwen3_5ForConditionalGeneration's config around the text config c: c under
// text_config (s.config_patch applied), the vision tower's config, the tie flag.
nlohmann::json qwen35_nested_config(const RandomSpec& s, const nlohmann::json& c);
// One layer's tensors below prefix p: a Gated DeltaNet layer (linear) or a
// gated full-attention layer, then the MLP.
void qwen35_layer_tensors(const RandomSpec& s, const std::string& p, bool linear,
                          std::vector<std::pair<std::string, std::vector<int64_t>>>& spec);

}  // namespace mtp::test
