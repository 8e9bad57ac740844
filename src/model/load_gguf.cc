// GGUF file -> (ModelConfig, ModelWeights).
//
// Order of work, as load_hf: the config from the metadata (gguf_config.cc);
// every tensor the config implies checked for presence, type and shape, and
// no stray tensor (it would be ignored, changing the outputs); then per layer,
// in parallel: norms and biases to fp32, q/k/v and gate/up fused row-wise and
// packed through pack_gguf_matrix — the ONE function every matrix goes
// through (the tied head included). The embedding table stays in the memory
// map; the GgufFile is kept alive through ModelWeights::keep_alive.
//
// The names: gguf_layer_tensor_name / gguf_native_mtp_name (the end of this
// file) map a Hugging Face tensor name to the family's GGUF one.
//
// llama.cpp's Llama convention: convert_hf_to_gguf.py stores q_proj/k_proj
// rows permuted (per head, rows (j·hd/2 + i) -> (2i + j)) so that its
// interleaved RoPE computes rotate-half. We apply the inverse as a ROW
// permutation of the stored bytes — valid for quantized rows too, since a
// row is a whole number of blocks — and run rotate-half: exactly the HF
// checkpoint's bits.
#include <algorithm>
#include <cstring>
#include <exception>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "core/error.h"
#include "core/ggml_type.h"
#include "core/thread_pool.h"
#include "io/gguf.h"
#include "kernels/quant_blocks.h"
#include "model/family.h"
#include "model/layer_io.h"
#include "model/loader.h"

namespace mtp::model {

namespace {

using io::GgufFile;
using io::GgufTensor;
using kernels::PackedMatrix;

// The storage dtype of a plain float ggml type; nullopt for every other type.
std::optional<DType> float_dtype(uint32_t t) {
  switch (static_cast<GgmlType>(t)) {
    case GgmlType::F32: return DType::F32;
    case GgmlType::F16: return DType::F16;
    case GgmlType::BF16: return DType::BF16;
    default: return std::nullopt;
  }
}

// Rows of one stored tensor, in the order `perm` gives (empty: as stored).
struct RowSource {
  const GgufTensor* t;
  std::vector<uint32_t> perm;  // output row r reads stored row perm[r]
};

// Inverse of llama.cpp's LlamaModel.permute for `heads` heads of head_dim
// rows each: HF row h·hd + j·hd/2 + i is stored at row h·hd + 2i + j.
std::vector<uint32_t> unpermute_rows(int heads, int head_dim) {
  std::vector<uint32_t> perm(size_t(heads) * size_t(head_dim));
  const int half = head_dim / 2;
  for (int h = 0; h < heads; ++h) {
    for (int j = 0; j < 2; ++j) {
      for (int i = 0; i < half; ++i) {
        perm[size_t(h * head_dim + j * half + i)] = uint32_t(h * head_dim + 2 * i + j);
      }
    }
  }
  return perm;
}

// Rows of `parts` (each through its permutation) copied as stored bytes into
// one buffer: a row of a block type is whole blocks, so permuting rows is
// exact for every type.
std::vector<uint8_t> gather_rows(const std::vector<RowSource>& parts, size_t cols) {
  size_t bytes = 0;
  for (auto& p : parts) {
    bytes += (p.perm.empty() ? p.t->rows() : p.perm.size()) * ggml_row_bytes(p.t->type, cols);
  }
  std::vector<uint8_t> buf(bytes);
  uint8_t* dst = buf.data();
  for (auto& p : parts) {
    const size_t rb = ggml_row_bytes(p.t->type, cols);
    const size_t n = p.perm.empty() ? p.t->rows() : p.perm.size();
    for (size_t r = 0; r < n; ++r, dst += rb) {
      std::memcpy(dst, p.t->data + size_t(p.perm.empty() ? r : p.perm[r]) * rb, rb);
    }
  }
  return buf;
}

PackedMatrix pack_float_parts(const std::vector<RowSource>& parts, const Hold& hold,
                              const std::string& file);

// THE packing of every GGUF weight matrix: the row-wise concatenation of
// `parts` (each read through its row permutation) as one PackedMatrix.
// Float parts (F32/F16/BF16) are held as `hold` (--weights); block-quantized
// parts (Q8_0 ... Q6_K) are held as stored, bit for bit, whatever `hold`.
// Parts of different block types (Q4_K_M's Q4_K q/k with Q6_K v) become a
// composite matrix (PackedMatrix::concat_rows): each part keeps its type.
PackedMatrix pack_gguf_matrix(const std::vector<RowSource>& parts, const Hold& hold,
                              const std::string& file) {
  bool any_block = false;
  for (auto& p : parts) any_block = any_block || !float_dtype(p.t->type);
  if (!any_block) return pack_float_parts(parts, hold, file);
  const size_t cols = parts[0].t->row_elems();
  std::vector<PackedMatrix> packed;
  for (size_t i = 0; i < parts.size();) {
    size_t j = i + 1;  // a run of parts of one type is one packed part
    while (j < parts.size() && parts[j].t->type == parts[i].t->type) ++j;
    const std::vector<RowSource> run(parts.begin() + long(i), parts.begin() + long(j));
    const uint32_t type = parts[i].t->type;
    if (float_dtype(type)) {
      packed.push_back(pack_float_parts(run, hold, file));
    } else {
      if (!kernels::ggml_type_supported(static_cast<GgmlType>(type))) {
        fail<ConfigError>("tensor {} in '{}' has type {}, which mtpspec cannot compute with "
                          "(supported: {})",
                          parts[i].t->name, file, ggml_type_name(type), kernels::kSupportedGgmlTypes);
      }
      for (const auto& p : run) {
        check_finite_blocks(p.t->data, static_cast<GgmlType>(type), p.t->rows(), cols,
                            fmt::format("tensor {} in '{}'", p.t->name, file));
      }
      const std::vector<uint8_t> buf = gather_rows(run, cols);
      const size_t rows = buf.size() / ggml_row_bytes(type, cols);
      packed.push_back(
          PackedMatrix::pack_blocks(buf.data(), static_cast<GgmlType>(type), rows, cols));
    }
    i = j;
  }
  return PackedMatrix::concat_rows(std::move(packed));
}

// Float parts only: same-type parts fused by copying stored row bytes; mixed
// float types go through fp32, which holds F32/F16/BF16 exactly.
PackedMatrix pack_float_parts(const std::vector<RowSource>& parts, const Hold& hold,
                              const std::string& file) {
  const size_t cols = parts[0].t->row_elems();
  size_t rows = 0;
  bool same = true;
  for (auto& p : parts) {
    rows += p.perm.empty() ? p.t->rows() : p.perm.size();
    same = same && p.t->type == parts[0].t->type;
  }
  const DType dt = same ? *float_dtype(parts[0].t->type) : DType::F32;
  if (parts.size() == 1 && parts[0].perm.empty()) {
    check_finite(parts[0].t->data, dt, rows * cols,
                 fmt::format("tensor {} in '{}'", parts[0].t->name, file));
    return pack_float_matrix(parts[0].t->data, dt, rows, cols, hold,
                             fmt::format("tensor {} in '{}'", parts[0].t->name, file));
  }
  const size_t out_row = cols * dtype_size(dt);
  std::vector<uint8_t> buf(rows * out_row);
  uint8_t* dst = buf.data();
  for (auto& p : parts) {
    const size_t in_row = ggml_row_bytes(p.t->type, cols);
    const size_t n = p.perm.empty() ? p.t->rows() : p.perm.size();
    const uint8_t* start = dst;
    for (size_t r = 0; r < n; ++r, dst += out_row) {
      const uint8_t* src = p.t->data + size_t(p.perm.empty() ? r : p.perm[r]) * in_row;
      if (same) {
        std::memcpy(dst, src, in_row);
      } else {
        to_f32(src, *float_dtype(p.t->type), cols, reinterpret_cast<float*>(dst));
      }
    }
    check_finite(start, dt, n * cols,
                 fmt::format("tensor {} in '{}'", p.t->name, file));
  }
  return pack_float_matrix(buf.data(), dt, rows, cols, hold,
                           fmt::format("tensors {}.. in '{}'", parts[0].t->name, file));
}

}  // namespace

std::vector<float> gguf_vector(const GgufFile& f, const std::string& name) {
  const GgufTensor& t = *f.tensor(name);
  std::vector<float> out(t.numel());
  to_f32(t.data, *float_dtype(t.type), out.size(), out.data());
  check_finite(out.data(), out.size(), fmt::format("tensor {} in '{}'", name, f.path()));
  return out;
}

kernels::PackedMatrix gguf_matrix(const GgufFile& f, const std::string& name, const Hold& hold) {
  return pack_gguf_matrix({{f.tensor(name), {}}}, hold, f.path());
}

namespace {

struct Expected {
  std::string name;
  std::vector<int64_t> shape;
  bool matrix;
  bool optional = false;  // llama.cpp's TENSOR_NOT_REQUIRED (a layer scalar: 1 when absent)
};

// Layer `layer` of c's tensors, named as block `block` of the file. The
// depthwise conv is stored squeezed ([C, kc]) and read as floats, like the
// vectors.
void add_layer_tensors(const ModelConfig& c, int layer, int block, std::vector<Expected>& t) {
  for (auto& [hf, shape] : layer_tensor_shapes(c, "", layer)) {
    const bool conv = hf.ends_with("conv1d.weight");
    std::vector<int64_t> s = shape;
    if (conv) s = {shape[0], shape[2]};
    t.push_back({gguf_layer_tensor_name(c, block, hf), s, s.size() == 2 && !conv,
                 hf == "layer_scalar"});
  }
}

std::vector<Expected> expected_tensors(const ModelConfig& c) {
  const int64_t d = c.d_model, v = c.vocab;
  std::vector<Expected> t;
  t.push_back({"token_embd.weight", {v, d}, true});
  if (c.ple_dim > 0) {
    const int64_t all = int64_t(c.n_layers) * c.ple_dim;
    t.push_back({"per_layer_token_embd.weight", {v, all}, true});
    t.push_back({"per_layer_model_proj.weight", {all, d}, true});
    t.push_back({"per_layer_proj_norm.weight", {c.ple_dim}, false});
  }
  for (int i = 0; i < c.n_layers; ++i) add_layer_tensors(c, i, i, t);
  t.push_back({"output_norm.weight", {d}, false});
  if (!c.tie_embeddings) t.push_back({"output.weight", {v, d}, true});
  if (c.mtp_layers > 0) {  // the native MTP head: block n_layers
    for (const char* hf : {"mtp.fc.weight", "mtp.pre_fc_norm_embedding.weight",
                           "mtp.pre_fc_norm_hidden.weight", "mtp.norm.weight"}) {
      const bool fc = std::string_view(hf) == "mtp.fc.weight";
      t.push_back({gguf_native_mtp_name(c, hf), fc ? std::vector<int64_t>{d, 2 * d}
                                                   : std::vector<int64_t>{d}, fc});
    }
    add_layer_tensors(native_mtp_config(c), 0, c.n_layers, t);
  }
  return t;
}

// A layer reading another's K/V computes none: its K/V tensors, which
// converted checkpoints may carry, are not read.
bool unread_kv_tensor(const ModelConfig& c, const std::string& name) {
  if (!name.starts_with("blk.")) return false;
  const size_t dot = name.find('.', 4);
  if (dot == std::string::npos) return false;
  int layer = -1;
  try {
    layer = std::stoi(name.substr(4, dot - 4));
  } catch (const std::exception&) {
    return false;
  }
  if (layer < 0 || layer >= c.n_layers || c.layer_kind(layer).owns_kv()) return false;
  const std::string rest = name.substr(dot + 1);
  return rest.starts_with("attn_k.") || rest.starts_with("attn_v.") ||
         rest.starts_with("attn_k_norm.");
}

void check_tensors(const GgufFile& f, const ModelConfig& c) {
  // Before listing them: a block_count the file's tensors cannot cover is
  // refused here, instead of building names for tensors that cannot exist.
  // The fewest of any layer kind: the pattern's kinds repeat within the
  // first layers, and the layers reading another's K/V (llama.cpp's converter
  // writes no attn_k/attn_v/attn_k_norm for them) are the last ones.
  size_t per_layer = SIZE_MAX;
  auto count = [&](int l) {
    per_layer = std::min(per_layer, layer_tensor_shapes(c, "", l).size() -
                                        (c.layer_scalar ? 1 : 0));
  };
  for (int l = 0; l < std::min(c.n_layers, 8); ++l) count(l);
  for (int l = std::max(0, c.n_layers - 8); l < c.n_layers; ++l) count(l);
  const size_t need = size_t(c.n_layers) * per_layer + (c.tie_embeddings ? 2 : 3);
  if (f.tensors().size() < need) {
    fail<FormatError>("GGUF file '{}': its metadata describes a {} model of {} layers ({} "
                      "tensors), but the file holds {} tensors", f.path(), arch_name(c.arch),
                      c.n_layers, need, f.tensors().size());
  }
  std::set<std::string> wanted;
  for (auto& e : expected_tensors(c)) {
    wanted.insert(e.name);
    const GgufTensor* t = f.tensor(e.name);
    if (!t && e.optional) continue;
    if (!t) fail<FormatError>("tensor {} not found in GGUF file '{}'", e.name, f.path());
    if (!e.matrix && !float_dtype(t->type)) {
      fail<ConfigError>("tensor {} in '{}' has type {}; norm weights and biases must be F32, F16 "
                        "or BF16", e.name, f.path(), ggml_type_name(t->type));
    }
    if (t->shape() != e.shape) {
      fail<ShapeError>("tensor {} in '{}' has shape {}; the file's metadata implies {}", e.name,
                       f.path(), shape_str(t->shape()), shape_str(e.shape));
    }
  }
  if (c.rope_scaling.type == RopeScaling::Type::Llama3 || c.rope_partial != 1.f ||
      family(c.arch).gguf_rope_freqs == RopeFreqs::Proportional) {
    wanted.insert("rope_freqs.weight");
  }
  for (auto& t : f.tensors()) {
    if (!wanted.count(t.name) && !unread_kv_tensor(c, t.name)) {
      fail<FormatError>("tensor {} in '{}' is not part of a {} model as its metadata describes it "
                        "(it would be ignored, changing the outputs)", t.name, f.path(),
                        arch_name(c.arch));
    }
  }
}

}  // namespace

LayerWeights load_gguf_layer(const GgufFile& f, const ModelConfig& c, int i, const Hold& hold,
                             int block) {
  const LayerKind kind = c.layer_kind(i);
  if (block < 0) block = i;
  auto name = [&](const char* hf) { return gguf_layer_tensor_name(c, block, hf); };
  auto tensor = [&](const char* hf) { return f.tensor(name(hf)); };
  LayerWeights w;
  w.attn_norm = gguf_vector(f, name("input_layernorm.weight"));
  if (c.sandwich_norms) {
    w.post_attn_norm = gguf_vector(f, name("post_attention_layernorm.weight"));
    w.ffn_norm = gguf_vector(f, name("pre_feedforward_layernorm.weight"));
    w.post_ffn_norm = gguf_vector(f, name("post_feedforward_layernorm.weight"));
  } else {
    w.ffn_norm = gguf_vector(f, name("post_attention_layernorm.weight"));
  }
  w.w_gate_up = pack_gguf_matrix(
      {{tensor("mlp.gate_proj.weight"), {}}, {tensor("mlp.up_proj.weight"), {}}}, hold, f.path());
  w.w_down = pack_gguf_matrix({{tensor("mlp.down_proj.weight"), {}}}, hold, f.path());
  if (kind.recurrent) {
    // llama.cpp's qwen35 tensors: ssm_a holds -exp(A_log), the norms but
    // the gated one 1 + w; the value heads in its tiled order (LinearAttn).
    w.w_lin_in = pack_gguf_matrix({{tensor("linear_attn.in_proj_qkv.weight"), {}},
                                   {tensor("linear_attn.in_proj_z.weight"), {}},
                                   {tensor("linear_attn.in_proj_b.weight"), {}},
                                   {tensor("linear_attn.in_proj_a.weight"), {}}},
                                  hold, f.path());
    w.w_lin_out = pack_gguf_matrix({{tensor("linear_attn.out_proj.weight"), {}}}, hold, f.path());
    w.conv_w = gguf_vector(f, name("linear_attn.conv1d.weight"));
    w.dt_bias = gguf_vector(f, name("linear_attn.dt_bias"));
    w.a_neg = gguf_vector(f, name("linear_attn.A_log"));
    w.lin_norm = gguf_vector(f, name("linear_attn.norm.weight"));
    return w;
  }
  if (c.qk_norm) {
    w.q_norm = gguf_vector(f, name("self_attn.q_norm.weight"));
    if (kind.owns_kv()) w.k_norm = gguf_vector(f, name("self_attn.k_norm.weight"));
  }
  if (c.qkv_bias) {
    for (const char* b : {"self_attn.q_proj.bias", "self_attn.k_proj.bias", "self_attn.v_proj.bias"}) {
      auto v = gguf_vector(f, name(b));
      w.qkv_bias.insert(w.qkv_bias.end(), v.begin(), v.end());
    }
  }
  const bool permuted = family(c.arch).gguf_qk_permuted;
  std::vector<RowSource> qkv = {{tensor("self_attn.q_proj.weight"), {}}};
  if (kind.owns_kv()) qkv.push_back({tensor("self_attn.k_proj.weight"), {}});
  if (kind.owns_kv() && !kind.k_eq_v) qkv.push_back({tensor("self_attn.v_proj.weight"), {}});
  if (permuted) {
    qkv[0].perm = unpermute_rows(c.n_heads, kind.head_dim);
    qkv[1].perm = unpermute_rows(kind.n_kv_heads, kind.head_dim);
  }
  w.wqkv = pack_gguf_matrix(qkv, hold, f.path());
  w.wo = pack_gguf_matrix({{tensor("self_attn.o_proj.weight"), {}}}, hold, f.path());
  if (c.ple_dim > 0) {
    w.w_ple_gate = pack_gguf_matrix({{tensor("per_layer_input_gate.weight"), {}}}, hold, f.path());
    w.w_ple_proj = pack_gguf_matrix({{tensor("per_layer_projection.weight"), {}}}, hold, f.path());
    w.ple_post_norm = gguf_vector(f, name("post_per_layer_input_norm.weight"));
  }
  if (c.layer_scalar && tensor("layer_scalar")) w.layer_scalar = gguf_vector(f, name("layer_scalar"))[0];
  return w;
}

EmbeddingTable gguf_table(const GgufFile& f, const std::string& name, size_t rows, size_t cols) {
  const GgufTensor* e = f.tensor(name);
  if (const auto edt = float_dtype(e->type)) {
    check_finite(e->data, *edt, e->numel(), fmt::format("tensor {} in '{}'", name, f.path()));
    return EmbeddingTable{e->data, *edt, rows, cols, GgmlType::F32, f.keep_alive()};
  }
  if (!kernels::ggml_type_supported(static_cast<GgmlType>(e->type))) {
    fail<ConfigError>("tensor {} in '{}' has type {}, which mtpspec cannot compute with", name,
                      f.path(), ggml_type_name(e->type));
  }
  check_finite_blocks(e->data, static_cast<GgmlType>(e->type), e->rows(), e->row_elems(),
                      fmt::format("tensor {} in '{}'", name, f.path()));
  return EmbeddingTable{e->data, DType::U8, rows, cols, static_cast<GgmlType>(e->type),
                        f.keep_alive()};
}

LoadedModel load_gguf(const std::string& path, const LoadOptions& opt) {
  auto file = std::make_shared<GgufFile>(path);
  const GgufFile& f = *file;
  LoadedModel m;
  m.path = path;
  m.config = gguf_model_config(f);
  m.tokenizer = path;  // tokenizer.ggml.* in the same file
  const ModelConfig& c = m.config;
  check_tensors(f, c);

  ModelWeights& w = m.weights;
  w.layers.resize(size_t(c.n_layers));
  const size_t n_tasks = size_t(c.n_layers) + 1;
  auto task = [&](size_t t) {
    if (t > 0) {
      w.layers[t - 1] = load_gguf_layer(f, c, int(t - 1), opt.weights);
      return;
    }
    const GgufTensor* e = f.tensor("token_embd.weight");
    w.embed = gguf_table(f, "token_embd.weight", size_t(c.vocab), size_t(c.d_model));
    if (c.ple_dim > 0) {
      w.ple_embed = gguf_table(f, "per_layer_token_embd.weight", size_t(c.vocab),
                               size_t(c.n_layers) * size_t(c.ple_dim));
      w.ple_model_proj = pack_gguf_matrix({{f.tensor("per_layer_model_proj.weight"), {}}},
                                          opt.weights, path);
      w.ple_proj_norm = gguf_vector(f, "per_layer_proj_norm.weight");
    }
    w.final_norm = gguf_vector(f, "output_norm.weight");
    w.lm_head = c.tie_embeddings
                    ? w.embed.head(opt.weights, opt.tied_head,
                                   fmt::format("tensor {} in '{}' (the tied head)", e->name, path))
                    : gguf_matrix(f, "output.weight", opt.weights);
    if (c.mtp_layers > 0) {
      auto head = [&](const char* hf) { return gguf_native_mtp_name(c, hf); };
      w.mtp.norm_embed = gguf_vector(f, head("mtp.pre_fc_norm_embedding.weight"));
      w.mtp.norm_hidden = gguf_vector(f, head("mtp.pre_fc_norm_hidden.weight"));
      w.mtp.norm = gguf_vector(f, head("mtp.norm.weight"));
      w.mtp.fc = pack_gguf_matrix({{f.tensor(head("mtp.fc.weight")), {}}}, opt.weights, path);
      w.mtp.layer = load_gguf_layer(f, native_mtp_config(c), 0, opt.weights, c.n_layers);
    }
  };
  run_load_tasks(n_tasks, task);
  w.keep_alive.push_back(file->keep_alive());
  return m;
}

// ---- Tensor names ---------------------------------------------------------

std::string gguf_layer_tensor_name(const ModelConfig& c, int layer, const std::string& hf) {
  const Family& f = family(c.arch);
  for (std::span<const TensorName> names : {f.gguf_layer_names, f.gguf_linear_names}) {
    for (const TensorName& m : names) {
      if (hf == m.hf) return "blk." + std::to_string(layer) + "." + m.gguf;
    }
  }
  MTP_CHECK(false, "no GGUF name for layer tensor '{}' of {}", hf, arch_name(c.arch));
}

std::string gguf_native_mtp_name(const ModelConfig& c, const std::string& hf) {
  // llama.cpp's _QwenMtpMixin: mtp.layers.0.* is block n_layers' layer,
  // the head's own tensors are that block's nextn.*.
  static constexpr std::pair<std::string_view, std::string_view> kHead[] = {
      {"mtp.fc.weight", "nextn.eh_proj.weight"},
      {"mtp.pre_fc_norm_embedding.weight", "nextn.enorm.weight"},
      {"mtp.pre_fc_norm_hidden.weight", "nextn.hnorm.weight"},
      {"mtp.norm.weight", "nextn.shared_head_norm.weight"}};
  const std::string block = "blk." + std::to_string(c.n_layers) + ".";
  for (const auto& [from, to] : kHead) {
    if (hf == from) return block + std::string(to);
  }
  constexpr std::string_view layer = "mtp.layers.0.";
  MTP_CHECK(hf.starts_with(layer), "'{}' is no tensor of the native MTP head", hf);
  return gguf_layer_tensor_name(native_mtp_config(c), c.n_layers, hf.substr(layer.size()));
}

}  // namespace mtp::model
