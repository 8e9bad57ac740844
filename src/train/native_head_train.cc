#include "train/native_head_train.h"

#include <fmt/core.h>

#include <cmath>
#include <filesystem>
#include <optional>
#include <random>

#include "core/error.h"
#include "core/dtype.h"
#include "drafter/native_head.h"
#include "io/gguf.h"
#include "io/pretrain_data.h"
#include "io/safetensors.h"
#include "model/layer_io.h"
#include "model/loader.h"
#include "train/native_head_gguf.h"
#include "train/parity.h"
#include "train/post_norm_capture.h"
#include "train/qwen35_torch.h"

namespace fs = std::filesystem;

namespace mtp::train {

namespace {

// The target's frozen embedding and head as the engine holds them: [V, d] each.
std::pair<torch::Tensor, torch::Tensor> frozen_tables(const model::Model& m) {
  const int64_t V = m.config().vocab, d = m.config().d_model;
  auto E = torch::empty({V, d}, torch::kFloat32), H = torch::empty({V, d}, torch::kFloat32);
  for (int64_t v = 0; v < V; ++v) {
    m.embed(int32_t(v), E.data_ptr<float>() + v * d);
    m.weights().lm_head.row_f32(size_t(v), H.data_ptr<float>() + v * d);
  }
  return {E, H};
}

// The libtorch head of a flat parameter vector over native_mtp_tensors.
struct TorchHead {
  const model::Model& m;
  model::ModelConfig mc;
  FlatLayout layout;
  torch::Tensor E, H;
  model::Rope rope;
  // Rows t = 0..R-2 of a window: token t + 1 and the capture at t -> logits [R - 1, V].
  torch::Tensor logits(const std::vector<torch::Tensor>& p, const std::vector<int32_t>& toks,
                       const std::vector<float>& post) const {
    const int64_t n = int64_t(toks.size()) - 1, d = mc.d_model;
    std::vector<int64_t> next(toks.begin() + 1, toks.end());
    auto e = E.index_select(0, torch::tensor(next)).unsqueeze(0);  // [1, n, d]
    auto h = torch::from_blob(const_cast<float*>(post.data()), {1, n, d}, torch::kFloat32).clone();
    const RopeTables rt = rope_tables(rope, false, n, mc.rotary_dim(mc.head_dim), torch::kCPU);
    auto out = native_head_forward(
        mc, [&](const std::string& name) { return p.at(layout.index(name)); }, e, h, rt,
        causal_mask(n, 0, torch::kCPU));
    return at::linear(out.squeeze(0), H);
  }
};

// init_from's mtp.* as one flat vector (any float dtype).
std::vector<float> read_head(const io::TensorSet& ts, const FlatLayout& layout) {
  std::vector<float> flat(size_t(layout.total));
  for (const auto& e : layout.entries) {
    const io::TensorView& v = model::finite_tensor(ts, e.name);
    if (v.shape != e.shape) {
      fail<InputError>("'{}': tensor '{}' has shape {}, the target's head needs {}", ts.source(),
                       e.name, model::shape_str(v.shape), model::shape_str(e.shape));
    }
    to_f32(v.data, v.dtype, size_t(e.numel), flat.data() + e.offset);
  }
  return flat;
}

// init_from's files and tensors with mtp.* replaced by `flat` (fp32), in `out`.
void write_dir(const std::string& init_from, const io::TensorSet& ts, const FlatLayout& layout,
               const std::vector<float>& flat, const std::string& out) {
  fs::create_directories(out);
  for (const auto& f : fs::directory_iterator(init_from)) {
    const std::string name = f.path().filename().string();
    if (!f.is_regular_file() || f.path().extension() == ".safetensors" ||
        name == "model.safetensors.index.json") {
      continue;
    }
    fs::copy_file(f.path(), fs::path(out) / name, fs::copy_options::overwrite_existing);
  }
  const auto head = layout.unflatten(flat.data(), int64_t(flat.size()));
  std::vector<io::TensorView> views;
  for (const std::string& n : ts.names()) {
    if (!head.count(n)) views.push_back(ts.get(n));
  }
  for (const auto& e : layout.entries) {
    views.push_back(io::make_view(e.name, DType::F32, e.shape, head.at(e.name)));
  }
  io::write_safetensors((fs::path(out) / "model.safetensors").string(), views, {{"format", "pt"}});
}

}  // namespace

bool native_head_writes_gguf(const NativeHeadTrainOptions& o) {
  return io::GgufFile::has_magic(native_head_init(o));
}

NativeHeadTrainResult train_native_head(const NativeHeadTrainOptions& o) {
  if (o.steps < 1 || o.seq_len < 3 || o.parity_windows < 1) {
    fail<InputError>("train-native-head: steps {}, sequence length {} and parity windows {} must "
                     "be >= 1, >= 3 and >= 1", o.steps, o.seq_len, o.parity_windows);
  }
  if (!(o.lr > 0)) fail<InputError>("train-native-head: learning rate {} must be > 0", o.lr);
  const model::Model m(model::load_model(o.target, {}));
  const model::ModelConfig& c = m.config();
  if (c.arch != model::Arch::Qwen35 || c.mtp_layers != 1) {
    fail<InputError>("train-native-head: '{}' is a {} target with {} MTP layers; the native head "
                     "is Qwen3.5's one MTP layer (mtp_num_hidden_layers 1)", o.target,
                     model::arch_name(c.arch), c.mtp_layers);
  }
  const std::string& init_path = native_head_init(o);
  const bool gguf = native_head_writes_gguf(o);
  const std::optional<io::TensorSet> init =
      gguf ? std::nullopt : std::optional(io::TensorSet::open_dir(init_path));
  auto [E, H] = frozen_tables(m);
  const TorchHead th{m, model::native_mtp_config(c),
                     FlatLayout::from_shapes(model::native_mtp_tensors(c)), E, H, model::Rope(c)};
  torch::Tensor flat = th.layout.to_flat(
      gguf ? th.layout.flatten(read_gguf_native_head(init_path, c)) : read_head(*init, th.layout),
      torch::kCPU);
  const io::PretrainData data = io::read_pretrain_data(o.tokens);
  const std::vector<int32_t>& stream = data.train.tokens;
  if (stream.size() < size_t(o.seq_len)) {
    fail<InputError>("train-native-head: '{}' holds {} training tokens, fewer than one sequence "
                     "of {}", o.tokens, stream.size(), o.seq_len);
  }
  for (const auto* s : {&data.train.tokens, &data.heldout.tokens}) {
    for (int32_t t : *s) {
      if (t < 0 || t >= c.vocab) {
        fail<InputError>("train-native-head: '{}' holds token {}, outside the target's "
                         "vocabulary of {}", o.tokens, t, c.vocab);
      }
    }
  }
  std::vector<torch::Tensor> leaves = th.layout.views(flat, true);
  torch::optim::Adam opt(leaves, torch::optim::AdamOptions(o.lr));
  std::mt19937_64 rng(o.seed);
  NativeHeadTrainResult r;
  const size_t R = size_t(o.seq_len);
  for (int s = 0; s < o.steps; ++s) {
    const size_t start = size_t(rng() % uint64_t(stream.size() - R + 1));
    const std::vector<int32_t> toks(stream.begin() + long(start), stream.begin() + long(start + R));
    const PostNormCapture cap = post_norm_capture(m, toks);
    // Row t drafts the target's greedy token after toks[0..t+1].
    const auto labels =
        torch::tensor(std::vector<int64_t>(cap.argmax.begin() + 1, cap.argmax.end()));
    opt.zero_grad();
    auto loss = torch::nn::functional::cross_entropy(th.logits(leaves, toks, cap.post), labels);
    loss.backward();
    opt.step();
    r.losses.push_back(loss.item<double>());
    if (s == 0 || (s + 1) % 10 == 0 || s + 1 == o.steps) {
      fmt::print(stderr, "[train-native-head] step {}/{}: loss {:.4f}\n", s + 1, o.steps,
                 r.losses.back());
    }
  }
  const std::vector<float> trained = to_host(flat);
  if (gguf) {
    write_gguf_native_head(init_path, c, th.layout.unflatten(trained.data(), int64_t(trained.size())),
                           o.out);
  } else {
    write_dir(init_path, *init, th.layout, trained, o.out);
  }

  // ---- parity gate: the served target with the written head vs libtorch ----
  model::LoadedModel served = model::load_model(o.target, {});
  served.weights.mtp = std::move(model::load_model(o.out, {}).weights.mtp);
  const model::Model gated_as_loaded(std::move(served));
  const std::optional<model::Model> float_head = with_float_head(gated_as_loaded);
  const model::Model& gated = float_head ? *float_head : gated_as_loaded;
  const std::vector<int32_t>& held = data.heldout.tokens.size() >= R ? data.heldout.tokens : stream;
  const int64_t d = c.d_model, V = c.vocab;
  double max_row = 0, max_g = 0;
  for (int64_t v = 0; v < V; ++v) max_row = std::max(max_row, H[v].norm().item<double>());
  const torch::Tensor g = th.layout.views(flat, false).at(th.layout.index("mtp.norm.weight"));
  max_g = (g + 1.0f).abs().max().item<double>();
  const double n = std::max({2.0 * d, double(c.ffn), 2.0 * c.n_heads * c.head_dim, double(R)});
  // fc, the layer and the head: three stage groups of C = 64 (train/parity.cc).
  r.parity_tol = 64.0 * 3 * std::ldexp(1.0, -24) * std::sqrt(n) * std::sqrt(double(d)) * max_g *
                 max_row;
  torch::NoGradGuard ng;
  const std::vector<torch::Tensor> P = th.layout.views(flat, false);
  for (int w = 0; w < o.parity_windows; ++w) {
    const size_t start = (size_t(w) * R) % (held.size() - R + 1);
    const std::vector<int32_t> toks(held.begin() + long(start), held.begin() + long(start + R));
    const PostNormCapture cap = post_norm_capture(m, toks);
    const std::vector<float> ref = to_host(th.logits(P, toks, cap.post));  // [R - 1, V]
    drafter::NativeHead head(gated, 1, int(R), int(R));
    std::vector<model::Row> rows;
    for (size_t t = 0; t + 1 < R; ++t) rows.push_back({0, int32_t(t), toks[t + 1]});
    std::vector<float> eng((R - 1) * size_t(V));
    head.forward(rows, cap.post.data(), nullptr, eng.data(), nullptr, nullptr);
    for (size_t t = 0; t + 1 < R; ++t) {
      const float* a = eng.data() + t * size_t(V);
      const float* b = ref.data() + t * size_t(V);
      size_t ae = 0, ar = 0;
      for (int64_t v = 0; v < V; ++v) {
        r.parity_max_dlogit = std::max(r.parity_max_dlogit, std::fabs(double(a[v]) - b[v]));
        if (a[v] > a[ae]) ae = size_t(v);
        if (b[v] > b[ar]) ar = size_t(v);
      }
      float second = -INFINITY;
      for (int64_t v = 0; v < V; ++v) {
        if (size_t(v) != ar) second = std::max(second, b[v]);
      }
      ++r.parity_rows;
      if (double(b[ar]) - second > 2 * r.parity_tol) {
        ++r.parity_decided;
        r.parity_agreed += ae == ar;
      }
    }
  }
  r.parity_passed = r.parity_max_dlogit <= r.parity_tol && r.parity_agreed == r.parity_decided;
  fmt::print(stderr, "[train-native-head] parity: {} rows, max|dlogit| {:.3g} (tolerance {:.3g}), "
             "argmax {}/{} decided rows agree: {}\n", r.parity_rows, r.parity_max_dlogit,
             r.parity_tol, r.parity_agreed, r.parity_decided, r.parity_passed ? "passed" : "FAILED");
  if (!r.parity_passed) {
    fs::remove(gguf ? fs::path(o.out) : fs::path(o.out) / "model.safetensors");
    fail<ConfigError>("train-native-head: the parity gate failed (max|dlogit| {:.3g}, tolerance "
                      "{:.3g}; {}/{} argmax agree); '{}' holds no model", r.parity_max_dlogit,
                      r.parity_tol, r.parity_agreed, r.parity_decided, o.out);
  }
  return r;
}

}  // namespace mtp::train
