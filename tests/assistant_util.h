// Random Gemma 4 assistants for the random Gemma 4 targets of
// checkpoint_util.h, written as transformers writes Google's: a folder with
// config.json (Gemma4AssistantConfig's keys, the layers under text_config as
// a gemma4_text config) and model.safetensors with
// Gemma4AssistantForCausalLM's tensor names. Values by name as
// checkpoint_util.h's (random_tensor_values), token_ordering a seeded
// permutation of the vocabulary.
#pragma once
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "checkpoint_util.h"

namespace mtp::test {

struct AssistantSpec {
  int hidden = 32, n_heads = 4, ffn = 48;
  // Gemma4TextConfig forces the last layer to full attention.
  std::vector<std::string> layer_types = {"sliding_attention", "sliding_attention",
                                          "full_attention"};
  int sliding_window = 0;  // 0: the target's
  bool ordered = false;    // use_ordered_embeddings: the centroid head
  int centroids = 4, top_k = 2;
  bool tie = true;
  DType dtype = DType::F32;
  uint64_t seed = 11;
  // token_ordering as stored (I64); empty: a permutation seeded by `seed`.
  std::vector<int64_t> ordering;
  // RFC 7396 merge patch applied to config.json last (text_config inside).
  nlohmann::json config_patch;
  // As RandomSpec::edit; an empty shape drops the tensor.
  std::function<void(const std::string& name, std::vector<int64_t>& shape,
                     std::vector<float>& values)> edit;
  std::vector<std::pair<std::string, std::vector<int64_t>>> extra_tensors;
};

// config.json of the assistant `a` drafting for `target`.
nlohmann::json assistant_config_json(const RandomSpec& target, const AssistantSpec& a);
void write_random_assistant(const std::string& dir, const RandomSpec& target,
                            const AssistantSpec& a);
// A fresh temp folder (removed at exit) holding it.
std::string random_assistant(const std::string& tag, const RandomSpec& target,
                             const AssistantSpec& a);

// A small Gemma 4 target for assistants: the random Gemma 4 of
// checkpoint_util.h (both layer kinds, shared layers, per-layer
// embeddings), with `vocab` tokens and no EOS (nothing stops generation).
RandomSpec assistant_target_spec(int vocab = 384);

}  // namespace mtp::test
