// Widening: the widened tensors (one layer at a time, zero layers never
// materialised), config.json and the files of the output folder.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <memory>

#include "core/error.h"
#include "core/json.h"
#include "core/mapped_file.h"
#include "io/safetensors.h"
#include "model/family.h"
#include "model/widen.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace mtp::model {

namespace {

// Row j of a widened head (rotate-half order) comes from row perm(j) of the
// source head: identity, or for an interleaved source the pair (2i, 2i + 1)
// split into rows i and i + hd/2 (transformers' convert_llama_weights_to_hf).
size_t head_row(const WidenPlan& p, size_t j) {
  const size_t half = size_t(p.src.head_dim) / 2;
  if (!p.permute_rope) return j;
  return j < half ? 2 * j : 2 * (j - half) + 1;
}

// A [rows, cols] fp32 tensor of zeros to fill.
HostTensor matrix(size_t rows, size_t cols) {
  HostTensor t;
  t.shape = {int64_t(rows), int64_t(cols)};
  t.values.assign(rows * cols, 0.f);
  return t;
}

HostTensor zeros(std::vector<int64_t> shape, bool norm) {
  HostTensor t;
  t.shape = std::move(shape);
  t.is_norm = norm;
  return t;
}

// dst row `to` cols [0, n) = src row `from` cols [0, n) of a packed matrix
// (held F32: the stored values), times `scale` (1 or a power of 2: exact).
void copy_row(const kernels::PackedMatrix& m, size_t from, HostTensor& t, size_t to,
              std::vector<float>& buf, double scale = 1.0) {
  buf.resize(m.cols());
  m.row_f32(from, buf.data());
  float* out = t.values.data() + to * size_t(t.shape[1]);
  const float s = float(scale);
  for (size_t i = 0; i < m.cols(); ++i) out[i] = scale == 1.0 ? buf[i] : buf[i] * s;
}

// Per-head norm [hd] (q_norm / k_norm): stored value of the effective one.
HostTensor head_norm(const WidenPlan& p, const std::vector<float>& eff) {
  HostTensor t = zeros({int64_t(eff.size())}, true);
  t.values.resize(eff.size());
  for (size_t j = 0; j < eff.size(); ++j) {
    const float v = eff[head_row(p, j)];
    t.values[j] = p.src.norm_one_plus ? v - 1.0f : v;
  }
  return t;
}

}  // namespace

std::vector<float> widen_norm(const WidenPlan& p, const std::vector<float>& eff) {
  std::vector<float> out(size_t(p.dst.d_model), 0.f);
  const float s = float(p.norm_scale);
  for (size_t i = 0; i < eff.size(); ++i) {
    out[i] = p.src.norm_one_plus ? eff[i] * s - 1.0f : eff[i] * s;
  }
  return out;
}

void widen_layer(const WidenPlan& p, const LayerWeights* src, const std::string& pre,
                 HostTensors& out) {
  const ModelConfig &a = p.src, &b = p.dst;
  const size_t hd = a.head_dim, d = b.d_model, H = a.n_heads, KV = a.n_kv_heads;
  const size_t H2 = b.n_heads, KV2 = b.n_kv_heads, F = a.ffn, F2 = b.ffn;
  auto norm = [&](const char* name, const std::vector<float>* eff) {
    HostTensor t = zeros({int64_t(d)}, true);
    if (eff) t.values = widen_norm(p, *eff);
    out[pre + name] = std::move(t);
  };
  norm("input_layernorm.weight", src ? &src->attn_norm : nullptr);
  if (a.sandwich_norms) {
    norm("post_attention_layernorm.weight", src ? &src->post_attn_norm : nullptr);
    norm("pre_feedforward_layernorm.weight", src ? &src->ffn_norm : nullptr);
    norm("post_feedforward_layernorm.weight", src ? &src->post_ffn_norm : nullptr);
  } else {
    norm("post_attention_layernorm.weight", src ? &src->ffn_norm : nullptr);
  }
  if (a.qk_norm) {
    out[pre + "self_attn.q_norm.weight"] =
        src ? head_norm(p, src->q_norm) : zeros({int64_t(hd)}, true);
    out[pre + "self_attn.k_norm.weight"] =
        src ? head_norm(p, src->k_norm) : zeros({int64_t(hd)}, true);
  }
  if (!src) {  // a zero layer: residual + 0
    out[pre + "self_attn.q_proj.weight"] = zeros({int64_t(H2 * hd), int64_t(d)}, false);
    out[pre + "self_attn.k_proj.weight"] = zeros({int64_t(KV2 * hd), int64_t(d)}, false);
    out[pre + "self_attn.v_proj.weight"] = zeros({int64_t(KV2 * hd), int64_t(d)}, false);
    out[pre + "self_attn.o_proj.weight"] = zeros({int64_t(d), int64_t(H2 * hd)}, false);
    if (a.qkv_bias) {
      out[pre + "self_attn.q_proj.bias"] = zeros({int64_t(H2 * hd)}, true);
      out[pre + "self_attn.k_proj.bias"] = zeros({int64_t(KV2 * hd)}, true);
      out[pre + "self_attn.v_proj.bias"] = zeros({int64_t(KV2 * hd)}, true);
    }
    out[pre + "mlp.gate_proj.weight"] = zeros({int64_t(F2), int64_t(d)}, false);
    out[pre + "mlp.up_proj.weight"] = zeros({int64_t(F2), int64_t(d)}, false);
    out[pre + "mlp.down_proj.weight"] = zeros({int64_t(d), int64_t(F2)}, false);
    return;
  }
  std::vector<float> buf;
  // q/k/v: source rows [H q heads | KV k heads | KV v heads], each hd rows.
  HostTensor q = matrix(H2 * hd, d), k = matrix(KV2 * hd, d), v = matrix(KV2 * hd, d);
  HostTensor qb = zeros({int64_t(H2 * hd)}, true), kb = zeros({int64_t(KV2 * hd)}, true),
             vb = zeros({int64_t(KV2 * hd)}, true);
  if (a.qkv_bias) {
    qb.values.assign(H2 * hd, 0.f);
    kb.values.assign(KV2 * hd, 0.f);
    vb.values.assign(KV2 * hd, 0.f);
  }
  const std::vector<float>& bias = src->qkv_bias;
  for (size_t h = 0; h < H; ++h) {
    for (size_t j = 0; j < hd; ++j) {
      const size_t from = h * hd + head_row(p, j), to = size_t(p.q_head[h]) * hd + j;
      copy_row(src->wqkv, from, q, to, buf, p.qk_scale);
      if (a.qkv_bias) qb.values[to] = bias[from] * float(p.qk_scale);
    }
  }
  for (size_t h = 0; h < KV; ++h) {
    for (size_t j = 0; j < hd; ++j) {
      const size_t kf = (H + h) * hd + head_row(p, j), vf = (H + KV + h) * hd + j;
      copy_row(src->wqkv, kf, k, h * hd + j, buf, p.qk_scale);
      copy_row(src->wqkv, vf, v, h * hd + j, buf);
      if (a.qkv_bias) {
        kb.values[h * hd + j] = bias[kf] * float(p.qk_scale);
        vb.values[h * hd + j] = bias[vf];
      }
    }
  }
  out[pre + "self_attn.q_proj.weight"] = std::move(q);
  out[pre + "self_attn.k_proj.weight"] = std::move(k);
  out[pre + "self_attn.v_proj.weight"] = std::move(v);
  if (a.qkv_bias) {
    out[pre + "self_attn.q_proj.bias"] = std::move(qb);
    out[pre + "self_attn.k_proj.bias"] = std::move(kb);
    out[pre + "self_attn.v_proj.bias"] = std::move(vb);
  }
  // o_proj [d', H'·hd]: real output rows first, each real head's columns at its new head.
  HostTensor o = matrix(d, H2 * hd);
  buf.resize(src->wo.cols());
  for (size_t r = 0; r < size_t(a.d_model); ++r) {
    src->wo.row_f32(r, buf.data());
    float* row = o.values.data() + r * H2 * hd;
    for (size_t h = 0; h < H; ++h) {
      std::memcpy(row + size_t(p.q_head[h]) * hd, buf.data() + h * hd, hd * sizeof(float));
    }
  }
  out[pre + "self_attn.o_proj.weight"] = std::move(o);
  HostTensor gate = matrix(F2, d), up = matrix(F2, d), down = matrix(d, F2);
  for (size_t r = 0; r < F; ++r) {
    copy_row(src->w_gate_up, r, gate, r, buf);
    copy_row(src->w_gate_up, F + r, up, r, buf);
  }
  for (size_t r = 0; r < size_t(a.d_model); ++r) copy_row(src->w_down, r, down, r, buf);
  out[pre + "mlp.gate_proj.weight"] = std::move(gate);
  out[pre + "mlp.up_proj.weight"] = std::move(up);
  out[pre + "mlp.down_proj.weight"] = std::move(down);
}

void write_host_tensors(const std::string& path, const HostTensors& t, DType dtype,
                        const std::map<std::string, std::string>& metadata) {
  if (dtype != DType::F32 && dtype != DType::BF16) {
    fail<InputError>("widen: matrices are written as F32 or BF16, not {}", dtype_name(dtype));
  }
  size_t max_zero = 0;
  for (auto& [name, x] : t) {
    size_t n = 1;
    for (auto s : x.shape) n *= size_t(s);
    if (!x.values.empty() && x.values.size() != n) {
      fail<ShapeError>("widen: tensor '{}' has {} values for its shape's {}", name,
                       x.values.size(), n);
    }
    if (x.values.empty()) max_zero = std::max(max_zero, n * (x.is_norm ? 4 : dtype_size(dtype)));
  }
  std::vector<uint8_t> zero(max_zero, 0);  // shared by every all-zero tensor
  std::vector<std::vector<uint16_t>> bf;
  bf.reserve(t.size());
  std::vector<io::TensorView> views;
  for (auto& [name, x] : t) {
    const DType dt = x.is_norm ? DType::F32 : dtype;
    size_t n = 1;
    for (auto s : x.shape) n *= size_t(s);
    io::TensorView v{name, dt, x.shape, nullptr, n * dtype_size(dt)};
    if (x.values.empty()) {
      v.data = zero.data();
    } else if (dt == DType::F32) {
      v.data = x.values.data();
    } else {
      bf.emplace_back(n);
      for (size_t i = 0; i < n; ++i) bf.back()[i] = f32_to_bf16(x.values[i]);
      v.data = bf.back().data();
    }
    views.push_back(std::move(v));
  }
  io::write_safetensors(path, views, metadata);
}

json widened_hf_config(const LoadedModel& src, const WidenPlan& p, DType dtype) {
  const ModelConfig& b = p.dst;
  json c;
  if (p.src.source == "hf") {
    const std::string cfg = (fs::path(src.path) / "config.json").string();
    c = parse_json(read_file(cfg), "'" + cfg + "'");
    if (c.contains("text_config") && c.at("text_config").is_object()) {  // multimodal
      const Family& f = family(p.src.arch);
      c = json(c.at("text_config"));
      c["architectures"] = {f.text_class};
      c["model_type"] = f.text_model_type;
    }
  } else {
    c = {{"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"},
         {"hidden_act", "silu"}, {"rope_theta", double(p.src.rope_theta)},
         {"rope_scaling", nullptr}, {"attention_bias", false}, {"mlp_bias", false},
         {"max_position_embeddings", p.src.max_position}, {"vocab_size", p.src.vocab}};
  }
  c["hidden_size"] = b.d_model;
  c["intermediate_size"] = b.ffn;
  c["num_hidden_layers"] = b.n_layers;
  c["num_attention_heads"] = b.n_heads;
  c["num_key_value_heads"] = b.n_kv_heads;
  c["head_dim"] = b.head_dim;
  c["vocab_size"] = b.vocab;
  c["rms_norm_eps"] = double(b.norm_eps);  // a float's exact value: parses back to it
  c["tie_word_embeddings"] = false;
  c["torch_dtype"] = dtype == DType::BF16 ? "bfloat16" : "float32";
  c["bos_token_id"] = b.bos_id >= 0 ? json(b.bos_id) : json(nullptr);
  c["eos_token_id"] = b.eos_ids.empty() ? json(nullptr) : json(b.eos_ids);
  c.erase("layer_types");
  if (family(b.arch).sliding == SlidingPattern::EvenLayers ||
      family(b.arch).sliding == SlidingPattern::EveryNth) {
    json lt = json::array();
    for (int i = 0; i < b.n_layers; ++i) {
      lt.push_back(b.is_sliding(i) ? "sliding_attention" : "full_attention");
    }
    c["layer_types"] = lt;
  }
  c["mtpspec_widened"] = {{"from", src.path},
                          {"from_shape", {{"d_model", p.src.d_model}, {"layers", p.src.n_layers},
                                          {"ffn", p.src.ffn}, {"heads", p.src.n_heads},
                                          {"kv_heads", p.src.n_kv_heads}}},
                          {"exact", p.exact()}, {"inexact", p.inexact}};
  return c;
}

uint64_t write_widened(const LoadedModel& src, const WidenPlan& p, DType dtype,
                       const std::string& tokenizer, const std::string& dir) {
  const ModelConfig &a = p.src, &b = p.dst;
  const ModelWeights& w = src.weights;
  for (auto& l : w.layers) {
    if (l.wqkv.hold() != kernels::WeightType::F32) {
      fail<InputError>("write_widened: the source must be loaded with F32 weights");
    }
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail<IoError>("cannot create '{}': {}", dir, ec.message());
  HostTensors t;
  const size_t V = a.vocab, d = a.d_model, d2 = b.d_model;
  HostTensor emb = matrix(V, d2), head = matrix(V, d2);
  emb.is_norm = true;  // kept in F32 (as the forward reads it in place)
  std::vector<float> row(d);
  const float es = float(p.embed_scale);
  for (size_t r = 0; r < V; ++r) {
    w.embed.lookup(int32_t(r), 1.0f, row.data());
    for (size_t i = 0; i < d; ++i) emb.values[r * d2 + i] = p.embed_scale == 1 ? row[i] : row[i] * es;
    w.lm_head.row_f32(r, head.values.data() + r * d2);
  }
  t["model.embed_tokens.weight"] = std::move(emb);
  t["lm_head.weight"] = std::move(head);
  HostTensor fn = zeros({int64_t(d2)}, true);
  fn.values = widen_norm(p, w.final_norm);
  t["model.norm.weight"] = std::move(fn);
  for (int l = 0; l < b.n_layers; ++l) {
    widen_layer(p, l < a.n_layers ? &w.layers[size_t(l)] : nullptr,
                "model.layers." + std::to_string(l) + ".", t);
  }
  const fs::path st = fs::path(dir) / "model.safetensors";
  write_host_tensors(st.string(), t, dtype, {{"format", "pt"}});
  t.clear();
  write_file_atomic((fs::path(dir) / "config.json").string(),
                    widened_hf_config(src, p, dtype).dump(2) + "\n");
  if (!tokenizer.empty()) {
    const fs::path tp(tokenizer);
    const std::string name = tp.filename().string();
    std::string canon = name.ends_with(".json")    ? "tokenizer.json"
                        : name.ends_with(".model") ? "tokenizer.model"
                        : name.ends_with(".bin")   ? "tokenizer.bin"
                                                   : name;
    fs::copy_file(tp, fs::path(dir) / canon, fs::copy_options::overwrite_existing, ec);
    if (ec) fail<IoError>("cannot copy tokenizer '{}' to '{}': {}", tokenizer, dir, ec.message());
    fs::permissions(fs::path(dir) / canon, fs::perms::owner_write, fs::perm_options::add, ec);
    for (const char* extra : {"tokenizer_config.json", "special_tokens_map.json"}) {
      const fs::path e = tp.parent_path() / extra;
      if (fs::exists(e)) fs::copy_file(e, fs::path(dir) / extra, fs::copy_options::overwrite_existing, ec);
    }
  }
  return uint64_t(fs::file_size(st));
}

}  // namespace mtp::model
