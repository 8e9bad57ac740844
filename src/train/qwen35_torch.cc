#include "train/qwen35_torch.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "core/error.h"
#include "model/layer_io.h"

namespace mtp::train {

namespace {
std::string layer_prefix(int i) { return "model.layers." + std::to_string(i) + "."; }
const char* const kMtpLayer = "mtp.layers.0.";

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// x / sqrt(Σ x² + 1e-6) over the last dimension (transformers' l2norm; delta::normalize_qk).
torch::Tensor l2norm(const torch::Tensor& x) {
  return x * torch::rsqrt(x.pow(2).sum(-1, /*keepdim=*/true) + 1e-6f);
}
}  // namespace

nlohmann::json qwen35_pretrain_config(const model::PretrainPreset& p, int vocab, int bos, int eos,
                                      int max_position) {
  using nlohmann::json;
  const int layers = p.n_layers;
  json types = json::array();
  for (int l = 0; l < layers; ++l) {
    types.push_back((l + 1) % 4 == 0 || l == layers - 1 ? "full_attention" : "linear_attention");
  }
  const double partial = 0.25;
  // Text positions are equal on the three mrope rows: the sections (summing
  // to the rotated pairs) do not change the function.
  const int pairs = int(p.head_dim * partial) / 2;
  return {{"architectures", {"Qwen3_5ForCausalLM"}},
          {"model_type", "qwen3_5_text"},
          {"hidden_size", p.d_model},
          {"intermediate_size", p.ffn},
          {"num_hidden_layers", layers},
          {"num_attention_heads", p.n_heads},
          {"num_key_value_heads", p.n_kv_heads},
          {"head_dim", p.head_dim},
          {"hidden_act", "silu"},
          {"attention_bias", false},
          {"attn_output_gate", true},
          {"layer_types", types},
          {"full_attention_interval", 4},
          {"linear_conv_kernel_dim", 4},
          {"linear_num_key_heads", std::max(1, p.n_kv_heads)},
          {"linear_num_value_heads", p.n_heads},
          {"linear_key_head_dim", p.head_dim},
          {"linear_value_head_dim", p.head_dim},
          {"mamba_ssm_dtype", "float32"},
          {"mtp_num_hidden_layers", 1},
          {"mtp_use_dedicated_embeddings", false},
          {"rope_parameters",
           {{"rope_type", "default"},
            {"rope_theta", 10000000.0},
            {"partial_rotary_factor", partial},
            {"mrope_interleaved", true},
            {"mrope_section", {pairs - 2 * (pairs / 3), pairs / 3, pairs / 3}}}},
          {"vocab_size", vocab},
          {"max_position_embeddings", max_position},
          {"rms_norm_eps", 1e-6},
          {"attention_dropout", 0.0},
          {"tie_word_embeddings", true},
          {"pad_token_id", nullptr},
          {"bos_token_id", bos >= 0 ? json(bos) : json(nullptr)},
          {"eos_token_id", eos >= 0 ? json(eos) : json(nullptr)},
          {"initializer_range", 0.02},
          {"use_cache", true},
          {"torch_dtype", "float32"},
          {"transformers_version", "5.5.0"}};
}

model::TensorShapes qwen35_tensor_shapes(const model::ModelConfig& c) {
  const int64_t d = c.d_model, v = c.vocab;
  model::TensorShapes t = {{"model.embed_tokens.weight", {v, d}}};
  for (int i = 0; i < c.n_layers; ++i) {
    for (auto& x : model::layer_tensor_shapes(c, layer_prefix(i), i)) t.push_back(std::move(x));
  }
  t.push_back({"model.norm.weight", {d}});
  if (!c.tie_embeddings) t.push_back({"lm_head.weight", {v, d}});
  if (c.mtp_layers > 0) {
    for (auto& x : model::native_mtp_tensors(c)) t.push_back(std::move(x));
  }
  return t;
}

TorchQwen35::TorchQwen35(const model::ModelConfig& c, torch::Device dev)
    : PretrainTarget(c, dev, FlatLayout::from_shapes(qwen35_tensor_shapes(c))),
      mtp_cfg_(model::native_mtp_config(c)), rope_(c) {
  if (c.arch != model::Arch::Qwen35 || c.mtp_layers > 1) {
    fail<ConfigError>("the libtorch Qwen3.5 builds Qwen3.5 models with at most one MTP layer "
                      "(got {}, mtp_num_hidden_layers {})", model::arch_name(c.arch), c.mtp_layers);
  }
}

std::vector<float> TorchQwen35::init_params(uint64_t seed) const {
  std::vector<float> flat = init_flat_params(
      layout_, c_.n_layers, seed, {"o_proj.weight", "down_proj.weight", "out_proj.weight"});
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ULL);
  std::uniform_real_distribution<float> a_dist(1.0f, 16.0f);
  const float conv_bound = 1.0f / std::sqrt(float(std::max(1, c_.linear.conv_kernel)));
  std::uniform_real_distribution<float> conv_dist(-conv_bound, conv_bound);
  for (const auto& e : layout_.entries) {
    float* p = flat.data() + e.offset;
    auto fill = [&](auto&& value) {
      for (int64_t i = 0; i < e.numel; ++i) p[i] = value();
    };
    if (ends_with(e.name, "linear_attn.norm.weight")) {
      fill([] { return 1.0f; });  // the gated norm: plain w
    } else if (ends_with(e.name, "norm.weight")) {
      fill([] { return 0.0f; });  // x̂ · (1 + w)
    } else if (ends_with(e.name, "dt_bias")) {
      fill([] { return 1.0f; });
    } else if (ends_with(e.name, "A_log")) {
      fill([&] { return std::log(a_dist(rng)); });
    } else if (ends_with(e.name, "conv1d.weight")) {
      fill([&] { return conv_dist(rng); });
    }
  }
  return flat;
}

const TorchQwen35::Tables& TorchQwen35::tables(int64_t R) const {
  auto it = cache_.find(R);
  if (it != cache_.end()) return it->second;
  Tables t{rope_tables(rope_, false, R, c_.rotary_dim(c_.head_dim), dev_), causal_mask(R, 0, dev_)};
  return cache_.emplace(R, std::move(t)).first->second;
}

torch::Tensor TorchQwen35::norm(const std::vector<torch::Tensor>& p, const std::string& name,
                                const torch::Tensor& x) const {
  return rmsnorm(x, param(p, name) + 1.0f, c_.norm_eps);
}

torch::Tensor gated_delta_net(const model::ModelConfig& c,
                              const std::function<torch::Tensor(const std::string&)>& W,
                              const torch::Tensor& x, DeltaState* state) {
  const model::LinearAttn& a = c.linear;
  const int64_t B = x.size(0), R = x.size(1), kc = a.conv_kernel, C = a.conv_dim();
  const int64_t nk = a.k_heads, nv = a.v_heads, dk = a.k_dim, dv = a.v_dim, key = a.key_dim();
  auto mixed = at::linear(x, W("in_proj_qkv.weight"));                     // [B, R, C]
  auto z = at::linear(x, W("in_proj_z.weight")).view({B, R, nv, dv});
  auto beta = torch::sigmoid(at::linear(x, W("in_proj_b.weight")));        // [B, R, nv]
  auto g = W("A_neg") * torch::softplus(at::linear(x, W("in_proj_a.weight")) + W("dt_bias"));
  // The causal depthwise conv over [history; rows]: kc - 1 columns of history
  // (zeros before position 0).
  auto cols = mixed.transpose(1, 2);                                       // [B, C, R]
  auto padded = state ? torch::cat({state->conv.to(cols.scalar_type()), cols}, 2)
                      : torch::constant_pad_nd(cols, {kc - 1, 0});          // [B, C, kc - 1 + R]
  auto conv = torch::conv1d(padded, W("conv1d.weight"), c10::optional<torch::Tensor>(),
                            at::IntArrayRef{1}, at::IntArrayRef{0}, at::IntArrayRef{1}, C);
  if (state) state->conv.copy_(padded.narrow(2, R, kc - 1));
  conv = torch::silu(conv).transpose(1, 2);                                // [B, R, C]
  auto q = l2norm(conv.narrow(-1, 0, key).view({B, R, nk, dk})) / std::sqrt(float(dk));
  auto k = l2norm(conv.narrow(-1, key, key).view({B, R, nk, dk}));
  auto v = conv.narrow(-1, 2 * key, nv * dv).view({B, R, nv, dv});
  if (nv != nk && a.v_tiled) {  // value head h reads key head h % nk (LinearAttn::k_head_of)
    q = q.repeat({1, 1, nv / nk, 1});
    k = k.repeat({1, 1, nv / nk, 1});
  } else if (nv != nk) {  // value head h reads key head h / (nv / nk)
    q = q.repeat_interleave(nv / nk, 2);
    k = k.repeat_interleave(nv / nk, 2);
  }
  auto decay = torch::exp(g);
  // The delta rule, one token at a time: S [B, nv, dk, dv].
  auto S = state ? state->S.to(x.scalar_type()) : torch::zeros({B, nv, dk, dv}, x.options());
  std::vector<torch::Tensor> outs;
  outs.reserve(size_t(R));
  for (int64_t t = 0; t < R; ++t) {
    auto kt = k.select(1, t).unsqueeze(-2);                                // [B, nv, 1, dk]
    S = S * decay.select(1, t).view({B, nv, 1, 1});
    auto mem = torch::matmul(kt, S).squeeze(-2);                           // Sᵀk [B, nv, dv]
    auto delta = (v.select(1, t) - mem) * beta.select(1, t).unsqueeze(-1);
    S = S + kt.transpose(-1, -2) * delta.unsqueeze(-2);                    // + k deltaᵀ
    outs.push_back(torch::matmul(q.select(1, t).unsqueeze(-2), S).squeeze(-2));  // Sᵀq
  }
  if (state) state->S.copy_(S);
  auto o = torch::stack(outs, 1);                                          // [B, R, nv, dv]
  o = rmsnorm(o, W("norm.weight"), c.norm_eps) * torch::silu(z);
  return at::linear(o.reshape({B, R, nv * dv}), W("out_proj.weight"));
}

torch::Tensor TorchQwen35::trunk(const std::vector<torch::Tensor>& p,
                                 const torch::Tensor& tokens) const {
  TORCH_CHECK(tokens.dim() == 2, "TorchQwen35::trunk: tokens must be [B, R]");
  const Tables& t = tables(tokens.size(1));
  torch::Tensor x = torch::embedding(param(p, "model.embed_tokens.weight"), tokens);  // [B, R, d]
  for (int i = 0; i < c_.n_layers; ++i) {
    const std::string pre = layer_prefix(i);
    auto W = [&](const std::string& n) { return param(p, pre + n); };
    if (!c_.is_recurrent(i)) {
      LayerContext lc;
      lc.layer = i;
      x = decoder_layer(c_, W, x, t.rope, t.mask, lc);
      continue;
    }
    auto lin = [&](const std::string& n) {
      return n == "A_neg" ? -torch::exp(W("linear_attn.A_log")) : W("linear_attn." + n);
    };
    x = x + gated_delta_net(c_, lin, norm(p, pre + "input_layernorm.weight", x));
    x = x + gated_mlp(c_, W, norm(p, pre + "post_attention_layernorm.weight", x));
  }
  return norm(p, "model.norm.weight", x);
}

torch::Tensor TorchQwen35::head(const std::vector<torch::Tensor>& p, const torch::Tensor& h) const {
  return at::linear(h, param(p, c_.tie_embeddings ? "model.embed_tokens.weight" : "lm_head.weight"));
}

torch::Tensor TorchQwen35::forward(const std::vector<torch::Tensor>& p,
                                   const torch::Tensor& tokens) const {
  return head(p, trunk(p, tokens));
}

torch::Tensor native_head_forward(const model::ModelConfig& mc,
                                  const std::function<torch::Tensor(const std::string&)>& W,
                                  const torch::Tensor& e, const torch::Tensor& hidden,
                                  const RopeTables& rope, const torch::Tensor& mask) {
  auto N = [&](const std::string& n, const torch::Tensor& x) {
    return rmsnorm(x, W(n) + 1.0f, mc.norm_eps);
  };
  auto cat = torch::cat({N("mtp.pre_fc_norm_embedding.weight", e),
                         N("mtp.pre_fc_norm_hidden.weight", hidden)}, -1);  // [B, R, 2d]
  auto x = at::linear(cat, W("mtp.fc.weight"));
  x = decoder_layer(
      mc, [&](const std::string& n) { return W(kMtpLayer + n); }, x, rope, mask);
  return N("mtp.norm.weight", x);
}

torch::Tensor TorchQwen35::mtp(const std::vector<torch::Tensor>& p, const torch::Tensor& next,
                               const torch::Tensor& hidden) const {
  MTP_CHECK(has_mtp(), "the Qwen3.5 config has no MTP layer");
  const Tables& t = tables(next.size(1));
  auto e = torch::embedding(param(p, "model.embed_tokens.weight"), next);  // [B, R, d]
  return native_head_forward(
      mtp_cfg_, [&](const std::string& n) { return param(p, n); }, e, hidden, t.rope, t.mask);
}

PretrainTarget::Loss TorchQwen35::training_loss(const std::vector<torch::Tensor>& p,
                                                const torch::Tensor& w) const {
  const int64_t R = w.size(1) - 1;
  torch::Tensor h = trunk(p, w.narrow(1, 0, R));  // [B, R, d]
  Loss l;
  l.total = next_token_loss(head(p, h), w, 1);
  if (!has_mtp() || R < 2) return l;
  // Row t: token t + 1 and h_t -> token t + 2, for t = 0..R-2.
  auto out = mtp(p, w.narrow(1, 1, R - 1), h.narrow(1, 0, R - 1));
  l.mtp = next_token_loss(head(p, out), w, 2);
  l.total = l.total + kQwen35MtpLossWeight * l.mtp;
  return l;
}

}  // namespace mtp::train
