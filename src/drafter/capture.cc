#include "drafter/capture.h"

#include <algorithm>

#include "core/error.h"
#include "core/json.h"

namespace mtp::drafter {

std::vector<uint8_t> capture_loss_mask(size_t n, size_t prompt_tokens, bool self_distilled) {
  std::vector<uint8_t> mask(n, 1);
  const size_t masked = self_distilled ? prompt_tokens : 1;
  std::fill_n(mask.begin(), std::min(masked, n), uint8_t(0));
  return mask;
}

Continuations::Continuations(std::span<const CaptureJob* const> jobs)
    : active_(jobs.size()), budget_(jobs.size()) {
  for (size_t b = 0; b < jobs.size(); ++b) budget_[b] = jobs[b]->gen, active_[b] = budget_[b] > 0;
}

bool Continuations::any() const {
  return std::any_of(active_.begin(), active_.end(), [](bool a) { return a; });
}

void Continuations::accept(size_t b, int32_t t, std::vector<int32_t>& seq,
                           const CaptureOptions& o) {
  if (std::binary_search(o.stops.begin(), o.stops.end(), t) || --budget_[b] < 0) {
    active_[b] = false;
    return;
  }
  seq.push_back(t);
  if (budget_[b] == 0 || int(seq.size()) >= o.seq_len) active_[b] = false;
}

namespace {

// One batch of sequences on one KV cache: forwards what is not forwarded yet
// and keeps each position's capture.
class BatchForward {
 public:
  BatchForward(const model::Model& m, std::vector<std::vector<int32_t>>& seq, int T, int rows,
               ThreadPool* pool)
      : m_(m), seq_(seq), rows_per_call_(size_t(rows)), pool_(pool),
        kv_(m.make_cache(int(seq.size()), T, rows, /*tree_slots=*/0)),
        d_(size_t(m.config().d_model)), V_(size_t(m.config().vocab)),
        hidden_(seq.size(), std::vector<float>(size_t(T) * d_)), done_(seq.size(), 0) {}

  // Forwards every not-yet-forwarded token of every sequence (≤ rows_per_call
  // rows per sequence per call). want_logits: one call only, with the logits
  // of each sequence's last row (last_row[b] its row in logits(), -1 = none).
  void pending(bool want_logits) {
    const size_t B = seq_.size();
    last_row_.assign(B, -1);
    while (true) {
      rows_.clear();
      who_.clear();
      for (size_t b = 0; b < B; ++b) {
        const size_t e = std::min(seq_[b].size(), done_[b] + rows_per_call_);
        for (size_t p = done_[b]; p < e; ++p) {
          rows_.push_back({int(b), int32_t(p), seq_[b][p]});
          who_.push_back({b, p});
        }
      }
      if (rows_.empty()) return;
      h_.resize(rows_.size() * d_);
      mask_.assign(rows_.size(), 0);
      for (size_t r = 0; r < rows_.size(); ++r) {
        const size_t b = who_[r].first;
        if (want_logits && who_[r].second + 1 == seq_[b].size()) mask_[r] = 1, last_row_[b] = int(r);
      }
      logits_.resize(want_logits ? rows_.size() * V_ : 0);
      m_.forward(rows_, kv_, {want_logits ? logits_.data() : nullptr, mask_.data(), h_.data()},
                 pool_);
      for (size_t r = 0; r < rows_.size(); ++r) {
        const auto [b, p] = who_[r];
        std::copy_n(h_.data() + r * d_, d_, hidden_[b].data() + p * d_);
        done_[b] = std::max(done_[b], p + 1);
      }
      bool any = false;
      for (size_t b = 0; b < B; ++b) any = any || done_[b] < seq_[b].size();
      if (!any || want_logits) return;
    }
  }
  // Forwards all but the last token of every sequence.
  void prefill_prompts() {
    while (true) {
      bool pending_prompt = false;
      for (size_t b = 0; b < seq_.size(); ++b) pending_prompt |= seq_[b].size() - done_[b] > 1;
      if (!pending_prompt) return;
      std::vector<int32_t> keep(seq_.size());
      for (size_t b = 0; b < seq_.size(); ++b) keep[b] = seq_[b].back(), seq_[b].pop_back();
      pending(false);
      for (size_t b = 0; b < seq_.size(); ++b) seq_[b].push_back(keep[b]);
    }
  }
  const float* logits_of(size_t b) const {
    return last_row_[b] < 0 ? nullptr : logits_.data() + size_t(last_row_[b]) * V_;
  }
  size_t vocab() const { return V_; }
  std::vector<float>& hidden(size_t b) { return hidden_[b]; }
  size_t d() const { return d_; }

 private:
  const model::Model& m_;
  std::vector<std::vector<int32_t>>& seq_;
  size_t rows_per_call_;
  ThreadPool* pool_;
  model::KVCache kv_;
  size_t d_, V_;
  std::vector<std::vector<float>> hidden_;  // [B][T, d]
  std::vector<size_t> done_;                // positions forwarded per sequence
  std::vector<model::Row> rows_;
  std::vector<std::pair<size_t, size_t>> who_;
  std::vector<float> h_, logits_;
  std::vector<uint8_t> mask_;
  std::vector<int> last_row_;
};

}  // namespace

std::vector<Captured> capture_jobs(const model::Model& m, std::span<const CaptureJob* const> jobs,
                                   const CaptureOptions& o, ThreadPool* pool) {
  const size_t B = jobs.size();
  const int T = o.seq_len;
  std::vector<std::vector<int32_t>> seq(B);
  bool generates = false;
  for (size_t b = 0; b < B; ++b) {
    seq[b] = jobs[b]->tokens;
    if (seq[b].empty() || int(seq[b].size()) > T) {
      fail<InputError>("capture job {} holds {} tokens; sequences hold 1 to {}", jobs[b]->id,
                       seq[b].size(), T);
    }
    generates = generates || jobs[b]->gen > 0;
  }
  if (generates && !o.choose) fail<InternalError>("capture_jobs: generating jobs need a token rule");
  BatchForward fw(m, seq, T, o.rows_per_call, pool);
  if (generates) {
    Continuations gen(jobs);
    fw.prefill_prompts();  // the prompts, then one token per step
    while (gen.any()) {
      fw.pending(true);
      for (size_t b = 0; b < B; ++b) {
        const float* lg = fw.logits_of(b);
        if (!gen.active(b) || !lg) continue;
        gen.accept(b, o.choose(b, lg, fw.vocab(), int64_t(seq[b].size())), seq[b], o);
      }
    }
  }
  fw.pending(false);  // every remaining position's capture (a generation's last tokens)
  std::vector<Captured> out(B);
  for (size_t b = 0; b < B; ++b) {
    out[b].hidden = std::move(fw.hidden(b));
    out[b].hidden.resize(seq[b].size() * fw.d());
    out[b].loss_mask = capture_loss_mask(seq[b].size(), jobs[b]->tokens.size(), jobs[b]->gen > 0);
    out[b].tokens = std::move(seq[b]);
  }
  return out;
}

nlohmann::json CaptureSpec::to_json() const {
  return {{"seq_len", seq_len}, {"self_distill", self_distill}, {"gen_tokens", gen_tokens},
          {"temp", temp}, {"stops", stops}};
}

CaptureSpec CaptureSpec::from_json(const nlohmann::json& j, const std::string& where) {
  CaptureSpec s;
  s.seq_len = json_get<int>(j, "seq_len", where);
  s.self_distill = json_get<bool>(j, "self_distill", where);
  s.gen_tokens = json_get<int>(j, "gen_tokens", where);
  s.temp = float(json_get<double>(j, "temp", where));
  for (const auto& t : json_get<nlohmann::json::array_t>(j, "stops", where)) {
    s.stops.push_back(json_as<int32_t>(t, "stops", where));
  }
  if (s.seq_len < 4 || s.gen_tokens < 0 || !(s.temp >= 0) ||
      !std::is_sorted(s.stops.begin(), s.stops.end())) {
    fail<FormatError>("{}: a capture spec with seq_len {}, gen_tokens {}, temp {} and {} stop "
                      "tokens (sorted: {}) is not one mtpspec writes", where, s.seq_len,
                      s.gen_tokens, s.temp, s.stops.size(),
                      std::is_sorted(s.stops.begin(), s.stops.end()));
  }
  return s;
}

std::vector<CaptureJob> jobs_of_stream(const io::TokenStream& s, long first_id,
                                       const CaptureSpec& spec) {
  std::vector<CaptureJob> jobs(s.starts.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    const size_t b = size_t(s.starts[i]);
    const size_t e = i + 1 < jobs.size() ? size_t(s.starts[i + 1]) : s.tokens.size();
    CaptureJob& j = jobs[i];
    j.tokens.assign(s.tokens.begin() + long(b), s.tokens.begin() + long(e));
    j.id = first_id + long(i);
    if (spec.self_distill) j.gen = self_distill_gen(int(j.tokens.size()), spec.seq_len, spec.gen_tokens);
    if (int(j.tokens.size()) > spec.seq_len || (spec.self_distill && j.gen < 1)) {
      fail<FormatError>("capture job {} holds {} tokens, which leaves no room in sequences of {}",
                        j.id, j.tokens.size(), spec.seq_len);
    }
  }
  return jobs;
}

}  // namespace mtp::drafter
