#include "speculative/cycle/spec_loop.h"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <nlohmann/json.hpp>

#include <fmt/core.h>

#include "core/error.h"

namespace mtp::speculative {

namespace {
using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::vector<double> ratios(const std::vector<long>& num, const std::vector<long>& den) {
  std::vector<double> a(den.size(), 0.0);
  for (size_t k = 0; k < den.size(); ++k) a[k] = den[k] ? double(num[k]) / double(den[k]) : 0.0;
  return a;
}
}  // namespace

void ChainProposer::propose(std::span<const int32_t> committed, int max_k, DraftTree& tree) {
  drafts_.clear();
  propose_chain(committed, max_k, drafts_);
  tree.assign_chain(drafts_, source_);
}

void DepthCounts::resize(size_t n) {
  if (drafted.size() < n) {
    drafted.resize(n, 0);
    accepted.resize(n, 0);
  }
}

std::vector<double> DepthCounts::acceptance() const { return ratios(accepted, drafted); }
long DepthCounts::verified() const { return std::accumulate(drafted.begin(), drafted.end(), 0L); }
long DepthCounts::accepted_total() const {
  return std::accumulate(accepted.begin(), accepted.end(), 0L);
}

std::vector<double> SpecStats::acceptance() const { return ratios(accepted, drafted); }

double SpecStats::tokens_per_cycle() const { return cycles ? double(emitted) / cycles : 0.0; }
double SpecStats::nodes_per_cycle() const { return cycles ? double(nodes) / cycles : 0.0; }

namespace {
template <class T>
void add_into(std::vector<T>& into, const std::vector<T>& x) {
  if (into.size() < x.size()) into.resize(x.size(), T{});
  for (size_t i = 0; i < x.size(); ++i) into[i] += x[i];
}
}  // namespace

void SpecStats::add(const SpecStats& x) {
  cycles += x.cycles;
  emitted += x.emitted;
  nodes += x.nodes;
  add_into(drafted, x.drafted);
  add_into(accepted, x.accepted);
  time_draft_s += x.time_draft_s;
  time_verify_s += x.time_verify_s;
  time_other_s += x.time_other_s;
  add_into(time_module_s, x.time_module_s);
  add_into(accepted_length_hist, x.accepted_length_hist);
  if (x.tree != "chain") tree = x.tree;
  for (const auto& [shape, n] : x.tree_shapes) tree_shapes[shape] += n;
  for (const auto& [name, c] : x.sources) {
    DepthCounts& into = sources[name];
    add_into(into.drafted, c.drafted);
    add_into(into.accepted, c.accepted);
    into.proposed += c.proposed;
    into.chosen += c.chosen;
    into.probes += c.probes;
    into.time_s += c.time_s;
  }
}

nlohmann::json SpecStats::to_json() const {
  nlohmann::json src = nlohmann::json::object();
  for (const auto& [name, c] : sources) {
    src[name] = {{"drafted", c.drafted},   {"accepted", c.accepted},
                 {"acceptance", c.acceptance()}, {"proposed", c.proposed},
                 {"verified", c.verified()}, {"accepted_tokens", c.accepted_total()},
                 {"chosen", c.chosen},     {"probes", c.probes},
                 {"time_s", c.time_s}};
  }
  return {{"cycles", cycles},
          {"drafted", drafted},
          {"accepted", accepted},
          {"acceptance", acceptance()},
          {"tokens_per_cycle", tokens_per_cycle()},
          {"nodes_per_cycle", nodes_per_cycle()},
          {"accepted_length_hist", accepted_length_hist},
          {"tree", tree},
          {"tree_shapes", tree_shapes},
          {"sources", src},
          {"time_draft_s", time_draft_s},
          {"time_verify_s", time_verify_s},
          {"time_other_s", time_other_s},
          {"time_module_s", time_module_s}};
}

nlohmann::json CycleTrace::to_json() const {
  nlohmann::json src = nlohmann::json::array(), props = nlohmann::json::array();
  for (const DraftOrigin& o : source) src.push_back(fmt::format("{}{}", o.source, o.is(kMtpSource) ? std::to_string(o.module) : ""));
  for (const Proposal& p : proposals) {
    props.push_back({{"source", p.source}, {"evidence", p.evidence}, {"tokens", p.tokens}});
  }
  return {{"seq", id},          {"committed", n_committed}, {"proposals", props},
          {"tree", {{"tokens", drafts}, {"parents", parents}, {"sources", src}, {"scores", scores}}},
          {"choices", choices}, {"accepted", accepted},     {"accepted_nodes", accepted_nodes}};
}

SpecSequence::SpecSequence(Proposer& proposer, std::vector<int32_t>& committed, TokenSink& sink,
                           int max_k, int ctx, SpecStats& stats, std::vector<CycleTrace>* trace)
    : proposer_(proposer), committed_(committed), sink_(sink), max_k_(max_k), ctx_(ctx),
      stats_(stats), trace_(trace) {
  if (max_k < 1) fail<InputError>("draft length must be >= 1, got {}", max_k);
  if (stats_.drafted.size() < size_t(max_k)) {
    stats_.drafted.resize(size_t(max_k), 0);
    stats_.accepted.resize(size_t(max_k), 0);
  }
}

bool SpecSequence::done() {
  if (sink_.done()) return true;
  // The committed sequence may grow to ctx: verify writes positions up to
  // n - 1 + depth, and commits at most depth + 1 tokens.
  if (ctx_ - int(committed_.size()) <= 0) {
    sink_.finish("context");
    return true;
  }
  return false;
}

const DraftTree& SpecSequence::draft(int max_k) {
  MTP_CHECK(max_k >= 0 && max_k <= max_k_, "draft length {} outside 0..{}", max_k, max_k_);
  const auto t0 = Clock::now();
  const int k_max = draft_limit(max_k);
  tree_.clear();
  if (k_max > 0) proposer_.propose(committed_, k_max, tree_);
  MTP_CHECK(tree_.max_depth() <= std::max(0, k_max), "proposer drafted depth {} for a limit of {}",
            tree_.max_depth(), k_max);
  const double s = since(t0);
  stats_.time_draft_s += s;
  if (!proposer_.counts_sources() && !tree_.empty()) {
    // Every node was proposed and is verified; each source in the tree was
    // chosen this cycle; the drafting time goes to the root's source (a
    // proposer without counts of its own has one source).
    for (size_t i = 0; i < tree_.size(); ++i) {
      DepthCounts& c = stats_.sources[tree_.source[i].name()];
      ++c.proposed;
      const bool first = std::none_of(tree_.source.begin(), tree_.source.begin() + long(i),
                                      [&](const DraftOrigin& x) {
                                        return x.is(tree_.source[i].source);
                                      });
      if (first) ++c.chosen;
    }
    stats_.sources[tree_.source[0].name()].time_s += s;
  }
  return tree_;
}

int SpecSequence::draft_limit(int max_k) const {
  return std::max(0, std::min(max_k, ctx_ - int(committed_.size()) - 1));
}

void SpecSequence::accept(std::span<const int32_t> choices) {
  const auto t0 = Clock::now();
  acc_ = tree_.accept(choices);
  const int a = int(acc_.nodes.size());
  ++stats_.cycles;
  stats_.nodes += long(tree_.size());
  // Depth counters: the tree reached depth d+1 / the accepted path did.
  if (stats_.accepted_length_hist.size() <= size_t(a)) stats_.accepted_length_hist.resize(size_t(a) + 1, 0);
  ++stats_.accepted_length_hist[size_t(a)];
  const int reached = tree_.max_depth();
  for (int d = 0; d < reached; ++d) {
    ++stats_.drafted[size_t(d)];
    if (d < a) ++stats_.accepted[size_t(d)];
  }
  for (size_t i = 0; i < tree_.size(); ++i) {
    DepthCounts& c = stats_.sources[tree_.source[i].name()];
    const int d = tree_.depth(i) - 1;
    c.resize(size_t(d) + 1);
    ++c.drafted[size_t(d)];
    if (std::find(acc_.nodes.begin(), acc_.nodes.end(), int32_t(i)) != acc_.nodes.end()) {
      ++c.accepted[size_t(d)];
    }
  }
  if (trace_) {
    CycleTrace& t = trace_->emplace_back();
    t.n_committed = int(committed_.size());
    t.drafts = tree_.token;
    t.parents = tree_.parent;
    t.source = tree_.source;
    t.choices.assign(choices.begin(), choices.end());
    t.accepted_nodes = acc_.nodes;
    t.accepted = a;
  }
  // Emit the accepted path, then the target's own token; stop at the first
  // token that ends generation.
  for (int i = 0; i <= a && !sink_.done(); ++i) {
    const int32_t t = i < a ? tree_.token[size_t(acc_.nodes[size_t(i)])] : acc_.next;
    const size_t before = sink_.tokens().size();
    sink_.push(t, i < a ? &tree_.source[size_t(acc_.nodes[size_t(i)])] : nullptr);
    if (sink_.tokens().size() == before) break;  // a stop token is not emitted
    committed_.push_back(t);
    ++stats_.emitted;
  }
  stats_.time_other_s += since(t0);
}

void SpecSequence::commit_proposer() {
  const auto t0 = Clock::now();
  proposer_.commit(committed_);
  const double s = since(t0);
  stats_.time_draft_s += s;
  // The proposer's work on the accepted tokens (the MTP modules' catch-up):
  // part of what its drafts cost.
  if (!proposer_.counts_sources() && !tree_.empty()) {
    stats_.sources[tree_.source[0].name()].time_s += s;
  }
}

void speculative_loop(Verifier& verifier, Proposer& proposer, std::vector<int32_t>& committed,
                      TokenSink& sink, int max_k, int ctx, SpecStats& stats,
                      std::vector<CycleTrace>* trace) {
  SpecSequence seq(proposer, committed, sink, max_k, ctx, stats, trace);
  std::vector<int32_t> choices;
  while (!seq.done()) {
    const DraftTree& tree = seq.draft();
    auto t0 = Clock::now();
    verifier.verify(committed, tree, choices);
    stats.time_verify_s += since(t0);
    seq.accept(choices);
    if (sink.done()) break;
    t0 = Clock::now();
    verifier.commit(committed, seq.accepted_nodes());
    stats.time_verify_s += since(t0);
    seq.commit_proposer();
  }
}

}  // namespace mtp::speculative
