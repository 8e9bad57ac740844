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
#include "drafter/shards.h"
#include "io/corpus.h"
#include "model/fingerprint.h"
#include "speculative/scheduler/generate.h"
#include "speculative/cycle/sampler.h"

namespace fs = std::filesystem;

namespace mtp::speculative {

namespace {

// One sequence to produce: plain mode forwards `tokens`; self-distillation
// continues them (the prompt) with up to `gen` sampled tokens.
struct Job {
  std::vector<int32_t> tokens;
  int gen = 0;
  long id = 0;  // global index: seeds the job's sampler (reproducible on resume)
};

// Prompts for measuring live acceptance on documents no training sequence came
// from: the opening tokens of each held-out document (the self-distillation
// prompt itself when there is one), as text, in the prompts-file format.
constexpr int kPlainPromptTokens = 16;
void write_heldout_prompts(const std::vector<Job>& held, const io::Tokenizer& tok, bool bos,
                           int prompt_tokens, const std::string& path) {
  std::string out;
  for (const Job& j : held) {
    const size_t b = bos ? 1 : 0;
    const size_t e = std::min(j.tokens.size(), b + size_t(prompt_tokens));
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

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// Runs a batch of jobs through the target and adds them to the shard.
void run_batch(const model::Model& m, const std::vector<const Job*>& jobs,
               const PrecomputeOptions& o, const std::vector<int32_t>& stops, ThreadPool* pool,
               drafter::ShardBuilder& shard) {
  const int B = int(jobs.size()), T = o.seq_len;
  const size_t d = m.config().d_model, V = m.config().vocab;
  model::KVCache kv = m.make_cache(B, T, 64, /*tree_slots=*/0);
  std::vector<std::vector<int32_t>> seq(B);
  std::vector<std::vector<float>> hidden(B, std::vector<float>(size_t(T) * d));
  std::vector<size_t> done(B, 0);  // positions forwarded per sequence
  std::vector<model::Row> rows;
  std::vector<float> h, logits;
  std::vector<uint8_t> mask;
  for (int b = 0; b < B; ++b) seq[b] = jobs[b]->tokens;

  // Forwards every not-yet-forwarded token of every sequence (≤ 64 rows per
  // sequence per call); with want_logits, the logits of each sequence's last row.
  auto forward_pending = [&](bool want_logits, std::vector<int>& last_row) {
    last_row.assign(B, -1);
    bool any = true;
    while (any) {
      any = false;
      rows.clear();
      std::vector<std::pair<int, size_t>> who;
      for (int b = 0; b < B; ++b) {
        size_t e = std::min(seq[b].size(), done[b] + 64);
        for (size_t p = done[b]; p < e; ++p) {
          rows.push_back({b, int32_t(p), seq[b][p]}), who.push_back({b, p});
        }
      }
      if (rows.empty()) break;
      h.resize(rows.size() * d);
      mask.assign(rows.size(), 0);
      for (size_t r = 0; r < rows.size(); ++r) {
        int b = who[r].first;
        if (want_logits && who[r].second + 1 == seq[b].size()) mask[r] = 1, last_row[b] = int(r);
      }
      logits.resize(want_logits ? rows.size() * V : 0);
      m.forward(rows, kv, {want_logits ? logits.data() : nullptr, mask.data(), h.data()}, pool);
      for (size_t r = 0; r < rows.size(); ++r) {
        auto [b, p] = who[r];
        std::copy_n(h.data() + r * d, d, hidden[b].data() + p * d);
        done[b] = std::max(done[b], p + 1);
      }
      for (int b = 0; b < B; ++b) any = any || done[b] < seq[b].size();
      if (want_logits) break;  // one round: callers append a token per sequence
    }
  };

  std::vector<int> last_row;
  if (!o.self_distill) {
    forward_pending(false, last_row);
  } else {
    std::vector<Sampler> samplers;
    for (int b = 0; b < B; ++b) {
      SamplerOptions so;
      so.temperature = o.temp;
      so.seed = o.seed * 1000003ull + uint64_t(jobs[b]->id);
      samplers.emplace_back(so);
    }
    std::vector<bool> active(B);
    std::vector<int> budget(B);
    for (int b = 0; b < B; ++b) budget[b] = jobs[b]->gen, active[b] = budget[b] > 0;
    // Prompt prefill first (may take several calls), then one token per step.
    while (true) {
      bool pending_prompt = false;
      for (int b = 0; b < B; ++b) pending_prompt |= seq[b].size() - done[b] > 1;
      if (!pending_prompt) break;
      // Forward all but the last token of each sequence without logits.
      std::vector<int32_t> keep(B);
      for (int b = 0; b < B; ++b) keep[b] = seq[b].back(), seq[b].pop_back();
      forward_pending(false, last_row);
      for (int b = 0; b < B; ++b) seq[b].push_back(keep[b]);
    }
    while (std::any_of(active.begin(), active.end(), [](bool a) { return a; })) {
      forward_pending(true, last_row);
      for (int b = 0; b < B; ++b) {
        if (!active[b] || last_row[b] < 0) continue;
        int32_t t = samplers[b].sample(logits.data() + size_t(last_row[b]) * V, V,
                                       int64_t(seq[b].size()));
        if (std::binary_search(stops.begin(), stops.end(), t) || --budget[b] < 0) {
          active[b] = false;
          continue;
        }
        seq[b].push_back(t);
        if (budget[b] == 0 || int(seq[b].size()) >= T) active[b] = false;
      }
    }
    forward_pending(false, last_row);  // the final tokens' hidden, for completeness
  }
  for (int b = 0; b < B; ++b) {
    std::vector<uint8_t> m_(seq[b].size(), 1);
    const size_t masked = o.self_distill ? jobs[b]->tokens.size() : 1;  // prompt / BOS
    for (size_t p = 0; p < std::min(masked, m_.size()); ++p) m_[p] = 0;
    shard.add(seq[b], hidden[b].data(), m_);
  }
}

}  // namespace

PrecomputeReport precompute(const model::Model& m, const io::Tokenizer& tok,
                            const std::string& fingerprint, const PrecomputeOptions& asked,
                            ThreadPool* pool) {
  auto t_start = std::chrono::steady_clock::now();
  const auto& c = m.config();
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
  if (o.corpus.empty()) fail_setting<InputError>("corpus", "precompute needs a corpus file");
  if (o.batch < 1) {
    fail_setting<InputError>("batch", "sequences per forward call must be >= 1, got {}", o.batch);
  }
  if (o.self_distill && o.prompt_tokens < 1) {
    fail_setting<InputError>("prompt_tokens", "a prompt length must be >= 1 token, got {}",
                             o.prompt_tokens);
  }
  if (o.self_distill && o.prompt_tokens >= o.seq_len) {
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

  // 1. Documents and the plan: jobs in a deterministic order, train then held out.
  std::vector<std::string> docs;
  nlohmann::json corpus = nlohmann::json::array();
  for (const auto& p : o.corpus) {
    io::CorpusFile f = io::read_corpus(p, docs);
    corpus.push_back({{"path", fs::absolute(p).string()}, {"sha256", f.sha256},
                      {"bytes", f.bytes}, {"documents", f.documents}});
  }
  const bool bos = tok.adds_bos() && tok.bos_id() >= 0;
  std::vector<Job> train, held;
  long planned = 0, n_docs_held = 0;
  for (size_t i = 0; i < docs.size() && (o.max_tokens <= 0 || planned < o.max_tokens); ++i) {
    const uint64_t hash = fnv1a(docs[i]);
    const bool is_held = double(hash % 1000000) < o.heldout * 1e6;
    n_docs_held += is_held;
    std::vector<int32_t> ids = tok.encode(docs[i], false);
    auto& out = is_held ? held : train;
    const size_t room = size_t(o.seq_len) - (bos ? 1 : 0);
    if (o.self_distill) {
      Job j;
      if (bos) j.tokens.push_back(tok.bos_id());
      size_t np = size_t(o.prompt_tokens);
      if (o.prompt_tokens_min > 0) {  // other bits of the hash than the held-out split's
        np = size_t(o.prompt_tokens_min) +
             size_t((hash >> 32) % uint64_t(o.prompt_tokens - o.prompt_tokens_min + 1));
      }
      j.tokens.insert(j.tokens.end(), ids.begin(), ids.begin() + std::min(ids.size(), np));
      if (j.tokens.empty()) continue;
      int room_gen = o.seq_len - int(j.tokens.size());
      j.gen = o.gen_tokens > 0 ? std::min(o.gen_tokens, room_gen) : room_gen;
      if (j.gen < 2) continue;
      planned += long(j.tokens.size()) + j.gen;
      out.push_back(std::move(j));
      continue;
    }
    for (size_t b = 0; b < ids.size(); b += room) {
      Job j;
      if (bos) j.tokens.push_back(tok.bos_id());
      j.tokens.insert(j.tokens.end(), ids.begin() + b, ids.begin() + std::min(ids.size(), b + room));
      if (j.tokens.size() < 4) continue;  // nothing for a module to learn
      planned += long(j.tokens.size());
      out.push_back(std::move(j));
      if (o.max_tokens > 0 && planned >= o.max_tokens) break;
    }
  }
  if (train.empty()) fail<InputError>("the corpus yields no training sequences");
  long id = 0;
  for (auto& j : train) j.id = id++;
  for (auto& j : held) j.id = id++;

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

  // 4. Work.
  PrecomputeReport rep;
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
        std::vector<const Job*> batch;
        for (size_t i = b; i < std::min(sp.end, b + size_t(o.batch)); ++i) batch.push_back(&jobs[i]);
        run_batch(m, batch, o, stops, pool, sb);
        for (auto* j : batch) done_tokens += double(j->tokens.size() + size_t(j->gen));
        prog.set_produced(double(rep.tokens + sb.real_tokens()));
        prog.update(done_tokens);
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

  // 5. Manifest (last: its presence means the folder is complete). A target
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
                  {"documents", docs.size()}, {"heldout_documents", n_docs_held}}},
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
  write_heldout_prompts(held, tok, bos, o.self_distill ? o.prompt_tokens : kPlainPromptTokens,
                        (fs::path(o.out_dir) / "heldout_prompts.jsonl").string());
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  return rep;
}

}  // namespace mtp::speculative
