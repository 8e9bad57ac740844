#include "spec/spec_loop.h"

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace mtp::spec {

namespace {
using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
}  // namespace

std::vector<double> SpecStats::acceptance() const {
  std::vector<double> a(drafted.size(), 0.0);
  for (size_t k = 0; k < drafted.size(); ++k) {
    a[k] = drafted[k] ? double(accepted[k]) / double(drafted[k]) : 0.0;
  }
  return a;
}

double SpecStats::tokens_per_cycle() const { return cycles ? double(emitted) / cycles : 0.0; }

nlohmann::json SpecStats::to_json() const {
  return {{"cycles", cycles},
          {"drafted", drafted},
          {"accepted", accepted},
          {"acceptance", acceptance()},
          {"tokens_per_cycle", tokens_per_cycle()},
          {"time_draft_s", time_draft_s},
          {"time_verify_s", time_verify_s},
          {"time_other_s", time_other_s},
          {"time_module_s", time_module_s}};
}

void speculative_loop(Verifier& verifier, Proposer& proposer, std::vector<int32_t>& committed,
                      TokenSink& sink, int max_k, int ctx, SpecStats& stats,
                      std::vector<CycleTrace>* trace) {
  if (max_k < 1) fail<InputError>("draft length must be >= 1, got {}", max_k);
  if (stats.drafted.size() < size_t(max_k)) {
    stats.drafted.resize(max_k, 0);
    stats.accepted.resize(max_k, 0);
  }
  std::vector<int32_t> drafts, choices;
  while (!sink.done()) {
    const int n = int(committed.size());
    // The committed sequence may grow to ctx: verify writes positions up to
    // n - 1 + k, and commits at most k + 1 tokens.
    const int room = ctx - n;
    if (room <= 0) {
      sink.finish("context");
      break;
    }
    const int k_max = std::min(max_k, room - 1);
    auto t0 = Clock::now();
    drafts.clear();
    if (k_max > 0) proposer.propose(committed, k_max, drafts);
    if (int(drafts.size()) > k_max) drafts.resize(k_max);
    auto t1 = Clock::now();
    stats.time_draft_s += std::chrono::duration<double>(t1 - t0).count();
    verifier.verify(committed, drafts, choices);
    auto t2 = Clock::now();
    stats.time_verify_s += std::chrono::duration<double>(t2 - t1).count();
    if (choices.size() != drafts.size() + 1) {
      fail<Error>("verifier returned {} choices for {} drafts", choices.size(), drafts.size());
    }
    int a = 0;
    while (a < int(drafts.size()) && drafts[a] == choices[a]) ++a;
    ++stats.cycles;
    for (size_t k = 0; k < drafts.size(); ++k) {
      ++stats.drafted[k];
      if (int(k) < a) ++stats.accepted[k];
    }
    if (trace) trace->push_back({n, drafts, a});
    // Emit accepted drafts, then the target's own token; stop at the first
    // token that ends generation.
    for (int i = 0; i <= a && !sink.done(); ++i) {
      const int32_t t = i < a ? drafts[i] : choices[a];
      const size_t before = sink.tokens().size();
      sink.push(t);
      if (sink.tokens().size() == before) break;  // a stop token is not emitted
      committed.push_back(t);
      ++stats.emitted;
    }
    stats.time_other_s += since(t2);
    if (sink.done()) break;
    auto t3 = Clock::now();
    verifier.commit(committed, a);
    stats.time_verify_s += since(t3);
    auto t4 = Clock::now();
    proposer.commit(committed);
    stats.time_draft_s += since(t4);
  }
}

}  // namespace mtp::spec
