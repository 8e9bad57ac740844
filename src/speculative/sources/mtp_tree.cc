// MtpProposer's draft trees (tree_shape.h for the shapes).
//
// Module k (k >= 1) drafts the children of depth-k nodes. In the module-row
// contract (drafter/module_rows.h) module k's row at position t embeds token
// t+k+1 and reads module k-1's row t; for a tree, module k's row for node x
// (depth j <= k) sits at position N-2-k+j, embeds token(x) and reads module
// k-1's row for parent(x) (for a depth-1 node: module k-1's last final row,
// N-1-k). So module k runs, in ONE call with tree attention
// (model/kv_cache.h "Tree rows"), one row for every node on the path to a
// depth-k node it expands — the chain's k non-final rows, per branch — and
// its logits at the expanded nodes' rows give their children. As for chains
// (mtp_chains.h), module 0 catches up at commit and module k >= 1 in the same
// call as its tree rows — ordinary rows first (model/kv_cache.h), its final
// rows not yet in its cache, so its weights are read once per cycle; a module
// the tree does not reach catches up in a later cycle's call. Tree rows never
// enter the module's positions: final rows come only from committed tokens
// (live ≡ teacher-forced on the accepted path).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <numeric>

#include "core/error.h"
#include "drafter/module_rows.h"
#include "speculative/sources/mtp_proposer.h"

namespace mtp::speculative {

void MtpProposer::set_tree(const TreeOptions& t, TreeChooser* chooser) {
  if (t.is_tree() && mode_ == SpecSampling::Rejection && !sampler_.greedy()) {
    fail<InputError>("--tree needs --spec-sampling coupled (or temperature 0): rejection "
                     "sampling verifies chains only");
  }
  if (t.kind == TreeOptions::Kind::Static && int(t.widths.size()) > chains_.K()) {
    fail<InputError>("--tree {} is {} deep; the drafter has K = {} modules (one per depth)",
                     t.describe(), t.widths.size(), chains_.K());
  }
  MTP_CHECK(t.kind != TreeOptions::Kind::Auto || chooser, "--tree auto needs a TreeChooser");
  tree_opts_ = t;
  chooser_ = chooser;
  row_of_.assign(size_t(chains_.K()), {});
  tree_out_.assign(size_t(chains_.K()), {});
}

void MtpProposer::add_children(const float* lg, int64_t pos, int parent, int k, size_t w,
                               double cum, DraftTree& tree) {
  const std::vector<int32_t>& vocab = chains_.runner().drafter().config().draft_vocab;
  const bool with_prob = tree_opts_.kind == TreeOptions::Kind::Budget;
  sampler_.top(lg, chains_.runner().logits_width(), pos, vocab.empty() ? nullptr : vocab.data(), w,
               with_prob, cand_);
  for (const Sampler::Candidate& c : cand_) {
    tree.push(c.id, parent, {DraftSource::Kind::Mtp, k});
    cum_.push_back(cum * c.prob);
  }
}

void MtpProposer::commit(std::span<const int32_t> committed) {
  if (chooser_ && last_n_ >= 0 && !last_tree_.empty()) {
    chooser_->observe_verify(
        int(last_tree_.size()) + 1,
        std::chrono::duration<double>(std::chrono::steady_clock::now() - proposed_at_).count());
    // The accepted path, by DraftTree::accept's own rule, with the committed
    // tokens as the target's choices (-1 past the end); a node's rank = its
    // earlier siblings.
    std::vector<int32_t> choices(last_tree_.size() + 1, -1);
    auto token_at = [&](size_t j) { return j < committed.size() ? committed[j] : -1; };
    choices[0] = token_at(size_t(last_n_));
    for (size_t i = 0; i < last_tree_.size(); ++i) {
      choices[i + 1] = token_at(size_t(last_n_ + last_tree_.depth(i)));
    }
    std::vector<int> ranks;
    for (const int32_t node : last_tree_.accept(choices).nodes) {
      int rank = 0;
      for (int32_t i = 0; i < node; ++i) rank += last_tree_.parent[size_t(i)] == last_tree_.parent[size_t(node)];
      ranks.push_back(rank);
    }
    chooser_->observe(last_widths_, ranks);
  }
  last_n_ = -1;
  // Module 0 now, modules k >= 1 inside their next drafting call (propose).
  catch_up(committed, 1);
}

void MtpProposer::propose_tree(std::span<const int32_t> committed, int max_k, DraftTree& tree) {
  // Auto: the previous cycle's whole time, propose to propose.
  const auto now = std::chrono::steady_clock::now();
  if (chooser_ && cycle_started_ && !last_widths_.empty()) {
    chooser_->observe_cycle(last_widths_,
                            std::chrono::duration<double>(now - *cycle_started_).count());
  }
  cycle_started_ = now;
  last_widths_.clear();
  catch_up(committed, 1);
  const int N = int(committed.size());
  const size_t V = chains_.runner().logits_width();
  const float* d0_logits = chains_.d0_logits(0);
  tree.clear();
  cum_.clear();
  last_n_ = -1;
  last_tree_.clear();
  if (max_k < 1 || chains_.d0_row(0) != N - 2) return;
  const int depth_max = std::min(max_k, modules_);
  const bool budget = tree_opts_.kind == TreeOptions::Kind::Budget;
  std::vector<int> widths;
  if (tree_opts_.kind == TreeOptions::Kind::Static) widths = tree_opts_.widths;
  if (tree_opts_.kind == TreeOptions::Kind::Auto) widths = chooser_->widths();
  if (int(widths.size()) > depth_max) widths.resize(size_t(depth_max));
  // Budget: expand the `beam` most probable nodes of a depth with their
  // `beam` best children (EAGLE-2's top-k), then keep the budget's best.
  const int beam = budget ? std::clamp(int(std::ceil(std::sqrt(double(tree_opts_.budget)))), 1, 8) : 0;
  const int D = budget ? depth_max : int(widths.size());
  if (D < 1) return;
  if (p_min_ > 0 && top_probability(d0_logits, V) < p_min_) return;
  add_children(d0_logits, N, -1, 0, size_t(budget ? beam : widths[0]), 1.0, tree);

  std::vector<int> depth(tree.size(), 1), expand;
  std::vector<uint8_t> on_path;
  size_t level_begin = 0, level_end = tree.size();
  for (int k = 1; k < D && level_end > level_begin; ++k) {
    // The depth-k nodes to expand.
    expand.resize(level_end - level_begin);
    std::iota(expand.begin(), expand.end(), int(level_begin));
    if (budget && int(expand.size()) > beam) {
      std::stable_sort(expand.begin(), expand.end(),
                       [&](int a, int b) { return cum_[size_t(a)] > cum_[size_t(b)]; });
      expand.resize(size_t(beam));
      std::sort(expand.begin(), expand.end());
    }
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
    if (final_len - chains_.runner().kv(k).length(0) + n_tree > chains_.runner().kv(k).q_max()) {
      catch_up(committed, k + 1);
    }
    const int c0 = std::min(chains_.runner().kv(k).length(0), final_len);
    rows_.clear();
    h_in_.clear();
    drafter::append_module_rows(
        0, k, c0, final_len, [&](int j) { return committed[size_t(j)]; },
        [&](int t) { return chains_.out(0, k - 1) + size_t(t) * d_; }, d_, rows_, h_in_);
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
      rows_.push_back({0, pos, tree.token[x], r, par < 0 ? -1 : row_of[size_t(par)]});
      MTP_CHECK(par < 0 || row_of_[size_t(k - 1)][size_t(par)] >= 0,
                "module {} row of node {} has no input row", k, x);
      const float* h_prev =
          par < 0 ? chains_.out(0, k - 1) + size_t(N - 1 - k) * d_
                  : tree_out_[size_t(k - 1)].data() + size_t(row_of_[size_t(k - 1)][size_t(par)]) * d_;
      h_in_.insert(h_in_.end(), h_prev, h_prev + d_);
      mask_.push_back(0);
    }
    for (int e : expand) mask_[n_c + size_t(row_of[size_t(e)])] = 1;
    logits_.resize(rows_.size() * V);
    h_out_.resize(rows_.size() * d_);
    run_module(k, h_in_.data(), h_out_.data(), logits_.data(), mask_.data());
    // The final rows' h_k into the module's outputs, the tree rows' apart.
    std::memcpy(chains_.out(0, k) + size_t(c0) * d_, h_out_.data(), n_c * d_ * sizeof(float));
    tree_out_[size_t(k)].assign(h_out_.begin() + std::ptrdiff_t(n_c * d_), h_out_.end());
    // Children of the expanded nodes, by their rows' logits (position N + k).
    for (int e : expand) {
      const float* lg = logits_.data() + (n_c + size_t(row_of[size_t(e)])) * V;
      if (p_min_ > 0 && top_probability(lg, V) < p_min_) continue;
      add_children(lg, N + k, e, k, size_t(budget ? beam : widths[size_t(k)]), cum_[size_t(e)],
                   tree);
    }
    depth.resize(tree.size(), k + 1);
    level_begin = level_end;
    level_end = tree.size();
  }

  if (budget && int(tree.size()) > tree_opts_.budget) {
    // Keep the budget's most probable nodes. A child's cumulative probability
    // never exceeds its parent's and ties go to the shallower, earlier node,
    // so every kept node's parent is kept.
    std::vector<int> order(tree.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      if (cum_[size_t(a)] != cum_[size_t(b)]) return cum_[size_t(a)] > cum_[size_t(b)];
      return depth[size_t(a)] < depth[size_t(b)];
    });
    std::vector<uint8_t> keep(tree.size(), 0);
    for (int i = 0; i < tree_opts_.budget; ++i) keep[size_t(order[size_t(i)])] = 1;
    DraftTree kept;
    std::vector<int> index(tree.size(), -1);
    for (size_t i = 0; i < tree.size(); ++i) {
      if (!keep[i]) continue;
      const int p = tree.parent[i];
      MTP_CHECK(p < 0 || index[size_t(p)] >= 0, "budget pruning kept node {} without its parent", i);
      index[i] = kept.push(tree.token[i], p < 0 ? -1 : index[size_t(p)], tree.source[i]);
    }
    tree = std::move(kept);
  }
  if (tree_opts_.kind == TreeOptions::Kind::Auto) ++shapes_used_[widths_text(widths)];
  last_n_ = N;
  last_tree_.token = tree.token;
  last_tree_.parent = tree.parent;
  last_widths_ = widths;
  proposed_at_ = std::chrono::steady_clock::now();
}

}  // namespace mtp::speculative
