#include "measure/precompute.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json.h"
#include "core/setting.h"
#include "core/mapped_file.h"
#include "core/progress.h"
#include "core/run_budget.h"
#include "drafter/shards.h"
#include "io/corpus.h"
#include "io/prompts.h"
#include "model/fingerprint.h"
#include "speculative/scheduler/generate.h"
#include "speculative/cycle/sampler.h"

namespace fs = std::filesystem;

namespace mtp::speculative {

namespace {

constexpr int kPlainPromptTokens = 16;

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// Runs a batch of jobs through the target (drafter::capture_jobs, the token
// rule: speculative::Sampler at o.temp, seeded per job) and adds them to the shard.
void run_batch(const model::Model& m, const std::vector<const drafter::CaptureJob*>& jobs,
               const PrecomputeOptions& o, const std::vector<int32_t>& stops, ThreadPool* pool,
               drafter::ShardBuilder& shard) {
  std::vector<Sampler> samplers;
  for (const drafter::CaptureJob* j : jobs) {
    SamplerOptions so;
    so.temperature = o.temp;
    so.seed = drafter::self_distill_seed(o.seed, j->id);
    samplers.emplace_back(so);
  }
  drafter::CaptureOptions co;
  co.seq_len = o.seq_len;
  co.stops = stops;
  co.choose = [&](size_t b, const float* logits, size_t V, int64_t pos) {
    return samplers[b].sample(logits, V, pos);
  };
  for (const drafter::Captured& c : drafter::capture_jobs(m, jobs, co, pool)) {
    shard.add(c.tokens, c.hidden.data(), c.loss_mask);
  }
}

}  // namespace

void write_heldout_prompts(const std::vector<drafter::CaptureJob>& held,
                           const io::Tokenizer& tok, bool bos, const PrecomputeOptions& o,
                           const std::string& path) {
  const size_t prompt_tokens = !o.prompts.empty() ? SIZE_MAX
                               : o.self_distill   ? size_t(o.prompt_tokens)
                                                  : size_t(kPlainPromptTokens);
  std::string out;
  for (const drafter::CaptureJob& j : held) {
    const size_t b = bos ? 1 : 0;
    const size_t e = std::min(j.tokens.size(), b + std::min(prompt_tokens, j.tokens.size()));
    if (e <= b) continue;
    // Decoded from BOS on, so the tokenizer strips the dummy-prefix space it adds
    // back on encode (the prompt re-encodes to the tokens the target saw).
    const std::string text = tok.decode(std::span(j.tokens).first(e));
    // A cut inside a multi-byte character is replaced (U+FFFD), not an error.
    out += nlohmann::json{{"prompt", text}}.dump(-1, ' ', false,
                                                 nlohmann::json::error_handler_t::replace) + "\n";
  }
  write_file_atomic(path, out);
}

double shard_bytes(long sequences, int seq_len, int d, DType hidden) {
  // tokens I32 + loss_mask U8 + hidden per position, length I32 per sequence.
  return double(sequences) *
         (double(seq_len) * (4.0 + 1.0 + double(d) * double(dtype_size(hidden))) + 4.0);
}

PrecomputeOptions resolve_precompute_options(const PrecomputeOptions& asked,
                                             const model::ModelConfig& c) {
  PrecomputeOptions o = asked;
  if (o.seq_len == 0) o.seq_len = std::min(kDefaultSeqLen, c.max_position);
  if (o.seq_len < 4 || o.seq_len > c.max_position) {
    fail_setting<InputError>("seq_len", "a sequence length of {} must be in [4, {}] (the model's "
                             "context)", o.seq_len, c.max_position);
  }
  if (!(o.heldout >= 0 && o.heldout < 1)) {
    fail_setting<InputError>("heldout", "the held-out fraction must be in [0, 1), got {}",
                             o.heldout);
  }
  if (o.corpus.empty() == o.prompts.empty()) {
    fail_setting<InputError>("corpus", "the capture needs a corpus or a prompts file (one of them)");
  }
  if (!o.prompts.empty()) o.self_distill = true;
  if (o.batch < 1) {
    fail_setting<InputError>("batch", "sequences per forward call must be >= 1, got {}", o.batch);
  }
  if (o.self_distill && o.prompt_tokens < 1) {
    fail_setting<InputError>("prompt_tokens", "a prompt length must be >= 1 token, got {}",
                             o.prompt_tokens);
  }
  if (o.self_distill && o.prompts.empty() && o.prompt_tokens >= o.seq_len) {
    fail_setting<InputError>("prompt_tokens", "prompts of {} tokens leave no room to generate in "
                             "sequences of {} tokens", o.prompt_tokens, o.seq_len);
  }
  if (o.gen_tokens < 0) {
    fail_setting<InputError>("gen_tokens", "tokens to generate per prompt must be >= 0 (0 = fill "
                             "the sequence), got {}", o.gen_tokens);
  }
  if (o.prompt_tokens_min < 0 || o.prompt_tokens_min > o.prompt_tokens) {
    fail_setting<InputError>("prompt_tokens_min", "a shortest prompt of {} tokens must be in [0, "
                             "{}] (the prompt length)", o.prompt_tokens_min, o.prompt_tokens);
  }
  return o;
}

CapturePlan plan_capture(const io::Tokenizer& tok, const PrecomputeOptions& o) {
  CapturePlan p;
  std::vector<std::string> docs;
  p.corpus = nlohmann::json::array();
  for (const auto& path : o.corpus) {
    io::CorpusFile f = io::read_corpus(path, docs);
    p.corpus.push_back({{"path", fs::absolute(path).string()}, {"sha256", f.sha256},
                        {"bytes", f.bytes}, {"documents", f.documents}});
  }
  const bool whole_prompts = !o.prompts.empty();
  if (whole_prompts) {
    const std::string bytes = read_file(o.prompts);
    for (io::PromptEntry& e : io::read_prompts(o.prompts)) docs.push_back(std::move(e.prompt));
    p.corpus.push_back({{"path", fs::absolute(o.prompts).string()},
                        {"sha256", model::sha256_hex(bytes)}, {"bytes", bytes.size()},
                        {"documents", docs.size()}, {"prompts", true}});
  }
  p.documents = docs.size();
  p.bos = tok.adds_bos() && tok.bos_id() >= 0;
  for (size_t i = 0; i < docs.size() && (o.max_tokens <= 0 || p.planned < o.max_tokens); ++i) {
    const uint64_t hash = fnv1a(docs[i]);
    const bool is_held = double(hash % 1000000) < o.heldout * 1e6;
    p.documents_held += is_held;
    std::vector<int32_t> ids = tok.encode(docs[i], false);
    auto& out = is_held ? p.held : p.train;
    const size_t room = size_t(o.seq_len) - (p.bos ? 1 : 0);
    if (o.self_distill) {
      drafter::CaptureJob j;
      if (p.bos) j.tokens.push_back(tok.bos_id());
      size_t np = whole_prompts ? ids.size() : size_t(o.prompt_tokens);
      if (!whole_prompts && o.prompt_tokens_min > 0) {  // other bits of the hash than the split's
        np = size_t(o.prompt_tokens_min) +
             size_t((hash >> 32) % uint64_t(o.prompt_tokens - o.prompt_tokens_min + 1));
      }
      j.tokens.insert(j.tokens.end(), ids.begin(), ids.begin() + std::min(ids.size(), np));
      if (j.tokens.empty() || int(j.tokens.size()) >= o.seq_len) continue;
      j.gen = drafter::self_distill_gen(int(j.tokens.size()), o.seq_len, o.gen_tokens);
      if (j.gen < 2) continue;
      p.planned += long(j.tokens.size()) + j.gen;
      out.push_back(std::move(j));
      continue;
    }
    for (size_t b = 0; b < ids.size(); b += room) {
      drafter::CaptureJob j;
      if (p.bos) j.tokens.push_back(tok.bos_id());
      j.tokens.insert(j.tokens.end(), ids.begin() + b, ids.begin() + std::min(ids.size(), b + room));
      if (j.tokens.size() < 4) continue;  // nothing for a module to learn
      p.planned += long(j.tokens.size());
      out.push_back(std::move(j));
      if (o.max_tokens > 0 && p.planned >= o.max_tokens) break;
    }
  }
  if (p.train.empty()) fail<InputError>("the corpus yields no training sequences");
  long id = 0;
  for (auto& j : p.train) j.id = id++;
  for (auto& j : p.held) j.id = id++;
  return p;
}

PrecomputeReport precompute(const model::Model& m, const io::Tokenizer& tok,
                            const std::string& fingerprint, const PrecomputeOptions& asked,
                            ThreadPool* pool) {
  auto t_start = std::chrono::steady_clock::now();
  const auto& c = m.config();
  const PrecomputeOptions o = resolve_precompute_options(asked, c);

  // 1. Documents and the plan: jobs in a deterministic order, train then held out.
  CapturePlan cp = plan_capture(tok, o);
  const std::vector<drafter::CaptureJob>& train = cp.train;
  const std::vector<drafter::CaptureJob>& held = cp.held;
  const bool bos = cp.bos;
  const nlohmann::json& corpus = cp.corpus;
  const long planned = cp.planned;

  // 2. Shards: train shards, then held-out shards.
  const size_t per = size_t(std::max(1L, o.shard_tokens / o.seq_len));
  struct ShardPlan { std::string split; size_t begin, end; };
  std::vector<ShardPlan> plan;
  for (size_t b = 0; b < train.size(); b += per) plan.push_back({"train", b, std::min(train.size(), b + per)});
  for (size_t b = 0; b < held.size(); b += per) plan.push_back({"heldout", b, std::min(held.size(), b + per)});

  // 3. Resume guard: the plan's identity.
  nlohmann::json identity = {{"fingerprint", fingerprint}, {"corpus", corpus},
                             {"seq_len", o.seq_len}, {"max_tokens", o.max_tokens},
                             {"shard_tokens", o.shard_tokens},
                             {"hidden_dtype", std::string(dtype_name(o.hidden_dtype))},
                             {"heldout", o.heldout}, {"self_distill", o.self_distill},
                             {"prompt_tokens", o.prompt_tokens}, {"gen_tokens", o.gen_tokens},
                             {"prompt_tokens_min", o.prompt_tokens_min}, {"temp", o.temp}, {"seed", o.seed}, {"tokenizer", tok.kind()}};
  if (!o.prompts.empty()) identity["prompts"] = true;
  const std::string plan_id = model::sha256_hex(identity.dump());
  fs::create_directories(o.out_dir);
  const fs::path plan_path = fs::path(o.out_dir) / "plan.json";
  // A folder whose plan differs is refused only when it holds work (a shard):
  // a run that was refused or killed before its first shard must not block the
  // corrected rerun.
  bool has_shards = false;
  for (const auto& e : fs::directory_iterator(o.out_dir)) {
    has_shards = has_shards || e.path().filename().string().rfind("shard-", 0) == 0;
  }
  nlohmann::json old;
  if (fs::exists(plan_path)) {
    try {
      old = parse_json(read_file(plan_path.string()), "'" + plan_path.string() + "'");
    } catch (const FormatError&) {
      old = nlohmann::json(nlohmann::json::value_t::discarded);
    }
  }
  if (has_shards && (old.is_discarded() || !old.is_object() || old.value("plan_id", "") != plan_id)) {
    std::string differ;
    if (old.is_object() && old.contains("identity") && old["identity"].is_object()) {
      for (const auto& [k, v] : identity.items()) {
        if (!old["identity"].contains(k) || old["identity"][k] != v) {
          differ += (differ.empty() ? "" : ", ") + k;
        }
      }
    }
    fail<InputError>("'{}' holds shards from a precompute with other {}; write to a new folder "
                     "(or delete it)",
                     o.out_dir,
                     differ.empty() ? std::string("arguments, corpus or target")
                                    : "settings (" + differ + ")");
  }
  if (!old.is_object() || old.value("plan_id", "") != plan_id) {
    write_file_atomic(plan_path.string(), nlohmann::json{{"plan_id", plan_id}, {"identity", identity}}.dump(1));
  }

  // 4. The budget (before any work): the shards must fit the free disk.
  RunBudget budget;
  budget.what = o.self_distill ? "self-distillation" : "precompute";
  budget.sequences = long(train.size() + held.size());
  budget.tokens = planned;
  budget.disk_bytes = shard_bytes(budget.sequences, o.seq_len, c.d_model, o.hidden_dtype);
  budget.disk_dir = o.out_dir;
  if (o.progress) note("{}\n", budget.text());
  check_budget(budget, o.force);

  // 5. Work.
  PrecomputeReport rep;
  bool estimated = false;
  const std::vector<int32_t> stops = stop_token_ids(c, &tok);
  Progress prog(o.self_distill ? "self-distill" : "precompute", double(planned), "tok", o.progress);
  double done_tokens = 0;
  nlohmann::json shards = nlohmann::json::array();
  long n_seq[2] = {0, 0}, n_tok[2] = {0, 0};
  for (size_t si = 0; si < plan.size(); ++si) {
    const ShardPlan& sp = plan[si];
    const auto& jobs = sp.split == "train" ? train : held;
    const std::string name = drafter::shard_file_name(int(si));
    const fs::path path = fs::path(o.out_dir) / name;
    long planned_here = 0;
    for (size_t i = sp.begin; i < sp.end; ++i) planned_here += long(jobs[i].tokens.size()) + jobs[i].gen;
    drafter::ShardBuilder sb(o.seq_len, c.d_model, o.hidden_dtype);
    int seqs = 0;
    long toks = 0;
    if (fs::exists(path)) {  // complete (written by rename): skip it
      drafter::Shard s = drafter::read_shard(path.string());
      if (size_t(s.sequences) != sp.end - sp.begin) {
        fail<FormatError>("'{}' holds {} sequences, the plan says {}; delete it to redo it",
                          path.string(), s.sequences, sp.end - sp.begin);
      }
      seqs = s.sequences;
      for (int q = 0; q < s.sequences; ++q) toks += s.length[q];
      ++rep.shards_skipped;
      done_tokens += double(planned_here);
      prog.update(done_tokens);
    } else {
      for (size_t b = sp.begin; b < sp.end; b += size_t(o.batch)) {
        std::vector<const drafter::CaptureJob*> batch;
        for (size_t i = b; i < std::min(sp.end, b + size_t(o.batch)); ++i) batch.push_back(&jobs[i]);
        run_batch(m, batch, o, stops, pool, sb);
        for (auto* j : batch) done_tokens += double(j->tokens.size() + size_t(j->gen));
        prog.set_produced(double(rep.tokens + sb.real_tokens()));
        prog.update(done_tokens);
        if (!estimated && o.progress) {  // the warm-up: this run's first batch
          estimated = true;
          const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                                            t_start).count();
          note("{}\n", estimate_line(budget.what, done_tokens, secs, double(planned), "token"));
        }
      }
      sb.write(path.string(), {{"split", sp.split}, {"target_fingerprint", fingerprint}});
      seqs = sb.sequences();
      toks = sb.real_tokens();
      rep.sequences += seqs;
      rep.tokens += toks;
      ++rep.shards;
    }
    const int k = sp.split == "train" ? 0 : 1;
    n_seq[k] += seqs;
    n_tok[k] += toks;
    shards.push_back({{"file", name}, {"split", sp.split}, {"sequences", seqs}, {"tokens", toks}});
  }
  prog.finish();

  // 6. Manifest (last: its presence means the folder is complete). A target
  // requantized at load (--weights q8_0 ...) is named: training loads the
  // checkpoint as stored, and its error message says why the shards differ.
  nlohmann::json target_json = {{"path", o.model_path}, {"architecture", model::arch_name(c.arch)}};
  if (!m.loaded().requantized.empty()) target_json["requantized"] = m.loaded().requantized;
  nlohmann::json man = {
      {"format", drafter::kShardsFormat},
      {"version", drafter::kShardsVersion},
      {"target_fingerprint", fingerprint},
      {"target", target_json},
      {"capture", "residual after the last decoder layer, before the final norm"},
      {"tokenizer", {{"path", o.tokenizer_path}, {"kind", tok.kind()}, {"bos", bos ? tok.bos_id() : -1}}},
      {"seq_len", o.seq_len},
      {"hidden_dtype", std::string(dtype_name(o.hidden_dtype))},
      {"d_model", c.d_model},
      {"vocab", c.vocab},
      {"counts", {{"train_sequences", n_seq[0]}, {"train_tokens", n_tok[0]},
                  {"heldout_sequences", n_seq[1]}, {"heldout_tokens", n_tok[1]},
                  {"documents", cp.documents}, {"heldout_documents", cp.documents_held}}},
      {"corpus", corpus},
      {"heldout", {{"fraction", o.heldout}, {"by", "document"}, {"hash", "fnv1a64(text) % 1e6"}}},
      {"self_distill", o.self_distill ? nlohmann::json{{"prompt_tokens", o.prompt_tokens},
                                                       {"prompt_tokens_min", o.prompt_tokens_min},
                                                       {"gen_tokens", o.gen_tokens},
                                                       {"temp", o.temp}, {"seed", o.seed}}
                                      : nlohmann::json(nullptr)},
      {"shards", shards},
      {"command_line", o.command_line}};
  write_file_atomic((fs::path(o.out_dir) / "manifest.json").string(), man.dump(1));
  write_heldout_prompts(held, tok, bos, o, (fs::path(o.out_dir) / "heldout_prompts.jsonl").string());
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  return rep;
}

}  // namespace mtp::speculative
