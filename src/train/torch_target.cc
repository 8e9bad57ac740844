#include "train/torch_target.h"

#include <ATen/autocast_mode.h>
#include <fmt/format.h>

#include <cmath>
#include <map>

#include "core/error.h"

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

// What decoder_layer computes and the engine's forward would compute otherwise.
void check_family(const model::ModelConfig& c) {
  std::string why;
  if (c.arch == model::Arch::Gemma4) why = "Gemma 4's layers";
  if (c.ple_dim > 0) why = "per-layer embeddings";
  if (c.v_norm) why = "a V norm";
  if (c.layer_scalar) why = "layer scalars";
  if (c.rope_partial != 1.0f) why = "proportional RoPE";
  for (int l = 0; l < c.n_layers && why.empty(); ++l) {
    const model::LayerKind k = c.layer_kind(l);
    if (k.head_dim != c.head_dim || k.n_kv_heads != c.n_kv_heads || k.ffn != c.ffn ||
        !k.owns_kv() || k.k_eq_v || k.recurrent) {
      why = fmt::format("layer {}'s kind (head_dim {}, {} kv heads, ffn {}, K/V of layer {})", l,
                        k.head_dim, k.n_kv_heads, k.ffn, k.kv_source);
    }
  }
  if (!why.empty()) {
    fail<ConfigError>("the libtorch target does not implement {} ({}): capture it with the "
                      "engine's forward on the CPU", why, model::arch_name(c.arch));
  }
}

}  // namespace

struct TorchTarget::Weights {
  std::vector<std::map<std::string, torch::Tensor>> layers;  // HF names
  torch::Tensor final_norm, lm_head;
  std::vector<bool> local;       // [layer]: local RoPE frequencies (model::Rope::local_for)
  std::vector<int> window;       // [layer]: sliding window (0 = none)
  // cos, sin [T, hd/2] for positions 0..T-1, global [0] and local [1], grown on demand.
  RopeTables rope[2];
  int64_t rope_len = 0;
};

TorchTarget::TorchTarget(const model::Model& m, torch::Device dev)
    : m_(m), dev_(dev), lc_(m.config()), w_(std::make_unique<Weights>()) {
  const model::ModelConfig& c = m.config();
  check_family(c);
  lc_.norm_one_plus = false;  // the engine's norms hold 1 + w already
  const auto& mw = m.weights();
  const size_t H = size_t(c.n_heads) * c.head_dim, KV = size_t(c.n_kv_heads) * c.head_dim;
  // Matrices in bf16 on CUDA (autocast multiplies in bf16 anyway), fp32 on the CPU.
  const auto mat = dev.is_cuda() ? torch::kBFloat16 : torch::kFloat32;
  auto put = [&](torch::Tensor t, bool matrix) { return t.to(dev, matrix ? mat : torch::kFloat32); };
  for (int l = 0; l < c.n_layers; ++l) {
    const model::LayerWeights& lw = mw.layers[size_t(l)];
    std::map<std::string, torch::Tensor> t;
    t["self_attn.q_proj.weight"] = put(matrix_rows(lw.wqkv, 0, H), true);
    t["self_attn.k_proj.weight"] = put(matrix_rows(lw.wqkv, H, KV), true);
    t["self_attn.v_proj.weight"] = put(matrix_rows(lw.wqkv, H + KV, KV), true);
    t["self_attn.o_proj.weight"] = put(matrix_rows(lw.wo, 0, lw.wo.rows()), true);
    t["mlp.gate_proj.weight"] = put(matrix_rows(lw.w_gate_up, 0, size_t(c.ffn)), true);
    t["mlp.up_proj.weight"] = put(matrix_rows(lw.w_gate_up, size_t(c.ffn), size_t(c.ffn)), true);
    t["mlp.down_proj.weight"] = put(matrix_rows(lw.w_down, 0, lw.w_down.rows()), true);
    if (c.qkv_bias) {
      torch::Tensor b = vec(lw.qkv_bias);
      t["self_attn.q_proj.bias"] = put(b.narrow(0, 0, int64_t(H)), false);
      t["self_attn.k_proj.bias"] = put(b.narrow(0, int64_t(H), int64_t(KV)), false);
      t["self_attn.v_proj.bias"] = put(b.narrow(0, int64_t(H + KV), int64_t(KV)), false);
    }
    t["input_layernorm.weight"] = put(vec(lw.attn_norm), false);
    if (c.sandwich_norms) {
      t["post_attention_layernorm.weight"] = put(vec(lw.post_attn_norm), false);
      t["pre_feedforward_layernorm.weight"] = put(vec(lw.ffn_norm), false);
      t["post_feedforward_layernorm.weight"] = put(vec(lw.post_ffn_norm), false);
    } else {
      t["post_attention_layernorm.weight"] = put(vec(lw.ffn_norm), false);
    }
    if (c.qk_norm) {
      t["self_attn.q_norm.weight"] = put(vec(lw.q_norm), false);
      t["self_attn.k_norm.weight"] = put(vec(lw.k_norm), false);
    }
    w_->layers.push_back(std::move(t));
    const bool sliding = c.is_sliding(l);
    w_->local.push_back(m.rope().local_for(sliding));
    w_->window.push_back(sliding ? c.sliding_window : 0);
  }
  w_->final_norm = put(vec(mw.final_norm), false);
  w_->lm_head = put(matrix_rows(mw.lm_head, 0, mw.lm_head.rows()), true);
}

TorchTarget::~TorchTarget() = default;

double TorchTarget::unit_roundoff() const {
  return dev_.is_cuda() ? 1.0 / 256.0 : 5.9604644775390625e-8;
}

TorchTarget::Cache TorchTarget::make_cache(int64_t B, int64_t T) const {
  Cache c;
  const auto opt = torch::TensorOptions().dtype(torch::kFloat32).device(dev_);
  for (int l = 0; l < lc_.n_layers; ++l) {
    c.layers.push_back({torch::zeros({B, lc_.n_kv_heads, T, lc_.head_dim}, opt),
                        torch::zeros({B, lc_.n_kv_heads, T, lc_.head_dim}, opt), {}});
  }
  return c;
}

torch::Tensor TorchTarget::embed(const torch::Tensor& tokens) const {
  const int64_t n = tokens.numel(), d = lc_.d_model;
  auto e = torch::empty({n, d}, torch::kFloat32);
  const int64_t* tp = tokens.data_ptr<int64_t>();
  float* p = e.data_ptr<float>();
  for (int64_t i = 0; i < n; ++i) m_.embed(int32_t(tp[i]), p + i * d);  // × embed_scale, fp32
  return e.view({tokens.size(0), tokens.size(1), d}).to(dev_);
}

torch::Tensor TorchTarget::forward(const torch::Tensor& tokens, const torch::Tensor& pos,
                                   Cache& cache, int layers) const {
  torch::NoGradGuard ng;
  Autocast ac(dev_.is_cuda());
  const int64_t B = tokens.size(0), R = tokens.size(1);
  const int64_t T = cache.layers.front().k.size(2);
  const int n = layers < 0 ? lc_.n_layers : layers;
  if (T > w_->rope_len) {  // the engine's own tables (model::Rope), positions 0..T-1
    for (int local = 0; local < 2; ++local) {
      auto [cos, sin] = rope_tables(m_.rope(), local == 1, T, lc_.head_dim, dev_);
      w_->rope[local] = {cos.view({T, lc_.head_dim / 2}), sin.view({T, lc_.head_dim / 2})};
    }
    w_->rope_len = T;
  }
  torch::Tensor p = pos.to(dev_);
  torch::Tensor x = embed(tokens);
  const auto j = torch::arange(T, torch::TensorOptions().dtype(torch::kInt64).device(dev_));
  const auto q = p.view({B, 1, R, 1});
  std::map<int, torch::Tensor> masks;  // by window
  for (int l = 0; l < n; ++l) {
    const int win = w_->window[size_t(l)];
    auto it = masks.find(win);
    if (it == masks.end()) {
      torch::Tensor masked = j.view({1, 1, 1, T}) > q;
      if (win > 0) masked = masked | (q - j.view({1, 1, 1, T}) >= win);
      it = masks.emplace(win, masked).first;
    }
    const auto& [cos, sin] = w_->rope[w_->local[size_t(l)] ? 1 : 0];
    const int64_t half = lc_.head_dim / 2;
    RopeTables rope{cos.index_select(0, p.reshape(-1)).view({B, R, 1, half}),
                    sin.index_select(0, p.reshape(-1)).view({B, R, 1, half})};
    LayerKV& kv = cache.layers[size_t(l)];
    kv.pos = p;
    const auto& lw = w_->layers[size_t(l)];
    x = decoder_layer(
        lc_, [&](const std::string& name) { return lw.at(name); }, x, rope, it->second,
        LayerContext{int(l)}, &kv);
    x = x.to(torch::kFloat32);
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
  const double red = std::max({double(c.d_model), double(c.n_heads) * c.head_dim, double(c.ffn),
                               double(n)});
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
  void generate(std::vector<std::vector<int32_t>>& seq, drafter::Continuations& gen,
                const drafter::CaptureOptions& o) {
    const int64_t B = int64_t(seq.size());
    TorchTarget::Cache cache = t_.make_cache(B, o.seq_len);
    size_t P = 0;
    for (const auto& s : seq) P = std::max(P, s.size());
    if (P > 1) {
      Batch pre = pad(seq, P - 1);
      t_.forward(pre.tokens, pre.pos, cache);
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
