// Gemma 4's MTP assistant (transformers' `gemma4_assistant`: Google's
// published drafters for every Gemma 4 model), loaded from its Hugging Face
// directory next to a Gemma 4 target. docs/FORMATS.md "Gemma 4 assistant"
// lists the config keys and tensors; docs/SEMANTICS.md "Gemma 4's assistant"
// the inputs of every draft step (drafter/assistant_runner.h runs them).
//
// The assistant is a few Gemma 4 decoder layers that compute no K/V: each
// attends with the K/V of the target's last K/V-owning layer of its own kind
// (sliding or full), read in place from the target's cache. Its input is
// pre_projection · [target embedding of a token; a backbone-wide state], its
// state out post_projection · (its final-normed residual), its scores the
// tied head of that residual — over the whole vocabulary, or (the ordered-
// embedding centroid head) over the tokens of the top clusters only.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "drafter/target_record.h"
#include "kernels/matmul.h"
#include "model/config.h"
#include "model/layer_io.h"
#include "model/weights.h"

namespace mtp::drafter {

inline constexpr const char* kAssistantModelType = "gemma4_assistant";
inline constexpr const char* kAssistantGgufArch = "gemma4-assistant";  // llama.cpp's

// The capture an assistant reads (docs/SEMANTICS.md "Gemma 4's assistant"),
// as the files mtpspec writes record it. The K-module drafter's is another
// (drafter.h kCapture: pre-norm); an assistant file recording any other is
// refused.
inline constexpr const char* kAssistantCapture =
    "target hidden after the final norm at the position before the last committed token, "
    "with the K/V of the target's last K/V-owning layer of each attention kind";

// The target an assistant was trained against, as files mtpspec writes
// record it: config.json's object "mtpspec" (transformers keeps unknown
// keys of a config and ignores them), the GGUF's keys "mtpspec.*" (llama.cpp
// ignores keys it does not know). Google's published assistants carry none:
// every field empty.
struct AssistantRecord {
  std::string target_fingerprint;   // model::target_fingerprint of that target
  std::string target_architecture;  // model::arch_name of it
  std::string capture;              // kAssistantCapture
  bool empty() const { return target_fingerprint.empty(); }
  nlohmann::json to_json() const;
};
inline constexpr const char* kAssistantRecordKey = "mtpspec";  // config.json's key, GGUF prefix

// config.json's record (absent: empty). FormatError naming `where` and the
// field for a record that is not an object of strings, lacks the
// fingerprint, or names another capture than kAssistantCapture.
AssistantRecord parse_assistant_record(const nlohmann::json& config, const std::string& where);

struct AssistantConfig {
  int backbone = 0;      // backbone_hidden_size: the target's d_model
  bool ordered = false;  // use_ordered_embeddings: the centroid head
  int centroids = 0;     // num_centroids (ordered)
  int top_k = 0;         // centroid_intermediate_top_k: clusters scored per row (ordered)
  // The assistant's own layers as the block code runs them (model/block.h):
  // d_model = text_config.hidden_size, its heads, norms, RoPE and window
  // from text_config (Gemma4TextConfig's rules); layer l's kind: its sliding
  // flag and head width, the kv heads of the target layer it reads, its MLP
  // width, and kv_source = that TARGET layer (the last K/V-owning target
  // layer of its kind) — a layer index of the target, not of this config.
  model::ModelConfig block;
  int tokens_per_cluster() const { return ordered ? block.vocab / centroids : 0; }
  // The target layer whose K/V the assistant's layers of this kind read.
  int kv_layer(bool sliding) const;
  // Keys a query at position pos (>= 1) attends to in a layer of this kind:
  // positions [lo, pos - 1] — all earlier ones (full), the last window + 1
  // (sliding: lo = max(0, pos - 1 - window)). docs/SEMANTICS.md says why.
  int first_key(bool sliding, int pos) const;
};

// The target layer whose K/V an assistant's layers of a kind read: the last
// layer of that kind owning its K/V (-1: the target has none).
int assistant_kv_owner(const model::ModelConfig& target, bool sliding);

// Whether `path` is a directory whose config.json says model_type
// "gemma4_assistant" (a file, or a folder without it: false). Reads only
// config.json; a config.json that is not JSON is a FormatError.
bool is_assistant_dir(const std::string& path);
// Whether `path` is a GGUF file whose general.architecture is
// "gemma4-assistant" (reads its metadata only; a malformed GGUF throws).
bool is_assistant_gguf(const std::string& path);
// Either of the two.
bool is_assistant(const std::string& path);

// config.json's object -> the assistant's config, checked against `target`:
// ConfigError naming `where`, the field and both values for an assistant
// that does not fit (backbone_hidden_size vs the target's hidden size, the
// vocabulary, a layer kind the target has no K/V owner of, head widths or
// kv heads that differ from those layers', a sliding window wider than the
// target's), a centroid count that does not divide the vocabulary, a top-k
// outside 1..num_centroids, and what the assistant's own text_config may not
// have (per-layer embeddings, MoE, double-wide MLPs, layers that own K/V).
AssistantConfig parse_assistant_config(const nlohmann::json& config,
                                       const model::ModelConfig& target, const std::string& where);

// Every float tensor the config implies, with its shape, by its Hugging Face
// name (Gemma4AssistantForCausalLM's state dict: the text model under
// "model.", the projections and the centroid head beside it; not the
// integer masked_embedding.token_ordering).
model::TensorShapes assistant_tensor_shapes(const AssistantConfig& a);

struct AssistantWeights {
  kernels::PackedMatrix pre_proj;          // [hidden, 2 · backbone]
  kernels::PackedMatrix post_proj;         // [backbone, hidden]
  std::vector<model::LayerWeights> layers;  // wqkv: q only ([H · hd, hidden])
  std::vector<float> final_norm;           // [hidden]
  // The full head: [vocab, hidden] (the tied embedding table, or lm_head).
  // Tied, it reads the table as model::TiedHead::Auto says: in place from
  // the memory map (a view) where the hold keeps its values, else a packed
  // copy. Ordered: empty; the head's rows by cluster instead (copies: rows
  // regrouped by cluster are not the table's layout).
  kernels::PackedMatrix head;
  kernels::PackedMatrix centroids;             // [num_centroids, hidden] (ordered)
  std::vector<int32_t> ordering;               // [vocab] token_ordering (ordered)
  std::vector<kernels::PackedMatrix> clusters;  // [c]: head rows ordering[c·n .. (c+1)·n)
};

class Gemma4Assistant {
 public:
  // dir: config.json + model.safetensors (or shards with their index).
  // Refuses what does not fit `target` (parse_assistant_config), a missing or
  // misshapen tensor (FormatError / ShapeError naming it), non-finite values,
  // and a token_ordering that is not a permutation of the vocabulary
  // (FormatError naming the first repeated or out-of-range id). Matrices are
  // held as `hold` (as stored when empty, model::Hold).
  // A GGUF file (is_assistant_gguf) is read by load_gguf instead.
  // served: the target's fingerprint and mismatch policy; the assistant's
  // record is checked against it (check_drafter_target) unless it has none
  // (record().empty(): accepted, the caller says so). Null: not checked
  // (training starts from any assistant, tests). A tied head reads the token
  // table as `tied` says (model::TiedHead; the target's own rule and default).
  static Gemma4Assistant load(const std::string& dir, const model::ModelConfig& target,
                              const model::Hold& hold = {}, const ServedTarget* served = nullptr,
                              model::TiedHead tied = model::TiedHead::Auto);
  // llama.cpp's gemma4-assistant GGUF (assistant_gguf.cc; docs/FORMATS.md):
  // its metadata read back into the gemma4_assistant config it came from and
  // refused as parse_assistant_config refuses it (the backbone width and the
  // vocabulary named by their GGUF keys), its tensors as load_gguf reads a
  // Gemma 4 target's (any weight type llama.cpp writes that mtpspec
  // computes with). It scores with the full tied head, as llama.cpp does:
  // the converter drops the centroid head (a file carrying
  // masked_embd_centroids / masked_embd_ordering loads; they are not read).
  static Gemma4Assistant load_gguf(const std::string& path, const model::ModelConfig& target,
                                   const model::Hold& hold = {},
                                   const ServedTarget* served = nullptr,
                                   model::TiedHead tied = model::TiedHead::Auto);

  const AssistantConfig& config() const { return cfg_; }
  const AssistantWeights& weights() const { return w_; }
  const std::string& path() const { return path_; }
  const AssistantRecord& record() const { return record_; }
  // Parameters as stored (the head counted once): the E2B assistant's ~78 M.
  int64_t parameters() const { return parameters_; }

 private:
  AssistantConfig cfg_;
  AssistantWeights w_;
  std::string path_;
  AssistantRecord record_;
  int64_t parameters_ = 0;
  // Checks record_ against `served` (when given) for `target`.
  void check_target(const model::ModelConfig& target, const ServedTarget* served) const;
};

}  // namespace mtp::drafter
