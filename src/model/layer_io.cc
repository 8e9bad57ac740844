#include "model/layer_io.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>

#include "core/thread_pool.h"

#include "core/error.h"
#include "kernels/quant_blocks.h"

namespace mtp::model {

using io::TensorSet;
using io::TensorView;
using kernels::PackedMatrix;

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

namespace {

// The pre-FFN norm(s) and the MLP of a layer.
void mlp_tensor_shapes(const ModelConfig& c, const std::string& p, const LayerKind& k,
                       TensorShapes& t) {
  const int64_t d = c.d_model, f = k.ffn;
  t.push_back({p + "post_attention_layernorm.weight", {d}});
  if (c.sandwich_norms) {
    t.push_back({p + "pre_feedforward_layernorm.weight", {d}});
    t.push_back({p + "post_feedforward_layernorm.weight", {d}});
  }
  t.push_back({p + "mlp.gate_proj.weight", {f, d}});
  t.push_back({p + "mlp.up_proj.weight", {f, d}});
  t.push_back({p + "mlp.down_proj.weight", {d, f}});
}

}  // namespace

TensorShapes layer_tensor_shapes(const ModelConfig& c, const std::string& p, int layer) {
  const LayerKind k = c.layer_kind(layer);
  const int64_t d = c.d_model, hd = k.head_dim, q = int64_t(c.n_heads) * hd,
                kv = int64_t(k.n_kv_heads) * hd;
  TensorShapes t;
  t.push_back({p + "input_layernorm.weight", {d}});
  if (k.recurrent) {
    const LinearAttn& a = c.linear;
    const int64_t C = a.conv_dim(), vd = a.value_dim(), hv = a.v_heads;
    t.push_back({p + "linear_attn.in_proj_qkv.weight", {C, d}});
    t.push_back({p + "linear_attn.in_proj_z.weight", {vd, d}});
    t.push_back({p + "linear_attn.in_proj_b.weight", {hv, d}});
    t.push_back({p + "linear_attn.in_proj_a.weight", {hv, d}});
    t.push_back({p + "linear_attn.conv1d.weight", {C, 1, a.conv_kernel}});
    t.push_back({p + "linear_attn.dt_bias", {hv}});
    t.push_back({p + "linear_attn.A_log", {hv}});
    t.push_back({p + "linear_attn.norm.weight", {a.v_dim}});
    t.push_back({p + "linear_attn.out_proj.weight", {d, vd}});
    mlp_tensor_shapes(c, p, k, t);
    return t;
  }
  // Qwen3.5's output gate: per head hd query rows, then hd gate rows.
  t.push_back({p + "self_attn.q_proj.weight", {c.attn_gate ? 2 * q : q, d}});
  if (k.owns_kv()) {
    t.push_back({p + "self_attn.k_proj.weight", {kv, d}});
    if (!k.k_eq_v) t.push_back({p + "self_attn.v_proj.weight", {kv, d}});
  }
  t.push_back({p + "self_attn.o_proj.weight", {d, q}});
  if (c.qkv_bias) {
    t.push_back({p + "self_attn.q_proj.bias", {q}});
    t.push_back({p + "self_attn.k_proj.bias", {kv}});
    t.push_back({p + "self_attn.v_proj.bias", {kv}});
  }
  if (c.qk_norm) {
    t.push_back({p + "self_attn.q_norm.weight", {hd}});
    if (k.owns_kv()) t.push_back({p + "self_attn.k_norm.weight", {hd}});
  }
  mlp_tensor_shapes(c, p, k, t);
  if (c.ple_dim > 0) {
    const int64_t e = c.ple_dim;
    t.push_back({p + "per_layer_input_gate.weight", {e, d}});
    t.push_back({p + "per_layer_projection.weight", {d, e}});
    t.push_back({p + "post_per_layer_input_norm.weight", {d}});
  }
  if (c.layer_scalar) t.push_back({p + "layer_scalar", {1}});
  return t;
}

TensorShapes native_mtp_tensors(const ModelConfig& c) {
  const int64_t d = c.d_model;
  TensorShapes t = {{"mtp.fc.weight", {d, 2 * d}},
                    {"mtp.pre_fc_norm_embedding.weight", {d}},
                    {"mtp.pre_fc_norm_hidden.weight", {d}},
                    {"mtp.norm.weight", {d}}};
  for (auto& x : layer_tensor_shapes(native_mtp_config(c), "mtp.layers.0.", 0)) {
    t.push_back(std::move(x));
  }
  return t;
}

void check_tensor_shapes(const TensorSet& ts, const TensorShapes& expected,
                         const std::string& what, const BlockTensors* blocks) {
  for (auto& [name, shape] : expected) {
    const TensorView* v = ts.find(name);
    if (!v) fail<FormatError>("tensor '{}' not found in '{}' ({})", name, ts.source(), what);
    const auto b = blocks ? blocks->find(name) : BlockTensors::const_iterator();
    if (blocks && b != blocks->end()) {
      const BlockTensor& bt = b->second;
      const std::vector<int64_t> logical{bt.rows, bt.cols};
      if (logical != shape) {
        fail<ShapeError>("tensor '{}' in '{}' is recorded as {} {}; {} implies {}", name,
                         ts.file_of(name), ggml_type_name(uint32_t(bt.type)), shape_str(logical),
                         what, shape_str(shape));
      }
      const int64_t rb = int64_t(ggml_row_bytes(uint32_t(bt.type), size_t(bt.cols)));
      if (v->dtype != DType::U8 || v->shape != std::vector<int64_t>{bt.rows, rb}) {
        fail<ShapeError>("tensor '{}' in '{}' is recorded as {} {}, so it must be U8 [{}, {}] "
                         "(its rows of blocks); it is {} {}", name, ts.file_of(name),
                         ggml_type_name(uint32_t(bt.type)), shape_str(logical), bt.rows, rb,
                         dtype_name(v->dtype), shape_str(v->shape));
      }
      continue;
    }
    if (v->dtype != DType::F32 && v->dtype != DType::BF16 && v->dtype != DType::F16) {
      fail<ShapeError>("tensor '{}' in '{}' has dtype {}; weights must be F32, BF16 or F16", name,
                       ts.file_of(name), dtype_name(v->dtype));
    }
    if (v->shape != shape) {
      fail<ShapeError>("tensor '{}' in '{}' has shape {}; {} implies {}", name, ts.file_of(name),
                       shape_str(v->shape), what, shape_str(shape));
    }
  }
}

const TensorView& finite_tensor(const TensorSet& ts, const std::string& name) {
  const TensorView& v = ts.get(name);
  check_finite(v.data, v.dtype, v.numel(),
               fmt::format("tensor '{}' in '{}'", name, ts.file_of(name)));
  return v;
}

// Same source dtype: bytes are copied, so packing sees exactly the stored
// values; mixed dtypes go through fp32, which represents F32/BF16/F16 exactly.
PackedMatrix pack_float_matrix(const void* src, DType stored, size_t rows, size_t cols,
                               const Hold& hold, const std::string& what) {
  try {
    return PackedMatrix::pack(src, stored, rows, cols, resolve_hold(hold, stored));
  } catch (const InputError& e) {
    fail<InputError>("{}: {}", what, e.what());
  }
}

PackedMatrix pack_rows(const std::vector<const TensorView*>& parts, const Hold& hold) {
  const size_t cols = size_t(parts[0]->shape[1]);
  size_t rows = 0;
  bool same = true;
  std::string what = "tensor";
  for (auto* p : parts) {
    rows += size_t(p->shape[0]);
    same = same && p->dtype == parts[0]->dtype;
    what += (p == parts[0] ? " " : " + ") + p->name;
  }
  if (parts.size() == 1) return pack_float_matrix(parts[0]->data, parts[0]->dtype, rows, cols, hold, what);
  const DType dt = same ? parts[0]->dtype : DType::F32;
  const size_t es = dtype_size(dt);
  std::vector<uint8_t> buf(rows * cols * es);
  uint8_t* dst = buf.data();
  for (auto* p : parts) {
    if (same) {
      std::memcpy(dst, p->data, p->nbytes);
    } else {
      to_f32(p->data, p->dtype, p->numel(), reinterpret_cast<float*>(dst));
    }
    dst += p->numel() * es;
  }
  return pack_float_matrix(buf.data(), dt, rows, cols, hold, what);
}

PackedMatrix load_matrix(const TensorSet& ts, const std::vector<std::string>& names,
                         const Hold& hold, const BlockTensors* blocks) {
  auto block_of = [&](const std::string& n) -> const BlockTensor* {
    if (!blocks) return nullptr;
    auto it = blocks->find(n);
    return it == blocks->end() ? nullptr : &it->second;
  };
  if (std::none_of(names.begin(), names.end(), block_of)) {
    std::vector<const TensorView*> parts;
    for (const auto& n : names) parts.push_back(&finite_tensor(ts, n));
    return pack_rows(parts, hold);
  }
  std::vector<PackedMatrix> packed;
  for (size_t i = 0; i < names.size();) {
    const BlockTensor* b = block_of(names[i]);
    if (!b) {
      packed.push_back(pack_rows({&finite_tensor(ts, names[i])}, hold));
      ++i;
      continue;
    }
    // A run of parts of one block type: their rows of blocks back to back.
    std::vector<uint8_t> buf;
    int64_t rows = 0;
    const size_t rb = ggml_row_bytes(uint32_t(b->type), size_t(b->cols));
    size_t j = i;
    for (const BlockTensor* bj; j < names.size() && (bj = block_of(names[j])) && bj->type == b->type;
         ++j) {
      const TensorView& v = ts.get(names[j]);
      const auto* src = static_cast<const uint8_t*>(v.data);
      MTP_CHECK(v.nbytes == size_t(bj->rows) * rb, "block tensor size checked at open");
      check_finite_blocks(src, b->type, size_t(bj->rows), size_t(b->cols),
                          fmt::format("tensor '{}' in '{}'", names[j], ts.file_of(names[j])));
      buf.insert(buf.end(), src, src + v.nbytes);
      rows += bj->rows;
    }
    packed.push_back(PackedMatrix::pack_blocks(buf.data(), b->type, size_t(rows), size_t(b->cols)));
    i = j;
  }
  return packed.size() == 1 ? std::move(packed[0]) : PackedMatrix::concat_rows(std::move(packed));
}

std::vector<float> load_norm(const TensorSet& ts, const std::string& name, bool one_plus) {
  const TensorView& v = finite_tensor(ts, name);
  return norm_weight(v.data, v.dtype, v.numel(), one_plus);
}

void run_load_tasks(size_t n, const std::function<void(size_t)>& task) {
  std::vector<std::exception_ptr> errors(n);
  ThreadPool pool(std::max(1, std::min<int>(physical_cores(), int(n))));
  pool.parallel_for(n, [&](size_t b, size_t e, size_t) {
    for (size_t t = b; t < e; ++t) {
      try {
        task(t);
      } catch (...) {
        errors[t] = std::current_exception();
      }
    }
  });
  for (auto& err : errors) {
    if (err) std::rethrow_exception(err);
  }
}

namespace {

std::vector<float> load_f32(const TensorSet& ts, const std::string& name) {
  const TensorView& v = finite_tensor(ts, name);
  std::vector<float> out(v.numel());
  to_f32(v.data, v.dtype, out.size(), out.data());
  return out;
}

void load_linear_attn(const TensorSet& ts, const std::string& p,
                      const Hold& hold, const BlockTensors* blocks, LayerWeights& w) {
  w.w_lin_in = load_matrix(ts, {p + "in_proj_qkv.weight", p + "in_proj_z.weight",
                                p + "in_proj_b.weight", p + "in_proj_a.weight"}, hold, blocks);
  w.w_lin_out = load_matrix(ts, {p + "out_proj.weight"}, hold, blocks);
  w.conv_w = load_f32(ts, p + "conv1d.weight");  // [C, 1, kc] = [C, kc]
  w.dt_bias = load_f32(ts, p + "dt_bias");
  w.a_neg = load_f32(ts, p + "A_log");
  for (float& a : w.a_neg) a = -std::exp(a);  // transformers: -A_log.float().exp()
  w.lin_norm = load_norm(ts, p + "norm.weight", false);  // the gated norm: plain w
}

}  // namespace

LayerWeights load_layer(const TensorSet& ts, const ModelConfig& c, const std::string& p,
                        const Hold& hold, const BlockTensors* blocks, int layer) {
  const LayerKind k = c.layer_kind(layer);
  const bool op = c.norm_one_plus;
  LayerWeights w;
  w.attn_norm = load_norm(ts, p + "input_layernorm.weight", op);
  if (c.sandwich_norms) {  // Gemma: post_attention_layernorm is the sandwich norm
    w.post_attn_norm = load_norm(ts, p + "post_attention_layernorm.weight", op);
    w.ffn_norm = load_norm(ts, p + "pre_feedforward_layernorm.weight", op);
    w.post_ffn_norm = load_norm(ts, p + "post_feedforward_layernorm.weight", op);
  } else {  // Llama/Qwen: post_attention_layernorm is the pre-FFN norm
    w.ffn_norm = load_norm(ts, p + "post_attention_layernorm.weight", op);
  }
  const std::string m = p + "mlp.";
  w.w_gate_up = load_matrix(ts, {m + "gate_proj.weight", m + "up_proj.weight"}, hold, blocks);
  w.w_down = load_matrix(ts, {m + "down_proj.weight"}, hold, blocks);
  if (k.recurrent) {
    load_linear_attn(ts, p + "linear_attn.", hold, blocks, w);
    return w;
  }
  if (c.qk_norm) {  // per-head norms: (1 + w) on Gemma 3 and Qwen3.5, plain on Qwen3 and Gemma 4
    w.q_norm = load_norm(ts, p + "self_attn.q_norm.weight", op);
    if (k.owns_kv()) w.k_norm = load_norm(ts, p + "self_attn.k_norm.weight", op);
  }
  if (c.qkv_bias) {
    for (const char* b : {"q", "k", "v"}) {
      const TensorView& v = finite_tensor(ts, p + "self_attn." + b + "_proj.bias");
      size_t off = w.qkv_bias.size();
      w.qkv_bias.resize(off + v.numel());
      to_f32(v.data, v.dtype, v.numel(), w.qkv_bias.data() + off);
    }
  }
  const std::string a = p + "self_attn.";
  std::vector<std::string> qkv = {a + "q_proj.weight"};
  if (k.owns_kv()) qkv.push_back(a + "k_proj.weight");
  if (k.owns_kv() && !k.k_eq_v) qkv.push_back(a + "v_proj.weight");
  w.wqkv = load_matrix(ts, qkv, hold, blocks);
  w.wo = load_matrix(ts, {a + "o_proj.weight"}, hold, blocks);
  if (c.ple_dim > 0) {
    w.w_ple_gate = load_matrix(ts, {p + "per_layer_input_gate.weight"}, hold, blocks);
    w.w_ple_proj = load_matrix(ts, {p + "per_layer_projection.weight"}, hold, blocks);
    w.ple_post_norm = load_norm(ts, p + "post_per_layer_input_norm.weight", op);
  }
  if (c.layer_scalar) w.layer_scalar = load_norm(ts, p + "layer_scalar", false).at(0);
  return w;
}

}  // namespace mtp::model
