#include "app/spec_common.h"

#include <fmt/core.h>

#include <algorithm>
#include <filesystem>

#include "core/error.h"
#include "io/corpus.h"
#include "model/fingerprint.h"
#include "speculative/sources/assistant_source.h"
#include "speculative/sources/native_mtp_source.h"

namespace fs = std::filesystem;

namespace mtp::app {

std::unique_ptr<drafter::Drafter> open_drafter(const ModelArgs& a, const DrafterArgs& d,
                                               const model::Model& m) {
  std::string path = d.drafter;
  if (!path.empty() && drafter::is_assistant(path)) return nullptr;
  if (path.empty()) {
    fs::path dir = fs::is_directory(a.model) ? fs::path(a.model) : fs::path(a.model).parent_path();
    fs::path beside = dir / "drafter.safetensors";
    if (!fs::exists(beside)) return nullptr;
    path = beside.string();
  }
  return std::make_unique<drafter::Drafter>(
      drafter::Drafter::load(path, m.loaded(), drafter_weight_type(a.weights), d.target_mismatch));
}

std::shared_ptr<const drafter::Gemma4Assistant> open_assistant(const ModelArgs& a,
                                                               const DrafterArgs& d,
                                                               const model::Model& m) {
  if (d.drafter.empty() || !drafter::is_assistant(d.drafter)) return nullptr;
  const drafter::ServedTarget served{model::target_fingerprint(m.loaded()), d.target_mismatch};
  auto g = std::make_shared<const drafter::Gemma4Assistant>(
      drafter::Gemma4Assistant::load(d.drafter, m.config(), parse_hold(a.weights), &served,
                                     model::parse_tied_head(a.tied_head)));
  if (g->record().empty()) {
    fmt::print(stderr, "note: assistant '{}' records no target (Google's published assistants "
                       "carry none): accepted without a fingerprint check\n", d.drafter);
  }
  return g;
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

void refuse_lookups_without_spec(const DrafterArgs& d, const LookupArgs& a) {
  if (d.no_spec && (a.any() || !a.sources.empty())) {
    fail<InputError>("--no-spec turns every draft source off; --draft-source, --lookup, "
                     "--lookup-corpus and --no-gate would be ignored");
  }
}

speculative::SchedulerOptions engine_options(
    const DrafterArgs& d, const LookupArgs& a, const drafter::Drafter* drafter,
    const io::Tokenizer* tok, int parallel, int ctx,
    std::shared_ptr<const drafter::Gemma4Assistant> assistant) {
  refuse_lookups_without_spec(d, a);
  speculative::SchedulerOptions so;
  so.parallel = parallel;
  so.ctx = ctx;
  if (d.no_spec) return so;
  if (!a.corpus.empty() && !a.has("history")) {
    fail<InputError>("--lookup-corpus is the history's datastore: add --lookup history");
  }
  // The sources: --draft-source as given, else the drafter (if any); then
  // the lookups not named yet.
  so.sources = a.sources;
  if (so.sources.empty() && drafter) so.sources.push_back(speculative::kMtpSource);
  if (so.sources.empty() && assistant) so.sources.push_back(speculative::kAssistantSource);
  for (const std::string& l : a.lookup) {
    if (std::find(so.sources.begin(), so.sources.end(), l) == so.sources.end()) so.sources.push_back(l);
  }
  auto named = [&](const char* n) {
    return std::find(so.sources.begin(), so.sources.end(), n) != so.sources.end();
  };
  if (named(speculative::kMtpSource) && !drafter) {
    fail<InputError>("--draft-source mtp needs a drafter (--drafter, or drafter.safetensors "
                     "beside the model)");
  }
  if (named(speculative::kAssistantSource) && !assistant) {
    fail<InputError>("--draft-source {} needs Gemma 4's assistant (--drafter DIR, a "
                     "gemma4_assistant directory)", speculative::kAssistantSource);
  }
  so.lookup.ngram_max = a.ngram_max;
  so.lookup.max_draft = a.max_draft;
  if (named(speculative::kHistorySource)) {
    so.history = std::make_shared<speculative::HistoryStore>(
        a.ngram_max, size_t(a.history_mb * double(1 << 20)));
    for (const auto& doc : lookup_corpus(a, tok)) so.history->add(doc);
  }
  so.adaptive = !a.no_gate;
  const int k = drafter ? drafter->config().K : 0;
  if (!d.tree.empty() || d.tree_budget > 0) {
    if (!drafter && !assistant) {
      fail<InputError>("--tree / --tree-budget need a drafter (--drafter, or "
                       "drafter.safetensors beside the model)");
    }
    so.tree = resolve_tree(d, assistant ? kAssistantMaxSteps : k);
  }
  so.assistant = std::move(assistant);
  if (so.assistant) {
    // A static tree deeper than the default draft length asks for its depth.
    const int deep = so.tree.kind == speculative::TreeOptions::Kind::Static
                         ? int(so.tree.widths.size()) : 0;
    so.draft_k = resolve_draft_k(d, kAssistantMaxSteps, "the assistant's longest draft",
                                 std::max(speculative::kAssistantDefaultSteps, deep));
  } else if (named(speculative::kNativeMtpSource) && !named(speculative::kMtpSource)) {
    // The checkpoint's own head drafts; --draft-k is its longest chain.
    so.draft_k = resolve_draft_k(d, speculative::NativeMtpSource::kMaxLen,
                                 "the native MTP head's longest draft", 0);
  } else if (drafter) {
    so.draft_k = resolve_draft_k(d, k, "the drafter's K", k);
  }
  return so;
}

void check_speculation_flags(const DrafterArgs& d, const SamplingArgs& s) {
  const bool tree = !d.tree.empty() || d.tree_budget > 0;
  if (tree && d.no_spec) {
    fail<InputError>("--tree / --tree-budget need a drafter; --no-spec turned it off");
  }
  if (tree && s.spec_sampling == "rejection" && s.temp > 0) {
    fail<InputError>("--tree needs --spec-sampling coupled (or --temp 0): rejection sampling "
                     "verifies chains only");
  }
}

std::unique_ptr<speculative::Scheduler> make_engine(const Session& s, const drafter::Drafter* dr,
                                                    const speculative::SchedulerOptions& so,
                                                    const std::string& flags) {
  try {
    return std::make_unique<speculative::Scheduler>(*s.model, s.tokenizer.get(), dr, so,
                                                    s.pool.get());
  } catch (const InputError& e) {
    fail<InputError>("{}: {}", flags, e.what());
  }
}

void apply_request_flags(const DrafterArgs& d, const SamplingArgs& s,
                         const drafter::Drafter* drafter, speculative::Request& r,
                         const drafter::Gemma4Assistant* assistant) {
  if (drafter) {
    r.draft_k = resolve_draft_k(d, drafter->config().K, "the drafter's K", drafter->config().K);
  } else if (assistant) {
    r.draft_k = resolve_draft_k(d, kAssistantMaxSteps, "the assistant's longest draft",
                                speculative::kAssistantDefaultSteps);
  }
  r.p_min = d.p_min;
  r.mode = spec_sampling_mode(s);
}

nlohmann::json assistant_json(const drafter::Gemma4Assistant& a,
                              const speculative::Scheduler& engine,
                              const speculative::SpecStats* stats) {
  const speculative::DraftSource::Cost c = engine.priced_cost();
  nlohmann::json j = {{"path", a.path()},
                      {"parameters", a.parameters()},
                      {"centroid_head", a.config().ordered},
                      {"step_s", c.call_s},
                      {"row_s", c.row_s}};
  if (stats) {
    std::vector<double> live;
    const auto it = stats->sources.find(speculative::kAssistantSource);
    for (size_t k = 0; k < stats->time_module_s.size(); ++k) {
      const long n = it != stats->sources.end() && k < it->second.drafted.size()
                         ? it->second.drafted[k] : 0;
      live.push_back(n > 0 ? stats->time_module_s[k] / double(n) : 0.0);
    }
    j["live_step_s"] = live;
  }
  return j;
}

void print_assistant(const drafter::Gemma4Assistant& a) {
  const model::ModelConfig& b = a.config().block;
  fmt::print(stderr, "[assistant {}: {} layers of width {}, {} parameters, {} head]\n", a.path(),
             b.n_layers, b.d_model, a.parameters(),
             a.config().ordered
                 ? fmt::format("centroid ({} of {} clusters)", a.config().top_k, a.config().centroids)
                 : std::string("full"));
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
