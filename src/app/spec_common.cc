#include "app/spec_common.h"

#include <fmt/core.h>

#include <filesystem>

#include "core/error.h"
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
      drafter::Drafter::load(path, m.loaded(), parse_weight_type(a.weights), d.target_mismatch));
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
}

}  // namespace mtp::app
