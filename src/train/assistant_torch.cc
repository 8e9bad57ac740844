#include "train/assistant_torch.h"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "core/mapped_file.h"
#include "io/safetensors.h"
#include "train/post_norm_capture.h"

namespace fs = std::filesystem;

namespace mtp::train {

AssistantCapture engine_capture(const model::Model& target, const drafter::AssistantConfig& a,
                                const std::vector<int32_t>& tokens, torch::Device dev,
                                ThreadPool* pool) {
  const int R = int(tokens.size());
  const model::ModelConfig& c = target.config();
  PostNormCapture cap = post_norm_capture(target, tokens, pool);
  const model::KVCache& kv = cap.kv;
  AssistantCapture out;
  out.target_argmax = std::move(cap.argmax);
  out.post_norm = torch::from_blob(cap.post.data(), {1, R, int64_t(c.d_model)}, torch::kFloat32)
                      .clone().to(dev);
  for (bool sliding : {true, false}) {
    const int owner = a.kv_layer(sliding);
    if (owner < 0) continue;
    const model::LayerKind k = c.layer_kind(owner);
    const int64_t KV = k.n_kv_heads, hd = k.head_dim, width = kv.kv_dim(owner);
    auto view = [&](const float* p) {  // slots [R, KV · hd] -> [1, KV, R, hd]
      return torch::from_blob(const_cast<float*>(p), {R, KV, hd}, torch::kFloat32)
          .clone().permute({1, 0, 2}).unsqueeze(0).contiguous().to(dev);
    };
    MTP_CHECK(width == KV * hd, "target layer {}: K/V width {} is not {} · {}", owner, width, KV, hd);
    out.kv[owner] = {view(kv.k(0, owner)), view(kv.v(0, owner))};
  }
  return out;
}

TorchAssistant::TorchAssistant(const model::Model& target, const drafter::AssistantConfig& a,
                               torch::Device dev)
    : m_(target), a_(a), dev_(dev),
      layout_(FlatLayout::from_shapes(drafter::assistant_tensor_shapes(a))), rope_(a.block) {
  if (!a.block.tie_embeddings) {
    fail<ConfigError>("the libtorch assistant trains tied heads only (tie_word_embeddings false)");
  }
}

torch::Tensor TorchAssistant::embed(const std::vector<int32_t>& tokens) const {
  const int64_t B = a_.backbone, R = int64_t(tokens.size());
  std::vector<float> e(size_t(R * B));
  for (int64_t t = 0; t < R; ++t) m_.embed(tokens[size_t(t)], e.data() + t * B);
  return torch::from_blob(e.data(), {1, R, B}, torch::kFloat32).clone().to(dev_);
}

torch::Tensor TorchAssistant::step1_state(const torch::Tensor& post_norm) {
  auto zero = torch::zeros_like(post_norm.narrow(1, 0, 1));
  return torch::cat({zero, post_norm.narrow(1, 0, post_norm.size(1) - 1)}, 1);
}

torch::Tensor TorchAssistant::mask(int64_t R, bool sliding) const {
  auto t = torch::arange(R).view({R, 1}), j = torch::arange(R).view({1, R});
  auto lo = sliding ? torch::clamp_min(t - 1 - a_.block.sliding_window, 0) : torch::zeros_like(t);
  auto masked = (j > t - 1) | (j < lo);
  masked.index_put_({0, 0}, false);  // row 0: key 0, so its softmax is defined
  return masked.to(dev_);
}

std::pair<torch::Tensor, torch::Tensor> TorchAssistant::step(
    const std::vector<torch::Tensor>& p, const torch::Tensor& e, const torch::Tensor& state,
    const std::map<int, std::pair<torch::Tensor, torch::Tensor>>& kv) const {
  const model::ModelConfig& b = a_.block;
  TORCH_CHECK(e.dim() == 3 && e.sizes() == state.sizes() && e.size(2) == a_.backbone,
              "TorchAssistant::step: e and state must both be [B, R, backbone]");
  const int64_t R = e.size(1);
  auto x = at::linear(torch::cat({e, state}, -1), param(p, "pre_projection.weight"));
  std::map<int, std::pair<torch::Tensor, torch::Tensor>> shared = kv;
  for (int l = 0; l < b.n_layers; ++l) {
    const model::LayerKind k = b.layer_kind(l);
    const bool local = rope_.local_for(k.sliding);
    const RopeTables rope = rope_tables(rope_, local, R, k.head_dim, dev_);
    LayerContext lc;
    lc.layer = l;
    lc.shared_kv = &shared;
    const std::string pre = "model.layers." + std::to_string(l) + ".";
    x = decoder_layer(b, [&](const std::string& n) { return param(p, pre + n); }, x, rope,
                      mask(R, k.sliding), lc);
  }
  auto xn = rmsnorm(x, param(p, "model.norm.weight"), b.norm_eps);
  return {at::linear(xn, param(p, "model.embed_tokens.weight")),
          at::linear(xn, param(p, "post_projection.weight"))};
}

std::vector<torch::Tensor> TorchAssistant::chain(
    const std::vector<torch::Tensor>& p, const std::vector<int32_t>& tokens,
    const AssistantCapture& cap, const std::vector<std::vector<int32_t>>& feed,
    int step_shift) const {
  auto [logits, state] = step(p, embed(tokens), step1_state(cap.post_norm), cap.kv);
  std::vector<torch::Tensor> out{logits};
  for (size_t j = 0; j < feed.size(); ++j) {
    TORCH_CHECK(feed[j].size() == tokens.size(), "TorchAssistant::chain: feed of step ", j + 2,
                " holds ", feed[j].size(), " tokens, not ", tokens.size());
    const int64_t shift = int64_t(j + 1) * step_shift;
    auto e = embed(feed[j]);
    if (shift != 0) e = torch::roll(e, shift, 1), state = torch::roll(state, shift, 1);
    std::tie(logits, state) = step(p, e, state, cap.kv);
    if (shift != 0) logits = torch::roll(logits, -shift, 1), state = torch::roll(state, -shift, 1);
    out.push_back(logits);
  }
  return out;
}

std::vector<float> TorchAssistant::read_dir(const std::string& dir) const {
  const io::TensorSet ts = io::TensorSet::open_dir(dir);
  model::check_tensor_shapes(ts, drafter::assistant_tensor_shapes(a_), "the assistant's config");
  std::map<std::string, std::vector<float>> t;
  for (const FlatLayout::Entry& e : layout_.entries) {
    const io::TensorView& v = ts.get(e.name);
    std::vector<float> x(v.numel());
    to_f32(v.data, v.dtype, x.size(), x.data());
    t[e.name] = std::move(x);
  }
  return layout_.flatten(t);
}

void TorchAssistant::write_dir(const std::string& dir, const nlohmann::json& config,
                               const std::vector<float>& flat,
                               const std::vector<int32_t>& ordering) const {
  if (a_.ordered && ordering.size() != size_t(a_.block.vocab)) {
    fail<InputError>("a centroid-head assistant needs its token_ordering ({} ids), got {}",
                     a_.block.vocab, ordering.size());
  }
  fs::create_directories(dir);
  const auto tensors = layout_.unflatten(flat.data(), int64_t(flat.size()));
  std::vector<io::TensorView> views;
  for (const FlatLayout::Entry& e : layout_.entries) {
    const std::vector<float>& v = tensors.at(e.name);
    views.push_back({e.name, DType::F32, e.shape, v.data(), v.size() * sizeof(float)});
  }
  std::vector<int64_t> ids(ordering.begin(), ordering.end());
  if (a_.ordered) {
    views.push_back({"masked_embedding.token_ordering", DType::I64, {int64_t(ids.size())},
                     ids.data(), ids.size() * sizeof(int64_t)});
  }
  io::write_safetensors((fs::path(dir) / "model.safetensors").string(), views, {{"format", "pt"}});
  nlohmann::json c = config;
  c["dtype"] = "float32";
  write_file_atomic((fs::path(dir) / "config.json").string(), c.dump(2));
}

}  // namespace mtp::train
