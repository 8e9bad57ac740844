#include "spec_fixture.h"

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

}  // namespace mtp::test
