#include "speculative/scheduler/generate.h"

#include <algorithm>
#include <memory>

#include "core/error.h"

namespace mtp::speculative {

SchedulerOptions engine_options(const model::ModelConfig& c, const GenerateOptions& opt,
                                const SpecOptions& spec, int64_t needed) {
  SchedulerOptions so;
  so.parallel = 1;
  so.ctx = resolve_ctx(c, opt.ctx, needed);
  so.draft_k = spec.draft_k;
  so.sources = spec.sources;
  so.lookup = spec.lookup;
  so.history = spec.history;
  so.assistant = spec.assistant;
  so.adaptive = spec.gate;
  so.tree = spec.tree;
  so.cost = spec.cost;
  so.trace = spec.trace;
  return so;
}

namespace {
Request request_of(const std::vector<int32_t>& prompt_ids, const GenerateOptions& opt,
                   const TextCallback& on_text, const SpecOptions& spec) {
  Request r;
  r.prompt = prompt_ids;
  r.n_new = opt.n_new;
  r.sampler = opt.sampler;
  r.stop = opt.stop;
  r.draft_k = spec.draft_k;
  r.p_min = spec.p_min;
  r.mode = spec.mode;
  r.on_text = on_text;
  r.on_token = opt.on_token;
  r.record_trace = spec.record_trace;
  return r;
}
}  // namespace

GenerateResult generate(Scheduler& engine, const std::vector<int32_t>& prompt_ids,
                        const GenerateOptions& opt, const TextCallback& on_text,
                        const SpecOptions& spec) {
  MTP_CHECK(engine.idle(), "generate: the engine is running other sequences");
  if (opt.n_new < 0) fail<InputError>("the number of new tokens must be >= 0, got {}", opt.n_new);
  if (prompt_ids.empty()) {
    fail<InputError>("the prompt is empty and the tokenizer adds no BOS token: nothing to "
                     "condition on");
  }
  const uint64_t id = engine.submit(request_of(prompt_ids, opt, on_text, spec));
  std::shared_ptr<const SequenceResult> done;
  while (engine.step()) {
    for (const Event& e : engine.take_events()) {
      if (e.kind == Event::Kind::Finish && e.id == id) done = e.result;
    }
  }
  for (const Event& e : engine.take_events()) {
    if (e.kind == Event::Kind::Finish && e.id == id) done = e.result;
  }
  MTP_CHECK(done != nullptr, "generate: sequence {} ended without its result", id);
  GenerateResult res;
  res.prompt_ids = done->prompt_ids;
  res.token_ids = done->token_ids;
  res.text = done->text;
  res.finish_reason = done->finish_reason;
  res.timings = done->timings;
  res.stats = done->stats;
  res.trace = done->trace;
  return res;
}

GenerateResult generate(const model::Model& m, const io::Tokenizer* tok,
                        const std::vector<int32_t>& prompt_ids, const GenerateOptions& opt,
                        ThreadPool* pool, const TextCallback& on_text, const SpecOptions& spec) {
  if (opt.n_new < 0) fail<InputError>("the number of new tokens must be >= 0, got {}", opt.n_new);
  if (spec.tree.is_tree() && !spec.drafter && !spec.assistant) {
    fail<InputError>("draft trees are drafted by an MTP drafter or Gemma 4's assistant; neither "
                     "was given");
  }
  const int longest = std::max({spec.drafter ? spec.drafter->config().K : 0,
                                spec.sources.empty() ? 0 : spec.lookup.max_draft, 1});
  const int64_t needed = int64_t(prompt_ids.size()) + opt.n_new + longest + 1;
  Scheduler engine(m, tok, spec.drafter, engine_options(m.config(), opt, spec, needed), pool);
  return generate(engine, prompt_ids, opt, on_text, spec);
}

}  // namespace mtp::speculative
