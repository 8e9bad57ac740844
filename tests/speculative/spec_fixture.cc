#include "spec_fixture.h"

#include <map>

#include "model/fingerprint.h"
#include "model/loader.h"

namespace mtp::test {

Target load_target(const std::string& path, kernels::WeightType wt) {
  model::LoadOptions o;
  o.weights = wt;
  model::LoadedModel lm = model::load_model(path, o);
  Target t;
  t.fingerprint = model::target_fingerprint(lm, /*use_cache=*/false);
  t.model = std::make_unique<model::Model>(std::move(lm));
  return t;
}

drafter::Drafter random_drafter(const Target& t, int K, uint64_t seed, int window,
                                std::vector<int32_t> draft_vocab, DType stored) {
  drafter::DrafterConfig dc;
  dc.K = K;
  dc.window = window;
  dc.draft_vocab = std::move(draft_vocab);
  return drafter::Drafter::from_tensors(t.model->config(), t.fingerprint, dc,
                                        drafter::random_drafter_tensors(t.model->config(), dc, seed),
                                        {{"kind", "test"}}, stored, kernels::WeightType::F32);
}

speculative::GenerateResult plain_generate(const Target& t, const speculative::Request& r,
                                           int ctx) {
  speculative::GenerateOptions go = options_of(r);
  go.ctx = ctx;
  return speculative::generate(*t.model, nullptr, r.prompt, go, nullptr, nullptr,
                               speculative::SpecOptions{});
}

SchedulerRun run_requests(speculative::Scheduler& s, const std::vector<speculative::Request>& rs) {
  std::map<uint64_t, size_t> index;
  for (size_t i = 0; i < rs.size(); ++i) index[s.submit(rs[i])] = i;
  SchedulerRun out;
  out.results.resize(rs.size());
  auto collect = [&] {
    for (const speculative::Event& e : s.take_events()) {
      if (e.kind == speculative::Event::Kind::Finish) out.results[index.at(e.id)] = e.result;
      else if (e.drafted) ++out.drafted_tokens;
    }
  };
  while (s.step()) collect();
  collect();
  return out;
}

}  // namespace mtp::test
