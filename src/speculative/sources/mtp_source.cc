#include "speculative/sources/mtp_source.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "speculative/sources/builtin_source.h"
#include "drafter/module_rows.h"

namespace mtp::speculative {

namespace {
using sources_detail::Clock;
using sources_detail::since;
}  // namespace

void register_mtp_source() {
  register_builtin_source(
      kMtpSource,
      [](const SourceContext& c) -> std::unique_ptr<DraftSource> {
        if (!c.drafter) {
          fail<InputError>("the draft source 'mtp' needs an MTP drafter; none was given");
        }
        return std::make_unique<MtpSource>(*c.target, *c.drafter, c.slots, c.ctx, c.draft_k);
      },
      "the MTP drafter's K modules (a drafter file trained against this target)");
}

MtpSource::MtpSource(const model::Model& target, const drafter::Drafter& d, int slots, int ctx,
                     int modules)
    : chains_(target, d, slots, ctx),
      modules_(modules > 0 ? std::min(modules, d.config().K) : d.config().K),
      d_(size_t(target.config().d_model)) {
  chains_.on_call = [this](int k, int rows, double s) {
    if (on_call) on_call(k, rows, s);
  };
  row_of_.assign(size_t(chains_.K()), {});
  tree_out_.assign(size_t(chains_.K()), {});
}

MtpChains::Job MtpSource::chain_job(ProposeJob& j, std::vector<MtpDraft>* history) {
  MtpChains::Job c;
  c.slot = j.slot;
  c.committed = j.committed;
  c.target = j.target;
  c.pool = j.target ? j.target->pool() : nullptr;
  c.modules = modules_;
  c.max_k = j.max_len;
  c.p_min = j.p_min;
  c.sampler = j.sampler;
  c.mode = j.mode;
  c.tree = j.out;
  c.history = history;
  c.module_seconds = j.depth_seconds;
  return c;
}

void MtpSource::prefill(std::span<ProposeJob> jobs) {
  std::vector<MtpChains::Job> c;
  for (ProposeJob& j : jobs) c.push_back(chain_job(j, nullptr));
  chains_.catch_up(c);
  for (size_t i = 0; i < jobs.size(); ++i) jobs[i].seconds += c[i].seconds;
}

void MtpSource::propose(std::span<ProposeJob> jobs) {
  std::vector<MtpChains::Job> chains;
  std::vector<size_t> of;
  std::vector<std::vector<MtpDraft>> hist;
  for (size_t i = 0; i < jobs.size(); ++i) {
    ProposeJob& j = jobs[i];
    MTP_CHECK(j.out && j.sampler && j.target, "mtp: job {} lacks its tree, sampler or target", i);
    if (j.tree && j.tree->is_tree()) {
      const auto t0 = Clock::now();
      propose_tree(j);
      j.seconds += since(t0);
      continue;
    }
    of.push_back(i);
  }
  if (of.empty()) return;
  hist.resize(of.size());
  for (size_t n = 0; n < of.size(); ++n) chains.push_back(chain_job(jobs[of[n]], &hist[n]));
  chains_.draft(chains);
  for (size_t n = 0; n < of.size(); ++n) {
    ProposeJob& j = jobs[of[n]];
    j.seconds += chains[n].seconds;
    if (!j.scores) continue;
    j.scores->clear();
    for (const MtpDraft& d : hist[n]) j.scores->push_back(d.max_logit);
  }
}

DraftSource::Cost MtpSource::measure_cost(ThreadPool* pool) {
  // Calls of module 0 over q rows with one logits row, in a runner of its
  // own (the slots' caches stay untouched).
  const model::Model& m = chains_.runner().target();
  return cost_from_calls([&](int q) {
    drafter::MtpRunner runner(m, drafter(), 1, q + 1, std::max(q, 1));
    std::vector<float> h_in(size_t(q) * d_, 0.1f), h_out(size_t(q) * d_);
    std::vector<float> logits(size_t(q) * runner.logits_width());
    std::vector<uint8_t> mask(size_t(q), 0);
    mask.back() = 1;
    std::vector<model::Row> rows;
    for (int i = 0; i < q; ++i) rows.push_back({0, i, int32_t((3 + i) % m.config().vocab)});
    const auto t0 = Clock::now();
    runner.forward(0, rows, h_in.data(), h_out.data(), logits.data(), mask.data(), pool);
    return since(t0);
  });
}

// ---------------------------------------------------------------- trees --

void MtpSource::catch_up(ProposeJob& j, int modules) {
  MtpChains::Job c = chain_job(j, nullptr);
  c.max_k = 0;
  chains_.catch_up({&c, 1}, modules);
}

void MtpSource::add_children(ProposeJob& j, const float* lg, int64_t pos, int parent, int k,
                             size_t w, double cum) {
  const std::vector<int32_t>& vocab = drafter().config().draft_vocab;
  const bool with_prob = j.tree->kind == TreeOptions::Kind::Budget;
  j.sampler->top(lg, chains_.runner().logits_width(), pos, vocab.empty() ? nullptr : vocab.data(),
                 w, with_prob, cand_);
  const float mx = *std::max_element(lg, lg + chains_.runner().logits_width());
  for (const Sampler::Candidate& c : cand_) {
    j.out->push(c.id, parent, {kMtpSource, k});
    cum_.push_back(cum * c.prob);
    if (j.scores) j.scores->push_back(mx);
  }
}

void MtpSource::run_module(ProposeJob& j, int k) {
  const auto t0 = Clock::now();
  chains_.runner().forward(k, rows_, h_in_.data(), h_out_.data(), logits_.data(), mask_.data(),
                           j.target->pool());
  const double s = since(t0);
  if (j.depth_seconds) (*j.depth_seconds)[size_t(k)] += s;
  if (on_call) on_call(k, int(rows_.size()), s);
}

void MtpSource::propose_tree(ProposeJob& j) {
  MTP_CHECK(j.tree->kind == TreeOptions::Kind::Static || j.tree->kind == TreeOptions::Kind::Budget,
            "mtp: a tree job of shape {} (the engine resolves auto)", j.tree->describe());
  DraftTree& tree = *j.out;
  tree.clear();
  cum_.clear();
  if (j.scores) j.scores->clear();
  const std::span<const int32_t> committed = j.committed;
  const int slot = j.slot;
  catch_up(j, 1);
  const int N = int(committed.size());
  const size_t V = chains_.runner().logits_width();
  if (j.max_len < 1 || chains_.d0_row(slot) != N - 2) return;
  const int depth_max = std::min(j.max_len, modules_);
  const bool budget = j.tree->kind == TreeOptions::Kind::Budget;
  std::vector<int> widths;
  if (!budget) widths = j.tree->widths;
  if (int(widths.size()) > depth_max) widths.resize(size_t(depth_max));
  // Budget: expand the `beam` most probable nodes of a depth with their
  // `beam` best children (EAGLE-2's top-k), then keep the budget's best.
  const int beam = budget ? budget_beam(j.tree->budget) : 0;
  const int D = budget ? depth_max : int(widths.size());
  if (D < 1) return;
  const float* d0_logits = chains_.d0_logits(slot);
  if (j.p_min > 0 && top_probability(d0_logits, V) < j.p_min) return;
  add_children(j, d0_logits, N, -1, 0, size_t(budget ? beam : widths[0]), 1.0);

  std::vector<int> depth(tree.size(), 1), expand;
  std::vector<uint8_t> on_path;
  size_t level_begin = 0, level_end = tree.size();
  for (int k = 1; k < D && level_end > level_begin; ++k) {
    // The depth-k nodes to expand.
    level_to_expand(expand, level_begin, level_end, budget ? beam : 0, cum_);
    // Module k's rows: every node on the path to an expanded node, in node
    // order (parents first), each a tree row under its parent's row.
    on_path.assign(tree.size(), 0);
    for (int e : expand) {
      for (int x = e; x >= 0 && !on_path[size_t(x)]; x = tree.parent[size_t(x)]) on_path[size_t(x)] = 1;
    }
    // Rows before position 0 do not exist in the contract (a short
    // committed sequence); a row whose parent's row does not exist starts at
    // the sequence's beginning (module k holds no final rows then).
    auto tree_pos = [&](size_t x) { return N - 2 - k + depth[x]; };
    int n_tree = 0;
    for (size_t x = 0; x < tree.size(); ++x) n_tree += on_path[x] && tree_pos(x) >= 0;
    // Module k's catch-up first: its final rows [c0, final_len), each reading
    // module k-1's final row (up to date: module k-1 ran just before). A
    // catch-up too long to share one call runs on its own.
    const int final_len = drafter::module_row_count(N, k);
    model::KVCache& kv = chains_.runner().kv(k);
    if (final_len - kv.length(slot) + n_tree > kv.q_max()) catch_up(j, k + 1);
    const int c0 = std::min(kv.length(slot), final_len);
    rows_.clear();
    h_in_.clear();
    drafter::append_module_rows(
        slot, k, c0, final_len, [&](int t) { return committed[size_t(t)]; },
        [&](int t) { return chains_.out(slot, k - 1) + size_t(t) * d_; }, d_, rows_, h_in_);
    const size_t n_c = rows_.size();
    mask_.assign(n_c, 0);
    std::vector<int>& row_of = row_of_[size_t(k)];
    row_of.assign(tree.size(), -1);
    for (size_t x = 0; x < tree.size(); ++x) {
      if (!on_path[x]) continue;
      const int par = tree.parent[x];
      const int32_t pos = tree_pos(x);
      if (pos < 0) continue;
      const int r = int(rows_.size() - n_c);  // its node index in this call's tree
      row_of[x] = r;
      rows_.push_back({slot, pos, tree.token[x], r, par < 0 ? -1 : row_of[size_t(par)]});
      MTP_CHECK(par < 0 || row_of_[size_t(k - 1)][size_t(par)] >= 0,
                "module {} row of node {} has no input row", k, x);
      const float* h_prev =
          par < 0 ? chains_.out(slot, k - 1) + size_t(N - 1 - k) * d_
                  : tree_out_[size_t(k - 1)].data() + size_t(row_of_[size_t(k - 1)][size_t(par)]) * d_;
      h_in_.insert(h_in_.end(), h_prev, h_prev + d_);
      mask_.push_back(0);
    }
    for (int e : expand) mask_[n_c + size_t(row_of[size_t(e)])] = 1;
    logits_.resize(rows_.size() * V);
    h_out_.resize(rows_.size() * d_);
    run_module(j, k);
    // The final rows' h_k into the module's outputs, the tree rows' apart.
    std::memcpy(chains_.out(slot, k) + size_t(c0) * d_, h_out_.data(), n_c * d_ * sizeof(float));
    tree_out_[size_t(k)].assign(h_out_.begin() + std::ptrdiff_t(n_c * d_), h_out_.end());
    // Children of the expanded nodes, by their rows' logits (position N + k).
    for (int e : expand) {
      const float* lg = logits_.data() + (n_c + size_t(row_of[size_t(e)])) * V;
      if (j.p_min > 0 && top_probability(lg, V) < j.p_min) continue;
      add_children(j, lg, N + k, e, k, size_t(budget ? beam : widths[size_t(k)]), cum_[size_t(e)]);
    }
    depth.resize(tree.size(), k + 1);
    level_begin = level_end;
    level_end = tree.size();
  }

  if (budget) keep_most_probable(tree, j.scores, cum_, depth, j.tree->budget);
}

}  // namespace mtp::speculative
