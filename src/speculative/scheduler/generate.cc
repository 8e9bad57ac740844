#include "speculative/scheduler/generate.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>

#include "core/error.h"
#include "core/memory_headroom.h"
#include "speculative/policy/draft_budget.h"
#include "speculative/policy/forward_timing.h"
#include "speculative/sources/mtp_proposer.h"
#include "speculative/policy/union_proposer.h"
#include "speculative/cycle/target_session.h"

namespace mtp::speculative {

namespace {
using Clock = std::chrono::steady_clock;
constexpr double kKvBudgetBytes = 8.0 * (1ull << 30);  // default-context memory cap
}  // namespace

std::vector<int32_t> stop_token_ids(const model::ModelConfig& c, const io::Tokenizer* tok) {
  std::vector<int32_t> ids = c.eos_ids;
  if (tok) {
    for (int32_t e : tok->eos_ids()) ids.push_back(e);
  }
  if (c.source == "llama2c") ids.push_back(c.bos_id >= 0 ? c.bos_id : 1);  // run.c stops on BOS
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

int resolve_ctx(const model::ModelConfig& c, int requested, int64_t needed) {
  if (requested < 0) fail<InputError>("--ctx must be positive, got {}", requested);
  if (requested > c.max_position) {
    fail<InputError>("--ctx {} exceeds the model's maximum context of {} positions", requested,
                     c.max_position);
  }
  // Bytes per position: K and V of every layer, and the captured hidden row.
  const double per_pos =
      (double(c.n_layers) * c.n_kv_heads * c.head_dim * 2 + c.d_model) * sizeof(float);
  const MemoryHeadroom room = memory_headroom();
  const double avail = room.bytes;
  if (requested > 0) {
    if (room.known() && per_pos * requested > avail) {
      fail<InputError>("--ctx {} needs {:.2f} GiB for the KV cache; {} is available", requested,
                       per_pos * requested / (1ull << 30), room.describe());
    }
    return requested;
  }
  // Default: what this generation can use (prompt + new tokens + drafts), at
  // most the model's maximum and a memory budget — never the model's maximum
  // up front (max_position_embeddings may be 1 M or 2^31 - 1).
  const double budget = room.known() ? std::min(kKvBudgetBytes, avail / 2) : kKvBudgetBytes;
  int64_t ctx = std::min<int64_t>(c.max_position, int64_t(std::max(256.0, budget / per_pos)));
  if (needed > 0) ctx = std::min(ctx, needed);
  return int(ctx);
}

int SpecOptions::max_draft() const {
  int k = drafter ? (draft_k > 0 ? draft_k : drafter->config().K) : 0;
  if (lookup_prompt || history) k = std::max(k, lookup.max_draft);
  return k;
}

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

GenerateResult generate(const model::Model& m, const io::Tokenizer* tok,
                        const std::vector<int32_t>& prompt_ids, const GenerateOptions& opt,
                        ThreadPool* pool, const TextCallback& on_text, const SpecOptions& spec) {
  const model::ModelConfig& c = m.config();
  if (opt.n_new < 0) fail<InputError>("-n must be >= 0, got {}", opt.n_new);
  if (prompt_ids.empty()) {
    fail<InputError>("the prompt is empty and the tokenizer adds no BOS token: nothing to "
                     "condition on");
  }
  if (spec.lookup_prompt || spec.history) spec.lookup.validate();
  if (spec.tree.is_tree() && !spec.drafter) {
    fail<InputError>("--tree / --tree-budget draft trees with an MTP drafter; none was given");
  }
  if (spec.tree.is_tree() && (spec.lookup_prompt || spec.history)) {
    fail<InputError>("--tree and --lookup cannot be combined yet (the union verifies chains)");
  }
  const int64_t max_k = std::max(spec.drafter ? std::max(spec.draft_k, spec.drafter->config().K) : 0,
                                 spec.max_draft());
  const int ctx = resolve_ctx(c, opt.ctx, int64_t(prompt_ids.size()) + opt.n_new + max_k + 1);
  if (int(prompt_ids.size()) >= ctx) {
    fail<InputError>("the prompt is {} tokens; the context is {} ({}), which leaves no room to "
                     "generate", prompt_ids.size(), ctx,
                     opt.ctx > 0 ? "--ctx" : "the model's maximum positions");
  }
  GenerateResult res;
  res.prompt_ids = prompt_ids;
  Sampler sampler(opt.sampler);
  TokenSink sink(tok, stop_token_ids(c, tok), opt.n_new, opt.stop, on_text, prompt_ids.back());
  sink.set_token_callback(opt.on_token);
  TargetSession target(m, ctx, pool);
  std::vector<float> logits(c.vocab);

  const bool speculate = spec.speculates();
  const int draft_k = !spec.drafter ? 0 : spec.draft_k > 0 ? spec.draft_k : spec.drafter->config().K;
  const int loop_k = spec.max_draft();
  if (spec.drafter && (draft_k < 1 || draft_k > spec.drafter->config().K)) {
    fail<InputError>("draft length {} is outside 1..{} (the drafter's K)", draft_k,
                     spec.drafter->config().K);
  }
  // Sources of the union (union_proposer.h): the lookups, then the drafter;
  // its gate has one arm per (lookup, evidence class) and one for the drafter.
  std::optional<PromptLookup> prompt;
  std::optional<HistorySource> history;
  std::vector<ChainSource*> lookups;
  if (spec.lookup_prompt) lookups.push_back(&prompt.emplace(spec.lookup));
  if (spec.history) lookups.push_back(&history.emplace(*spec.history, spec.lookup.max_draft));
  const int union_sources = UnionProposer::gate_arms(lookups, spec.drafter != nullptr);
  if (speculate) {
    res.stats = SpecStats{};
    res.stats->tree = spec.tree.describe();
    res.stats->drafted.assign(loop_k, 0);
    res.stats->accepted.assign(loop_k, 0);
  }

  // Prompt processing: the target's prefill and, when speculating, the
  // drafter's modules over the same prompt (timed together as prompt_s).
  auto t0 = Clock::now();
  std::optional<MtpProposer> proposer;
  std::optional<TreeChooser> own_chooser;
  std::optional<CostModel> cost = spec.cost;
  if (!sink.done()) {
    const bool remembered = spec.gate_memory && spec.gate_memory->gate &&
                            spec.gate_memory->gate->n_sources() == union_sources &&
                            spec.gate_memory->gate->max_k() == loop_k;
    // The union's gate needs verify costs: timed on the prompt's own last rows
    // when it is long enough, else on dummy rows after it (forward_timing.h).
    const bool time_costs =
        speculate && spec.uses_union() && !spec.tree.is_tree() && !cost && !remembered;
    std::vector<double> times;
    if (time_costs) times = prefill_timed(target, prompt_ids, loop_k + 1, logits.data());
    else target.prefill(prompt_ids, logits.data());
    if (spec.drafter) {
      proposer.emplace(*spec.drafter, target, spec.p_min, draft_k, opt.sampler, spec.mode);
      if (spec.gate_memory) proposer->use_call_costs(spec.gate_memory->module_calls);
      if (spec.tree.is_tree()) {
        TreeChooser* chooser = spec.tree_chooser;
        if (spec.tree.kind == TreeOptions::Kind::Auto && !chooser) {
          chooser = &own_chooser.emplace(make_tree_chooser(m, spec.tree, draft_k, pool));
        }
        proposer->set_tree(spec.tree, chooser);
      }
      proposer->prefill(prompt_ids);
    }
    if (time_costs) {
      cost = CostModel::from_times(times.empty() ? session_forward_times(target, loop_k + 1)
                                                 : times);
    }
  }
  res.timings.n_prompt = int(prompt_ids.size());
  res.timings.prompt_s = std::chrono::duration<double>(Clock::now() - t0).count();

  std::vector<int32_t> committed = prompt_ids;
  // The token sampled after a sequence of n tokens has position n (sampler.h).
  auto next_pos = [&] { return int64_t(committed.size()); };
  if (!sink.done() && sink.push(sampler.sample(logits.data(), logits.size(), next_pos()))) {
    committed.push_back(sink.tokens().back());
    if (speculate) {
      TargetVerifier verifier(target, opt.sampler, spec.mode);
      std::vector<CycleTrace>* trace = spec.record_trace ? &res.trace : nullptr;
      if (spec.uses_union() && !spec.tree.is_tree()) {
        GateOptions g = spec.gate_options;
        g.enabled = spec.gate;
        MtpProposer* mtp = proposer ? &*proposer : nullptr;
        std::optional<UnionProposer> u;
        if (spec.gate_memory) {
          SourceGate& shared = spec.gate_memory->get(
              union_sources, loop_k, cost ? *cost : spec.gate_memory->gate->cost(), g);
          u.emplace(std::move(lookups), mtp, draft_k, loop_k, shared, &*res.stats);
        } else {
          u.emplace(std::move(lookups), mtp, draft_k, loop_k, *cost, g, &*res.stats);
        }
        speculative_loop(verifier, *u, committed, sink, loop_k, ctx, *res.stats, trace);
      } else {
        speculative_loop(verifier, *proposer, committed, sink, draft_k, ctx, *res.stats, trace);
      }
      if (proposer) {
        res.stats->time_module_s = proposer->module_seconds();
        res.stats->tree_shapes = proposer->shapes_used();
      }
    } else {
      while (!sink.done()) {
        if (int(committed.size()) >= ctx) {
          sink.finish("context");
          break;
        }
        target.forward({&committed.back(), 1}, logits.data());
        if (!sink.push(sampler.sample(logits.data(), logits.size(), next_pos()))) break;
        committed.push_back(sink.tokens().back());
      }
    }
  }
  sink.close();
  res.token_ids = sink.tokens();
  res.text = sink.text();
  res.finish_reason = sink.finish_reason();
  res.timings.n_gen = int(res.token_ids.size());
  res.timings.gen_s = sink.generation_seconds();
  return res;
}

}  // namespace mtp::speculative
