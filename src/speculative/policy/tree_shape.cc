#include "speculative/policy/tree_shape.h"

#include <algorithm>
#include <memory>
#include <chrono>
#include <cstdlib>

#include <fmt/format.h>

#include "core/error.h"
#include "core/setting.h"

namespace mtp::speculative {

namespace {
constexpr int kMaxTreeNodes = 63;  // verify rows (root + nodes) fit a 64-row call
}  // namespace

std::string widths_text(const std::vector<int>& widths) {
  std::string s;
  for (size_t i = 0; i < widths.size(); ++i) s += (i ? "," : "") + std::to_string(widths[i]);
  return s;
}

int TreeOptions::nodes(const std::vector<int>& widths) {
  long total = 0, level = 1;
  for (int w : widths) {
    level *= w;
    total += level;
    if (total > 1'000'000) return 1'000'000;  // far beyond any limit; no overflow
  }
  return int(total);
}

TreeOptions TreeOptions::from_name(const std::string& name) {
  if (name == "chain") return {};
  const std::string b = "budget=";
  if (name.rfind(b, 0) != 0) return about_setting("tree_shapes", [&] { return parse(name); });
  const std::string v = name.substr(b.size());
  char* end = nullptr;
  const long n = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0') {
    fail_setting<InputError>("tree_shapes", "the tree shape {:?}: budget=N takes a whole number "
                             "of nodes", name);
  }
  return about_setting("tree_shapes",
                       [&] { return with_budget(int(std::clamp(n, -1L, 1000L))); });
}

TreeOptions TreeOptions::parse(const std::string& value) {
  TreeOptions t;
  if (value == "auto") {
    t.kind = Kind::Auto;
    return t;
  }
  t.kind = Kind::Static;
  size_t at = 0;
  while (at <= value.size()) {
    const size_t comma = std::min(value.find(',', at), value.size());
    const std::string part = value.substr(at, comma - at);
    char* end = nullptr;
    const long w = part.empty() ? 0 : std::strtol(part.c_str(), &end, 10);
    if (part.empty() || *end != '\0' || w < 1 || w > 64) {
      fail_setting<InputError>("tree",
                               "a tree shape {:?}: widths are whole numbers >= 1 separated by "
                               "commas (children per node at each depth, e.g. 3,2,1), or 'auto'; "
                               "'{}' is not", value, part);
    }
    t.widths.push_back(int(w));
    at = comma + 1;
  }
  const int n = nodes(t.widths);
  if (n > kMaxTreeNodes) {
    fail_setting<InputError>("tree",
                             "a tree shape {}: {} nodes; a tree verifies at most {} nodes in one "
                             "forward", value,
                             n >= 1'000'000 ? std::string("over a million") : std::to_string(n),
                             kMaxTreeNodes);
  }
  return t;
}

TreeOptions TreeOptions::with_budget(int n) {
  if (n < 1 || n > kMaxTreeNodes) {
    fail_setting<InputError>("tree_budget", "a tree budget must be between 1 and {} nodes; got {}",
                             kMaxTreeNodes, n);
  }
  TreeOptions t;
  t.kind = Kind::Budget;
  t.budget = n;
  t.max_nodes = n;
  return t;
}

std::string TreeOptions::describe() const {
  switch (kind) {
    case Kind::Chain: return "chain";
    case Kind::Static: return widths_text(widths);
    case Kind::Budget: return fmt::format("budget {}", budget);
    case Kind::Auto: return "auto";
  }
  return "?";
}

TreeChooser::TreeChooser(CostCurve curve, double decode_s, int max_depth, int max_nodes,
                         Timer timer)
    : curve_(std::move(curve)), max_depth_(std::max(1, max_depth)),
      max_nodes_(std::clamp(max_nodes, 1, kMaxTreeNodes)), default_call_s_(0.05 * decode_s),
      timer_(std::move(timer)), widths_(size_t(max_depth_), 1) {
  acc_.assign(size_t(max_depth_), std::vector<double>(kMaxWidth, 0.0));
  seen_ = acc_;
  timings_.assign(size_t(kMaxTreeNodes) + 2, 0);
  live_s_.assign(timings_.size(), 0.0);
  live_w_.assign(timings_.size(), 0.0);
  timed_at_.assign(timings_.size(), 0);
  for (const auto& [q, sec] : curve_.points()) note_timed(q);  // timed once, before any choice
}

double TreeChooser::acceptance(int depth, int rank) const {
  double prior;
  if (rank > 0) prior = 0.5 * acceptance(depth, rank - 1);
  else prior = depth == 1 ? 0.6 : acceptance(depth - 1, 0);
  const size_t d = size_t(depth - 1), r = size_t(rank);
  return (acc_[d][r] + kPriorWeight * prior) / (seen_[d][r] + kPriorWeight);
}

double TreeChooser::expected_tokens(const std::vector<int>& w) const {
  double e = 1, reach = 1;
  for (size_t d = 0; d < w.size(); ++d) {
    double p = 0;
    for (int r = 0; r < w[d]; ++r) p += acceptance(int(d) + 1, r);
    reach *= std::min(1.0, p);
    e += reach;
  }
  return e;
}

double TreeChooser::cycle_seconds(const std::vector<int>& w) const {
  return std::max(0.25 * model_seconds(w), model_seconds(w) + overhead_);
}

void TreeChooser::observe_cycle(const std::vector<int>& used, double seconds) {
  seconds -= timing_s_;  // forwards timed for the curve inside this cycle
  timing_s_ = 0;
  if (used.empty()) return;
  const double excess = seconds - model_seconds(used);
  overhead_n_ = overhead_n_ * kDecay + 1;
  overhead_ += (excess - overhead_) / overhead_n_;
}

void TreeChooser::observe_verify(int q, double seconds) {
  if (q < 1 || size_t(q) >= live_s_.size() || !(seconds > 0)) return;
  for (size_t i = 0; i < live_s_.size(); ++i) live_s_[i] *= kDecay, live_w_[i] *= kDecay;
  live_s_[size_t(q)] += seconds;
  live_w_[size_t(q)] += 1;
}

double TreeChooser::model_seconds(const std::vector<int>& w) const {
  const double tokens = expected_tokens(w);
  double s = verify_seconds(1 + TreeOptions::nodes(w));
  s += modules_.seconds(tokens, default_call_s_);  // module 0's catch-up
  long level = 1, above = 0;
  for (size_t k = 0; k + 1 < w.size(); ++k) {  // module k + 1 drafts depth k + 2
    level *= w[k];
    above += level;
    s += modules_.seconds(tokens + double(above), default_call_s_);  // in one call with its catch-up
  }
  return s;
}

bool TreeChooser::verified(int q) const {
  return q >= 1 && size_t(q) < live_w_.size() && live_w_[size_t(q)] > kVerifiedWeight;
}

std::vector<int> TreeChooser::verified_rows() const {
  std::vector<int> qs;
  for (int q = 1; q < int(live_w_.size()); ++q) if (verified(q)) qs.push_back(q);
  return qs;
}

double TreeChooser::verify_seconds(int q) const {
  // The timed price, flat past the last timed point when optimistic_.
  auto timed = [&](int r) {
    if (optimistic_ && !curve_.points().empty()) r = std::min(r, curve_.points().back().first);
    return curve_(r);
  };
  auto in_cycles = [&](int r) {  // the cycles' verifies of r rows, the timing as one more
    return (live_s_[size_t(r)] + kVerifyPrior * timed(r)) / (live_w_[size_t(r)] + kVerifyPrior);
  };
  double v;
  if (verified(q)) {
    v = in_cycles(q);
  } else {
    // Never verified (or long ago): the timed price, lowered — never raised —
    // by the ratio of the nearest verified q, so that a shape is tried
    // rather than priced out by another shape's cycles.
    v = timed(q);
    int near = 0;
    for (int r = 1; r < int(live_w_.size()); ++r) {
      if (verified(r) && (near == 0 || std::abs(r - q) < std::abs(near - q))) near = r;
    }
    if (near > 0) v *= std::min(1.0, in_cycles(near) / timed(near));
  }
  // A verify of more rows never costs less than a verified one of fewer.
  for (int r = 1; r < std::min(q, int(live_w_.size())); ++r) {
    if (verified(r)) v = std::max(v, in_cycles(r));
  }
  return v;
}

void TreeChooser::choose() {
  pick();
  if (retime_contender()) pick();
  ++choices_;
}

bool TreeChooser::retime_contender() {
  if (!timer_) return false;
  // The best shape verifying another row count than the winner.
  const int q_win = 1 + TreeOptions::nodes(widths_);
  const double v_win = expected_tokens(widths_) / cycle_seconds(widths_);
  int q_c = 0;
  double v_c = 0;
  each_shape([&](const std::vector<int>& w) {
    const int q = 1 + TreeOptions::nodes(w);
    const double v = q != q_win ? expected_tokens(w) / cycle_seconds(w) : 0;
    if (v > v_c) v_c = v, q_c = q;
  });
  if (q_c == 0 || v_c < (1 - kRetimeMargin) * v_win) return false;
  // The timed point that prices it: its own, else the last one below it —
  // and of those the one whose own timing sets the price: the curve is kept
  // non-decreasing, so a slow timing raises every point above it up to the
  // next larger timing. q = 1 included: timed slow (on the demo target at 2
  // threads 2.70 ms, against 1.11 ms per plain token), it read every verify
  // up to 15 rows as free, and auto verified 2,2,2 trees at 0.68x the chain.
  double price = 0;
  int q = 0;
  for (const auto& [pq, sec] : curve_.points()) if (pq <= q_c) q = pq, price = sec;
  for (const auto& [pq, sec] : curve_.points()) {
    if (pq <= q && sec == price) {
      q = pq;
      break;
    }
  }
  const auto n = size_t(q);
  if (q < 1 || n >= timings_.size() || timings_[n] >= kMaxTimings ||
      choices_ - timed_at_[n] < kRetimeAfter) {
    return false;
  }
  const auto t0 = std::chrono::steady_clock::now();
  curve_.lower_point(q, timer_(q));
  timing_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ++timings_[n];
  timed_at_[n] = choices_;
  ++retimed_;
  return true;
}

void TreeChooser::note_timed(int q) {
  const auto n = size_t(q);
  if (n >= timings_.size()) return;
  ++timings_[n];
  timed_at_[n] = choices_;
}

void TreeChooser::each_shape(const std::function<void(const std::vector<int>&)>& fn) const {
  // Every non-increasing width sequence up to the depth and node limits.
  std::vector<int> cur;
  auto rec = [&](auto&& self, int cap) -> void {
    if (!cur.empty()) fn(cur);
    if (int(cur.size()) == max_depth_) return;
    for (int w = 1; w <= cap; ++w) {
      cur.push_back(w);
      if (TreeOptions::nodes(cur) <= max_nodes_) self(self, w);
      cur.pop_back();
    }
  };
  rec(rec, kMaxWidth);
}

void TreeChooser::pick() {
  std::vector<int> best;
  double best_v = 0;
  auto search = [&] {  // best / best_v become the best of every shape (and themselves)
    each_shape([&](const std::vector<int>& w) {
      const double v = expected_tokens(w) / cycle_seconds(w);
      if (v > best_v) best_v = v, best = w;
    });
  };
  // With a timer: until the winner's verify size is a timed point (each
  // round times one new q, so at most max_nodes rounds).
  for (int round = 0; round <= max_nodes_; ++round) {
    best = {1};
    best_v = expected_tokens(best) / cycle_seconds(best);
    search();
    int q = 1 + TreeOptions::nodes(best);
    if (!timer_) break;
    if (curve_.has_point(q)) {
      // The winner is priced from timed points; would a shape past the last
      // point win if the curve stayed flat there? Then time toward it.
      const std::vector<int> winner = best;
      const double winner_v = best_v;
      optimistic_ = true;
      search();
      optimistic_ = false;
      const int q_opt = 1 + TreeOptions::nodes(best);
      best = winner;
      best_v = winner_v;
      if (q_opt <= curve_.points().back().first) break;
      q = q_opt;
    }
    // Not q itself when it lies far past the timed points: at most twice the
    // largest one below it. Beyond the last point the curve extends the last
    // slope, so a flat start (m(4) = m(3), common on a memory-bound target)
    // makes a max_nodes tree look free; timing it cost 7.5 decodes (31 rows,
    // Zen 3) to learn what 8 rows (2.2) already showed. A tree that really
    // wins at q is reached in a few doublings.
    int below = 0;
    for (const auto& [pq, s] : curve_.points()) if (pq < q) below = pq;
    const int t = below > 0 ? std::min(q, 2 * below) : q;
    const auto t0 = std::chrono::steady_clock::now();
    curve_.add_point(t, timer_(t));
    timing_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    note_timed(t);
  }
  widths_ = best;
}

const std::vector<int>& TreeChooser::widths() {
  if (since_++ % kEvery == 0) choose();
  return widths_;
}

void TreeChooser::observe(const std::vector<int>& used, const std::vector<int>& ranks) {
  // Depth d (1-based) was reached by the cycle when the path got to d - 1.
  for (size_t d = 0; d < used.size() && d <= ranks.size(); ++d) {
    const int width = std::min(used[d], kMaxWidth);
    for (int r = 0; r < width; ++r) {
      seen_[d][size_t(r)] = seen_[d][size_t(r)] * kDecay + 1;
      acc_[d][size_t(r)] *= kDecay;
    }
    if (d < ranks.size() && ranks[d] < kMaxWidth) acc_[d][size_t(ranks[d])] += 1;
  }
}

void TreeChooser::observe_module(int rows, double seconds) { modules_.observe(rows, seconds); }

TreeChooser make_tree_chooser(const model::Model& m, const TreeOptions& t, int draft_k,
                              ThreadPool* pool) {
  // The target's m(q) at q = 1..4 up front (a 16-row prefill and ~5
  // decodes); larger verifies are timed when a choice first needs them
  // (TreeChooser's timer), so a target where chains win never times the
  // 16..33-row forwards (~20 decodes of start-up on a memory-bound target).
  auto timer = std::make_shared<ForwardTimer>(m, 1 + t.max_nodes, pool);
  CostCurve curve = forward_cost_curve(*timer, 4, 0, 1.0 + draft_k);
  const double decode_s = curve(1);
  return TreeChooser(std::move(curve), decode_s, draft_k, t.max_nodes,
                     [timer](int q) { return timer->seconds(q); });
}

}  // namespace mtp::speculative
