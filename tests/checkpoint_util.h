// Small, randomly initialised Hugging Face checkpoints for tests.
//
// write_random_hf_checkpoint writes a folder that load_hf parses exactly like a
// real checkpoint of that family: config.json in the family's own format (the
// keys and nulls transformers writes), generation_config.json, and
// model.safetensors or model-0000i-of-0000N.safetensors + index.json.
//
// Values: every tensor's values depend only on (seed, tensor name below the
// language model's prefix), never on the shard count, the multimodal layout
// or the stored dtype (the dtype only rounds them), so two checkpoints that
// differ only in sharding or layout hold identical weights. Scales keep
// activations O(1): matrices N(0, 1) · 0.5/√cols (≈0.02–0.1 for these sizes),
// embeddings N(0, 1) · 0.1, norm weights 1 + 0.1·N (Gemma stores w for its
// 1 + w: 0.1·N), biases 0.02·N.
#pragma once
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "model/config.h"

namespace mtp::test {

struct RandomSpec {
  model::Arch arch = model::Arch::Llama;
  int d_model = 64, n_layers = 2, n_heads = 4, n_kv_heads = 2, head_dim = 16;
  int ffn = 96, vocab = 320, max_position = 512;
  int sliding_window = 0;          // Gemma: window of the sliding layers
  int sliding_pattern = 6;         // Gemma 3: sliding_window_pattern
  float query_pre_attn_scalar = 0; // Gemma: 0 = head_dim
  float rope_theta = 10000.f;
  bool tie = false;                // tie_word_embeddings
  // Special tokens; ids at or beyond the vocabulary are left out (null).
  int32_t bos_id = 1;
  std::vector<int32_t> eos_ids = {2};      // config.json eos_token_id (int if one, null if none)
  std::vector<int32_t> gen_eos_ids;        // generation_config.json (empty = same as eos_ids)
  DType dtype = DType::F32;        // stored dtype: F32, BF16 or F16
  uint64_t seed = 1;
  int shards = 1;                  // 1 = model.safetensors; N = N shards + index.json
  // Gemma 3/4: write the multimodal checkpoint (Gemma3/4ForConditionalGeneration:
  // text model under text_config, tiny tower tensors beside it).
  bool nested_text_config = false;
  // Gemma 4 (Gemma4TextConfig keys): layer_types ("" = the family's 5:1
  // pattern), global layers' head_dim and kv heads (0 = head_dim / kv heads),
  // attention_k_eq_v, num_kv_shared_layers, use_double_wide_mlp,
  // hidden_size_per_layer_input (0 = none), the full layers' partial rotary
  // factor, the final soft-cap (0 = null).
  std::vector<std::string> layer_types;
  int global_head_dim = 0, n_global_kv_heads = 0;
  bool k_eq_v = false;
  int kv_shared = 0;
  bool double_wide = false;
  int ple_dim = 0;
  float partial_rotary = 0.25f;
  float final_softcap = 0.f;
  // Qwen3.5 (Qwen3_5TextConfig keys): layer_types of linear_attention /
  // full_attention ("" = every full_attention_interval-th full), the Gated
  // DeltaNet shape, the native MTP head (mtp.* tensors, mtp_num_hidden_layers
  // 1). The nested layout is Qwen3_5ForConditionalGeneration's.
  int full_attention_interval = 4;
  int conv_kernel = 4, lin_k_heads = 2, lin_v_heads = 4, lin_k_dim = 8, lin_v_dim = 8;
  bool mtp = false;
  // Prefix of the language model's tensors; "" = "model." (text-only) or
  // "language_model.model." (nested). "model.language_model." is the newer
  // multimodal layout.
  std::string weight_prefix;
  // RFC 7396 merge patch applied to the (text) config object last: a null
  // value deletes a key. For testing config handling.
  nlohmann::json config_patch;
  // Called for each tensor before it is stored (values are fp32); may change
  // values and shape (keep values.size() == product(shape)). An empty shape
  // drops the tensor.
  std::function<void(const std::string& name, std::vector<int64_t>& shape,
                     std::vector<float>& values)> edit;
  // Extra random tensors (name, shape) written beside the model's.
  std::vector<std::pair<std::string, std::vector<int64_t>>> extra_tensors;

  // Realistic small defaults per family (head_dim · heads ≠ d for Qwen3 and
  // Gemma, KV grouping, Gemma's sliding windows and softcaps, Qwen's tied
  // embeddings, Gemma 3 with 6 layers so the pattern has a global layer).
  static RandomSpec for_arch(model::Arch a);
};

// Writes the checkpoint into `dir` (created if needed; existing files replaced).
void write_random_hf_checkpoint(const std::string& dir, const RandomSpec& spec);

// A fresh temp folder (removed at exit) holding a checkpoint; returns its path.
std::string random_hf_checkpoint(const std::string& tag, const RandomSpec& spec);

// The config.json object the writer would produce for `spec` (before writing).
nlohmann::json hf_config_json(const RandomSpec& spec);

// A Gemma 4 layer as the spec's config.json describes it (Gemma4TextConfig's
// rules, written here for the test checkpoints).
struct Gemma4Layer {
  bool full = false, shared = false, k_eq_v = false;
  int head_dim = 0, kv_heads = 0, ffn = 0;
};
std::vector<Gemma4Layer> gemma4_layers(const RandomSpec& s);

// The values write_random_hf_checkpoint gives tensor `name` of `shape` for
// `spec` (by role and name, see above), and their bytes stored as `dtype`
// (F32, BF16 or F16): for writers of other random checkpoints (Gemma 4's
// assistant, assistant_util.h).
std::vector<float> random_tensor_values(const RandomSpec& spec, const std::string& name,
                                        const std::vector<int64_t>& shape);
std::vector<uint8_t> stored_bytes(const std::vector<float>& values, DType dtype);

// Qwen3.5: whether layer i is a Gated DeltaNet (linear_attention) layer.
bool qwen35_linear(const RandomSpec& s, int i);

// Every architecture of the family table (model/family.h), in table order.
std::vector<model::Arch> every_arch();

// Each layer's sliding flag (empty when the config has no layer kinds).
std::vector<uint8_t> sliding_of(const model::ModelConfig& c);

}  // namespace mtp::test
