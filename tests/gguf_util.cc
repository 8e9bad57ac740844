#include "gguf_util.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "core/dtype.h"
#include "core/ggml_type.h"
#include "core/mapped_file.h"
#include "io/safetensors.h"
#include "kernels/quant_blocks.h"
#include "model/hf_config.h"
#include "model/loader.h"

namespace fs = std::filesystem;

namespace mtp::test {

namespace {

using io::GgufMetadata;
using io::GgufValue;
using model::Arch;

bool is_gemma(Arch a) { return a == Arch::Gemma2 || a == Arch::Gemma3; }
bool ends_with(const std::string& s, const std::string& t) {
  return s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
}

// LlamaModel.permute: rows (h, j, i) of [heads, 2, hd/2] -> (h, i, j).
std::vector<float> permute(const std::vector<float>& w, int heads, size_t cols) {
  const size_t rows = w.size() / cols, hd = rows / size_t(heads), half = hd / 2;
  std::vector<float> out(w.size());
  for (size_t h = 0; h < size_t(heads); ++h)
    for (size_t j = 0; j < 2; ++j)
      for (size_t i = 0; i < half; ++i)
        std::memcpy(&out[(h * hd + 2 * i + j) * cols], &w[(h * hd + j * half + i) * cols],
                    cols * sizeof(float));
  return out;
}

std::string encode(const std::vector<float>& v, uint32_t type, size_t cols = 0) {
  std::string b;
  if (ggml_type_info(type).block_elems > 1) {  // rows of blocks
    const size_t rb = ggml_row_bytes(type, cols);
    if (rb == 0) throw std::runtime_error("encode: row length not a whole number of blocks");
    b.resize(v.size() / cols * rb);
    for (size_t r = 0; r < v.size() / cols; ++r) {
      kernels::quantize_row(static_cast<GgmlType>(type), v.data() + r * cols, cols, &b[r * rb]);
    }
    return b;
  }
  if (type == uint32_t(GgmlType::F32)) {
    b.assign(reinterpret_cast<const char*>(v.data()), v.size() * 4);
    return b;
  }
  b.resize(v.size() * 2);
  for (size_t i = 0; i < v.size(); ++i) {
    uint16_t h = type == uint32_t(GgmlType::F16) ? f32_to_f16(v[i]) : f32_to_bf16(v[i]);
    std::memcpy(&b[2 * i], &h, 2);
  }
  return b;
}

// HF name below the "model." prefix -> GGUF name. Qwen3.5's mtp.* become
// block n_layers (llama.cpp's _Qwen35MtpMixin): the head's own tensors as
// nextn.*, its layer's by the layer map.
std::string gguf_name(const model::ModelConfig& c, std::string name) {
  if (name.starts_with("model.language_model.")) name = "model." + name.substr(21);
  if (name.starts_with("mtp.")) {
    const std::string blk = "blk." + std::to_string(c.n_layers) + ".";
    static const std::pair<const char*, const char*> head[] = {
        {"mtp.fc.weight", "nextn.eh_proj.weight"},
        {"mtp.pre_fc_norm_embedding.weight", "nextn.enorm.weight"},
        {"mtp.pre_fc_norm_hidden.weight", "nextn.hnorm.weight"},
        {"mtp.norm.weight", "nextn.shared_head_norm.weight"}};
    for (auto& [from, to] : head) {
      if (name == from) return blk + to;
    }
    if (!name.starts_with("mtp.layers.0.")) throw std::runtime_error("unexpected tensor " + name);
    return model::gguf_layer_tensor_name(c, c.n_layers, name.substr(13));
  }
  if (name == "model.embed_tokens_per_layer.weight") return "per_layer_token_embd.weight";
  if (name == "model.per_layer_model_projection.weight") return "per_layer_model_proj.weight";
  if (name == "model.per_layer_projection_norm.weight") return "per_layer_proj_norm.weight";
  if (name == "model.embed_tokens.weight") return "token_embd.weight";
  if (name == "model.norm.weight") return "output_norm.weight";
  if (name == "lm_head.weight") return "output.weight";
  const std::string pre = "model.layers.";
  if (name.rfind(pre, 0) != 0) throw std::runtime_error("unexpected tensor " + name);
  const size_t dot = name.find('.', pre.size());
  const int layer = std::stoi(name.substr(pre.size(), dot - pre.size()));
  return model::gguf_layer_tensor_name(c, layer, name.substr(dot + 1));
}

// LlamaModel.generate_extra_tensors for rope_type llama3, in fp32 like torch.
std::vector<float> llama3_rope_freqs(const nlohmann::json& cfg, const model::ModelConfig& c) {
  const auto& rs = cfg["rope_scaling"];
  const float base = cfg.value("rope_theta", 10000.0f);
  const int dim = c.head_dim;
  const float factor = rs.value("factor", 8.0f), low = rs.value("low_freq_factor", 1.0f),
              high = rs.value("high_freq_factor", 4.0f);
  const float old_ctx = cfg.value("original_max_position_embeddings", 8192.0f);
  const float low_wl = old_ctx / low, high_wl = old_ctx / high;
  std::vector<float> out;
  for (int i = 0; i < dim; i += 2) {
    const float freq = 1.0f / std::pow(base, float(i) / float(dim));
    const float wl = float(2 * M_PI) / freq;
    if (wl < high_wl) out.push_back(1.0f);
    else if (wl > low_wl) out.push_back(factor);
    else {
      const float smooth = (old_ctx / wl - low) / (high - low);
      out.push_back(1.0f / ((1 - smooth) / factor + smooth));
    }
  }
  return out;
}

// Gemma4Model.generate_extra_tensors: 1 for each rotated pair of the full
// layers' proportional RoPE, 1e30 for the others.
std::vector<float> gemma4_rope_freqs(const nlohmann::json& cfg) {
  const nlohmann::json& t = cfg.contains("text_config") ? cfg["text_config"] : cfg;
  const int hd = t.value("global_head_dim", 512);
  const double partial = t["rope_parameters"]["full_attention"].value("partial_rotary_factor", 1.0);
  const int rot = int(hd * partial / 2);
  std::vector<float> f(size_t(hd / 2), 1e30f);
  std::fill(f.begin(), f.begin() + rot, 1.0f);
  return f;
}

// Gemma4Model.set_gguf_parameters: each kind's head width, kv heads and MLP
// width per layer, the sliding pattern, shared layers, PLE width.
void add_gemma4_metadata(const nlohmann::json& cfg, const model::ModelConfig& c, GgufMetadata& kv,
                         const std::string& arch = "gemma4") {
  const nlohmann::json& t = cfg.contains("text_config") ? cfg["text_config"] : cfg;
  auto u32 = [&](const std::string& k, int64_t v) { kv.push_back({arch + "." + k, GgufValue::u32(uint32_t(v))}); };
  auto f32 = [&](const std::string& k, double v) { kv.push_back({arch + "." + k, GgufValue::f32(float(v))}); };
  auto u32s = [&](const std::string& k, const std::vector<int>& v) {
    std::vector<GgufValue> items;
    for (int x : v) items.push_back(GgufValue::u32(uint32_t(x)));
    kv.push_back({arch + "." + k, GgufValue::array(io::GgufType::U32, items)});
  };
  std::vector<GgufValue> swa;
  std::vector<int> ffn, kv_heads;
  for (int l = 0; l < c.n_layers; ++l) {
    const model::LayerKind k = c.layer_kind(l);
    swa.push_back(GgufValue::boolean(k.sliding));
    ffn.push_back(k.ffn);
    kv_heads.push_back(k.n_kv_heads);
  }
  if (t.value("use_double_wide_mlp", false)) u32s("feed_forward_length", ffn);
  else u32("feed_forward_length", c.ffn);
  if (t.contains("num_global_key_value_heads") && !t["num_global_key_value_heads"].is_null()) {
    u32s("attention.head_count_kv", kv_heads);
  } else {
    u32("attention.head_count_kv", c.n_kv_heads);
  }
  kv.push_back({arch + ".attention.sliding_window_pattern", GgufValue::array(io::GgufType::Bool, swa)});
  const int full_hd = t.value("global_head_dim", 512);
  u32("attention.key_length", full_hd);
  u32("attention.value_length", full_hd);
  u32("attention.key_length_swa", c.head_dim);
  u32("attention.value_length_swa", c.head_dim);
  u32("rope.dimension_count", full_hd);
  u32("rope.dimension_count_swa", c.head_dim);
  f32("rope.freq_base", t["rope_parameters"]["full_attention"].value("rope_theta", 1e6));
  f32("rope.freq_base_swa", t["rope_parameters"]["sliding_attention"].value("rope_theta", 1e4));
  u32("attention.sliding_window", c.sliding_window);
  u32("attention.shared_kv_layers", t.value("num_kv_shared_layers", 0));
  u32("embedding_length_per_layer_input", c.ple_dim);
  if (c.final_softcap > 0) f32("final_logit_softcapping", c.final_softcap);
}

// Qwen3.5 (llama.cpp's Qwen3NextModel / Qwen3_5TextModel): the ssm.* shape,
// the attention interval, partial rotary, the MTP block count.
void add_qwen35_metadata(const nlohmann::json& cfg, const model::ModelConfig& c, GgufMetadata& kv) {
  const nlohmann::json& t = cfg.contains("text_config") ? cfg["text_config"] : cfg;
  auto u32 = [&](const std::string& k, int64_t v) { kv.push_back({"qwen35." + k, GgufValue::u32(uint32_t(v))}); };
  u32("feed_forward_length", c.ffn);
  u32("attention.head_count_kv", c.n_kv_heads);
  u32("rope.dimension_count", c.rope_rotary_dim);
  u32("ssm.conv_kernel", c.linear.conv_kernel);
  u32("ssm.state_size", c.linear.k_dim);
  u32("ssm.group_count", c.linear.k_heads);
  u32("ssm.time_step_rank", c.linear.v_heads);
  u32("ssm.inner_size", c.linear.value_dim());
  u32("full_attention_interval", t.value("full_attention_interval", 4));
  std::vector<GgufValue> sections;
  for (int v : {11, 11, 10, 0}) sections.push_back(GgufValue::i32(v));
  kv.push_back({"qwen35.rope.dimension_sections", GgufValue::array(io::GgufType::I32, sections)});
  if (c.mtp_layers > 0) u32("nextn_predict_layers", c.mtp_layers);
  if (t.contains("layer_types")) {  // add_recurrent_layers: one flag per block, the MTP's false
    std::vector<GgufValue> rec;
    for (const auto& k : t["layer_types"]) rec.push_back(GgufValue::boolean(k == "linear_attention"));
    for (int i = 0; i < c.mtp_layers; ++i) rec.push_back(GgufValue::boolean(false));
    kv.push_back({"qwen35.attention.recurrent_layers", GgufValue::array(io::GgufType::Bool, rec)});
  }
}

// _LinearAttentionVReorderBase._reorder_v_heads along rows ([heads · hd]
// rows of `cols` values): grouped by key head -> tiled.
std::vector<float> tile_v_rows(const std::vector<float>& x, size_t row0, int nk, int nv, int hd,
                               size_t cols) {
  std::vector<float> out = x;
  const int r = nv / nk;
  for (int g = 0; g < nk; ++g) {
    for (int j = 0; j < r; ++j) {
      const size_t from = row0 + size_t(g * r + j) * size_t(hd), to = row0 + size_t(j * nk + g) * size_t(hd);
      std::memcpy(&out[to * cols], &x[from * cols], size_t(hd) * cols * sizeof(float));
    }
  }
  return out;
}

// The same along the columns of out_proj [d, nv · hd].
std::vector<float> tile_v_cols(const std::vector<float>& x, int nk, int nv, int hd, size_t cols) {
  std::vector<float> out = x;
  const int r = nv / nk;
  for (size_t row = 0; row < x.size() / cols; ++row) {
    for (int g = 0; g < nk; ++g) {
      for (int j = 0; j < r; ++j) {
        std::memcpy(&out[row * cols + size_t(j * nk + g) * size_t(hd)],
                    &x[row * cols + size_t(g * r + j) * size_t(hd)], size_t(hd) * sizeof(float));
      }
    }
  }
  return out;
}

// Qwen3NextModel.modify_tensors and the value-head reorder on one tensor
// (values as fp32): ssm_a = -exp(A_log) (in fp32 for F32/BF16 sources, which
// the converter widens; in fp16, rounded, for F16 ones), the conv squeezed,
// value heads tiled when nk != nv.
void qwen35_tensor(const model::ModelConfig& c, const std::string& name, DType stored,
                   std::vector<float>& x, std::vector<int64_t>& shape) {
  const model::LinearAttn& a = c.linear;
  if (name.ends_with("linear_attn.A_log")) {
    for (float& e : x) {
      e = -std::exp(e);
      if (stored == DType::F16) e = f16_to_f32(f32_to_f16(e));
    }
  }
  if (name.ends_with("linear_attn.conv1d.weight")) shape = {shape[0], shape[2]};
  if (a.k_heads == a.v_heads || name.find("linear_attn.") == std::string::npos) return;
  const size_t cols = shape.size() == 2 ? size_t(shape[1]) : 1;
  const size_t key_rows = 2 * size_t(a.key_dim());
  if (name.ends_with("in_proj_qkv.weight") || name.ends_with("conv1d.weight")) {
    x = tile_v_rows(x, key_rows, a.k_heads, a.v_heads, a.v_dim, cols);
  } else if (name.ends_with("in_proj_z.weight")) {
    x = tile_v_rows(x, 0, a.k_heads, a.v_heads, a.v_dim, cols);
  } else if (name.ends_with("in_proj_a.weight") || name.ends_with("in_proj_b.weight") ||
             name.ends_with("A_log") || name.ends_with("dt_bias")) {
    x = tile_v_rows(x, 0, a.k_heads, a.v_heads, 1, cols);
  } else if (name.ends_with("out_proj.weight")) {
    x = tile_v_cols(x, a.k_heads, a.v_heads, a.v_dim, cols);
  }
}

}  // namespace

std::string hf_to_gguf_name(const model::ModelConfig& c, const std::string& hf) {
  return gguf_name(c, hf);
}

void add_test_vocab(GgufMetadata& kv, int n) {
  std::vector<std::string> toks = {"<unk>", "<s>", "</s>"};
  std::vector<float> scores = {0, 0, 0};
  std::vector<int32_t> types = {2, 3, 3};
  for (int b = 0; b < 256; ++b) {
    toks.push_back(fmt::format("<0x{:02X}>", b));
    scores.push_back(0);
    types.push_back(6);
  }
  const char* letters = "abcdefghijklmnopqrstuvwxyz";
  for (int k = 0; int(toks.size()) < n; ++k) {
    std::string piece = k < 26 ? std::string("\xE2\x96\x81") + letters[k]
                               : std::string(1, letters[k % 26]) + letters[(k / 26) % 26] +
                                     std::to_string(k);
    toks.push_back(piece);
    scores.push_back(-float(k));
    types.push_back(1);
  }
  kv.push_back({"tokenizer.ggml.model", GgufValue::str("llama")});
  kv.push_back({"tokenizer.ggml.tokens", GgufValue::strings(toks)});
  kv.push_back({"tokenizer.ggml.scores", GgufValue::f32s(scores)});
  kv.push_back({"tokenizer.ggml.token_type", GgufValue::i32s(types)});
  kv.push_back({"tokenizer.ggml.bos_token_id", GgufValue::u32(1)});
  kv.push_back({"tokenizer.ggml.eos_token_id", GgufValue::u32(2)});
  kv.push_back({"tokenizer.ggml.unknown_token_id", GgufValue::u32(0)});
}

void convert_hf_to_gguf(const std::string& hf_dir, const std::string& out, const GgufConvert& opt) {
  const model::ModelConfig c = model::read_hf_config(hf_dir);
  const nlohmann::json cfg =
      nlohmann::json::parse(read_file((fs::path(hf_dir) / "config.json").string()));
  // llama.cpp converts Mistral as a Llama (LlamaModel), dropping the window.
  const bool mistral = c.arch == Arch::Mistral;
  const bool llama = c.arch == Arch::Llama || mistral;
  const std::string a = mistral ? "llama" : model::arch_name(c.arch);
  GgufMetadata kv;
  auto u32 = [&](const std::string& k, int64_t v) { kv.push_back({a + "." + k, GgufValue::u32(uint32_t(v))}); };
  auto f32 = [&](const std::string& k, double v) { kv.push_back({a + "." + k, GgufValue::f32(float(v))}); };
  kv.push_back({"general.architecture", GgufValue::str(a)});
  if (opt.alignment) kv.push_back({"general.alignment", GgufValue::u32(opt.alignment)});
  kv.push_back({"general.name", GgufValue::str("random test model")});
  u32("context_length", c.max_position);
  u32("embedding_length", c.d_model);
  u32("block_count", c.n_layers + c.mtp_layers);
  u32("attention.head_count", c.n_heads);
  f32("attention.layer_norm_rms_epsilon", c.norm_eps);
  if (c.arch == Arch::Gemma4) {
    add_gemma4_metadata(cfg, c, kv);
  } else if (c.arch == Arch::Qwen35) {
    add_qwen35_metadata(cfg, c, kv);
  } else {
    u32("feed_forward_length", c.ffn);
    u32("attention.head_count_kv", c.n_kv_heads);
  }
  if ((!is_gemma(c.arch) || c.arch == Arch::Gemma3) && c.arch != Arch::Gemma4) {
    f32("rope.freq_base", c.rope_theta);
  }
  if (c.arch != Arch::Qwen2 && c.arch != Arch::Gemma4) {
    u32("attention.key_length", c.head_dim);
    u32("attention.value_length", c.head_dim);
  }
  if (llama) {
    u32("vocab_size", c.vocab);
    u32("rope.dimension_count", c.head_dim);
  }
  if (c.rope_scaling.type == model::RopeScaling::Type::Linear) {
    kv.push_back({a + ".rope.scaling.type", GgufValue::str("linear")});
    f32("rope.scaling.factor", c.rope_scaling.factor);
  }
  if (c.arch == Arch::Gemma2) {
    f32("attn_logit_softcapping", c.attn_softcap);
    f32("final_logit_softcapping", c.final_softcap);
  }
  if (is_gemma(c.arch)) u32("attention.sliding_window", c.sliding_window);
  if (c.arch == Arch::Gemma3 && (c.attn_softcap != 0 || c.final_softcap != 0)) {
    throw std::runtime_error("gemma3 softcaps cannot be written to GGUF");
  }
  kv.push_back({"general.file_type", GgufValue::u32(opt.matrix_type == 0 ? 0 : opt.matrix_type == 1 ? 1 : 32)});
  if (opt.with_tokenizer) add_test_vocab(kv, c.vocab);

  std::vector<io::GgufWriteTensor> tensors;
  if (c.rope_scaling.type == model::RopeScaling::Type::Llama3) {
    tensors.push_back({"rope_freqs.weight", {c.head_dim / 2}, 0, encode(llama3_rope_freqs(cfg, c), 0)});
  }
  if (c.arch == Arch::Gemma4) {  // the full layers' proportional RoPE (converter's extra tensor)
    std::vector<float> f = gemma4_rope_freqs(cfg);
    tensors.push_back({"rope_freqs.weight", {int64_t(f.size())}, 0, encode(f, 0)});
  }
  io::TensorSet ts = io::TensorSet::open_dir(hf_dir);
  for (const std::string& name : ts.names()) {
    if (name == "lm_head.weight" && c.tie_embeddings) continue;
    if (name.starts_with("model.vision_tower.") || name.starts_with("model.audio_tower.") ||
        name.starts_with("model.embed_vision.") || name.starts_with("model.embed_audio.") ||
        name.starts_with("model.visual.")) {
      continue;  // the mmproj file's (Gemma4VisionAudioModel), not the text model's
    }
    const io::TensorView& v = ts.get(name);
    std::vector<float> x(v.numel());
    to_f32(v.data, v.dtype, x.size(), x.data());  // the converter's .to(float32)
    const size_t cols = size_t(v.shape.back());
    if (llama && ends_with(name, "q_proj.weight")) x = permute(x, c.n_heads, cols);
    if (llama && ends_with(name, "k_proj.weight")) x = permute(x, c.n_kv_heads, cols);
    std::vector<int64_t> shape = v.shape;
    if (c.arch == Arch::Qwen35) qwen35_tensor(c, name, v.dtype, x, shape);
    const bool one_plus = is_gemma(c.arch) || (c.arch == Arch::Qwen35 && !ends_with(name, "linear_attn.norm.weight"));
    const std::string gname = gguf_name(c, name);
    // The converter tests the name after _QwenMtpMixin's renaming, so the
    // head's mtp.pre_fc_norm_{embedding,hidden} (as nextn.{e,h}norm) count.
    if (one_plus && (ends_with(name, "norm.weight") ||
                     (name.starts_with("mtp.") && ends_with(gname, "norm.weight")))) {
      // torch adds in the tensor's dtype: fp32 for F32/BF16 sources (the
      // converter widens BF16 first), fp16 for F16 ones (rounded again).
      for (auto& e : x) e = v.dtype == DType::F16 ? f16_to_f32(f32_to_f16(e + 1.0f)) : e + 1.0f;
    }
    const bool vec = shape.size() <= 1 || ends_with(name, "norm.weight") || ends_with(name, "conv1d.weight");
    uint32_t type = vec ? 0 : opt.matrix_type;
    if (!vec && opt.type_of && opt.type_of(gname) >= 0) type = uint32_t(opt.type_of(gname));
    std::vector<int64_t> dims(shape.rbegin(), shape.rend());
    tensors.push_back({gname, dims, type, encode(x, type, cols)});
  }
  if (opt.edit) opt.edit(kv, tensors);
  io::write_gguf(out, kv, tensors, opt.version);
}

void convert_assistant_to_gguf(const std::string& hf_dir, const std::string& out,
                               const GgufConvert& opt) {
  const nlohmann::json cfg =
      nlohmann::json::parse(read_file((fs::path(hf_dir) / "config.json").string()));
  nlohmann::json text = cfg.at("text_config");  // its layers as a text model's that own K/V
  text["num_kv_shared_layers"] = 0;
  text["hidden_size_per_layer_input"] = 0;
  const model::ModelConfig c = model::parse_hf_config(text, nullptr, "assistant text_config");
  if (!cfg.value("tie_word_embeddings", true)) {
    throw std::runtime_error("llama.cpp's gemma4-assistant has no untied head");
  }
  const std::string a = "gemma4-assistant";
  GgufMetadata kv;
  auto u32 = [&](const std::string& k, int64_t v) { kv.push_back({a + "." + k, GgufValue::u32(uint32_t(v))}); };
  kv.push_back({"general.architecture", GgufValue::str(a)});
  kv.push_back({"general.name", GgufValue::str("random test assistant")});
  u32("context_length", c.max_position);
  u32("embedding_length", c.d_model);
  u32("block_count", c.n_layers);
  u32("attention.head_count", c.n_heads);
  kv.push_back({a + ".attention.layer_norm_rms_epsilon", GgufValue::f32(c.norm_eps)});
  add_gemma4_metadata(cfg, c, kv, a);
  u32("embedding_length_out", cfg.at("backbone_hidden_size").get<int64_t>());
  u32("nextn_predict_layers", c.n_layers);
  kv.push_back({"general.file_type", GgufValue::u32(opt.matrix_type == 0 ? 0 : opt.matrix_type == 1 ? 1 : 32)});
  if (opt.with_tokenizer) add_test_vocab(kv, c.vocab);
  std::vector<io::GgufWriteTensor> tensors;
  const std::vector<float> f = gemma4_rope_freqs(cfg);
  tensors.push_back({"rope_freqs.weight", {int64_t(f.size())}, 0, encode(f, 0)});
  io::TensorSet ts = io::TensorSet::open_dir(hf_dir);
  for (const std::string& name : ts.names()) {
    if (name.starts_with("masked_embedding.")) continue;  // the converter's filter_tensors
    const io::TensorView& v = ts.get(name);
    std::vector<float> x(v.numel());
    to_f32(v.data, v.dtype, x.size(), x.data());
    std::string gname = name == "pre_projection.weight"    ? "nextn.pre_projection.weight"
                        : name == "post_projection.weight" ? "nextn.post_projection.weight"
                                                           : gguf_name(c, name);
    const bool vec = v.shape.size() <= 1 || ends_with(name, "norm.weight");
    uint32_t type = vec ? 0 : opt.matrix_type;
    if (!vec && opt.type_of && opt.type_of(gname) >= 0) type = uint32_t(opt.type_of(gname));
    std::vector<int64_t> dims(v.shape.rbegin(), v.shape.rend());
    tensors.push_back({gname, dims, type, encode(x, type, size_t(v.shape.back()))});
  }
  if (opt.edit) opt.edit(kv, tensors);
  io::write_gguf(out, kv, tensors, opt.version);
}

}  // namespace mtp::test
