// A Gemma 4 assistant trained from scratch (no initial directory): its
// config for a target and its initial weights. docs/TRAINING.md "Gemma 4's
// assistant" says how the shape is chosen.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "model/config.h"

namespace mtp::train {

// The assistant's shape. 0 = Google's E2B assistant scaled to the target
// (docs/FORMATS.md "Gemma 4 assistant": h = 256 beside a 1536-wide target,
// 4 layers, 4 query heads, MLP 8·h): hidden = d_model / 6 rounded up to a
// multiple of 16 (at least 32), heads = 4 rounded up to a multiple of the
// kv heads of the target layers it reads, ffn = 8 · hidden. The last layer
// is full attention, the others sliding (all full when the target has no
// sliding layer of its own K/V). The head is the full tied head: a centroid
// head comes only from an initial directory (train/assistant_train.h says
// why).
struct AssistantShape {
  int hidden = 0, layers = 4, heads = 0, ffn = 0;
};

// gemma4_assistant's config.json for `target` (a Gemma 4 model config):
// every attention shape bound to the target layers the assistant reads
// (head widths, kv heads, RoPE, window), the rest from `s`. ConfigError for
// a non-Gemma 4 target or a shape out of range (naming the setting and
// value); the result is checked by drafter::parse_assistant_config.
nlohmann::json scratch_assistant_config(const model::ModelConfig& target, const AssistantShape& s);

}  // namespace mtp::train
