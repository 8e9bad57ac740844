#include "spec_fixture.h"

#include "model/fingerprint.h"
#include "model/loader.h"

namespace mtp::test {

Target load_target(const std::string& path) {
  model::LoadedModel lm = model::load_model(path, {});
  Target t;
  t.fingerprint = model::target_fingerprint(lm, /*use_cache=*/false);
  t.model = std::make_unique<model::Model>(std::move(lm));
  return t;
}

drafter::Drafter random_drafter(const Target& t, int K, uint64_t seed) {
  drafter::DrafterConfig dc;
  dc.K = K;
  return drafter::Drafter::from_tensors(t.model->config(), t.fingerprint, dc,
                                        drafter::random_drafter_tensors(t.model->config(), dc, seed),
                                        {{"kind", "test"}}, DType::F32, kernels::WeightType::F32);
}

}  // namespace mtp::test
