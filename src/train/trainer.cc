#include "train/trainer.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/setting.h"
#include "core/mapped_file.h"
#include "core/memory_headroom.h"
#include "core/progress.h"
#include "core/run_budget.h"
#include "core/thread_pool.h"
#include "kernels/matmul.h"
#include "model/fingerprint.h"
#include "model/loader.h"
#include "train/checkpoint.h"
#include "train/data.h"
#include "train/dist.h"
#include "train/online_data.h"
#include "train/parity.h"
#include "train/step.h"
#include "train/torch_mtp.h"

namespace mtp::train {

namespace fs = std::filesystem;

namespace {

uint64_t hash64(const std::string& s) {
  return std::stoull(model::sha256_hex(s).substr(0, 15), nullptr, 16);
}

// The shards, or the online capture by the target's engine forward or its
// libtorch twin (TrainOptions::target_forward).
std::unique_ptr<TrainData> open_data(const TrainOptions& o, const model::Model& target,
                                     const std::string& fp, torch::Device dev, int threads) {
  if (o.online_jobs.empty() == o.shards_dir.empty()) {
    fail_setting<InputError>("shards", "training reads shards or online jobs (one of them)");
  }
  if (o.online_jobs.empty()) {
    return std::make_unique<ShardSet>(o.shards_dir, fp, target.config().d_model);
  }
  OnlineDataOptions oo;
  oo.jobs_path = o.online_jobs;
  oo.hidden_dtype = o.hidden_dtype == "fp16"   ? DType::F16
                    : o.hidden_dtype == "fp32" ? DType::F32
                                               : DType::BF16;
  oo.seed = o.seed;
  return std::make_unique<OnlineData>(oo, target.config(), fp,
                                      target_capture(o.target_forward, target, dev, threads));
}

// Bytes this process still allocates for the run (the target and the frozen
// head are loaded already): the optimizer state (params, Adam m and v, EMA,
// the gradient and its sum: 6 flat fp32 vectors of P), one micro-batch's
// capture and autograd activations (per module and row: the fused input,
// q/k/v/o, the MLP's gate/up/act, norms ~ 14 d + 4 ffn floats, and the
// attention's H·L scores and probabilities, kept for the backward ×2 with
// their gradients), the head's chunk of logits (×3: logits, softmax, grad),
// and online: the capture's KV cache and hidden for the micro-batch and the
// cached held-out batches.
double training_memory_bytes(const model::ModelConfig& c, const drafter::DrafterConfig& dc,
                             long P, int batch, int seq_len, int64_t head_rows, bool online,
                             long eval_sequences) {
  const double f = 4.0, B = batch, L = seq_len, d = c.d_model;
  const double per_row = dc.K * (14.0 * d + 4.0 * c.ffn + 2.0 * c.n_heads * L) * 2.0 + 2.0 * d;
  double bytes = 6.0 * double(P) * f + B * L * per_row * f + 3.0 * double(head_rows) * c.vocab * f;
  if (online) {
    double kv_dim = 0;
    for (int l = 0; l < c.n_layers; ++l) kv_dim += 2.0 * c.n_kv_heads * c.head_dim;
    bytes += B * L * (kv_dim + d) * f + double(eval_sequences) * L * (d + 1.25) * f;
  }
  return bytes;
}

}  // namespace

std::vector<double> per_step_loss_weights(const std::vector<double>& given, int K) {
  if (given.empty()) {
    fail_setting<InputError>("loss_weights", "the loss weights need at least one value");
  }
  for (double w : given) {
    if (!std::isfinite(w) || w < 0) {
      fail_setting<InputError>("loss_weights", "loss weights must be finite and >= 0, got {}", w);
    }
  }
  std::vector<double> w = given;
  while (int(w.size()) < K) w.push_back(w.back() * 0.8);
  w.resize(size_t(std::max(K, 0)));
  return w;
}

TrainReport run_training(const TrainOptions& o) {
  // ---- options ----
  if (o.K < 1 || o.K > 16) {
    fail_setting<InputError>("K", "the number of MTP modules must be 1..16, got {}", o.K);
  }
  if (o.batch < 1) {
    fail_setting<InputError>("batch", "sequences per micro-batch must be >= 1, got {}", o.batch);
  }
  if (o.accum < 1) {
    fail_setting<InputError>("accum", "micro-batches per step must be >= 1, got {}", o.accum);
  }
  if (!(o.lr > 0)) fail_setting<InputError>("lr", "the learning rate must be > 0, got {}", o.lr);
  if (!(o.ema >= 0 && o.ema < 1)) {
    fail_setting<InputError>("ema", "the EMA decay must be in [0, 1) (0 = off), got {}", o.ema);
  }
  if (o.offset_shift < -1 || o.offset_shift > 0) fail<InputError>("offset shift must be -1 or 0");
  per_step_loss_weights(o.loss_weights, o.K);
  if (o.loss != "ce" && o.loss != "kl" && o.loss != "ce+kl") {
    fail_setting<InputError>("loss", "the loss must be ce, kl or ce+kl, got '{}'", o.loss);
  }
  if (!std::isfinite(o.kl_temp) || !(o.kl_temp > 0)) {
    fail_setting<InputError>("kl_temp", "the KL temperature must be a finite number > 0, got {}",
                             o.kl_temp);
  }
  const int threads = resolve_threads(o.threads);
  set_threads(threads);
  if (o.hidden_dtype != "bf16" && o.hidden_dtype != "fp16" && o.hidden_dtype != "fp32") {
    fail_setting<InputError>("hidden_dtype", "the capture is held as bf16, fp16 or fp32, got '{}'",
                             o.hidden_dtype);
  }
  DistOptions dopt;
  dopt.world_size = o.world_size;
  dopt.rank = o.rank;
  dopt.file = o.dist_file;
  dopt.master_addr = o.master_addr;
  dopt.master_port = o.master_port;
  dopt.timeout_s = o.dist_timeout_s;
  const DistOptions resolved = resolve_dist(dopt);
  const torch::Device dev = training_device(o.device, resolved.local_rank);
  DistGroup dist(resolved, dev);
  const bool lead = dist.rank() == 0;
  auto say = [&](const std::string& s) {  // summaries and the parity table (lead rank)
    if (!lead) return;
    fmt::print("{}\n", s);
    std::fflush(stdout);  // before the progress line on stderr
  };
  if (dist.world() > 1) {
    say(fmt::format("data parallel: {} ranks, c10d {} on {}", dist.world(), dist.backend(),
                    dev.str()));
  }

  // ---- target, data, modules ----
  model::LoadedModel lm = model::load_model(o.model_path, {});
  const std::string fp = model::target_fingerprint(lm);
  const std::string model_path = lm.path;
  model::Model target(std::move(lm));
  const model::ModelConfig& cfg = target.config();
  std::unique_ptr<TrainData> data_owner = open_data(o, target, fp, dev, threads);
  TrainData& data = *data_owner;
  auto [data_key, data_record] = data.record();
  if (auto* online = dynamic_cast<const OnlineData*>(&data)) {
    // The capture a libtorch target trains against, measured against the
    // engine's before any work (train/torch_target.h); the engine: the same bits.
    const nlohmann::json gap = online->capture_gap();
    data_record["capture_gap"] = gap;
    if (!gap.is_null()) {
      say(fmt::format("capture gap of the {} target against the engine: max |dh| {:.3e}, "
                      "bound {:.3e} over {} positions", online->target_forward(),
                      gap["max_abs"].get<double>(), gap["tol"].get<double>(),
                      gap["positions"].get<long>()));
      if (!gap["within"].get<bool>()) {
        const std::string msg = fmt::format(
            "the {} target's capture differs from the engine's by {:.3e}, beyond the bound {:.3e}: "
            "the drafter would train on hidden states the engine does not serve",
            online->target_forward(), gap["max_abs"].get<double>(), gap["tol"].get<double>());
        if (!o.force) fail_setting<ConfigError>("force", "{}", msg);
        warn_setting("force", msg + "; training anyway");
      }
    }
  }
  drafter::DrafterConfig dc;
  dc.K = o.K;
  dc.window = o.window < 0 ? data.seq_len() : o.window;
  dc.hidden_dtype = data.hidden_dtype();
  TorchMtp tm(target, dc, dev);
  const std::vector<double> w = per_step_loss_weights(o.loss_weights, o.K);

  const int M = dist.world() * o.accum;  // micro-batches per step
  const long per_step = long(M) * o.batch;
  const long n_train = long(data.size(Split::Train));
  const long total = o.steps > 0 ? o.steps
                                 : std::max(1L, long(std::ceil((o.epochs > 0 ? o.epochs : 1.0) *
                                                               double(n_train) / double(per_step))));
  const long warmup = o.warmup >= 0 ? o.warmup : std::min(100L, total / 10);
  const long eval_every = o.eval_every > 0 ? o.eval_every : std::max(1L, total / 10);
  const long save_every = o.save_every > 0 ? o.save_every : eval_every;
  const long log_every = std::max(1L, eval_every / 5);

  // Everything that fixes the trajectory: must match on resume and across ranks.
  nlohmann::json traj = {
      {"target_fingerprint", fp},
      {"drafter", dc.to_json()}, {"K", o.K}, {"batch", o.batch}, {"accum", o.accum},
      {"world", dist.world()}, {"steps", total}, {"warmup", warmup}, {"lr", o.lr},
      {"min_lr_ratio", o.min_lr_ratio}, {"weight_decay", o.weight_decay}, {"beta1", o.beta1},
      {"beta2", o.beta2}, {"adam_eps", o.adam_eps}, {"clip", o.clip}, {"loss_weights", w},
      {"ema", o.ema}, {"seed", o.seed}, {"offset_shift", o.offset_shift}};
  // The loss joins the trajectory only when it is not the default, so runs
  // (and their checkpoints) from before --loss existed still resume.
  if (o.loss != "ce") traj["loss"] = {{"kind", o.loss}, {"kl_temp", o.kl_temp}};
  traj.update(data.trajectory());
  dist.check_same(hash64(traj.dump()), "training configuration (flags, shards or target)");

  // ---- state: fresh or resumed ----
  OptimState st;
  st.params = tm.to_flat(tm.layout().flatten(drafter::random_drafter_tensors(cfg, dc, o.seed)));
  st.m = torch::zeros_like(st.params);
  st.v = torch::zeros_like(st.params);
  if (o.ema > 0) st.ema = st.params.clone();
  long step = 0;
  const std::string ckpt = checkpoint_path(o.run_dir);
  nlohmann::json last_eval;
  std::optional<Checkpoint> c = checkpoint_to_resume(
      ckpt, o.resume, traj, o.run_dir, "training", "the same flags, shards and target");
  const bool resumed = c.has_value();
  if (resumed) {
    st.params = tm.to_flat(c->params);
    st.m = tm.to_flat(c->adam_m);
    st.v = tm.to_flat(c->adam_v);
    if (o.ema > 0) st.ema = tm.to_flat(c->ema);
    step = c->state.value("step", 0L);
    last_eval = c->state.value("last_eval", nlohmann::json());
    say(fmt::format("resuming {} from step {} of {}", o.run_dir, step, total));
    c.reset();  // its tensors are copied: free them for the run
  }
  dist.check_same(uint64_t(step), "checkpoint step");

  std::ofstream metrics;
  if (lead) {
    fs::create_directories(o.run_dir);
    metrics = open_metrics((fs::path(o.run_dir) / "metrics.jsonl").string(), step, resumed);
    nlohmann::json run = {{"trajectory", traj}, {"model", model_path},
                          {"threads", threads}, {"device", o.device},
                          {"command_line", o.command_line}, {data_key, data_record}};
    if (auto* shards = dynamic_cast<const ShardSet*>(&data)) {
      run["shards_dir"] = o.shards_dir;
      run["manifest_counts"] = shards->manifest().value("counts", nlohmann::json());
    }
    write_file_atomic((fs::path(o.run_dir) / "run.json").string(), run.dump(1));
  }
  auto log = [&](nlohmann::json j) {
    if (!lead) return;
    metrics << j.dump() << "\n" << std::flush;
    if (!metrics) fail<IoError>("cannot write '{}/metrics.jsonl' (disk full?)", o.run_dir);
  };

  StepContext ctx{tm, data, w, o, dist, total, warmup};

  // ---- budget (before the long work) ----
  RunBudget budget;
  budget.what = o.online_jobs.empty() ? "training" : "online training";
  budget.steps = total - step;
  budget.tokens = long(double(budget.steps) * double(per_step) * data.seq_len());
  budget.memory_bytes = training_memory_bytes(
      cfg, dc, long(tm.layout().total), o.batch, data.seq_len(), tm.head_chunk_rows(),
      !o.online_jobs.empty(), lead ? (o.eval_sequences > 0 ? o.eval_sequences : long(data.size(Split::Heldout))) : 0);
  budget.held_bytes = resident_set_bytes();  // the target and its frozen copies, loaded
  if (lead && o.progress) say(budget.text() + " (tokens: at most, sequences cut to seq_len)");
  check_budget(budget, o.force);
  auto save = [&](const nlohmann::json& eval) {
    if (!lead) return;
    Checkpoint c;
    c.state = {{"format", kCheckpointFormat},
               {"step", step},
               {"total_steps", total},
               {"trajectory", traj},
               {"cursor", {{"sequences_consumed", step * per_step},
                           {"epoch", n_train ? step * per_step / n_train : 0}}},
               {"target", {{"fingerprint", fp}, {"path", model_path},
                           {"architecture", model::arch_name(cfg.arch)}}},
               {"drafter_config", dc.to_json()},
               {"layout", tm.layout().to_json()},
               {"last_eval", eval},
               {data_key, data_record},
               {"threads", threads},
               {"torch_version", TORCH_VERSION}};
    c.params = to_host(st.params);
    c.adam_m = to_host(st.m);
    c.adam_v = to_host(st.v);
    if (st.ema.defined()) c.ema = to_host(st.ema);
    save_checkpoint(ckpt, c);
  };
  auto do_eval = [&]() {
    nlohmann::json e = {{"raw", evaluate(ctx, st.params)}};
    if (st.ema.defined()) e["ema"] = evaluate(ctx, st.ema);
    return e;
  };

  // ---- loop ----
  TrainReport rep;
  DataOrder order(size_t(n_train), o.seed);
  // Counts this invocation's steps (so the rate and ETA stay right on resume).
  Progress prog("train", double(total - step), "step", lead && o.progress);
  const auto t0 = std::chrono::steady_clock::now();
  long tokens = 0;
  double train_secs = 0;  // time in train_step only (throughput excludes eval/saves)
  const long start = step;
  const long stop = o.stop_after > 0 ? std::min(total, o.stop_after) : total;
  // The time estimate from a warm-up: the first steps of this invocation.
  const long warm = std::min(stop - start, 3L);
  while (step < stop) {
    const double lr = cosine_lr(o.lr, o.min_lr_ratio, step, total, warmup);
    const auto ts = std::chrono::steady_clock::now();
    StepResult r = train_step(ctx, st, order, step, lr);
    const auto te = std::chrono::steady_clock::now();
    train_secs += std::chrono::duration<double>(te - ts).count();
    ++step;
    tokens += r.tokens;
    if (step - start == warm && lead && o.progress && stop - start > warm) {
      say(estimate_line(budget.what, double(warm), train_secs, double(stop - start), "step"));
    }
    const double secs = std::chrono::duration<double>(te - t0).count();
    const double tps = train_secs > 0 ? double(tokens) * dist.world() / train_secs : 0;
    if (step % log_every == 0 || step == total) {  // this step's values (resume-invariant)
      log({{"kind", "train"}, {"step", step}, {"lr", lr}, {"loss", r.objective},
           {"module_loss", r.module_loss}, {"grad_norm", r.grad_norm}, {"tokens_per_s", tps},
           {"elapsed_s", secs}});
    }
    const bool at_end = step == total;
    if (step % eval_every == 0 || at_end) {
      if (data.size(Split::Heldout) > 0 && lead) {
        last_eval = do_eval();
        log({{"kind", "eval"}, {"step", step}, {"lr", lr}, {"eval", last_eval},
             {"tokens_per_s", tps}, {"elapsed_s", secs}});
      }
    }
    if (step % save_every == 0 || at_end || step == stop) save(last_eval);
    std::string extra = fmt::format("loss {:.3f} lr {:.1e} {:.0f} tok/s", r.objective, lr, tps);
    if (!last_eval.is_null() && last_eval.contains("raw")) {
      extra += fmt::format(" | eval acc0 {:.3f} E {:.2f}", last_eval["raw"]["acc"][0].get<double>(),
                           last_eval["raw"]["E"].get<double>());
    }
    prog.update(double(step - start), fmt::format("step {}/{} {}", step, total, extra));
  }
  prog.finish();
  rep.final_step = step;
  rep.steps_done = step - start;
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  rep.tokens_per_s = train_secs > 0 ? double(tokens) * dist.world() / train_secs : 0;
  rep.steps_per_s = train_secs > 0 ? double(rep.steps_done) / train_secs : 0;
  if (auto* online = dynamic_cast<const OnlineData*>(&data)) {
    rep.capture_seconds = online->capture_seconds();
    rep.capture_tokens_per_s =
        rep.capture_seconds > 0 ? double(online->captured_tokens()) / rep.capture_seconds : 0;
    say(fmt::format("online capture ({}): {:.1f} s (training and held-out batches) for {} "
                    "tokens, {:.0f} tokens/s on this rank", online->target_forward(),
                    rep.capture_seconds, online->captured_tokens(), rep.capture_tokens_per_s));
  }
  rep.last_eval = last_eval;
  say(fmt::format("trained steps {}..{} of {} in {:.1f} s ({:.1f} s in steps): {:.2f} steps/s, "
                  "{:.0f} tokens/s ({} thread(s) x {} rank(s))", start, step, total, rep.seconds,
                  train_secs, rep.steps_per_s, rep.tokens_per_s, threads, dist.world()));
  if (step < total) return rep;  // stopped early (--stop-after): resume later

  // ---- parity gate on the final weights (raw, and EMA when on) ----
  if (lead && o.parity) {
    ThreadPool pool(threads);
    rep.parity_ran = true;
    rep.parity_passed = true;
    for (bool ema : {false, true}) {
      if (ema && !st.ema.defined()) continue;
      auto tensors = tm.layout().unflatten(to_host(ema ? st.ema : st.params).data(),
                                           tm.layout().total);
      drafter::Drafter eng = drafter::Drafter::from_tensors(
          cfg, fp, dc, tensors, {{"kind", "parity-check"}}, DType::F32, kernels::WeightType::F32);
      ParityOptions po;
      po.data = &data;
      ParityReport pr = run_parity(target, eng, tensors, po, &pool);
      say(std::string(ema ? "EMA weights: " : "raw weights: ") + pr.text());
      log({{"kind", "parity"}, {"step", step}, {"weights", ema ? "ema" : "raw"},
           {"parity", pr.to_json()}});
      rep.parity_passed = rep.parity_passed && pr.passed;
    }
    if (!rep.parity_passed) {
      fail<Error>("parity gate FAILED: the libtorch modules and the engine's modules disagree "
                  "(see the table above); do not export this run");
    }
  }
  return rep;
}

}  // namespace mtp::train
