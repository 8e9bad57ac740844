// Gemma 4's assistant as llama.cpp's `gemma4-assistant` GGUF
// (convert_hf_to_gguf.py's Gemma4AssistantModel, src/models/gemma4-assistant.cpp;
// read, not copied): docs/FORMATS.md "Gemma 4 assistant". The metadata is
// read back into the gemma4_assistant config it was converted from, so the
// one parse_assistant_config decides what fits the target; the tensors are
// read as load_gguf reads a Gemma 4 target's.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/ggml_type.h"
#include "core/json.h"
#include "core/mapped_file.h"
#include "drafter/assistant_gguf.h"
#include "drafter/gemma4_assistant.h"
#include "io/gguf.h"
#include "model/layer_io.h"
#include "model/hf_config.h"
#include "model/loader.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace mtp::drafter {

namespace {

constexpr const char* kPre = "nextn.pre_projection.weight";
constexpr const char* kPost = "nextn.post_projection.weight";
// The centroid head's tensors: llama.cpp's converter drops them and its
// graph never reads them (it scores with the full tied head), so a file
// carrying them drafts with the full head here too.
constexpr const char* kCentroids = "masked_embd_centroids.weight";
constexpr const char* kOrderingGguf = "masked_embd_ordering";

struct Meta {
  const io::GgufFile& f;
  std::string key(const char* k) const { return std::string(kAssistantGgufArch) + "." + k; }
  int64_t req(const char* k) const {
    auto v = f.get_int(key(k));
    if (!v) fail<ConfigError>("GGUF file '{}': missing required key '{}'", f.path(), key(k));
    if (*v < 0 || *v > (1 << 24)) {
      fail<ConfigError>("GGUF file '{}': '{}' = {} is out of range", f.path(), key(k), *v);
    }
    return *v;
  }
  // A value for every layer: one for all, or an array of n (bools as 0/1).
  std::vector<int64_t> per_layer(const char* k, int n) const {
    const io::GgufValue* v = f.find(key(k));
    if (!v) fail<ConfigError>("GGUF file '{}': missing required key '{}'", f.path(), key(k));
    if (v->type != io::GgufType::Array) return std::vector<int64_t>(size_t(n), req(k));
    if (int64_t(v->arr.size()) != n) {
      fail<ConfigError>("GGUF file '{}': '{}' lists {} values for {} = {} layers", f.path(),
                        key(k), v->arr.size(), key("block_count"), n);
    }
    std::vector<int64_t> out;
    for (const io::GgufValue& x : v->arr) {
      const bool ok = x.type == io::GgufType::Bool || x.is_integer();
      const int64_t i = x.type == io::GgufType::Bool ? int64_t(x.u)
                        : x.type == io::GgufType::I8 || x.type == io::GgufType::I16 ||
                                x.type == io::GgufType::I32 || x.type == io::GgufType::I64
                            ? x.i
                            : int64_t(x.u);
      if (!ok || i < 0 || i > (1 << 24)) {
        fail<ConfigError>("GGUF file '{}': '{}' holds {} (an integer >= 0 per layer)", f.path(),
                          key(k), x.describe());
      }
      out.push_back(i);
    }
    return out;
  }
  // The value of layers of one kind (ConfigError if they differ).
  int64_t of_kind(const std::vector<int64_t>& v, const std::vector<int64_t>& swa, bool sliding,
                  const char* k) const {
    int64_t got = -1;
    for (size_t l = 0; l < v.size(); ++l) {
      if ((swa[l] != 0) != sliding) continue;
      if (got >= 0 && v[l] != got) {
        fail<ConfigError>("GGUF file '{}': '{}' differs between the assistant's {} layers ({} "
                          "and {}); its layers of one kind are alike", f.path(), key(k),
                          sliding ? "sliding" : "full", got, v[l]);
      }
      got = v[l];
    }
    return got;
  }
};

// The file's metadata as the gemma4_assistant config.json it was converted
// from (Gemma4Model.set_gguf_parameters' keys, embedding_length_out the
// backbone), after the two checks that name GGUF keys: the backbone and the
// vocabulary against the target.
json gguf_config_json(const io::GgufFile& f, const model::ModelConfig& target) {
  const Meta m{f};
  const int n = int(m.req("block_count"));
  if (n < 1) fail<ConfigError>("GGUF file '{}': '{}' is 0", f.path(), m.key("block_count"));
  const int64_t backbone = m.req("embedding_length_out");
  if (backbone != target.d_model) {
    fail<ConfigError>("GGUF file '{}': '{}' (the backbone hidden size) is {}, but the target's "
                      "hidden size is {}", f.path(), m.key("embedding_length_out"), backbone,
                      target.d_model);
  }
  const io::GgufTensor* embd = f.tensor("token_embd.weight");
  if (!embd || embd->dims.size() != 2) {
    fail<FormatError>("GGUF file '{}' has no 2-D token_embd.weight", f.path());
  }
  if (embd->dims[1] != target.vocab) {
    fail<ConfigError>("GGUF file '{}': token_embd.weight has {} rows (its vocabulary), but the "
                      "target's vocabulary is {}", f.path(), embd->dims[1], target.vocab);
  }
  if (auto p = f.get_int(m.key("nextn_predict_layers")); p && *p != n) {
    fail<ConfigError>("GGUF file '{}': '{}' is {}; an assistant's is its {} = {}", f.path(),
                      m.key("nextn_predict_layers"), *p, m.key("block_count"), n);
  }
  const std::vector<int64_t> swa = m.per_layer("attention.sliding_window_pattern", n);
  const std::vector<int64_t> kv = m.per_layer("attention.head_count_kv", n);
  const std::vector<int64_t> ffn = m.per_layer("feed_forward_length", n);
  json types = json::array();
  bool any_full = false;
  for (int64_t s : swa) {
    types.push_back(s ? "sliding_attention" : "full_attention");
    any_full = any_full || !s;
  }
  const int full_hd = int(m.req("attention.key_length"));
  const int64_t swa_kv = m.of_kind(kv, swa, true, "attention.head_count_kv");
  const int64_t full_kv = m.of_kind(kv, swa, false, "attention.head_count_kv");
  const int64_t width = m.of_kind(ffn, swa, true, "feed_forward_length");
  const int64_t width_full = m.of_kind(ffn, swa, false, "feed_forward_length");
  if (width >= 0 && width_full >= 0 && width != width_full) {
    fail<ConfigError>("GGUF file '{}': '{}' is {} on sliding and {} on full layers; an "
                      "assistant's MLPs are alike", f.path(), m.key("feed_forward_length"), width,
                      width_full);
  }
  json full_rope = {{"rope_type", "proportional"},
                    {"rope_theta", f.get_float(m.key("rope.freq_base")).value_or(1e6)},
                    {"partial_rotary_factor", any_full ? model::gguf_rope_partial(f, full_hd) : 1.0}};
  json text = {
      {"model_type", "gemma4_text"},
      {"hidden_size", m.req("embedding_length")},
      {"intermediate_size", width >= 0 ? width : width_full},
      {"num_hidden_layers", n},
      {"num_attention_heads", m.req("attention.head_count")},
      {"num_key_value_heads", swa_kv >= 0 ? swa_kv : full_kv},
      {"attention_k_eq_v", true},  // full layers' kv heads: num_global_key_value_heads
      {"num_global_key_value_heads", full_kv >= 0 ? full_kv : swa_kv},
      {"head_dim", f.get_int(m.key("attention.key_length_swa")).value_or(full_hd)},
      {"global_head_dim", full_hd},
      {"num_kv_shared_layers", f.get_int(m.key("attention.shared_kv_layers")).value_or(n)},
      {"hidden_size_per_layer_input", f.get_int(m.key("embedding_length_per_layer_input")).value_or(0)},
      {"vocab_size_per_layer_input", 0},
      {"vocab_size", embd->dims[1]},
      {"sliding_window", m.req("attention.sliding_window")},
      {"layer_types", types},
      {"rope_parameters",
       {{"sliding_attention",
         {{"rope_type", "default"},
          {"rope_theta", f.get_float(m.key("rope.freq_base_swa")).value_or(1e4)}}},
        {"full_attention", full_rope}}},
      {"hidden_activation", "gelu_pytorch_tanh"},
      {"rms_norm_eps", f.get_float(m.key("attention.layer_norm_rms_epsilon")).value_or(1e-6)},
      {"max_position_embeddings", m.req("context_length")},
      {"tie_word_embeddings", true}};
  return {{"model_type", kAssistantModelType},
          {"backbone_hidden_size", backbone},
          {"use_ordered_embeddings", false},
          {"tie_word_embeddings", true},
          {"text_config", text}};
}

// Every tensor the config implies, by GGUF name, with its shape.
model::TensorShapes gguf_tensors(const AssistantConfig& a) {
  const model::ModelConfig& b = a.block;
  const int64_t h = b.d_model;
  model::TensorShapes t = {{"token_embd.weight", {b.vocab, h}},
                           {"output_norm.weight", {h}},
                           {kPre, {h, 2 * int64_t(a.backbone)}},
                           {kPost, {a.backbone, h}}};
  for (int i = 0; i < b.n_layers; ++i) {
    for (auto& [hf, shape] : model::layer_tensor_shapes(b, "", i)) {
      t.push_back({model::gguf_layer_tensor_name(b, i, hf), shape});
    }
  }
  return t;
}

// Presence and shape of each expected tensor, and no stray one (what the
// assistant does not read: the centroid head's, K/V projections of layers
// that compute none).
void check_gguf_tensors(const io::GgufFile& f, const AssistantConfig& a) {
  const model::TensorShapes want = gguf_tensors(a);
  for (const auto& [name, shape] : want) {
    const io::GgufTensor* t = f.tensor(name);
    if (!t && name.ends_with("layer_output_scale.weight")) continue;  // 1 when absent
    if (!t) fail<FormatError>("tensor {} not found in GGUF file '{}'", name, f.path());
    if (t->shape() != shape) {
      fail<ShapeError>("tensor {} in '{}' has shape {}; the file's metadata implies {}", name,
                       f.path(), model::shape_str(t->shape()), model::shape_str(shape));
    }
  }
  for (const io::GgufTensor& t : f.tensors()) {
    const bool known = std::any_of(want.begin(), want.end(),
                                   [&](const auto& e) { return e.first == t.name; }) ||
                       t.name == "rope_freqs.weight" || t.name == kCentroids ||
                       t.name == kOrderingGguf;
    const bool unread_kv = t.name.starts_with("blk.") &&
                           (t.name.find(".attn_k.") != std::string::npos ||
                            t.name.find(".attn_v.") != std::string::npos ||
                            t.name.find(".attn_k_norm.") != std::string::npos);
    if (!known && !unread_kv) {
      fail<FormatError>("tensor {} in '{}' is not part of a {} model (nothing would read it)",
                        t.name, f.path(), kAssistantGgufArch);
    }
  }
}

// The record's keys "mtpspec.<field>" as the config.json object they stand
// for, read by the one parser (absent: empty).
AssistantRecord gguf_record(const io::GgufFile& f) {
  json j = json::object();
  const json fields = AssistantRecord{}.to_json();  // the record's field names
  for (const auto& [k, unused] : fields.items()) {
    if (auto v = f.get_string(std::string(kAssistantRecordKey) + "." + k)) j[k] = *v;
  }
  if (j.empty()) return {};
  return parse_assistant_record({{kAssistantRecordKey, j}},
                                "GGUF file '" + f.path() + "' (its keys " + kAssistantRecordKey + ".*)");
}

}  // namespace

bool is_assistant_gguf(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec) || !io::GgufFile::has_magic(path)) return false;
  const io::GgufFile f(path, io::GgufRead::MetadataOnly);
  return f.get_string("general.architecture").value_or("") == kAssistantGgufArch;
}

bool is_assistant(const std::string& path) {
  return is_assistant_dir(path) || is_assistant_gguf(path);
}

Gemma4Assistant Gemma4Assistant::load_gguf(const std::string& path,
                                           const model::ModelConfig& target,
                                           const model::Hold& hold, const ServedTarget* served,
                                           model::TiedHead tied) {
  const io::GgufFile f(path);
  Gemma4Assistant a;
  a.path_ = path;
  a.cfg_ = parse_assistant_config(gguf_config_json(f, target), target,
                                  "GGUF file '" + path + "' (read as a gemma4_assistant config)");
  a.record_ = gguf_record(f);
  a.check_target(target, served);
  const AssistantConfig& c = a.cfg_;
  check_gguf_tensors(f, c);
  for (const auto& [name, shape] : gguf_tensors(c)) {
    if (const io::GgufTensor* t = f.tensor(name)) a.parameters_ += int64_t(t->numel());
  }
  AssistantWeights& w = a.w_;
  w.layers.resize(size_t(c.block.n_layers));
  model::run_load_tasks(w.layers.size() + 1, [&](size_t i) {
    if (i < w.layers.size()) {
      w.layers[i] = model::load_gguf_layer(f, c.block, int(i), hold);
      return;
    }
    w.final_norm = model::gguf_vector(f, "output_norm.weight");
    w.pre_proj = model::gguf_matrix(f, kPre, hold);
    w.post_proj = model::gguf_matrix(f, kPost, hold);
    // The tied head reads the table as the target's does (`tied`).
    w.head = model::gguf_table(f, "token_embd.weight", size_t(c.block.vocab), size_t(c.block.d_model))
                 .head(hold, tied,
                       "tensor token_embd.weight in '" + path + "' (the tied head)");
  });
  return a;
}

}  // namespace mtp::drafter

namespace mtp::drafter {

namespace {

// The stored float type's ggml id (F32 0, F16 1, BF16 30).
uint32_t ggml_float_type(DType t, const std::string& name, const std::string& where) {
  switch (t) {
    case DType::F32: return uint32_t(GgmlType::F32);
    case DType::F16: return uint32_t(GgmlType::F16);
    case DType::BF16: return uint32_t(GgmlType::BF16);
    default:
      fail<FormatError>("tensor '{}' in '{}' is {}; an assistant's tensors are F32, F16 or BF16",
                        name, where, dtype_name(t));
  }
}

}  // namespace

void write_assistant_gguf(const std::string& dir, const std::string& out) {
  const std::string cfg_path = (fs::path(dir) / "config.json").string();
  const json cfg = parse_json(read_file(cfg_path), "'" + cfg_path + "'");
  if (!cfg.contains("text_config") || !cfg.at("text_config").is_object()) {
    fail<ConfigError>("{}: missing object 'text_config'", cfg_path);
  }
  if (cfg.contains("tie_word_embeddings") && cfg.at("tie_word_embeddings") == false) {
    fail<ConfigError>("{}: tie_word_embeddings is false; llama.cpp's gemma4-assistant has only "
                      "the tied head", cfg_path);
  }
  json text = cfg.at("text_config");  // its layers as a text model's that own K/V
  text["model_type"] = "gemma4_text";
  text["num_kv_shared_layers"] = 0;
  text["hidden_size_per_layer_input"] = 0;
  const model::ModelConfig c = model::parse_hf_config(text, nullptr, cfg_path + " text_config");
  const std::string a = kAssistantGgufArch;
  io::GgufMetadata kv;
  auto u32 = [&](const std::string& k, int64_t v) { kv.push_back({a + "." + k, io::GgufValue::u32(uint32_t(v))}); };
  auto f32 = [&](const std::string& k, double v) { kv.push_back({a + "." + k, io::GgufValue::f32(float(v))}); };
  kv.push_back({"general.architecture", io::GgufValue::str(a)});
  kv.push_back({"general.name", io::GgufValue::str(fs::path(dir).filename().string())});
  int full_hd = c.head_dim;
  std::vector<io::GgufValue> swa, kv_heads;
  for (int l = 0; l < c.n_layers; ++l) {
    const model::LayerKind k = c.layer_kind(l);
    if (!k.sliding) full_hd = k.head_dim;
    swa.push_back(io::GgufValue::boolean(k.sliding));
    kv_heads.push_back(io::GgufValue::u32(uint32_t(k.n_kv_heads)));
  }
  u32("context_length", c.max_position);
  u32("embedding_length", c.d_model);
  u32("block_count", c.n_layers);
  u32("feed_forward_length", c.ffn);
  u32("attention.head_count", c.n_heads);
  kv.push_back({a + ".attention.head_count_kv", io::GgufValue::array(io::GgufType::U32, kv_heads)});
  kv.push_back({a + ".attention.sliding_window_pattern", io::GgufValue::array(io::GgufType::Bool, swa)});
  f32("attention.layer_norm_rms_epsilon", c.norm_eps);
  u32("attention.key_length", full_hd);
  u32("attention.value_length", full_hd);
  u32("attention.key_length_swa", c.head_dim);
  u32("attention.value_length_swa", c.head_dim);
  u32("rope.dimension_count", full_hd);
  u32("rope.dimension_count_swa", c.head_dim);
  f32("rope.freq_base", c.rope_theta);
  f32("rope.freq_base_swa", c.rope_local_theta);
  u32("attention.sliding_window", c.sliding_window);
  u32("attention.shared_kv_layers", c.n_layers);
  u32("embedding_length_per_layer_input", 0);
  u32("embedding_length_out", json_as<int>(cfg.value("backbone_hidden_size", json(1536)),
                                           "backbone_hidden_size", cfg_path));
  u32("nextn_predict_layers", c.n_layers);
  const AssistantRecord rec = parse_assistant_record(cfg, cfg_path);
  if (!rec.empty()) {
    const json fields = rec.to_json();
    for (const auto& [k, v] : fields.items()) {
      kv.push_back({std::string(kAssistantRecordKey) + "." + k, io::GgufValue::str(v.get<std::string>())});
    }
  }
  std::vector<io::GgufWriteTensor> tensors;
  {  // the full layers' proportional RoPE: 1 per rotated pair, 1e30 for the others
    std::vector<float> f(size_t(full_hd / 2), 1e30f);
    std::fill(f.begin(), f.begin() + long(std::floor(double(c.rope_partial) * full_hd / 2)), 1.0f);
    tensors.push_back({"rope_freqs.weight", {int64_t(f.size())}, uint32_t(GgmlType::F32),
                       std::string(reinterpret_cast<const char*>(f.data()), f.size() * 4)});
  }
  const io::TensorSet ts = io::TensorSet::open_dir(dir);
  for (const std::string& name : ts.names()) {
    if (name.starts_with("masked_embedding.") || name.ends_with(".rotary_emb.inv_freq")) continue;
    if (name.starts_with("model.layers.") &&
        (name.find(".self_attn.k_proj.") != std::string::npos ||
         name.find(".self_attn.v_proj.") != std::string::npos ||
         name.find(".self_attn.k_norm.") != std::string::npos)) {
      continue;  // no layer of an assistant computes K/V
    }
    std::string g;
    if (name == "model.embed_tokens.weight") g = "token_embd.weight";
    else if (name == "model.norm.weight") g = "output_norm.weight";
    else if (name == "pre_projection.weight") g = kPre;
    else if (name == "post_projection.weight") g = kPost;
    else if (name.starts_with("model.layers.")) {
      const size_t at = 13, dot = name.find('.', at);
      g = model::gguf_layer_tensor_name(c, std::stoi(name.substr(at, dot - at)), name.substr(dot + 1));
    } else {
      fail<FormatError>("tensor '{}' in '{}' is not part of a gemma4_assistant", name, ts.file_of(name));
    }
    const io::TensorView& v = model::finite_tensor(ts, name);
    const bool vec = v.shape.size() <= 1 || name.ends_with("norm.weight");
    std::string bytes;
    uint32_t type = uint32_t(GgmlType::F32);
    if (vec) {
      std::vector<float> x(v.numel());
      to_f32(v.data, v.dtype, x.size(), x.data());
      bytes.assign(reinterpret_cast<const char*>(x.data()), x.size() * 4);
    } else {
      type = ggml_float_type(v.dtype, name, ts.file_of(name));
      bytes.assign(static_cast<const char*>(v.data), v.nbytes);
    }
    tensors.push_back({g, std::vector<int64_t>(v.shape.rbegin(), v.shape.rend()), type, std::move(bytes)});
  }
  io::write_gguf(out, kv, tensors);
}

}  // namespace mtp::drafter
