#include "train/assistant_train.h"

#include <fmt/core.h>

#include <filesystem>
#include <random>

#include "core/error.h"
#include "core/json.h"
#include "core/mapped_file.h"
#include "drafter/assistant_gguf.h"
#include "drafter/gemma4_assistant.h"
#include "io/pretrain_data.h"
#include "model/loader.h"
#include "train/assistant_torch.h"

namespace fs = std::filesystem;

namespace mtp::train {

AssistantTrainResult train_assistant(const AssistantTrainOptions& o) {
  if (o.steps < 1 || o.seq_len < 3) {
    fail<InputError>("train-assistant: steps {} and sequence length {} must be >= 1 and >= 3",
                     o.steps, o.seq_len);
  }
  if (!(o.lr > 0)) fail<InputError>("train-assistant: learning rate {} must be > 0", o.lr);
  const model::Model m(model::load_model(o.target, {}));
  const drafter::Gemma4Assistant init = drafter::Gemma4Assistant::load(o.init_from, m.config());
  const std::string cfg_path = (fs::path(o.init_from) / "config.json").string();
  const nlohmann::json config = parse_json(read_file(cfg_path), "'" + cfg_path + "'");
  const io::PretrainData data = io::read_pretrain_data(o.tokens);
  const std::vector<int32_t>& stream = data.train.tokens;
  if (stream.size() < size_t(o.seq_len)) {
    fail<InputError>("train-assistant: '{}' holds {} training tokens, fewer than one sequence of {}",
                     o.tokens, stream.size(), o.seq_len);
  }
  for (int32_t t : stream) {
    if (t < 0 || t >= m.config().vocab) {
      fail<InputError>("train-assistant: '{}' holds token {}, outside the target's vocabulary of {}",
                       o.tokens, t, m.config().vocab);
    }
  }
  const torch::Device cpu(torch::kCPU);
  const TorchAssistant ta(m, init.config(), cpu);
  torch::Tensor flat = ta.layout().to_flat(ta.read_dir(o.init_from), cpu);
  // The views share flat's storage: the optimizer's in-place steps train it.
  std::vector<torch::Tensor> leaves = ta.layout().views(flat, true);
  torch::optim::Adam opt(leaves, torch::optim::AdamOptions(o.lr));
  std::mt19937_64 rng(o.seed);
  AssistantTrainResult r;
  const int64_t R = o.seq_len;
  for (int s = 0; s < o.steps; ++s) {
    const size_t start = size_t(rng() % uint64_t(stream.size() - size_t(R) + 1));
    const std::vector<int32_t> toks(stream.begin() + long(start), stream.begin() + long(start) + R);
    const AssistantCapture cap = engine_capture(m, init.config(), toks, cpu);
    // Row t (t >= 1) drafts the target's next token after toks[0..t].
    const auto labels = torch::tensor(std::vector<int64_t>(cap.target_argmax.begin() + 1,
                                                           cap.target_argmax.end()));
    opt.zero_grad();
    auto logits = ta.step(leaves, ta.embed(toks), TorchAssistant::step1_state(cap.post_norm),
                          cap.kv).first.squeeze(0).narrow(0, 1, R - 1);
    auto loss = torch::nn::functional::cross_entropy(logits, labels);
    loss.backward();
    opt.step();
    r.losses.push_back(loss.item<double>());
    if (s == 0 || (s + 1) % 10 == 0 || s + 1 == o.steps) {
      fmt::print(stderr, "[train-assistant] step {}/{}: loss {:.4f}\n", s + 1, o.steps,
                 r.losses.back());
    }
  }
  // The config as it came (transformers' strict config classes take no keys
  // of ours; what it was trained against is the caller's to record).
  ta.write_dir(o.out, config, to_host(flat), init.weights().ordering);
  if (!o.gguf.empty()) drafter::write_assistant_gguf(o.out, o.gguf);
  return r;
}

}  // namespace mtp::train
