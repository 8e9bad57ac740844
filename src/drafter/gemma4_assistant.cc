// Gemma 4's assistant: its config.json against the target, and its tensors.
// Names and defaults as transformers' Gemma4AssistantConfig /
// Gemma4AssistantForCausalLM (read, not copied): docs/FORMATS.md.
#include "drafter/gemma4_assistant.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json.h"
#include "core/mapped_file.h"
#include "io/safetensors.h"
#include "model/hf_config.h"
#include "model/layer_io.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace mtp::drafter {

namespace {

// Gemma4AssistantConfig's defaults (the E2B assistant's values).
constexpr int kDefaultBackbone = 1536;
constexpr int kDefaultCentroids = 2048;
constexpr int kDefaultTopK = 32;

int int_field(const json& j, const char* key, int def, const std::string& where) {
  if (!j.contains(key) || j.at(key).is_null()) return def;
  return json_as<int>(j.at(key), key, where);
}

bool bool_field(const json& j, const char* key, bool def, const std::string& where) {
  if (!j.contains(key) || j.at(key).is_null()) return def;
  return json_as<bool>(j.at(key), key, where);
}

// What transformers' validate_architecture refuses in an assistant's
// text_config (Gemma4AssistantConfig), and K/V-owning layers.
void refuse_text_config(const json& t, const std::string& where) {
  auto must_be = [&](const char* key, int def, int want) {
    const int v = int_field(t, key, def, where);
    if (v != want) {
      fail<ConfigError>("{}: '{}' is {}; an assistant's must be {}{}", where, key, v, want,
                        def != want && !t.contains(key) ? " (absent: transformers' default)" : "");
    }
  };
  must_be("hidden_size_per_layer_input", 256, 0);
  must_be("vocab_size_per_layer_input", 262144, 0);
  if (bool_field(t, "enable_moe_block", false, where)) {
    fail<ConfigError>("{}: 'enable_moe_block' is true; an assistant has no MoE blocks", where);
  }
  if (bool_field(t, "use_double_wide_mlp", false, where)) {
    fail<ConfigError>("{}: 'use_double_wide_mlp' is true; an assistant's must be false", where);
  }
  const int layers = int_field(t, "num_hidden_layers", 0, where);
  const int shared = int_field(t, "num_kv_shared_layers", 0, where);
  if (shared != 0 && shared != layers) {
    fail<ConfigError>("{}: 'num_kv_shared_layers' is {}; every layer of an assistant reads the "
                      "target's K/V, so it must be num_hidden_layers ({}) or 0", where, shared,
                      layers);
  }
}

// Each layer of the assistant onto the target layer it reads, refusing a
// kind the target has no owner of or whose head width or kv heads differ.
void bind_to_target(model::ModelConfig& b, const model::ModelConfig& target,
                    const std::string& where) {
  for (int l = 0; l < b.n_layers; ++l) {
    model::LayerKind& k = b.layers[size_t(l)];
    const char* kind = k.sliding ? "sliding_attention" : "full_attention";
    const int o = assistant_kv_owner(target, k.sliding);
    if (o < 0) {
      fail<ConfigError>("{}: layer {} is {}, but the target has no {} layer whose K/V it could "
                        "read", where, l, kind, kind);
    }
    const model::LayerKind t = target.layer_kind(o);
    if (k.head_dim != t.head_dim) {
      fail<ConfigError>("{}: '{}' is {}, but the target's {} layer {} (whose K/V layer {} reads) "
                        "has head width {}", where, k.sliding ? "head_dim" : "global_head_dim",
                        k.head_dim, kind, o, l, t.head_dim);
    }
    if (k.n_kv_heads != t.n_kv_heads) {
      fail<ConfigError>("{}: {} gives {} kv heads for {} layers, but the target's layer {} has {}",
                        where, k.sliding || !k.k_eq_v ? "'num_key_value_heads'"
                                                      : "'num_global_key_value_heads'",
                        k.n_kv_heads, kind, o, t.n_kv_heads);
    }
    if (b.n_heads % t.n_kv_heads != 0) {
      fail<ConfigError>("{}: num_attention_heads {} is not a multiple of the {} kv heads of the "
                        "target's layer {}", where, b.n_heads, t.n_kv_heads, o);
    }
    k.kv_source = o;
    k.k_eq_v = false;
    if (k.sliding && b.sliding_window > target.sliding_window) {
      fail<ConfigError>("{}: 'sliding_window' is {}, wider than the target's {} (its sliding "
                        "layers keep no older K/V)", where, b.sliding_window,
                        target.sliding_window);
    }
  }
}

}  // namespace

int assistant_kv_owner(const model::ModelConfig& target, bool sliding) {
  for (int l = target.n_layers - 1; l >= 0; --l) {
    const model::LayerKind k = target.layer_kind(l);
    if (k.owns_kv() && k.sliding == sliding) return l;
  }
  return -1;
}

int AssistantConfig::kv_layer(bool sliding) const {
  for (const model::LayerKind& k : block.layers) {
    if (k.sliding == sliding) return k.kv_source;
  }
  return -1;
}

int AssistantConfig::first_key(bool sliding, int pos) const {
  return sliding ? std::max(0, pos - 1 - block.sliding_window) : 0;
}

bool is_assistant_dir(const std::string& path) {
  std::error_code ec;
  const fs::path cfg = fs::path(path) / "config.json";
  if (!fs::is_directory(path, ec) || !fs::exists(cfg, ec)) return false;
  const json j = parse_json(read_file(cfg.string()), "'" + cfg.string() + "'");
  return j.is_object() && j.contains("model_type") && j.at("model_type") == kAssistantModelType;
}

AssistantConfig parse_assistant_config(const json& config, const model::ModelConfig& target,
                                       const std::string& where) {
  if (!config.is_object()) fail<ConfigError>("{}: not a JSON object", where);
  const std::string type = config.contains("model_type") && config.at("model_type").is_string()
                               ? config.at("model_type").get<std::string>() : "";
  if (type != kAssistantModelType) {
    fail<ConfigError>("{}: model_type is '{}', not '{}'", where, type, kAssistantModelType);
  }
  if (target.arch != model::Arch::Gemma4) {
    fail<ConfigError>("{}: a Gemma 4 assistant drafts for Gemma 4 targets; this target is {}",
                      where, model::arch_name(target.arch));
  }
  AssistantConfig a;
  a.backbone = int_field(config, "backbone_hidden_size", kDefaultBackbone, where);
  if (a.backbone != target.d_model) {
    fail<ConfigError>("{}: backbone_hidden_size is {}, but the target's hidden size is {}", where,
                      a.backbone, target.d_model);
  }
  a.ordered = bool_field(config, "use_ordered_embeddings", false, where);
  a.centroids = int_field(config, "num_centroids", kDefaultCentroids, where);
  a.top_k = int_field(config, "centroid_intermediate_top_k", kDefaultTopK, where);
  if (!config.contains("text_config") || !config.at("text_config").is_object()) {
    fail<ConfigError>("{}: missing object 'text_config' (the assistant's Gemma 4 layers)", where);
  }
  const std::string tw = where + " text_config";
  json text = config.at("text_config");
  refuse_text_config(text, tw);
  // Its layers as a Gemma 4 text model whose layers own their K/V (the
  // parser's rules for sizes, RoPE, layer kinds); then bound to the target.
  text.erase("architectures");
  text["model_type"] = "gemma4_text";
  text["num_kv_shared_layers"] = 0;
  text["hidden_size_per_layer_input"] = 0;
  if (config.contains("tie_word_embeddings")) text["tie_word_embeddings"] = config["tie_word_embeddings"];
  a.block = model::parse_hf_config(text, nullptr, tw);
  a.block.final_softcap = 0;  // the assistant's head applies none
  if (a.block.vocab != target.vocab) {
    fail<ConfigError>("{}: vocab_size is {}, but the target's vocabulary is {}", tw,
                      a.block.vocab, target.vocab);
  }
  bind_to_target(a.block, target, tw);
  if (a.ordered) {
    if (a.centroids < 1 || a.block.vocab % a.centroids != 0) {
      fail<ConfigError>("{}: num_centroids {} does not divide the vocabulary of {}", where,
                        a.centroids, a.block.vocab);
    }
    if (a.top_k < 1 || a.top_k > a.centroids) {
      fail<ConfigError>("{}: centroid_intermediate_top_k is {}; it must be in 1..num_centroids "
                        "({})", where, a.top_k, a.centroids);
    }
  }
  return a;
}

nlohmann::json AssistantRecord::to_json() const {
  return {{"target_fingerprint", target_fingerprint},
          {"target_architecture", target_architecture},
          {"capture", capture}};
}

AssistantRecord parse_assistant_record(const json& config, const std::string& where) {
  AssistantRecord r;
  if (!config.is_object() || !config.contains(kAssistantRecordKey)) return r;
  const std::string w = where + " '" + kAssistantRecordKey + "'";
  const json& j = config.at(kAssistantRecordKey);
  if (!j.is_object()) fail<FormatError>("{}: not a JSON object", w);
  r.target_fingerprint = json_get<std::string>(j, "target_fingerprint", w);
  r.target_architecture =
      j.contains("target_architecture") ? json_get<std::string>(j, "target_architecture", w) : "";
  r.capture = json_get<std::string>(j, "capture", w);
  if (r.target_fingerprint.empty()) fail<FormatError>("{}: target_fingerprint is empty", w);
  if (r.capture != kAssistantCapture) {
    fail<FormatError>("{}: capture is '{}'; an assistant reads '{}'", w, r.capture,
                      kAssistantCapture);
  }
  return r;
}

void Gemma4Assistant::check_target(const model::ModelConfig& target,
                                   const ServedTarget* served) const {
  if (served && !record_.empty()) {
    check_drafter_target(path_, record_.target_fingerprint, record_.target_architecture, target,
                         *served);
  }
}

model::TensorShapes assistant_tensor_shapes(const AssistantConfig& a) {
  const model::ModelConfig& b = a.block;
  const int64_t h = b.d_model, V = b.vocab, B = a.backbone;
  model::TensorShapes t;
  t.push_back({"model.embed_tokens.weight", {V, h}});
  for (int i = 0; i < b.n_layers; ++i) {
    for (auto& x : model::layer_tensor_shapes(b, "model.layers." + std::to_string(i) + ".", i)) {
      t.push_back(std::move(x));
    }
  }
  t.push_back({"model.norm.weight", {h}});
  if (!b.tie_embeddings) t.push_back({"lm_head.weight", {V, h}});
  t.push_back({"pre_projection.weight", {h, 2 * B}});
  t.push_back({"post_projection.weight", {B, h}});
  if (a.ordered) t.push_back({"masked_embedding.centroids.weight", {a.centroids, h}});
  return t;
}

namespace {

constexpr const char* kOrdering = "masked_embedding.token_ordering";

// The K/V projections and norms a shared layer has no use for (transformers
// ignores them on load too), and RoPE caches.
bool ignorable(const std::string& name) {
  if (name.ends_with(".rotary_emb.inv_freq")) return true;
  if (!name.starts_with("model.layers.")) return false;
  for (const char* w : {".self_attn.k_proj.", ".self_attn.v_proj.", ".self_attn.k_norm.",
                        ".self_attn.v_norm."}) {
    if (name.find(w) != std::string::npos) return true;
  }
  return false;
}

// token_ordering as ids, refused unless it is a permutation of [0, V).
std::vector<int32_t> read_ordering(const io::TensorSet& ts, int V) {
  const io::TensorView& v = ts.get(kOrdering);
  if ((v.dtype != DType::I64 && v.dtype != DType::I32) || v.shape != std::vector<int64_t>{V}) {
    fail<ShapeError>("tensor '{}' in '{}' is {} {}; it must be I64 (or I32) [{}]", kOrdering,
                     ts.file_of(kOrdering), dtype_name(v.dtype), model::shape_str(v.shape), V);
  }
  std::vector<int32_t> ids(static_cast<size_t>(V));
  std::vector<uint8_t> seen(static_cast<size_t>(V), 0);
  for (size_t i = 0; i < size_t(V); ++i) {
    int64_t x;
    if (v.dtype == DType::I64) {
      std::memcpy(&x, static_cast<const uint8_t*>(v.data) + i * 8, 8);
    } else {
      int32_t y;
      std::memcpy(&y, static_cast<const uint8_t*>(v.data) + i * 4, 4);
      x = y;
    }
    if (x < 0 || x >= V || seen[size_t(x)]) {
      fail<FormatError>("tensor '{}' in '{}' is not a permutation of the vocabulary [0, {}): "
                        "entry {} is {}{}", kOrdering, ts.file_of(kOrdering), V, i, x,
                        x >= 0 && x < V ? ", which an earlier entry holds" : "");
    }
    seen[size_t(x)] = 1;
    ids[i] = int32_t(x);
  }
  return ids;
}

// The head's rows of each cluster, c: ordering[c·n .. (c+1)·n), packed as
// one matrix each (the same hold and width as the whole head, so each
// logit is the whole head's bits for that row: kernels/matmul.h).
std::vector<kernels::PackedMatrix> cluster_heads(const io::TensorView& head,
                                                 const AssistantConfig& a,
                                                 const std::vector<int32_t>& ordering,
                                                 const model::Hold& hold) {
  const size_t n = size_t(a.tokens_per_cluster()), h = size_t(a.block.d_model);
  const size_t es = dtype_size(head.dtype), row = h * es;
  std::vector<kernels::PackedMatrix> out(size_t(a.centroids));
  model::run_load_tasks(out.size(), [&](size_t c) {
    std::vector<uint8_t> buf(n * row);
    for (size_t j = 0; j < n; ++j) {
      const size_t id = size_t(ordering[c * n + j]);
      std::memcpy(buf.data() + j * row, static_cast<const uint8_t*>(head.data) + id * row, row);
    }
    out[c] = model::pack_float_matrix(buf.data(), head.dtype, n, h, hold,
                                      "tensor '" + head.name + "' (cluster " + std::to_string(c) + ")");
  });
  return out;
}

}  // namespace

Gemma4Assistant Gemma4Assistant::load(const std::string& dir, const model::ModelConfig& target,
                                      const model::Hold& hold, const ServedTarget* served,
                                      model::TiedHead tied) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec) && is_assistant_gguf(dir)) {
    return load_gguf(dir, target, hold, served, tied);
  }
  const std::string cfg_path = (fs::path(dir) / "config.json").string();
  if (!fs::exists(cfg_path)) fail<IoError>("no config.json in '{}'", dir);
  Gemma4Assistant a;
  a.path_ = dir;
  const json config = parse_json(read_file(cfg_path), "'" + cfg_path + "'");
  a.cfg_ = parse_assistant_config(config, target, cfg_path);
  a.record_ = parse_assistant_record(config, cfg_path);
  a.check_target(target, served);
  const AssistantConfig& c = a.cfg_;
  const io::TensorSet ts = io::TensorSet::open_dir(dir);
  const model::TensorShapes expected = assistant_tensor_shapes(c);
  model::check_tensor_shapes(ts, expected, "the assistant's config.json");
  for (const std::string& name : ts.names()) {
    const bool known = name == kOrdering ? c.ordered
                       : std::any_of(expected.begin(), expected.end(),
                                     [&](const auto& e) { return e.first == name; });
    if (!known && !ignorable(name)) {
      fail<FormatError>("tensor '{}' in '{}' is not part of this assistant (config.json: "
                        "use_ordered_embeddings {}, tie_word_embeddings {}); nothing would read it",
                        name, ts.file_of(name), c.ordered, c.block.tie_embeddings);
    }
    if (known || name == kOrdering) a.parameters_ += int64_t(ts.get(name).numel());
  }
  if (c.ordered && !ts.contains(kOrdering)) {
    fail<FormatError>("tensor '{}' not found in '{}' (use_ordered_embeddings is true)", kOrdering,
                      ts.source());
  }
  AssistantWeights& w = a.w_;
  w.layers.resize(size_t(c.block.n_layers));
  model::run_load_tasks(w.layers.size(), [&](size_t i) {
    w.layers[i] = model::load_layer(ts, c.block, "model.layers." + std::to_string(i) + ".", hold,
                                    nullptr, int(i));
  });
  w.final_norm = model::load_norm(ts, "model.norm.weight", c.block.norm_one_plus);
  w.pre_proj = model::load_matrix(ts, {"pre_projection.weight"}, hold);
  w.post_proj = model::load_matrix(ts, {"post_projection.weight"}, hold);
  const std::string head = c.block.tie_embeddings ? "model.embed_tokens.weight" : "lm_head.weight";
  const io::TensorView& hv = model::finite_tensor(ts, head);
  if (c.ordered) {
    w.centroids = model::load_matrix(ts, {"masked_embedding.centroids.weight"}, hold);
    w.ordering = read_ordering(ts, c.block.vocab);
    w.clusters = cluster_heads(hv, c, w.ordering, hold);
  } else if (c.block.tie_embeddings) {
    // The tied head reads the table as the target's does (`tied`).
    const model::EmbeddingTable table{hv.data, hv.dtype, size_t(c.block.vocab),
                                      size_t(c.block.d_model), GgmlType::F32, ts.keep_alive()};
    w.head = table.head(hold, tied, "tensor '" + head + "' (the tied head)");
  } else {
    w.head = model::load_matrix(ts, {head}, hold);
  }
  return a;
}

}  // namespace mtp::drafter
