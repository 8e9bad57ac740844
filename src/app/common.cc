#include "app/common.h"

#include <fmt/core.h>

#include <algorithm>
#include <functional>
#include <map>
#include <utility>

#include "core/error.h"
#include "core/mapped_file.h"
#include "core/setting.h"
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

PromptBound prompt_bound(const Session& s, int ctx) {
  PromptBound b;
  const int max = s.model->config().max_position;
  b.ctx = ctx > 0 && (max <= 0 || ctx < max) ? ctx : max;
  b.max_bytes = io::max_prompt_bytes(*s.tokenizer, b.ctx);
  return b;
}

std::string read_prompt_file(const std::string& path, const PromptBound& b) {
  return read_file(path, b.max_bytes,
                   fmt::format("more than a context of {} tokens holds with this tokenizer: "
                               "shorten it or raise --ctx", b.ctx));
}

std::vector<int32_t> encode_prompt(const Session& s, const std::string& text, bool add_special,
                                   const PromptBound& b, const std::string& what) {
  io::check_prompt_bytes(text.size(), b.max_bytes, b.ctx, what);
  return s.tokenizer->encode(text, add_special);
}

Session open_session(const ModelArgs& a) {
  Session s;
  model::LoadOptions lo;
  lo.weights = parse_hold(a.weights);
  lo.tied_head = model::parse_tied_head(a.tied_head);
  model::LoadedModel lm = model::load_model(a.model, lo);
  std::string tok_path = a.tokenizer.empty() ? lm.tokenizer : a.tokenizer;
  if (tok_path.empty()) {
    fail<IoError>("no tokenizer found beside '{}'; pass --tokenizer PATH", a.model);
  }
  s.model = std::make_unique<model::Model>(std::move(lm));
  // Its errors are about the tokenizer setting, given or not: the one beside
  // the model (a GGUF's own metadata) is what --tokenizer replaces.
  about_setting("tokenizer", [&] {
    s.tokenizer = io::load_tokenizer(tok_path);
    io::check_tokenizer_covers(s.model->config().vocab, *s.tokenizer, tok_path);
  });
  s.pool = std::make_unique<ThreadPool>(resolve_threads(a.threads));
  return s;
}

Session open_random_session(const std::string& preset, const ModelArgs& a, uint64_t seed) {
  Session s;
  s.model = std::make_unique<model::Model>(
      model::random_model(model::random_model_preset(preset),
                          model::resolve_hold(parse_hold(a.weights), DType::F32), seed,
                          model::parse_tied_head(a.tied_head)));
  s.pool = std::make_unique<ThreadPool>(resolve_threads(a.threads));
  return s;
}

// The weight matrices one decode step streams (the token tables, the
// per-layer one included, only give one row each, so they are not among them).
std::vector<const kernels::PackedMatrix*> streamed_matrices(const model::Model& m) {
  const auto& w = m.weights();
  std::vector<const kernels::PackedMatrix*> out{&w.lm_head};
  if (!w.ple_model_proj.empty()) out.push_back(&w.ple_model_proj);
  for (const auto& l : w.layers) {
    out.insert(out.end(), {&l.wqkv, &l.wo, &l.w_gate_up, &l.w_down});
    if (!l.w_lin_in.empty()) out.insert(out.end(), {&l.w_lin_in, &l.w_lin_out});
    if (!l.w_ple_gate.empty()) out.insert(out.end(), {&l.w_ple_gate, &l.w_ple_proj});
  }
  return out;
}

// The weight types the matrices are held in, by share of their bytes, e.g.
// "q4_k 79%, q6_k 21%": a GGUF file's quantized tensors are held as stored
// whatever --weights says (it applies to float tensors), so print what runs.
// A composite matrix (Q4_K_M's Q4_K q/k with Q6_K v) counts each part.
std::string held_types(const model::Model& m) {
  std::map<std::string, double> by;
  double all = 0;
  std::function<void(const kernels::PackedMatrix&)> add = [&](const kernels::PackedMatrix& x) {
    if (x.is_composite()) {
      for (const auto& p : x.parts()) add(p);
      return;
    }
    by[kernels::weight_type_name(x.hold())] += double(x.bytes());
    all += double(x.bytes());
  };
  for (const auto* x : streamed_matrices(m)) add(*x);
  std::vector<std::pair<double, std::string>> v;
  for (const auto& [name, b] : by) v.emplace_back(-b, name);
  std::sort(v.begin(), v.end());
  std::string out;
  for (const auto& [nb, name] : v) out += fmt::format("{}{} {:.0f}%", out.empty() ? "" : ", ", name, -nb / all * 100);
  return out;
}

}  // namespace mtp::app
