#include "speculative/sources/assistant_source.h"

#include <algorithm>
#include <chrono>
#include <map>

#include "core/error.h"
#include "speculative/sources/builtin_source.h"
#include "speculative/sources/mtp_chains.h"  // choose_draft, top_probability

namespace mtp::speculative {

namespace {
using sources_detail::Clock;
using sources_detail::since;
}  // namespace

void register_assistant_source() {
  register_builtin_source(
      kAssistantSource,
      [](const SourceContext& c) -> std::unique_ptr<DraftSource> {
        if (!c.assistant) {
          fail<InputError>("the draft source '{}' needs Gemma 4's assistant (a gemma4_assistant "
                           "directory); none was given", kAssistantSource);
        }
        return std::make_unique<AssistantSource>(
            *c.target, *c.assistant, c.draft_k > 0 ? c.draft_k : kAssistantDefaultSteps);
      },
      "Gemma 4's MTP assistant (a gemma4_assistant directory: Google's, or one trained here)");
}

AssistantSource::AssistantSource(const model::Model& target, const drafter::Gemma4Assistant& a,
                                 int max_len)
    : runner_(target, a), max_len_(max_len) {
  if (max_len < 1) fail<InputError>("the assistant's draft length must be >= 1, got {}", max_len);
}

void AssistantSource::propose(std::span<ProposeJob> jobs) {
  // One call per step for the jobs of one cache (the engine's: all of them).
  std::map<const model::KVCache*, std::vector<ProposeJob*>> by_cache;
  for (ProposeJob& j : jobs) {
    MTP_CHECK(j.out && j.sampler && j.target, "{}: a job lacks its tree, sampler or target",
              kAssistantSource);
    j.out->clear();
    if (j.scores) j.scores->clear();
    // Step 1 reads the capture of position N - 2: none before two tokens.
    const int N = int(j.committed.size());
    if (j.max_len < 1 || N < 2) continue;
    MTP_CHECK(j.target->forwarded() >= N - 1, "{}: {} committed tokens but {} forwarded",
              kAssistantSource, N, j.target->forwarded());
    if (j.tree && j.tree->is_tree()) {
      propose_tree(j, j.target->kv());
      continue;
    }
    by_cache[&j.target->kv()].push_back(&j);
  }
  for (const auto& [kv, group] : by_cache) propose_group(group, *kv);
}

void AssistantSource::propose_group(std::span<ProposeJob* const> jobs, const model::KVCache& kv) {
  const model::Model& m = runner_.target();
  const size_t B = size_t(runner_.assistant().config().backbone);
  const size_t d = size_t(m.config().d_model);
  state_.resize(jobs.size() * B);
  next_.resize(jobs.size() * B);
  std::vector<size_t> live;  // jobs still drafting, by index
  for (size_t i = 0; i < jobs.size(); ++i) {
    const ProposeJob& j = *jobs[i];
    const int N = int(j.committed.size());
    MTP_CHECK(d == B, "backbone {} vs hidden {}", B, d);
    m.final_norm(j.target->hidden(N - 2), 1, state_.data() + i * B);  // the post-norm hidden
    live.push_back(i);
  }
  std::vector<int32_t> token(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) token[i] = jobs[i]->committed.back();
  for (int k = 0; !live.empty(); ++k) {
    in_.clear();
    for (size_t i : live) {
      const ProposeJob& j = *jobs[i];
      in_.push_back({j.target->seq(), int(j.committed.size()) - 1, token[i], state_.data() + i * B});
    }
    const auto t0 = Clock::now();
    runner_.step(in_, kv, next_.data(), jobs[live[0]]->target->pool());
    std::vector<size_t> still;
    for (size_t r = 0; r < live.size(); ++r) {
      const size_t i = live[r];
      ProposeJob& j = *jobs[i];
      const drafter::AssistantScores s = runner_.scores(r);
      if (j.p_min > 0 && top_probability(s.logits, s.n) < j.p_min) continue;
      float max_logit = 0;
      // Step k + 1 drafts the token at sequence position N + k.
      const int32_t t = choose_draft(*j.sampler, j.mode, s.logits, s.n, s.ids,
                                     int64_t(j.committed.size()) + k, *j.out, max_logit);
      j.out->push(t, k - 1, {kAssistantSource, k});
      if (j.scores) j.scores->push_back(max_logit);
      std::copy_n(next_.data() + r * B, B, state_.data() + i * B);
      token[i] = t;
      if (k + 1 < std::min(j.max_len, max_len_)) still.push_back(i);
    }
    const double s = since(t0);
    for (size_t i : live) {
      ProposeJob& j = *jobs[i];
      const double share = s / double(live.size());
      j.seconds += share;
      if (j.depth_seconds && size_t(k) < j.depth_seconds->size()) (*j.depth_seconds)[size_t(k)] += share;
    }
    if (on_call) on_call(k, int(live.size()), s);
    live = std::move(still);
  }
}

void AssistantSource::run_step(ProposeJob& j, int k, const model::KVCache& kv) {
  next_.resize(in_.size() * size_t(runner_.assistant().config().backbone));
  const auto t0 = Clock::now();
  runner_.step(in_, kv, next_.data(), j.target->pool());
  const double s = since(t0);
  j.seconds += s;
  if (j.depth_seconds && size_t(k) < j.depth_seconds->size()) (*j.depth_seconds)[size_t(k)] += s;
  if (on_call) on_call(k, int(in_.size()), s);
}

void AssistantSource::propose_tree(ProposeJob& j, const model::KVCache& kv) {
  MTP_CHECK(j.tree->kind == TreeOptions::Kind::Static || j.tree->kind == TreeOptions::Kind::Budget,
            "{}: a tree job of shape {} (the engine resolves auto)", kAssistantSource,
            j.tree->describe());
  DraftTree& tree = *j.out;
  const size_t B = size_t(runner_.assistant().config().backbone);
  const int N = int(j.committed.size());
  const bool budget = j.tree->kind == TreeOptions::Kind::Budget;
  const int depth_max = std::min(j.max_len, max_len_);
  const int beam = budget ? budget_beam(j.tree->budget) : 0;
  const int D = budget ? depth_max : std::min(depth_max, int(j.tree->widths.size()));
  state_.resize(B);
  runner_.target().final_norm(j.target->hidden(N - 2), 1, state_.data());
  node_state_.clear();
  cum_.clear();
  std::vector<int> depth, expand{-1};  // -1: the root (the last committed token)
  for (int k = 0; k < D && !expand.empty(); ++k) {
    in_.clear();
    for (int x : expand) {
      in_.push_back({j.target->seq(), N - 1, x < 0 ? j.committed.back() : tree.token[size_t(x)],
                     x < 0 ? state_.data() : node_state_.data() + size_t(x) * B});
    }
    run_step(j, k, kv);
    const size_t level = tree.size();
    for (size_t r = 0; r < expand.size(); ++r) {
      const drafter::AssistantScores s = runner_.scores(r);
      if (j.p_min > 0 && top_probability(s.logits, s.n) < j.p_min) continue;
      // Depth k + 1's children: candidates for the token at position N + k.
      j.sampler->top(s.logits, s.n, N + k, s.ids, size_t(budget ? beam : j.tree->widths[size_t(k)]),
                     budget, cand_);
      const float mx = *std::max_element(s.logits, s.logits + s.n);
      const int x = expand[r];
      for (const Sampler::Candidate& c : cand_) {
        tree.push(c.id, x, {kAssistantSource, k});
        cum_.push_back((x < 0 ? 1.0 : cum_[size_t(x)]) * c.prob);
        depth.push_back(k + 1);
        if (j.scores) j.scores->push_back(mx);
        node_state_.insert(node_state_.end(), next_.begin() + std::ptrdiff_t(r * B),
                           next_.begin() + std::ptrdiff_t((r + 1) * B));
      }
    }
    level_to_expand(expand, level, tree.size(), budget ? beam : 0, cum_);
  }
  if (budget) keep_most_probable(tree, j.scores, cum_, depth, j.tree->budget);
}

DraftSource::Cost AssistantSource::measure_cost(ThreadPool* pool) {
  // Median seconds of a step of q rows, each attending to 64 positions of a
  // scratch target cache (zero K/V: the arithmetic is the same).
  const model::Model& m = runner_.target();
  constexpr int kKeys = 64;
  const size_t B = size_t(runner_.assistant().config().backbone);
  auto median_s = [&](int q) {
    model::KVCache kv = m.make_cache(q, kKeys + 1, kKeys, 0);
    std::vector<model::Row> fill;
    for (int s = 0; s < q; ++s) {
      for (int p = 0; p < kKeys; ++p) fill.push_back({s, p, 0});
    }
    kv.begin_rows(fill, m.config().vocab);
    kv.end_rows(fill);
    std::vector<float> state(size_t(q) * B, 0.1f), out(size_t(q) * B);
    std::vector<drafter::AssistantInput> in;
    for (int s = 0; s < q; ++s) in.push_back({s, kKeys, int32_t((3 + s) % m.config().vocab), state.data() + size_t(s) * B});
    drafter::AssistantRunner runner(m, runner_.assistant());
    std::vector<double> t;
    for (int r = 0; r < 7; ++r) {
      const auto t0 = Clock::now();
      runner.step(in, kv, out.data(), pool);
      t.push_back(since(t0));
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  };
  Cost c;
  c.call_s = median_s(1);
  c.row_s = std::max(0.0, (median_s(9) - c.call_s) / 8);
  return c;
}

}  // namespace mtp::speculative
