#include "spec/generate.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"

namespace mtp::spec {

namespace {
using Clock = std::chrono::steady_clock;
double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}
constexpr double kKvBudgetBytes = 8.0 * (1ull << 30);  // default-context memory cap

// Length of the longest prefix of s that is whole UTF-8 characters.
size_t utf8_safe_prefix(std::string_view s, size_t n) {
  while (n > 0 && n < s.size() && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return n;
}
}  // namespace

std::vector<int32_t> stop_token_ids(const model::ModelConfig& c, const io::Tokenizer& tok) {
  std::vector<int32_t> ids = c.eos_ids;
  for (int32_t e : tok.eos_ids()) ids.push_back(e);
  if (c.source == "llama2c") ids.push_back(c.bos_id >= 0 ? c.bos_id : 1);  // run.c stops on BOS
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

int resolve_ctx(const model::ModelConfig& c, int requested) {
  if (requested < 0) fail<InputError>("--ctx must be positive, got {}", requested);
  if (requested > c.max_position) {
    fail<InputError>("--ctx {} exceeds the model's maximum context of {} positions", requested,
                     c.max_position);
  }
  if (requested > 0) return requested;
  double per_pos = double(c.n_layers) * c.n_kv_heads * c.head_dim * 2 * sizeof(float);
  int cap = int(std::max(256.0, kKvBudgetBytes / per_pos));
  return std::min(c.max_position, cap);
}

std::string StopStringFilter::push(std::string_view text) {
  if (stopped_) return {};
  pending_.append(text);
  // Earliest match of any stop string.
  size_t cut = std::string::npos;
  for (const auto& s : stops_) {
    if (s.empty()) continue;
    size_t p = pending_.find(s);
    if (p != std::string::npos) cut = std::min(cut, p);
  }
  std::string out;
  if (cut != std::string::npos) {
    stopped_ = true;
    out = pending_.substr(0, cut);
    pending_.clear();
  } else {
    // Keep back the longest tail that is a prefix of some stop string.
    size_t keep = 0;
    for (const auto& s : stops_) {
      for (size_t k = std::min(s.size() - 1, pending_.size()); k > keep; --k) {
        if (pending_.compare(pending_.size() - k, k, s, 0, k) == 0) {
          keep = k;
          break;
        }
      }
    }
    size_t n = utf8_safe_prefix(pending_, pending_.size() - keep);
    out = pending_.substr(0, n);
    pending_.erase(0, n);
  }
  emitted_ += out;
  return out;
}

std::string StopStringFilter::flush() {
  std::string out;
  if (!stopped_) out.swap(pending_);
  emitted_ += out;
  return out;
}

GenerateResult generate(const model::Model& m, const io::Tokenizer& tok,
                        const std::vector<int32_t>& prompt_ids, const GenerateOptions& opt,
                        ThreadPool* pool, const TextCallback& on_text) {
  const model::ModelConfig& c = m.config();
  if (opt.n_new < 0) fail<InputError>("-n must be >= 0, got {}", opt.n_new);
  if (prompt_ids.empty()) {
    fail<InputError>("the prompt is empty and the tokenizer adds no BOS token: nothing to "
                     "condition on");
  }
  const int ctx = resolve_ctx(c, opt.ctx);
  if (int(prompt_ids.size()) >= ctx) {
    fail<InputError>("the prompt is {} tokens; the context is {} (--ctx), which leaves no room "
                     "to generate", prompt_ids.size(), ctx);
  }
  GenerateResult res;
  res.prompt_ids = prompt_ids;
  res.finish_reason = "length";
  const std::vector<int32_t> stops = stop_token_ids(c, tok);
  Sampler sampler(opt.sampler);
  StopStringFilter filter(opt.stop);
  io::TextStream stream;
  auto emit = [&](const std::string& s) {
    if (!s.empty() && on_text) on_text(s);
  };

  model::KVCache kv = m.make_cache(1, ctx);
  const size_t V = c.vocab;
  std::vector<float> logits(V);
  std::vector<model::Row> rows;
  std::vector<uint8_t> mask;
  std::vector<float> chunk_logits;

  // Prompt: forward every prompt token; logits only for the last one.
  auto t0 = Clock::now();
  const int q_chunk = kv.q_max();
  const size_t P = prompt_ids.size();
  for (size_t b = 0; b < P; b += q_chunk) {
    size_t e = std::min(P, b + q_chunk);
    rows.clear();
    mask.assign(e - b, 0);
    for (size_t i = b; i < e; ++i) rows.push_back({0, int32_t(i), prompt_ids[i]});
    const bool last = e == P;
    if (last) mask.back() = 1;
    chunk_logits.resize(last ? (e - b) * V : 0);
    model::ForwardOut out;
    if (last) {
      out.logits = chunk_logits.data();
      out.logits_mask = mask.data();
    }
    m.forward(rows, kv, out, pool);
    if (last) std::copy_n(chunk_logits.data() + (e - b - 1) * V, V, logits.data());
  }
  res.timings.n_prompt = int(P);
  res.timings.prompt_s = seconds(t0, Clock::now());

  Clock::time_point first{}, last{};
  int32_t prev = prompt_ids.back();
  for (int i = 0; i < opt.n_new; ++i) {
    int32_t next = sampler.sample(logits.data(), V);
    if (std::binary_search(stops.begin(), stops.end(), next)) {
      res.finish_reason = "eos";
      break;
    }
    last = Clock::now();
    if (i == 0) first = last;
    res.token_ids.push_back(next);
    emit(filter.push(stream.push(tok.token_bytes(next, prev))));
    if (filter.stopped()) {
      res.finish_reason = "stop";
      break;
    }
    prev = next;
    if (i + 1 == opt.n_new) break;
    if (kv.length(0) + 1 >= ctx) {
      res.finish_reason = "context";
      break;
    }
    model::Row row{0, int32_t(kv.length(0)), next};
    m.forward({&row, 1}, kv, {logits.data(), nullptr, nullptr}, pool);
  }
  if (!filter.stopped()) emit(filter.push(stream.flush()));
  emit(filter.flush());
  res.text = filter.full_text();
  res.timings.n_gen = int(res.token_ids.size());
  res.timings.gen_s = res.token_ids.empty() ? 0 : seconds(first, last);
  return res;
}

}  // namespace mtp::spec
