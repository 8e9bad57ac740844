#include "train/torch_mtp.h"

#include <dlfcn.h>
#include <malloc.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

#include "core/error.h"
#include "core/setting.h"
#include "model/block.h"

namespace mtp::train {

namespace {
std::string prefix(int k) { return "mtp." + std::to_string(k) + "."; }

// Matrices and embeddings; not norms, biases, Gemma 4's layer scalar or the
// Gated DeltaNet's decay parameters (dt_bias, A_log).
bool is_decayed(const std::string& name) {
  auto ends = [&](const char* s) {
    const size_t n = std::char_traits<char>::length(s);
    return name.size() >= n && name.compare(name.size() - n, n, s) == 0;
  };
  return name.find("norm") == std::string::npos && !ends(".bias") && !ends("layer_scalar") &&
         !ends("dt_bias") && !ends("A_log");
}
}  // namespace

torch::Tensor rmsnorm(const torch::Tensor& x, const torch::Tensor& w, float eps) {
  return x * torch::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + eps) * w;
}

// ---- FlatLayout -------------------------------------------------------------

FlatLayout FlatLayout::for_drafter(const model::ModelConfig& target,
                                   const drafter::DrafterConfig& d) {
  return from_shapes(drafter::drafter_tensor_shapes(target, d));
}

FlatLayout FlatLayout::from_shapes(model::TensorShapes shapes) {
  std::sort(shapes.begin(), shapes.end());
  FlatLayout l;
  for (auto& [name, shape] : shapes) {
    Entry e;
    e.name = name;
    e.shape = shape;
    e.numel = 1;
    for (auto s : shape) e.numel *= s;
    e.offset = l.total;
    e.decay = is_decayed(name);
    l.total += e.numel;
    l.entries.push_back(std::move(e));
  }
  return l;
}

const FlatLayout::Entry& FlatLayout::at(const std::string& name) const {
  auto it = std::lower_bound(entries.begin(), entries.end(), name,
                             [](const Entry& e, const std::string& n) { return e.name < n; });
  if (it == entries.end() || it->name != name) fail<ShapeError>("no drafter tensor '{}'", name);
  return *it;
}

std::vector<float> FlatLayout::flatten(const std::map<std::string, std::vector<float>>& t) const {
  if (t.size() != entries.size()) {
    fail<ShapeError>("{} drafter tensors given; this drafter has {}", t.size(), entries.size());
  }
  std::vector<float> flat(static_cast<size_t>(total));
  for (auto& e : entries) {
    auto it = t.find(e.name);
    if (it == t.end()) fail<ShapeError>("drafter tensor '{}' is missing", e.name);
    if (int64_t(it->second.size()) != e.numel) {
      fail<ShapeError>("drafter tensor '{}' has {} values, its shape needs {}", e.name,
                       it->second.size(), e.numel);
    }
    std::copy(it->second.begin(), it->second.end(), flat.begin() + e.offset);
  }
  return flat;
}

std::map<std::string, std::vector<float>> FlatLayout::unflatten(const float* flat,
                                                                int64_t n) const {
  if (n != total) fail<ShapeError>("flat parameter vector of {} values; layout needs {}", n, total);
  std::map<std::string, std::vector<float>> out;
  for (auto& e : entries) out[e.name].assign(flat + e.offset, flat + e.offset + e.numel);
  return out;
}

nlohmann::json FlatLayout::to_json() const {
  nlohmann::json j = nlohmann::json::array();
  for (auto& e : entries) j.push_back({{"name", e.name}, {"offset", e.offset}, {"shape", e.shape}});
  return j;
}

std::vector<torch::Tensor> FlatLayout::views(const torch::Tensor& flat, bool requires_grad) const {
  TORCH_CHECK(flat.dim() == 1 && flat.size(0) == total, "views: flat vector of ",
              total, " values expected");
  std::vector<torch::Tensor> out;
  for (const auto& e : entries) {
    torch::Tensor v = flat.narrow(0, e.offset, e.numel).view(e.shape).detach();
    out.push_back(requires_grad ? v.requires_grad_(true) : v);
  }
  return out;
}

torch::Tensor FlatLayout::flat_grad(const std::vector<torch::Tensor>& leaves) const {
  std::vector<torch::Tensor> parts;
  for (size_t i = 0; i < leaves.size(); ++i) {
    const torch::Tensor& g = leaves[i].grad();
    parts.push_back(g.defined() ? g.reshape(-1)
                                : torch::zeros({entries[i].numel}, leaves[i].options()));
  }
  return torch::cat(parts);
}

torch::Tensor FlatLayout::to_flat(const std::vector<float>& values, torch::Device dev) const {
  if (int64_t(values.size()) != total) {
    fail<ShapeError>("{} parameters given; the layout has {}", values.size(), total);
  }
  return torch::from_blob(const_cast<float*>(values.data()), {total}, torch::kFloat32)
      .clone()
      .to(dev);
}

// ---- shared layer code ------------------------------------------------------

RopeTables rope_tables(const model::Rope& rope, bool local, int64_t R, int64_t head_dim,
                       torch::Device dev) {
  std::vector<model::Row> rows(static_cast<size_t>(R));
  for (int64_t t = 0; t < R; ++t) rows[size_t(t)] = {0, int32_t(t), 0};
  std::vector<float> cs;
  rope.tables(rows, local, cs);  // [R, hd]: cos[hd/2] then sin[hd/2]
  const int64_t half = head_dim / 2;
  auto t = torch::from_blob(cs.data(), {R, 2, half}, torch::kFloat32).clone().to(dev);
  return {t.select(1, 0).view({1, R, 1, half}), t.select(1, 1).view({1, R, 1, half})};
}

torch::Tensor causal_mask(int64_t R, int window, torch::Device dev) {
  auto t = torch::arange(R).view({R, 1}), j = torch::arange(R).view({1, R});
  auto masked = j > t;
  if (window > 0) masked = masked | (t - j >= window);
  return masked.to(dev);
}

namespace {
// x: [B, R, heads, hd]; rotate-half (HF) or interleaved pairs (llama2.c).
// Partial rotary (Qwen3.5): the tables cover the first 2·cos.size(-1) dims of
// each head; the other dims pass unrotated.
torch::Tensor apply_rope(const model::ModelConfig& c, const torch::Tensor& x, const RopeTables& r) {
  const auto& [cos, sin] = r;
  const int64_t half = cos.size(-1);
  if (2 * half < x.size(-1)) {
    const int64_t rot = 2 * half;
    return torch::cat({apply_rope(c, x.narrow(-1, 0, rot), r),
                       x.narrow(-1, rot, x.size(-1) - rot)}, -1);
  }
  if (c.rope_interleaved) {  // pairs (x[2i], x[2i+1])
    auto xp = x.unflatten(-1, {half, 2});
    auto x0 = xp.select(-1, 0), x1 = xp.select(-1, 1);
    return torch::stack({x0 * cos - x1 * sin, x0 * sin + x1 * cos}, -1).flatten(-2);
  }
  auto x0 = x.narrow(-1, 0, half), x1 = x.narrow(-1, half, half);  // rotate-half
  return torch::cat({x0 * cos - x1 * sin, x0 * sin + x1 * cos}, -1);
}
}  // namespace

std::vector<float> to_host(const torch::Tensor& t) {
  torch::Tensor c = t.detach().to(torch::kCPU).contiguous();
  return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
}

// ---- TorchMtp ---------------------------------------------------------------

void set_threads(int n) {
  // Training allocates the same large activations every step; keep them in the
  // heap instead of mmap/munmap (and page faults) per tensor.
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  at::set_num_threads(n);
  using SetFn = void (*)(int);
  if (auto f = reinterpret_cast<SetFn>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) f(n);
}

torch::Device training_device(const std::string& name, int local_rank) {
  if (name == "cuda") {
    if (!torch::cuda::is_available()) {
      fail_setting<InputError>("device", "the device cuda: {}",
                               at::globalContext().hasCUDART()
                                   ? "this libtorch build has CUDA but sees no CUDA device "
                                     "(driver, CUDA_VISIBLE_DEVICES)"
                                   : "this libtorch build has no CUDA (a CPU build: "
                                     "docs/TRAINING.md \"CUDA\" says how to build against a "
                                     "CUDA libtorch)");
    }
    const int n = int(torch::cuda::device_count());
    return torch::Device(torch::kCUDA, c10::DeviceIndex(local_rank % n));
  }
  if (name != "cpu") {
    fail_setting<InputError>("device", "the training device must be cpu or cuda, got '{}'", name);
  }
  return torch::Device(torch::kCPU);
}

torch::Tensor round_to_dtype(const torch::Tensor& x, DType t) {
  switch (t) {
    case DType::BF16: return x.to(torch::kBFloat16).to(torch::kFloat32);
    case DType::F16: return x.to(torch::kHalf).to(torch::kFloat32);
    default: return x;
  }
}

TorchMtp::TorchMtp(const model::Model& target, const drafter::DrafterConfig& dc,
                   torch::Device dev)
    : target_(target), dc_(dc), bc_(drafter::module_block_config(target.config(), dc)), dev_(dev),
      layout_(FlatLayout::for_drafter(target.config(), dc)) {
  const auto& c = target.config();
  const auto& w = target.weights();
  const int64_t V = c.vocab, d = c.d_model;
  // lm_head rows exactly as the engine's kernel multiplies them.
  auto head = torch::empty({V, d}, torch::kFloat32);
  float* hp = head.data_ptr<float>();
  for (int64_t v = 0; v < V; ++v) w.lm_head.row_f32(size_t(v), hp + v * d);
  lm_head_ = head.to(dev_);
  final_norm_ = torch::from_blob(const_cast<float*>(w.final_norm.data()), {d}, torch::kFloat32)
                    .clone()
                    .to(dev_);
}


torch::Tensor TorchMtp::embed(const std::vector<int32_t>& tokens) const {
  const int64_t d = bc_.d_model, n = int64_t(tokens.size());
  auto e = torch::empty({n, d}, torch::kFloat32);
  float* p = e.data_ptr<float>();
  for (int64_t i = 0; i < n; ++i) target_.embed(tokens[size_t(i)], p + i * d);
  return e.to(dev_);
}

torch::Tensor TorchMtp::param(const P& p, const std::string& name) const {
  return p.at(layout_.index(name));
}

torch::Tensor TorchMtp::norm_weight(const P& p, const std::string& name) const {
  torch::Tensor w = param(p, name);
  return bc_.norm_one_plus ? w + 1.0f : w;  // Gemma: 1 + w in fp32, as load_norm
}

const RopeTables& TorchMtp::rope_tables(int64_t R) const {
  auto it = rope_cache_.find(R);
  if (it != rope_cache_.end()) return it->second;
  // The engine's own tables: global or local frequencies exactly as MtpRunner picks.
  const bool local = bc_.is_sliding(0) && target_.rope().has_local();
  return rope_cache_.emplace(R, train::rope_tables(target_.rope(), local, R, bc_.rotary_dim(bc_.head_dim), dev_))
      .first->second;
}

torch::Tensor TorchMtp::attn_mask(int64_t R) const {
  auto it = mask_cache_.find(R);
  if (it != mask_cache_.end()) return it->second;
  return mask_cache_
      .emplace(R, causal_mask(R, bc_.is_sliding(0) ? bc_.sliding_window : 0, dev_))
      .first->second;
}

torch::Tensor TorchMtp::block(int k, const P& flat, torch::Tensor x) const {
  const std::string p = prefix(k) + "block.";
  const int64_t R = x.size(1);
  return decoder_layer(bc_, [&](const std::string& n) { return param(flat, p + n); }, x,
                       rope_tables(R), attn_mask(R));
}

torch::Tensor gated_mlp(const model::ModelConfig& c,
                        const std::function<torch::Tensor(const std::string&)>& W,
                        const torch::Tensor& xn) {
  auto g = at::linear(xn, W("mlp.gate_proj.weight"));
  auto u = at::linear(xn, W("mlp.up_proj.weight"));
  auto a = c.activation == model::Activation::SiLU ? torch::silu(g) * u
                                                    : torch::gelu(g, "tanh") * u;
  return at::linear(a, W("mlp.down_proj.weight"));
}

torch::Tensor decoder_layer(const model::ModelConfig& c,
                            const std::function<torch::Tensor(const std::string&)>& W,
                            torch::Tensor x, const RopeTables& rope, const torch::Tensor& mask,
                            const LayerContext& lc, LayerKV* kv) {
  const model::LayerKind kind = c.layer_kind(lc.layer);
  const int64_t B = x.size(0), R = x.size(1), H = c.n_heads, KV = kind.n_kv_heads,
                hd = kind.head_dim;
  const float eps = c.norm_eps;
  auto N = [&](const std::string& n) {  // Gemma: 1 + w in fp32, as load_norm
    torch::Tensor w = W(n);
    return c.norm_one_plus ? w + 1.0f : w;
  };
  // --- attention ---
  auto xn = rmsnorm(x, N("input_layernorm.weight"), eps);
  torch::Tensor bq, bk, bv;
  if (c.qkv_bias) {
    bq = W("self_attn.q_proj.bias");
    bk = W("self_attn.k_proj.bias");
    bv = W("self_attn.v_proj.bias");
  }
  auto q = at::linear(xn, W("self_attn.q_proj.weight"), bq);
  torch::Tensor gate;  // Qwen3.5: per head hd query rows, then hd output-gate rows
  if (c.attn_gate) {
    auto qg = q.view({B, R, H, 2 * hd});
    q = qg.narrow(-1, 0, hd);
    gate = qg.narrow(-1, hd, hd).reshape({B, R, H * hd});
  } else {
    q = q.view({B, R, H, hd});
  }
  if (c.qk_norm) q = rmsnorm(q, N("self_attn.q_norm.weight"), eps);
  q = apply_rope(c, q, rope).permute({0, 2, 1, 3});  // [B, H, R, hd]
  torch::Tensor kk, v;
  if (kind.owns_kv()) {
    kk = at::linear(xn, W("self_attn.k_proj.weight"), bk).view({B, R, KV, hd});
    // V: its own projection, or (K = V) K's projection before K's norm and RoPE.
    v = kind.k_eq_v ? kk : at::linear(xn, W("self_attn.v_proj.weight"), bv).view({B, R, KV, hd});
    if (c.qk_norm) kk = rmsnorm(kk, N("self_attn.k_norm.weight"), eps);
    if (c.v_norm) v = v * torch::rsqrt(v.pow(2).mean(-1, /*keepdim=*/true) + eps);
    kk = apply_rope(c, kk, rope).permute({0, 2, 1, 3});  // [B, KV, R, hd]
    v = v.permute({0, 2, 1, 3});
    if (kv) {  // this call's rows into the cache, then attention over every cached position
      const auto at = kv->pos.view({B, 1, R, 1}).expand({B, KV, R, hd});
      kv->k.scatter_(2, at, kk.to(kv->k.scalar_type()));
      kv->v.scatter_(2, at, v.to(kv->v.scalar_type()));
      kk = kv->k;
      v = kv->v;
    }
    if (lc.shared_kv) (*lc.shared_kv)[lc.layer] = {kk, v};
  } else {
    MTP_CHECK(lc.shared_kv && lc.shared_kv->count(kind.kv_source),
              "layer {} reads the K/V of layer {}, which this call did not compute", lc.layer,
              kind.kv_source);
    std::tie(kk, v) = lc.shared_kv->at(kind.kv_source);
  }
  if (H != KV) {  // GQA: query head h uses KV head h / (H / KV)
    kk = kk.repeat_interleave(H / KV, 1);
    v = v.repeat_interleave(H / KV, 1);
  }
  const float scale = c.query_scale > 0.f ? c.query_scale : 1.0f / std::sqrt(float(hd));
  auto scores = torch::matmul(q, kk.transpose(-1, -2)) * scale;  // [B, H, R, R or T]
  if (c.attn_softcap > 0) scores = torch::tanh(scores / c.attn_softcap) * c.attn_softcap;
  scores = scores.masked_fill(mask, -std::numeric_limits<float>::infinity());
  auto att = torch::matmul(torch::softmax(scores, -1), v);  // [B, H, R, hd]
  att = att.permute({0, 2, 1, 3}).reshape({B, R, H * hd});
  if (c.attn_gate) att = att * torch::sigmoid(gate);
  auto o = at::linear(att, W("self_attn.o_proj.weight"));
  if (c.sandwich_norms) {
    o = rmsnorm(o, N("post_attention_layernorm.weight"), eps);
  }
  x = x + o;
  // --- feed-forward ---
  const std::string ffn_norm =
      c.sandwich_norms ? "pre_feedforward_layernorm.weight" : "post_attention_layernorm.weight";
  xn = rmsnorm(x, N(ffn_norm), eps);
  auto dn = gated_mlp(c, W, xn);
  if (c.sandwich_norms) {
    dn = rmsnorm(dn, N("post_feedforward_layernorm.weight"), eps);
  }
  x = x + dn;
  // --- per-layer embeddings (Gemma 4): x += norm(proj(gelu(gate(x)) · ple)) ---
  if (c.ple_dim > 0) {
    MTP_CHECK(lc.ple.defined(), "layer {} of a model with per-layer embeddings got no input",
              lc.layer);
    auto p = torch::gelu(at::linear(x, W("per_layer_input_gate.weight")), "tanh") * lc.ple;
    x = x + rmsnorm(at::linear(p, W("per_layer_projection.weight")),
                    N("post_per_layer_input_norm.weight"), eps);
  }
  if (c.layer_scalar) x = x * W("layer_scalar");
  return x;
}

torch::Tensor TorchMtp::module_forward(int k, const P& flat, const torch::Tensor& h_in,
                                       const torch::Tensor& e) const {
  if (k < 0 || k >= dc_.K) fail<InputError>("module {} does not exist (K = {})", k, dc_.K);
  TORCH_CHECK(h_in.dim() == 3 && e.sizes() == h_in.sizes() && h_in.size(2) == bc_.d_model,
              "module_forward: h_in and e must both be [B, R, d]");
  const std::string p = prefix(k);
  const float eps = bc_.norm_eps;
  auto h = k == 0 ? round_to_dtype(h_in, dc_.hidden_dtype) : h_in;
  auto cat = torch::cat({rmsnorm(e, norm_weight(flat, p + "enorm.weight"), eps),
                         rmsnorm(h, norm_weight(flat, p + "hnorm.weight"), eps)},
                        -1);  // [B, R, 2d], order [e; h]
  auto x = at::linear(cat, param(flat, p + "eh_proj.weight"));
  return block(k, flat, x);
}

torch::Tensor TorchMtp::logits(const torch::Tensor& h) const {
  auto y = at::linear(rmsnorm(h, final_norm_, bc_.norm_eps), lm_head_);
  const float cap = target_.config().final_softcap;
  if (cap > 0) y = torch::tanh(y / cap) * cap;
  return y;
}

int64_t TorchMtp::head_chunk_rows() const {
  return std::max<int64_t>(1, (int64_t(1) << 22) / std::max(1, bc_.vocab));
}

}  // namespace mtp::train
