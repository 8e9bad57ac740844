#include "train/torch_target.h"

#include <ATen/autocast_mode.h>
#include <fmt/format.h>

#include <cmath>
#include <map>

#include "core/error.h"
#include "train/gemma4_torch.h"

namespace mtp::train {

namespace {

// ---- Tolerance of the capture gap -----------------------------------------
// Both sides compute the same expression; they differ in summation order and
// elementwise approximations (and on CUDA in bf16 products). As for the parity
// gate (parity.cc), a length-n reduction in two orders differs by about
// √n·u·Σ|a·b| (u the unit roundoff of the arithmetic), and RMSNorms keep each
// layer's error relative to the activations' scale; a layer is ~8 such
// reductions, and the residual stream carries every layer's error forward, so
//   tol = C · L · u · √n · max|h|
// with n the longest reduction (d, H·hd, ffn, the positions attended) and C =
// 64 (8 stages × 8 headroom). The post-norm hidden and the penultimate layer's
// output are orders of magnitude outside it (the negative controls).
constexpr double kC = 64.0;

// RAII: bf16 autocast on CUDA for one forward (libtorch 1.13 and 2.x spellings).
// The longest reduction of the forward over n positions: d, every layer
// kind's H·hd and MLP width, a Gated DeltaNet's value width, the positions.
double longest_reduction(const model::ModelConfig& c, size_t n) {
  double red = std::max({double(c.d_model), double(n), double(c.linear.value_dim())});
  for (int l = 0; l < c.n_layers; ++l) {
    const model::LayerKind k = c.layer_kind(l);
    red = std::max({red, double(c.n_heads) * k.head_dim, double(k.ffn)});
  }
  return red;
}

class Autocast {
 public:
  explicit Autocast(bool on) : on_(on) {
    if (!on_) return;
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
    at::autocast::set_autocast_enabled(at::kCUDA, true);
    at::autocast::set_autocast_dtype(at::kCUDA, at::kBFloat16);
#else
    at::autocast::set_enabled(true);
    at::autocast::set_autocast_gpu_dtype(at::kBFloat16);
#endif
  }
  ~Autocast() {
    if (!on_) return;
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
    at::autocast::set_autocast_enabled(at::kCUDA, false);
#else
    at::autocast::set_enabled(false);
#endif
    at::autocast::clear_cache();
  }

 private:
  bool on_;
};

// Rows [r0, r0 + n) of a packed matrix as fp32 [n, cols] (dequantized).
torch::Tensor matrix_rows(const kernels::PackedMatrix& m, size_t r0, size_t n) {
  auto t = torch::empty({int64_t(n), int64_t(m.cols())}, torch::kFloat32);
  float* p = t.data_ptr<float>();
  for (size_t r = 0; r < n; ++r) m.row_f32(r0 + r, p + r * m.cols());
  return t;
}

torch::Tensor vec(const std::vector<float>& v) {
  return torch::from_blob(const_cast<float*>(v.data()), {int64_t(v.size())}, torch::kFloat32)
      .clone();
}

// Matrices in bf16 on CUDA (autocast multiplies in bf16 anyway), fp32 on the CPU.
struct Put {
  torch::Device dev;
  torch::Tensor operator()(const torch::Tensor& t, bool matrix) const {
    return t.to(dev, matrix && dev.is_cuda() ? torch::kBFloat16 : torch::kFloat32);
  }
  torch::Tensor rows(const kernels::PackedMatrix& m, size_t r0, size_t n) const {
    return (*this)(matrix_rows(m, r0, n), true);
  }
  torch::Tensor all(const kernels::PackedMatrix& m) const { return rows(m, 0, m.rows()); }
  torch::Tensor fp32(const std::vector<float>& v) const { return (*this)(vec(v), false); }
};

using Tensors = std::map<std::string, torch::Tensor>;  // a layer's, by Hugging Face name

// Attention of layer kind k: q (with Qwen3.5's gate rows), and k, v when the
// layer owns its K/V (no v for K = V); the engine's fused wqkv in that order.
void attention_tensors(const model::ModelConfig& c, const model::LayerKind& k,
                       const model::LayerWeights& lw, const Put& put, Tensors& t) {
  const size_t Q = size_t(c.n_heads) * size_t(k.head_dim) * (c.attn_gate ? 2 : 1);
  const size_t KV = size_t(k.n_kv_heads) * size_t(k.head_dim);
  t["self_attn.q_proj.weight"] = put.rows(lw.wqkv, 0, Q);
  if (k.owns_kv()) {
    t["self_attn.k_proj.weight"] = put.rows(lw.wqkv, Q, KV);
    if (!k.k_eq_v) t["self_attn.v_proj.weight"] = put.rows(lw.wqkv, Q + KV, KV);
  }
  t["self_attn.o_proj.weight"] = put.all(lw.wo);
  if (c.qkv_bias) {
    torch::Tensor b = vec(lw.qkv_bias);
    t["self_attn.q_proj.bias"] = put(b.narrow(0, 0, int64_t(Q)), false);
    t["self_attn.k_proj.bias"] = put(b.narrow(0, int64_t(Q), int64_t(KV)), false);
    t["self_attn.v_proj.bias"] = put(b.narrow(0, int64_t(Q + KV), int64_t(KV)), false);
  }
  if (c.qk_norm) {
    t["self_attn.q_norm.weight"] = put.fp32(lw.q_norm);
    if (k.owns_kv()) t["self_attn.k_norm.weight"] = put.fp32(lw.k_norm);
  }
}

// A Gated DeltaNet's tensors as gated_delta_net names them: the engine's fused
// in-projection [C + value_dim + 2·Hv, d] split back into qkv, z, b, a.
void delta_net_tensors(const model::LinearAttn& a, const model::LayerWeights& lw, const Put& put,
                       Tensors& t) {
  const size_t C = size_t(a.conv_dim()), vd = size_t(a.value_dim()), hv = size_t(a.v_heads);
  t["in_proj_qkv.weight"] = put.rows(lw.w_lin_in, 0, C);
  t["in_proj_z.weight"] = put.rows(lw.w_lin_in, C, vd);
  t["in_proj_b.weight"] = put.rows(lw.w_lin_in, C + vd, hv);
  t["in_proj_a.weight"] = put.rows(lw.w_lin_in, C + vd + hv, hv);
  t["conv1d.weight"] = put(vec(lw.conv_w).view({int64_t(C), 1, a.conv_kernel}), false);
  t["A_neg"] = put.fp32(lw.a_neg);
  t["dt_bias"] = put.fp32(lw.dt_bias);
  t["norm.weight"] = put.fp32(lw.lin_norm);
  t["out_proj.weight"] = put.all(lw.w_lin_out);
}

// Layer l's tensors (the norms as the engine holds them).
Tensors layer_tensors(const model::ModelConfig& c, int l, const model::LayerWeights& lw,
                      const Put& put) {
  const model::LayerKind k = c.layer_kind(l);
  Tensors t;
  if (k.recurrent) {
    delta_net_tensors(c.linear, lw, put, t);
  } else {
    attention_tensors(c, k, lw, put, t);
  }
  t["mlp.gate_proj.weight"] = put.rows(lw.w_gate_up, 0, size_t(k.ffn));
  t["mlp.up_proj.weight"] = put.rows(lw.w_gate_up, size_t(k.ffn), size_t(k.ffn));
  t["mlp.down_proj.weight"] = put.all(lw.w_down);
  t["input_layernorm.weight"] = put.fp32(lw.attn_norm);
  if (c.sandwich_norms) {
    t["post_attention_layernorm.weight"] = put.fp32(lw.post_attn_norm);
    t["pre_feedforward_layernorm.weight"] = put.fp32(lw.ffn_norm);
    t["post_feedforward_layernorm.weight"] = put.fp32(lw.post_ffn_norm);
  } else {
    t["post_attention_layernorm.weight"] = put.fp32(lw.ffn_norm);
  }
  if (c.ple_dim > 0) {
    t["per_layer_input_gate.weight"] = put.all(lw.w_ple_gate);
    t["per_layer_projection.weight"] = put.all(lw.w_ple_proj);
    t["post_per_layer_input_norm.weight"] = put.fp32(lw.ple_post_norm);
  }
  if (c.layer_scalar) t["layer_scalar"] = put(torch::full({1}, lw.layer_scalar), false);
  return t;
}

}  // namespace

struct TorchTarget::Weights {
  std::vector<Tensors> layers;
  torch::Tensor final_norm, lm_head;
  torch::Tensor ple_proj, ple_norm;  // [L·e, d], [e] (per-layer embeddings)
  // cos, sin [T, width/2] of positions 0..T-1 by (local, rotated width), grown on demand.
  std::map<std::pair<bool, int64_t>, RopeTables> rope;
  int64_t rope_len = 0;
};

TorchTarget::TorchTarget(const model::Model& m, torch::Device dev)
    : m_(m), dev_(dev), lc_(m.config()), w_(std::make_unique<Weights>()) {
  const model::ModelConfig& c = m.config();
  lc_.norm_one_plus = false;  // the engine's norms hold 1 + w already
  const auto& mw = m.weights();
  const Put put{dev};
  for (int l = 0; l < c.n_layers; ++l) {
    w_->layers.push_back(layer_tensors(c, l, mw.layers[size_t(l)], put));
  }
  if (c.ple_dim > 0) {
    w_->ple_proj = put.all(mw.ple_model_proj);
    w_->ple_norm = put.fp32(mw.ple_proj_norm);
  }
  w_->final_norm = put.fp32(mw.final_norm);
  w_->lm_head = put.all(mw.lm_head);
}

TorchTarget::~TorchTarget() = default;

double TorchTarget::unit_roundoff() const {
  return dev_.is_cuda() ? 1.0 / 256.0 : 5.9604644775390625e-8;
}

TorchTarget::Cache TorchTarget::make_cache(int64_t B, int64_t T) const {
  Cache c;
  c.T = T;
  const auto opt = torch::TensorOptions().dtype(torch::kFloat32).device(dev_);
  const model::LinearAttn& a = lc_.linear;
  for (int l = 0; l < lc_.n_layers; ++l) {
    const model::LayerKind k = lc_.layer_kind(l);
    c.layers.emplace_back();
    c.state.emplace_back();
    if (k.recurrent) {
      c.state.back() = {torch::zeros({B, a.conv_dim(), a.conv_kernel - 1}, opt),
                        torch::zeros({B, a.v_heads, a.k_dim, a.v_dim}, opt)};
    } else if (k.owns_kv()) {
      c.layers.back().k = torch::zeros({B, k.n_kv_heads, T, k.head_dim}, opt);
      c.layers.back().v = torch::zeros({B, k.n_kv_heads, T, k.head_dim}, opt);
    }
  }
  return c;
}

TorchTarget::Cache TorchTarget::Cache::slice(int64_t b) const {
  auto one = [&](const torch::Tensor& t) { return t.defined() ? t.narrow(0, b, 1) : t; };
  Cache s;
  s.T = T;
  for (const LayerKV& kv : layers) s.layers.push_back({one(kv.k), one(kv.v), {}});
  for (const DeltaState& st : state) s.state.push_back({one(st.conv), one(st.S)});
  return s;
}

torch::Tensor TorchTarget::embed(const torch::Tensor& tokens) const {
  const int64_t n = tokens.numel(), d = lc_.d_model;
  auto e = torch::empty({n, d}, torch::kFloat32);
  const int64_t* tp = tokens.data_ptr<int64_t>();
  float* p = e.data_ptr<float>();
  for (int64_t i = 0; i < n; ++i) m_.embed(int32_t(tp[i]), p + i * d);  // × embed_scale, fp32
  return e.view({tokens.size(0), tokens.size(1), d}).to(dev_);
}

torch::Tensor TorchTarget::per_layer_inputs(const torch::Tensor& tokens,
                                            const torch::Tensor& x) const {
  const int64_t n = tokens.numel(), P = int64_t(lc_.n_layers) * lc_.ple_dim;
  auto tok = torch::empty({n, P}, torch::kFloat32);  // the table's rows × ple_embed_scale
  const int64_t* tp = tokens.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    m_.weights().ple_embed.lookup(int32_t(tp[i]), lc_.ple_embed_scale,
                                  tok.data_ptr<float>() + i * P);
  }
  return gemma4_per_layer_inputs(lc_, w_->ple_proj, w_->ple_norm,
                                 tok.view({tokens.size(0), tokens.size(1), P}).to(dev_), x);
}

RopeTables TorchTarget::rope_at(bool local, int64_t width, const torch::Tensor& p,
                                int64_t T) const {
  if (T > w_->rope_len) {  // regrown for positions 0..T-1
    w_->rope.clear();
    w_->rope_len = T;
  }
  auto it = w_->rope.find({local, width});
  if (it == w_->rope.end()) {  // the engine's own tables (model::Rope)
    const int64_t L = w_->rope_len;
    auto [cos, sin] = rope_tables(m_.rope(), local, L, width, dev_);
    it = w_->rope.emplace(std::make_pair(local, width),
                          RopeTables{cos.view({L, width / 2}), sin.view({L, width / 2})})
             .first;
  }
  const auto& [cos, sin] = it->second;
  const int64_t B = p.size(0), R = p.size(1);
  return {cos.index_select(0, p.reshape(-1)).view({B, R, 1, width / 2}),
          sin.index_select(0, p.reshape(-1)).view({B, R, 1, width / 2})};
}

torch::Tensor TorchTarget::forward(const torch::Tensor& tokens, const torch::Tensor& pos,
                                   Cache& cache, int layers) const {
  torch::NoGradGuard ng;
  Autocast ac(dev_.is_cuda());
  const int64_t B = tokens.size(0), R = tokens.size(1), T = cache.T;
  const int n = layers < 0 ? lc_.n_layers : layers;
  const float eps = lc_.norm_eps;
  torch::Tensor p = pos.to(dev_);
  torch::Tensor x = embed(tokens);
  torch::Tensor ple;
  if (lc_.ple_dim > 0) ple = per_layer_inputs(tokens, x);  // [B, R, L, e]
  const auto j = torch::arange(T, torch::TensorOptions().dtype(torch::kInt64).device(dev_));
  const auto q = p.view({B, 1, R, 1});
  std::map<int, torch::Tensor> masks;  // [B, 1, R, T] by window
  std::map<int, std::pair<torch::Tensor, torch::Tensor>> shared_kv;  // owners' cached K/V
  for (int l = 0; l < n; ++l) {
    const model::LayerKind k = lc_.layer_kind(l);
    const Tensors& lw = w_->layers[size_t(l)];
    auto W = [&](const std::string& name) { return lw.at(name); };
    if (k.recurrent) {
      x = x + gated_delta_net(lc_, W, rmsnorm(x, W("input_layernorm.weight"), eps),
                              &cache.state[size_t(l)]);
      x = x + gated_mlp(lc_, W, rmsnorm(x, W("post_attention_layernorm.weight"), eps));
      x = x.to(torch::kFloat32);
      continue;
    }
    const int win = k.sliding ? lc_.sliding_window : 0;
    auto it = masks.find(win);
    if (it == masks.end()) {
      torch::Tensor masked = j.view({1, 1, 1, T}) > q;
      if (win > 0) masked = masked | (q - j.view({1, 1, 1, T}) >= win);
      it = masks.emplace(win, masked).first;
    }
    const RopeTables rope =
        rope_at(m_.rope().local_for(k.sliding), lc_.rotary_dim(k.head_dim), p, T);
    LayerContext ctx{l, &shared_kv, lc_.ple_dim > 0 ? ple.select(2, l) : torch::Tensor()};
    LayerKV* kv = k.owns_kv() ? &cache.layers[size_t(l)] : nullptr;
    if (kv) kv->pos = p;
    x = decoder_layer(lc_, W, x, rope, it->second, ctx, kv).to(torch::kFloat32);
  }
  return x;
}

torch::Tensor TorchTarget::logits(const torch::Tensor& h) const {
  torch::NoGradGuard ng;
  Autocast ac(dev_.is_cuda());
  auto y = at::linear(rmsnorm(h, w_->final_norm, lc_.norm_eps), w_->lm_head).to(torch::kFloat32);
  if (lc_.final_softcap > 0) y = torch::tanh(y / lc_.final_softcap) * lc_.final_softcap;
  return y;
}

std::vector<float> TorchTarget::capture(const std::vector<int32_t>& tokens, int layers) const {
  const int64_t n = int64_t(tokens.size());
  auto t = torch::empty({1, n}, torch::kInt64);
  for (int64_t i = 0; i < n; ++i) t.data_ptr<int64_t>()[i] = tokens[size_t(i)];
  Cache cache = make_cache(1, n);
  return to_host(forward(t, torch::arange(n, torch::kInt64).view({1, n}), cache, layers));
}

nlohmann::json CaptureGap::to_json() const {
  return {{"max_abs", max_abs}, {"tol", tol}, {"ref", ref}, {"positions", positions},
          {"within", within()}};
}

CaptureGap capture_gap(const TorchTarget& t, const std::vector<int32_t>& tokens,
                       const std::vector<float>& torch_capture) {
  const model::Model& m = t.engine();
  const model::ModelConfig& c = m.config();
  const size_t n = tokens.size(), d = size_t(c.d_model);
  if (torch_capture.size() != n * d) {
    fail<ShapeError>("capture_gap: {} values for {} positions of width {}", torch_capture.size(),
                     n, d);
  }
  model::KVCache kv = m.make_cache(1, int(n), int(n), 0);
  std::vector<model::Row> rows;
  for (size_t i = 0; i < n; ++i) rows.push_back({0, int32_t(i), tokens[i]});
  std::vector<float> h(n * d);
  m.forward(rows, kv, {nullptr, nullptr, h.data()}, nullptr);
  CaptureGap g;
  g.positions = long(n);
  for (size_t i = 0; i < n * d; ++i) {
    g.max_abs = std::max(g.max_abs, std::fabs(double(h[i]) - torch_capture[i]));
    g.ref = std::max(g.ref, std::fabs(double(h[i])));
  }
  const double red = longest_reduction(c, n);
  g.tol = kC * c.n_layers * t.unit_roundoff() * std::sqrt(red) * g.ref;
  return g;
}

namespace {

class TorchCapture final : public TargetCapture {
 public:
  TorchCapture(const model::Model& m, torch::Device dev) : t_(m, dev) {}

  std::vector<drafter::Captured> capture(std::span<const drafter::CaptureJob* const> jobs,
                                         const drafter::CaptureOptions& o) override {
    const size_t B = jobs.size();
    std::vector<std::vector<int32_t>> seq(B);
    for (size_t b = 0; b < B; ++b) seq[b] = jobs[b]->tokens;
    drafter::Continuations gen(jobs);
    if (gen.any()) generate(seq, gen, o);
    // The capture of the final sequences: one forward over them (padded).
    size_t L = 0;
    for (const auto& s : seq) L = std::max(L, s.size());
    Batch padded = pad(seq, L);
    TorchTarget::Cache cache = t_.make_cache(int64_t(B), int64_t(L));
    torch::Tensor h = t_.forward(padded.tokens, padded.pos, cache).to(torch::kCPU).contiguous();
    std::vector<drafter::Captured> out(B);
    const size_t d = size_t(t_.engine().config().d_model);
    for (size_t b = 0; b < B; ++b) {
      const float* hp = h.data_ptr<float>() + b * L * d;
      out[b].hidden.assign(hp, hp + seq[b].size() * d);
      out[b].loss_mask =
          drafter::capture_loss_mask(seq[b].size(), jobs[b]->tokens.size(), jobs[b]->gen > 0);
      out[b].tokens = std::move(seq[b]);
    }
    return out;
  }

  std::string name() const override {
    return t_.device().is_cuda() ? "libtorch (cuda, bf16 autocast)" : "libtorch (cpu, fp32)";
  }

  nlohmann::json gap(const std::vector<int32_t>& tokens) override {
    return capture_gap(t_, tokens, t_.capture(tokens)).to_json();
  }

 private:
  struct Batch {
    torch::Tensor tokens, pos;  // [B, L] int64 (host)
  };
  // Rows [B, L]: each sequence's tokens from position 0, padded with its last token.
  static Batch pad(const std::vector<std::vector<int32_t>>& seq, size_t L) {
    const int64_t B = int64_t(seq.size());
    Batch p{torch::empty({B, int64_t(L)}, torch::kInt64),
            torch::arange(int64_t(L), torch::kInt64).repeat({B, 1})};
    int64_t* t = p.tokens.data_ptr<int64_t>();
    for (size_t b = 0; b < seq.size(); ++b) {
      for (size_t i = 0; i < L; ++i) t[b * L + i] = seq[b][std::min(i, seq[b].size() - 1)];
    }
    return p;
  }

  // Prompts (all but their last token) in one forward, then one row per
  // sequence per step at its own position; rows past a sequence's end are
  // padding whose K/V its own later rows overwrite before any query reads them.
  // With recurrent layers each prompt is forwarded alone, and a finished
  // sequence's state goes on absorbing its last token (never read again: the
  // capture is a fresh forward).
  void generate(std::vector<std::vector<int32_t>>& seq, drafter::Continuations& gen,
                const drafter::CaptureOptions& o) {
    const int64_t B = int64_t(seq.size());
    TorchTarget::Cache cache = t_.make_cache(B, o.seq_len);
    size_t P = 0;
    for (const auto& s : seq) P = std::max(P, s.size());
    if (P > 1 && !t_.recurrent()) {
      Batch pre = pad(seq, P - 1);
      t_.forward(pre.tokens, pre.pos, cache);
    }
    // A recurrent state would absorb the padding: each prompt alone.
    for (size_t b = 0; t_.recurrent() && b < seq.size(); ++b) {
      if (seq[b].size() < 2) continue;
      Batch pre = pad({std::vector<int32_t>(seq[b].begin(), seq[b].end() - 1)}, seq[b].size() - 1);
      TorchTarget::Cache one = cache.slice(int64_t(b));
      t_.forward(pre.tokens, pre.pos, one);
    }
    while (gen.any()) {
      auto tok = torch::empty({B, 1}, torch::kInt64), pos = torch::empty({B, 1}, torch::kInt64);
      for (size_t b = 0; b < seq.size(); ++b) {
        tok.data_ptr<int64_t>()[b] = seq[b].back();
        pos.data_ptr<int64_t>()[b] = int64_t(seq[b].size()) - 1;
      }
      torch::Tensor h = t_.forward(tok, pos, cache);
      torch::Tensor lg = t_.logits(h.view({B, -1})).to(torch::kCPU).contiguous();
      const size_t V = size_t(lg.size(1));
      for (int64_t b = 0; b < B; ++b) {
        if (!gen.active(size_t(b))) continue;
        const float* row = lg.data_ptr<float>() + size_t(b) * V;
        gen.accept(size_t(b), o.choose(size_t(b), row, V, int64_t(seq[size_t(b)].size())),
                   seq[size_t(b)], o);
      }
    }
  }

  TorchTarget t_;
};

}  // namespace

std::unique_ptr<TargetCapture> torch_capture(const model::Model& m, torch::Device dev) {
  return std::make_unique<TorchCapture>(m, dev);
}

}  // namespace mtp::train
