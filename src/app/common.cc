#include "app/common.h"

#include "core/error.h"
#include "model/loader.h"
#include "model/random_model.h"

namespace mtp::app {

kernels::WeightType parse_weight_type(const std::string& s) { return kernels::parse_weight_type(s); }

model::Hold parse_hold(const std::string& s) {
  if (s == "auto") return std::nullopt;
  return parse_weight_type(s);
}

kernels::WeightType drafter_weight_type(const std::string& s) {
  const kernels::WeightType t = model::resolve_hold(parse_hold(s), DType::F32);
  return kernels::weight_type_quantized(t) ? kernels::WeightType::BF16 : t;
}

Session open_session(const ModelArgs& a) {
  Session s;
  model::LoadOptions lo;
  lo.weights = parse_hold(a.weights);
  model::LoadedModel lm = model::load_model(a.model, lo);
  std::string tok_path = a.tokenizer.empty() ? lm.tokenizer : a.tokenizer;
  if (tok_path.empty()) {
    fail<IoError>("no tokenizer found beside '{}'; pass --tokenizer PATH", a.model);
  }
  s.model = std::make_unique<model::Model>(std::move(lm));
  s.tokenizer = io::load_tokenizer(tok_path);
  io::check_tokenizer_covers(s.model->config().vocab, *s.tokenizer, tok_path);
  s.pool = std::make_unique<ThreadPool>(resolve_threads(a.threads));
  return s;
}

Session open_random_session(const std::string& preset, const ModelArgs& a, uint64_t seed) {
  Session s;
  s.model = std::make_unique<model::Model>(
      model::random_model(model::random_model_preset(preset),
                          model::resolve_hold(parse_hold(a.weights), DType::F32), seed));
  s.pool = std::make_unique<ThreadPool>(resolve_threads(a.threads));
  return s;
}

}  // namespace mtp::app
