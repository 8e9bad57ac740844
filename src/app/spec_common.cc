#include "app/spec_common.h"

#include <fmt/core.h>

#include <filesystem>

#include "core/error.h"
#include "io/corpus.h"
#include "model/fingerprint.h"

namespace fs = std::filesystem;

namespace mtp::app {

std::unique_ptr<drafter::Drafter> open_drafter(const ModelArgs& a, const DrafterArgs& d,
                                               const model::Model& m) {
  std::string path = d.drafter;
  if (path.empty()) {
    fs::path dir = fs::is_directory(a.model) ? fs::path(a.model) : fs::path(a.model).parent_path();
    fs::path beside = dir / "drafter.safetensors";
    if (!fs::exists(beside)) return nullptr;
    path = beside.string();
  }
  return std::make_unique<drafter::Drafter>(
      drafter::Drafter::load(path, m.loaded(), drafter_weight_type(a.weights), d.target_mismatch));
}

std::unique_ptr<drafter::Drafter> random_drafter(const model::Model& m, int K, uint64_t seed,
                                                 kernels::WeightType hold) {
  drafter::DrafterConfig dc;
  dc.K = K;
  return std::make_unique<drafter::Drafter>(drafter::Drafter::from_tensors(
      m.config(), model::target_fingerprint(m.loaded()), dc,
      drafter::random_drafter_tensors(m.config(), dc, seed),
      {{"kind", "random-init"}, {"seed", seed}}, DType::BF16, hold));
}

std::vector<std::vector<int32_t>> lookup_corpus(const LookupArgs& a, const io::Tokenizer* tok) {
  std::vector<std::vector<int32_t>> out;
  if (a.corpus.empty()) return out;
  if (!tok) fail<InputError>("--lookup-corpus needs a tokenizer (a random target has none)");
  std::vector<std::string> docs;
  io::read_corpus(a.corpus, docs);
  for (const std::string& d : docs) out.push_back(tok->encode(d, false));
  return out;
}

std::unique_ptr<speculative::HistoryStore> open_history(const LookupArgs& a,
                                                        const io::Tokenizer* tok) {
  if (!a.has("history")) {
    if (!a.corpus.empty()) {
      fail<InputError>("--lookup-corpus is the history's datastore: add --lookup history");
    }
    return nullptr;
  }
  auto h = std::make_unique<speculative::HistoryStore>(a.ngram_max,
                                                       size_t(a.history_mb * double(1 << 20)));
  for (const auto& d : lookup_corpus(a, tok)) h->add(d);
  return h;
}

namespace {
// --lookup-ngram-max and --lookup-max-draft, validated (InputError naming the flag).
speculative::LookupOptions lookup_options(const LookupArgs& a) {
  speculative::LookupOptions o;
  o.ngram_max = a.ngram_max;
  o.max_draft = a.max_draft;
  o.validate();
  return o;
}
}  // namespace

void apply_lookup_args(const LookupArgs& a, const speculative::HistoryStore* history,
                       speculative::SpecOptions& so) {
  so.lookup_prompt = a.has("prompt");
  so.history = history;
  so.lookup = lookup_options(a);
  so.gate = !a.no_gate;
}

void refuse_lookups_without_spec(const DrafterArgs& d, const LookupArgs& a) {
  if (d.no_spec && a.any()) {
    fail<InputError>("--no-spec turns every draft source off; --lookup, --lookup-corpus and "
                     "--no-gate would be ignored");
  }
}

void apply_lookup_args(const LookupArgs& a, const io::Tokenizer* tok,
                       speculative::SchedulerOptions& so, const char* no_gate_needs) {
  if (a.no_gate) {
    fail<InputError>("--no-gate needs {} (the batching scheduler sizes every draft from its "
                     "cost curve)", no_gate_needs);
  }
  so.history = open_history(a, tok);
  so.lookup_prompt = a.has("prompt");
  so.lookup = lookup_options(a);
}

std::string acceptance_by_position(const speculative::DepthCounts& c) {
  std::string pos;
  const auto ca = c.acceptance();
  for (size_t k = 0; k < ca.size(); ++k) pos += fmt::format("{}{:.2f}", k ? " " : "", ca[k]);
  return pos;
}

void print_spec_stats(const speculative::SpecStats& s) {
  std::string acc;
  auto a = s.acceptance();
  for (size_t k = 0; k < a.size(); ++k) {
    acc += fmt::format("{}{}: {:.3f} ({}/{})", k ? ", " : "", k, a[k], s.accepted[k], s.drafted[k]);
  }
  double total = s.time_draft_s + s.time_verify_s + s.time_other_s;
  fmt::print(stderr,
             "[speculative: {} cycles, {:.2f} tokens/cycle | acceptance by position: {} | time "
             "draft {:.1f}% verify {:.1f}% other (incl. streaming the text) {:.1f}%]\n",
             s.cycles, s.tokens_per_cycle(), acc, total > 0 ? 100 * s.time_draft_s / total : 0,
             total > 0 ? 100 * s.time_verify_s / total : 0,
             total > 0 ? 100 * s.time_other_s / total : 0);
  if (s.tree != "chain") {
    std::string hist, shapes;
    for (size_t a = 0; a < s.accepted_length_hist.size(); ++a) {
      hist += fmt::format("{}{}: {}", a ? ", " : "", a, s.accepted_length_hist[a]);
    }
    for (const auto& [shape, n] : s.tree_shapes) {
      shapes += fmt::format("{}{} x{}", shapes.empty() ? " | shapes chosen: " : ", ", shape, n);
    }
    fmt::print(stderr, "[tree {}: {:.2f} nodes/cycle | cycles by accepted length: {}{}]\n", s.tree,
               s.nodes_per_cycle(), hist, shapes);
  }
  for (const auto& [name, c] : s.sources) {
    const std::string pos = acceptance_by_position(c);
    fmt::print(stderr,
               "[  {}: chosen {} cycles ({} probes), proposed {}, verified {}, accepted {} | "
               "acceptance by position: {} | {:.3f} s drafting]\n",
               name, c.chosen, c.probes, c.proposed, c.verified(), c.accepted_total(), pos,
               c.time_s);
  }
}

}  // namespace mtp::app
