#include "train/export.h"

#include <fmt/core.h>

#include <filesystem>

#include "core/error.h"
#include "core/json.h"
#include "core/setting.h"
#include "core/thread_pool.h"
#include "drafter/draft_vocab.h"
#include "drafter/drafter.h"
#include "kernels/matmul.h"
#include "model/fingerprint.h"
#include "model/loader.h"
#include "train/checkpoint.h"
#include "train/online_data.h"

namespace mtp::train {

namespace fs = std::filesystem;

namespace {

struct LoadedRun {
  Checkpoint ckpt;
  std::unique_ptr<model::Model> target;
  std::string fingerprint;
};

LoadedRun load_run(const std::string& run_dir, const std::string& model_override) {
  LoadedRun r;
  r.ckpt = load_checkpoint(checkpoint_path(run_dir));
  const nlohmann::json& tgt = r.ckpt.state.at("target");
  const std::string path = model_override.empty() ? tgt.at("path").get<std::string>()
                                                  : model_override;
  model::LoadedModel lm = model::load_model(path, {});
  r.fingerprint = model::target_fingerprint(lm);
  const std::string want = tgt.at("fingerprint").get<std::string>();
  if (r.fingerprint != want) {
    fail<ConfigError>("run '{}' was trained for target {}; '{}' is {}", run_dir, want, path,
                      r.fingerprint);
  }
  r.target = std::make_unique<model::Model>(std::move(lm));
  return r;
}

// training["stored"]: "F32" / "BF16" (the safetensors spelling, as files
// written before block storage have it) or a block type ("q8_0").
std::string storage_label(const drafter::DrafterStorage& s) {
  return s.quantized() ? s.name() : std::string(dtype_name(s.floats));
}
drafter::DrafterStorage storage_from_label(const std::string& l) {
  if (l == "F32" || l == "BF16") return dtype_from_name(l);
  return drafter::DrafterStorage::parse(l);
}

std::string default_shards(const Checkpoint& c, const std::string& given) {
  if (!given.empty()) return given;
  std::string dir = c.state.value("shards", nlohmann::json::object()).value("dir", std::string());
  return !dir.empty() && fs::exists(fs::path(dir) / "manifest.json") ? dir : std::string();
}

// An online run's data (its jobs file, captured by the engine: what the
// engine serves), or null for a run on shards or a jobs file that is gone.
std::unique_ptr<OnlineData> online_data(const LoadedRun& run) {
  const nlohmann::json& s = run.ckpt.state;
  if (!s.contains("online") || !s["online"].is_object()) return nullptr;
  const std::string where = "checkpoint state: online";
  OnlineDataOptions o;
  o.jobs_path = json_get<std::string>(s["online"], "jobs", where);
  if (!fs::exists(o.jobs_path)) return nullptr;
  o.hidden_dtype = dtype_from_name(json_get<std::string>(s["online"], "hidden_dtype", where));
  o.seed = json_get<uint64_t>(s["online"], "seed", where);
  return std::make_unique<OnlineData>(o, run.target->config(), run.fingerprint,
                                      engine_capture(*run.target, resolve_threads(0)));
}

// The parity gate's inputs beyond the random ones: shards, or an online run's capture.
void parity_inputs(ParityOptions& po, const LoadedRun& run, const std::string& shards_given,
                   std::unique_ptr<OnlineData>& online) {
  po.shards_dir = default_shards(run.ckpt, shards_given);
  if (po.shards_dir.empty() && (online = online_data(run))) po.data = online.get();
}


}  // namespace

ExportReport export_drafter(const ExportOptions& o) {
  LoadedRun run = load_run(o.run_dir, o.model);
  const nlohmann::json& s = run.ckpt.state;
  const model::ModelConfig& cfg = run.target->config();
  drafter::DrafterConfig dc = drafter::DrafterConfig::from_json(
      json_get<nlohmann::json::object_t>(s, "drafter_config", "checkpoint state"),
      "checkpoint state: drafter_config");
  ExportReport rep;
  nlohmann::json dv_meta = nullptr;
  if (o.draft_vocab > 0 && o.shards_dir.empty() && run.ckpt.state.contains("online")) {
    std::unique_ptr<OnlineData> online = online_data(run);
    if (!online) {
      fail_setting<InputError>("draft_vocab", "a draft vocabulary counts the training labels of "
                               "the run's online jobs, which are not where the run says");
    }
    drafter::DraftVocab dv = drafter::top_tokens(online->label_counts(), o.draft_vocab);
    dc.draft_vocab = dv.ids;
    rep.draft_vocab = long(dv.ids.size());
    rep.draft_coverage = dv.coverage();
    dv_meta = {{"size", dv.ids.size()}, {"asked", o.draft_vocab}, {"labels", dv.labels},
               {"distinct_labels", dv.distinct}, {"coverage", dv.coverage()},
               {"online_jobs", online->record().second["jobs"]}};
  } else if (o.draft_vocab > 0) {
    const std::string dir = default_shards(run.ckpt, o.shards_dir);
    if (dir.empty()) {
      fail_setting<InputError>("shards", "a draft vocabulary counts the training labels of the "
                               "run's shards; they are not where the run says: give the shards "
                               "folder");
    }
    drafter::DraftVocab dv = drafter::choose_draft_vocab(dir, cfg.vocab, o.draft_vocab);
    dc.draft_vocab = dv.ids;
    rep.draft_vocab = long(dv.ids.size());
    rep.draft_coverage = dv.coverage();
    dv_meta = {{"size", dv.ids.size()}, {"asked", o.draft_vocab}, {"labels", dv.labels},
               {"distinct_labels", dv.distinct}, {"coverage", dv.coverage()},
               {"shards", fs::absolute(dir).string()}};
    if (o.verbose) {
      fmt::print("draft vocabulary: {} of {} tokens, covering {:.2f} % of {} training labels "
                 "({} distinct)\n", dv.ids.size(), cfg.vocab, 100 * dv.coverage(), dv.labels,
                 dv.distinct);
    }
  }
  auto tensors = checkpoint_tensors(run.ckpt, o.ema);
  // Blocks are written from the trained values (quantizing dequantized values
  // need not give the same blocks back); parity runs on their dequantization.
  const auto trained = o.stored.quantized() ? tensors : decltype(tensors){};
  drafter::round_to_storage(tensors, cfg, dc, o.stored);
  rep.step = s.value("step", 0L);
  rep.fingerprint = run.fingerprint;
  const long total = s.value("total_steps", 0L);
  const nlohmann::json& traj = s.at("trajectory");
  nlohmann::json training = {
      {"kind", "mtpspec-train"},
      {"weights", o.ema ? "ema" : "raw"},
      {"ema_decay", traj.value("ema", 0.0)},
      {"steps", rep.step},
      {"total_steps", total},
      {"complete", rep.step >= total},
      {"metrics", s.value("last_eval", nlohmann::json())},
      {"shards", s.value("shards", nlohmann::json())},
      {"online", s.value("online", nlohmann::json())},
      {"optimizer", {{"lr", traj.value("lr", 0.0)}, {"batch", traj.value("batch", 0)},
                     {"accum", traj.value("accum", 1)}, {"world", traj.value("world", 1)},
                     {"loss_weights", traj.value("loss_weights", nlohmann::json())},
                     {"seed", traj.value("seed", 0)}}},
      {"simd_target", kernels::simd_target()},
      {"torch_version", s.value("torch_version", std::string())},
      {"run_dir", fs::absolute(o.run_dir).string()},
      {"stored", storage_label(o.stored)},
      {"draft_vocab", dv_meta}};
  // Parity runs on the drafter as it will be stored (same rounding), built in
  // memory; the file is written only when the gate passed.
  if (o.parity) {
    // Block storage: the dequantized values in fp32 (the file's values; the
    // quantized kernels' own accuracy is the kernels' contract, quant_dot.h).
    drafter::Drafter eng = drafter::Drafter::from_tensors(
        cfg, run.fingerprint, dc, tensors, training,
        o.stored.quantized() ? drafter::DrafterStorage(DType::F32) : o.stored,
        kernels::WeightType::F32);
    ParityOptions po;
    std::unique_ptr<OnlineData> online;
    parity_inputs(po, run, o.shards_dir, online);
    po.threads = resolve_threads(o.threads);
    ThreadPool pool(resolve_threads(o.threads));
    rep.parity = run_parity(*run.target, eng, tensors, po, &pool);
    rep.parity_ran = true;
    if (o.verbose) fmt::print("{}", rep.parity.text());
    if (!rep.parity.passed) {
      fail<Error>("parity gate FAILED for run '{}': the engine's modules do not reproduce the "
                  "trained ones; nothing was written to '{}'", o.run_dir, o.out);
    }
  }
  drafter::write_drafter(o.out, cfg, run.fingerprint, dc, o.stored.quantized() ? trained : tensors,
                         training, o.stored);
  if (o.verbose) {
    fmt::print("wrote K={} drafter ({} weights, step {}/{}) for target {} to {}\n", dc.K,
               o.ema ? "EMA" : "raw", rep.step, total, run.fingerprint.substr(0, 16), o.out);
  }
  return rep;
}

ParityReport parity_for_run(const RunParityOptions& o) {
  LoadedRun run = load_run(o.run_dir, o.model);
  const model::ModelConfig& cfg = run.target->config();
  drafter::Drafter eng =
      drafter::Drafter::load(o.drafter, cfg, run.fingerprint, kernels::WeightType::F32)
          .with_float_matrices();
  bool ema = false;
  drafter::DrafterStorage stored;
  auto it = eng.metadata().find("training");
  if (it != eng.metadata().end()) {
    const std::string where = "drafter '" + o.drafter + "': __metadata__['training']";
    const nlohmann::json tr = parse_json(it->second, where);
    if (tr.is_object()) {
      ema = json_value<std::string>(tr, "weights", "raw", where) == "ema";
      stored = storage_from_label(json_value<std::string>(tr, "stored", "F32", where));
    }
  }
  auto tensors = checkpoint_tensors(run.ckpt, ema);
  drafter::round_to_storage(tensors, cfg, eng.config(), stored);
  ParityOptions po;
  std::unique_ptr<OnlineData> online;
  parity_inputs(po, run, o.shards_dir, online);
  po.threads = resolve_threads(o.threads);
  ThreadPool pool(resolve_threads(o.threads));
  return run_parity(*run.target, eng, tensors, po, &pool);
}

}  // namespace mtp::train
