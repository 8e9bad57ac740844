#include "measure/drift.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "kernels/ops.h"
#include "speculative/sources/mtp_source.h"
#include "speculative/cycle/target_session.h"

namespace mtp::speculative {

namespace {

// Proposes the decode stream (sequence index i → stream[i]).
class OracleProposer : public ChainProposer {
 public:
  OracleProposer(const std::vector<int32_t>& stream, int vocab, int miss_every)
      : ChainProposer(kOracleSource), stream_(stream), vocab_(vocab),
        miss_every_(miss_every) {}
  void propose_chain(std::span<const int32_t> committed, int max_k,
                     std::vector<int32_t>& drafts) override {
    drafts.clear();
    for (size_t i = committed.size(); i < stream_.size() && int(drafts.size()) < max_k; ++i) {
      drafts.push_back(stream_[i]);
    }
    ++cycle_;
    if (miss_every_ > 0 && cycle_ % miss_every_ == 0 && !drafts.empty()) {
      drafts.back() = (drafts.back() + 1) % vocab_;
    }
  }
  void commit(std::span<const int32_t>) override {}

 private:
  const std::vector<int32_t>& stream_;
  int vocab_, miss_every_;
  long cycle_ = 0;
};

}  // namespace

DriftResult drift_one(const model::Model& m, const std::vector<int32_t>& prompt,
                      const DriftOptions& o, ThreadPool* pool) {
  if (prompt.empty()) fail<InputError>("drift: empty prompt");
  const size_t V = m.config().vocab, P = prompt.size();
  // With the stale-KV fault, rejected drafts keep their positions: room for all.
  const int need = o.stale_kv_fault ? int(P) + (o.n + 1) * (o.draft_k + 1)
                                    : int(P) + o.n + o.draft_k + 2;
  const int ctx = o.ctx > 0 ? o.ctx : std::min(need, m.config().max_position);
  if (int(P) + o.n + o.draft_k + 2 > m.config().max_position) {
    fail<InputError>("drift: prompt ({} tokens) + n ({}) exceeds the model's context of {}", P,
                     o.n, m.config().max_position);
  }
  DriftResult res;
  std::vector<float> dec_logits(size_t(o.n) * V), spec_logits(size_t(o.n) * V);

  // Decode path: q = 1 forwards only (after the shared prompt prefill).
  std::vector<int32_t> stream = prompt;
  {
    TargetSession s(m, ctx, pool);
    Sampler sampler(o.sampling);
    std::vector<float> lg(V);
    s.prefill(prompt, lg.data());
    for (int i = 0; i < o.n; ++i) {
      std::copy(lg.begin(), lg.end(), dec_logits.begin() + size_t(i) * V);
      stream.push_back(sampler.sample(lg.data(), V, int64_t(stream.size())));
      if (i + 1 < o.n) s.forward({&stream.back(), 1}, lg.data());
    }
    res.decode_tokens.assign(stream.begin() + long(P), stream.end());
  }

  // Speculative path: verify calls of q = K + 1.
  {
    TargetSession s(m, ctx, pool);
    std::vector<float> lg(V);
    s.prefill(prompt, lg.data());
    std::copy(lg.begin(), lg.end(), spec_logits.begin());
    TokenSink sink(nullptr, {}, o.n, {}, nullptr, prompt.back());
    std::vector<int32_t> committed = prompt;
    Sampler first(o.sampling);
    if (sink.push(first.sample(lg.data(), V, int64_t(committed.size())))) {
      committed.push_back(sink.tokens().back());
      TargetVerifier verifier(s, o.sampling, o.mode);
      if (o.stale_kv_fault) verifier.inject_stale_kv_fault();
      verifier.set_observer([&](size_t first, const float* rows, size_t n) {
        for (size_t j = 0; j < n; ++j) {
          size_t i = first + j - P;  // generated-token index this row chose
          if (i < size_t(o.n)) std::copy_n(rows + j * V, V, spec_logits.begin() + i * V);
        }
      });
      OracleProposer oracle(stream, int(V), o.miss_every);
      std::unique_ptr<MtpSource> mtp;
      std::unique_ptr<SourceProposer> drafts;
      Proposer* proposer = &oracle;
      if (o.drafter) {
        mtp = std::make_unique<MtpSource>(m, *o.drafter, 1, ctx, o.draft_k);
        drafts = std::make_unique<SourceProposer>(*mtp, s, o.sampling, o.mode);
        proposer = drafts.get();
      }
      speculative_loop(verifier, *proposer, committed, sink, o.draft_k, ctx, res.stats);
    }
    res.spec_tokens = sink.tokens();
  }

  const size_t n = std::min(res.decode_tokens.size(), res.spec_tokens.size());
  size_t diff = 0;
  for (size_t i = 0; i < n; ++i) {
    if (res.decode_tokens[i] != res.spec_tokens[i]) {
      ++diff;
      if (!res.first_flip) res.first_flip = int(i);
    }
  }
  res.flip_rate = n ? double(diff) / double(n) : 0.0;
  // Logits at positions whose context is identical in both paths: up to and
  // including the first flip (its row still saw the same prefix).
  const size_t upto = res.first_flip ? size_t(*res.first_flip) + 1 : n;
  for (size_t i = 0; i < upto; ++i) {
    for (size_t v = 0; v < V; ++v) {
      double dl = std::fabs(double(dec_logits[i * V + v]) - double(spec_logits[i * V + v]));
      res.max_abs_dlogit = std::max(res.max_abs_dlogit, dl);
    }
    ++res.compared;
  }
  return res;
}

nlohmann::json DriftSummary::to_json() const {
  return {{"prompts", prompts},     {"flipped", flipped},
          {"max_abs_dlogit", max_abs_dlogit}, {"n", n},
          {"draft_k", draft_k},     {"verify_kernels", verify_kernels},
          {"inject_fault", inject_fault}, {"proposer", proposer}, {"sampling", sampling}};
}

DriftSummary DriftSummary::from_json(const nlohmann::json& j) {
  DriftSummary d;
  try {
    d.prompts = j.at("prompts").get<long>();
    d.flipped = j.at("flipped").get<long>();
    d.max_abs_dlogit = j.at("max_abs_dlogit").get<double>();
    d.n = j.at("n").get<int>();
    d.draft_k = j.at("draft_k").get<int>();
    d.verify_kernels = j.at("verify_kernels").get<std::string>();
    d.inject_fault = j.at("inject_fault").get<std::string>();
    d.proposer = j.at("proposer").get<std::string>();
    d.sampling = j.value("sampling", nlohmann::json());
  } catch (const nlohmann::json::exception& e) {
    fail<FormatError>("not a drift summary (the JSON a drift run prints): {}", e.what());
  }
  return d;
}

}  // namespace mtp::speculative
