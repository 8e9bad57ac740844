#include "train/pretrain.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/json.h"
#include "core/mapped_file.h"
#include "core/progress.h"
#include "core/setting.h"
#include "core/thread_pool.h"
#include "io/pretrain_data.h"
#include "io/safetensors.h"
#include "model/fingerprint.h"
#include "model/hf_config.h"
#include "train/checkpoint.h"
#include "train/data.h"
#include "train/gemma4_torch.h"
#include "train/qwen35_torch.h"
#include "train/pretrain_target.h"
#include "train/step.h"

namespace mtp::train {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// config.json as transformers writes it for LlamaForCausalLM.
json llama_config_json(const PretrainPreset& p, int vocab, int bos, int eos, int max_position) {
  return {{"architectures", {"LlamaForCausalLM"}},
          {"model_type", "llama"},
          {"hidden_size", p.d_model},
          {"intermediate_size", p.ffn},
          {"num_hidden_layers", p.n_layers},
          {"num_attention_heads", p.n_heads},
          {"num_key_value_heads", p.n_kv_heads},
          {"head_dim", p.head_dim},
          {"vocab_size", vocab},
          {"max_position_embeddings", max_position},
          {"rms_norm_eps", 1e-5},
          {"rope_theta", 10000.0},
          {"rope_scaling", nullptr},
          {"hidden_act", "silu"},
          {"attention_bias", false},
          {"attention_dropout", 0.0},
          {"mlp_bias", false},
          {"tie_word_embeddings", false},
          {"bos_token_id", bos >= 0 ? json(bos) : json(nullptr)},
          {"eos_token_id", eos >= 0 ? json(eos) : json(nullptr)},
          {"initializer_range", 0.02},
          {"pretraining_tp", 1},
          {"use_cache", true},
          {"torch_dtype", "float32"},
          {"transformers_version", "4.44.0"}};
}

// Windows of n tokens of stream s starting at `offsets` (wrapping): int64 [B, n].
torch::Tensor windows(const io::TokenStream& s, const std::vector<int64_t>& offsets, int64_t n,
                      torch::Device dev) {
  const int64_t N = int64_t(s.tokens.size());
  auto t = torch::empty({int64_t(offsets.size()), n}, torch::kInt64);
  int64_t* p = t.data_ptr<int64_t>();
  for (size_t b = 0; b < offsets.size(); ++b) {
    for (int64_t j = 0; j < n; ++j) p[int64_t(b) * n + j] = s.tokens[size_t((offsets[b] + j) % N)];
  }
  return t.to(dev);
}

// Mean next-token cross-entropy of the windows' tokens [B, R + 1].
torch::Tensor window_loss(const PretrainTarget& m, const std::vector<torch::Tensor>& P,
                          const torch::Tensor& w) {
  return PretrainTarget::next_token_loss(m.forward(P, w.narrow(1, 0, w.size(1) - 1)), w, 1);
}

// Held-out loss over non-overlapping windows (each target predicted once).
double evaluate_heldout(const PretrainTarget& m, const torch::Tensor& flat, const io::TokenStream& s,
                        int seq_len, int batch, int max_windows) {
  torch::NoGradGuard ng;
  const int64_t M = int64_t(s.tokens.size());
  const int64_t R = std::min<int64_t>(seq_len, M - 1);
  int64_t n = std::max<int64_t>(1, (M - 1) / R);
  if (max_windows > 0) n = std::min<int64_t>(n, max_windows);
  const std::vector<torch::Tensor> P = m.layout().views(flat, false);
  double sum = 0;
  for (int64_t w0 = 0; w0 < n; w0 += batch) {
    std::vector<int64_t> offs;
    for (int64_t w = w0; w < std::min(n, w0 + batch); ++w) offs.push_back(w * R);
    sum +=
        window_loss(m, P, windows(s, offs, R + 1, m.device())).item<double>() * double(offs.size());
  }
  return sum / double(n);
}

model::ModelConfig parse_config(const json& j, const std::string& where) {
  return model::parse_hf_config(j, nullptr, where);
}

void write_model(const std::string& dir, const PretrainTarget& m, const json& config,
                 const std::vector<float>& flat, const json& summary) {
  auto tensors = m.layout().unflatten(flat.data(), int64_t(flat.size()));
  std::vector<io::TensorView> views;
  for (const auto& e : m.layout().entries) {
    views.push_back(io::make_view(e.name, DType::F32, e.shape, tensors.at(e.name)));
  }
  // The weights first, config.json last: both present = a finished model.
  io::write_safetensors((fs::path(dir) / "model.safetensors").string(), views,
                        {{"format", "pt"}, {"mtpspec_pretrain", summary.dump()}});
  write_file_atomic((fs::path(dir) / "config.json").string(), config.dump(2) + "\n");
}

}  // namespace

PretrainReport run_pretrain(const PretrainOptions& o) {
  // ---- options ----
  const PretrainPreset& pre = pretrain_preset(o.preset);
  const long total = o.steps > 0 ? o.steps : pre.steps;
  const int seq_len = o.seq_len > 0 ? o.seq_len : pre.seq_len;
  const int batch = o.batch > 0 ? o.batch : pre.batch;
  const double lr = o.lr > 0 ? o.lr : pre.lr;
  if (o.steps < 0) fail_setting<InputError>("steps", "steps must be >= 0 (0 = the preset's)");
  if (o.seq_len < 0) {
    fail_setting<InputError>("seq_len", "the sequence length must be >= 0 (0 = the preset's)");
  }
  if (o.batch < 0) fail_setting<InputError>("batch", "the batch must be >= 0 (0 = the preset's)");
  if (o.lr < 0) fail_setting<InputError>("lr", "the learning rate must be >= 0 (0 = the preset's)");
  if (seq_len < 2) {
    fail_setting<InputError>("seq_len", "a sequence length of {} is too short (at least 2)",
                             seq_len);
  }
  if (std::find(model::kPretrainArchs.begin(), model::kPretrainArchs.end(), o.arch) ==
      model::kPretrainArchs.end()) {
    fail_setting<InputError>("arch", "pretraining builds llama, gemma4 or qwen35 models, not '{}'",
                             o.arch);
  }
  if (!(o.min_lr_ratio >= 0 && o.min_lr_ratio <= 1))
    fail<InputError>("min lr ratio must be in [0, 1]");
  const int threads = resolve_threads(o.threads);
  set_threads(threads);
  const torch::Device dev = training_device(o.device);
  const long warmup = o.warmup >= 0 ? o.warmup : std::min(100L, total / 10);
  const long eval_every = o.eval_every > 0 ? o.eval_every : std::max(1L, total / 10);
  const long save_every = o.save_every > 0 ? o.save_every : eval_every;
  const long log_every = std::max(1L, eval_every / 5);

  // ---- data and model ----
  const std::string scratch = io::pretrain_dir(o.model_dir);
  const std::string tokens_path = io::pretrain_tokens_path(o.model_dir);
  if (!fs::exists(tokens_path)) {
    fail<IoError>("'{}' is missing: run `mtpspec pretrain`, which tokenizes the corpus first",
                  tokens_path);
  }
  io::PretrainData data = io::read_pretrain_data(tokens_path);
  const json& info = data.info;
  if (data.train.starts.empty()) fail<InputError>("'{}' holds no training documents", tokens_path);
  if (int64_t(data.train.tokens.size()) < seq_len + 1) {
    fail_setting<InputError>("seq_len", "the training split has {} tokens, fewer than one window "
                             "of the sequence length {} + 1", data.train.tokens.size(), seq_len);
  }
  const int vocab = info["vocab"].get<int>(), bos = info.value("bos_id", -1),
            eos = info.value("eos_id", -1);
  const json config = o.arch == "gemma4"   ? gemma4_pretrain_config(pre, vocab, bos, eos, seq_len)
                      : o.arch == "qwen35" ? qwen35_pretrain_config(pre, vocab, bos, eos, seq_len)
                                           : llama_config_json(pre, vocab, bos, eos, seq_len);
  const model::ModelConfig cfg = parse_config(config, "the pretraining config");
  const std::unique_ptr<PretrainTarget> model = make_pretrain_target(cfg, dev);
  const PretrainTarget& m = *model;
  const int64_t V = cfg.vocab;

  // Everything that fixes the trajectory: must match on resume.
  const json traj = {{"data", info.value("identity_hash", "")},
                     {"config", config},
                     {"preset", pre.name},
                     {"seq_len", seq_len},
                     {"batch", batch},
                     {"steps", total},
                     {"warmup", warmup},
                     {"lr", lr},
                     {"min_lr_ratio", o.min_lr_ratio},
                     {"weight_decay", o.weight_decay},
                     {"beta1", o.beta1},
                     {"beta2", o.beta2},
                     {"adam_eps", o.adam_eps},
                     {"clip", o.clip},
                     {"seed", o.seed}};

  // ---- state: fresh or resumed ----
  OptimState st;
  long step = 0;
  double last_eval = -1;
  const std::string ckpt = checkpoint_path(scratch);
  std::optional<Checkpoint> c = checkpoint_to_resume(
      ckpt, o.resume, traj, o.model_dir, "pretraining", "the same corpus, tokenizer and flags");
  const bool resumed = c.has_value();
  if (resumed) {
    st.params = m.to_flat(c->params);
    st.m = m.to_flat(c->adam_m);
    st.v = m.to_flat(c->adam_v);
    step = c->state.value("step", 0L);
    last_eval = c->state.value("last_eval", -1.0);
    fmt::print("resuming {} from step {} of {}\n", o.model_dir, step, total);
    c.reset();  // its tensors are copied: free them for the run
  } else {
    // A fresh run: no finished model from an earlier run may stay behind.
    for (const char* f : {"config.json", "model.safetensors"})
      fs::remove(fs::path(o.model_dir) / f);
    st.params = m.to_flat(m.init_params(o.seed));
    st.m = torch::zeros_like(st.params);
    st.v = torch::zeros_like(st.params);
  }
  std::ofstream metrics =
      open_metrics((fs::path(scratch) / "metrics.jsonl").string(), step, resumed);
  write_file_atomic((fs::path(scratch) / "run.json").string(),
                    json({{"trajectory", traj},
                          {"threads", threads},
                          {"device", o.device},
                          {"parameters", m.layout().total},
                          {"data", info},
                          {"command_line", o.command_line}})
                        .dump(1));
  auto log = [&](const json& j) {
    metrics << j.dump() << "\n" << std::flush;
    if (!metrics) fail<IoError>("cannot write '{}/metrics.jsonl' (disk full?)", scratch);
  };
  auto save = [&] {
    Checkpoint c;
    c.state = {
        {"format", kCheckpointFormat}, {"kind", "pretrain"}, {"step", step},
        {"total_steps", total},        {"trajectory", traj}, {"layout", m.layout().to_json()},
        {"last_eval", last_eval},      {"threads", threads}, {"torch_version", TORCH_VERSION}};
    c.params = to_host(st.params);
    c.adam_m = to_host(st.m);
    c.adam_v = to_host(st.v);
    save_checkpoint(ckpt, c);
  };
  const bool has_heldout = data.heldout.tokens.size() >= 2;
  auto eval = [&] {
    if (has_heldout) {
      last_eval = evaluate_heldout(m, st.params, data.heldout, seq_len, batch, o.eval_windows);
    }
  };

  // ---- loop ----
  PretrainReport rep;
  rep.total_steps = total;
  rep.parameters = m.layout().total;
  DataOrder order(data.train.starts.size(), o.seed);
  const long tokens_per_step = long(batch) * seq_len;
  const long stop = o.stop_after > 0 ? std::min(total, o.stop_after) : total;
  Progress prog("pretrain", double((stop - step) * tokens_per_step), "tok", o.progress);
  const AdamWOptions adamw{o.beta1, o.beta2, o.adam_eps, o.weight_decay, o.clip};
  const auto t0 = std::chrono::steady_clock::now();
  const long start = step;
  double train_secs = 0;
  while (step < stop) {
    const double lr_now = cosine_lr(lr, o.min_lr_ratio, step, total, warmup);
    const auto ts = std::chrono::steady_clock::now();
    std::vector<int64_t> offs;
    for (int b = 0; b < batch; ++b) {
      offs.push_back(data.train.starts[order.at(uint64_t(step) * uint64_t(batch) + uint64_t(b))]);
    }
    const std::vector<torch::Tensor> leaves = m.layout().views(st.params, true);
    const PretrainTarget::Loss loss =
        m.training_loss(leaves, windows(data.train, offs, seq_len + 1, dev));
    loss.total.backward();
    torch::Tensor g = m.layout().flat_grad(leaves);
    rep.train_loss = loss.total.item<double>();
    rep.mtp_loss = loss.mtp.defined() ? loss.mtp.item<double>() : -1;
    const double gnorm = optimizer_step(st, g, m.layout(), lr_now, step, adamw);
    train_secs += std::chrono::duration<double>(std::chrono::steady_clock::now() - ts).count();
    ++step;
    const double tps = double((step - start) * tokens_per_step) / std::max(1e-9, train_secs);
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (step % log_every == 0 || step == total) {
      log({{"kind", "train"},
           {"step", step},
           {"lr", lr_now},
           {"loss", rep.train_loss},
           {"mtp_loss", rep.mtp_loss >= 0 ? json(rep.mtp_loss) : json(nullptr)},
           {"grad_norm", gnorm},
           {"tokens_per_s", tps},
           {"elapsed_s", secs}});
    }
    if ((step % eval_every == 0 || step == total) && has_heldout) {
      eval();
      log({{"kind", "eval"},
           {"step", step},
           {"loss", last_eval},
           {"ppl", std::exp(last_eval)},
           {"tokens_per_s", tps},
           {"elapsed_s", secs}});
    }
    if (step % save_every == 0 || step == total || step == stop) save();
    prog.update(
        double((step - start) * tokens_per_step),
        fmt::format("step {}/{} loss {:.3f}{} lr {:.1e}", step, total, rep.train_loss,
                    last_eval >= 0 ? fmt::format(" held-out {:.3f}", last_eval) : "", lr_now));
  }
  prog.finish();
  rep.final_step = step;
  rep.steps_done = step - start;
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  rep.tokens_per_s = train_secs > 0 ? double(rep.steps_done * tokens_per_step) / train_secs : 0;
  rep.eval_loss = last_eval;
  fmt::print(
      "pretrained steps {}..{} of {} in {:.1f} s ({:.1f} s in steps): {:.0f} tokens/s "
      "({} thread(s), {})\n",
      start, step, total, rep.seconds, train_secs, rep.tokens_per_s, threads, o.device);
  if (step < total) return rep;  // stopped early (--stop-after): resume later

  if (has_heldout && last_eval < 0) eval();  // a resumed, already finished run
  rep.eval_loss = last_eval;
  const json summary = {{"preset", pre.name},
                        {"steps", total},
                        {"seq_len", seq_len},
                        {"batch", batch},
                        {"tokens_seen", total * tokens_per_step},
                        {"data", info.value("identity_hash", "")},
                        {"seed", o.seed},
                        {"heldout_loss", last_eval}};
  write_model(o.model_dir, m, config, to_host(st.params), summary);
  rep.model_written = true;
  fmt::print("wrote {} (config.json, model.safetensors): {} parameters, {:.1f} MB fp32{}\n",
             o.model_dir, m.layout().total, double(m.layout().total) * 4 / 1e6,
             has_heldout ? fmt::format("; held-out loss {:.3f} (perplexity {:.1f})", last_eval,
                                       std::exp(last_eval))
                         : "");
  return rep;
}

namespace {

// The libtorch twin of the model in model_dir and its weights (a flat tensor
// on the CPU) from config.json and model.safetensors.
struct LoadedTarget {
  std::unique_ptr<PretrainTarget> model;
  torch::Tensor params;
  std::vector<torch::Tensor> views() const { return model->layout().views(params, false); }
};

LoadedTarget load_torch_target(const std::string& model_dir) {
  const std::string cfg_path = (fs::path(model_dir) / "config.json").string();
  const json config = parse_json(read_file(cfg_path), "'" + cfg_path + "'");
  LoadedTarget t{make_pretrain_target(parse_config(config, cfg_path), torch::kCPU), {}};
  const PretrainTarget& m = *t.model;
  io::SafetensorsFile f((fs::path(model_dir) / "model.safetensors").string());
  std::vector<float> flat(size_t(m.layout().total));
  for (const auto& e : m.layout().entries) {
    const io::TensorView& v = f.get(e.name);
    if (v.dtype != DType::F32 || v.shape != e.shape) {
      fail<ShapeError>("'{}': tensor '{}' is not F32 of the config's shape", f.path(), e.name);
    }
    std::copy_n(static_cast<const float*>(v.data), e.numel, flat.begin() + e.offset);
  }
  t.params = m.to_flat(flat);
  return t;
}

torch::Tensor token_row(const std::vector<int32_t>& tokens) {  // [1, T] int64
  auto t = torch::empty({1, int64_t(tokens.size())}, torch::kInt64);
  for (size_t i = 0; i < tokens.size(); ++i) t[0][int64_t(i)] = int64_t(tokens[i]);
  return t;
}

}  // namespace

std::vector<float> torch_logits(const std::string& model_dir, const std::vector<int32_t>& tokens) {
  torch::NoGradGuard ng;
  const LoadedTarget t = load_torch_target(model_dir);
  return to_host(t.model->forward(t.views(), token_row(tokens))[0]);
}

std::vector<float> torch_mtp_logits(const std::string& model_dir,
                                    const std::vector<int32_t>& tokens) {
  torch::NoGradGuard ng;
  const LoadedTarget t = load_torch_target(model_dir);
  const auto* q = dynamic_cast<const TorchQwen35*>(t.model.get());
  if (!q || !q->has_mtp()) {
    fail<InputError>("'{}' holds no native multi-token-prediction head (a Qwen3.5 checkpoint "
                     "with mtp_num_hidden_layers 1)", model_dir);
  }
  if (tokens.size() < 2) fail<InputError>("the native head needs at least 2 tokens");
  const int64_t T = int64_t(tokens.size());
  const std::vector<torch::Tensor> P = t.views();
  const torch::Tensor row = token_row(tokens);
  const torch::Tensor h = q->trunk(P, row);
  const torch::Tensor out = q->mtp(P, row.narrow(1, 1, T - 1), h.narrow(1, 0, T - 1));
  return to_host(q->head(P, out)[0]);
}

}  // namespace mtp::train
