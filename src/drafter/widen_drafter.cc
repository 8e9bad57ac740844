#include "drafter/widen_drafter.h"

#include <map>
#include <vector>

#include "core/error.h"
#include "core/json.h"
#include "drafter/drafter.h"

namespace mtp::drafter {

namespace {
std::string prefix(int k) { return "mtp." + std::to_string(k) + "."; }
}  // namespace

void widen_drafter(const std::string& src_path, const std::string& src_fingerprint,
                   const model::WidenPlan& plan, const DrafterStorage& stored,
                   const std::string& dst_fingerprint,
                   const std::string& out_path) {
  // F32 hold: every packed value is the stored one (a BF16 file is held BF16,
  // whose values are exact in fp32 too).
  widen_drafter(Drafter::load(src_path, plan.src, src_fingerprint, kernels::WeightType::F32),
                src_path, src_fingerprint, plan, stored, dst_fingerprint, out_path);
}

void widen_drafter(const Drafter& src, const std::string& src_path,
                   const std::string& src_fingerprint, const model::WidenPlan& plan,
                   const DrafterStorage& stored, const std::string& dst_fingerprint,
                   const std::string& out_path) {
  const size_t d = size_t(plan.src.d_model), d2 = size_t(plan.dst.d_model);
  std::map<std::string, std::vector<float>> out;
  std::vector<float> row(2 * d);
  for (int k = 0; k < src.config().K; ++k) {
    const MtpModule& m = src.modules()[size_t(k)];
    out[prefix(k) + "enorm.weight"] = model::widen_norm(plan, m.enorm);
    out[prefix(k) + "hnorm.weight"] = model::widen_norm(plan, m.hnorm);
    // eh_proj [d', 2d']: input [enorm(e) (d'); hnorm(h) (d')].
    std::vector<float> eh(d2 * 2 * d2, 0.f);
    for (size_t r = 0; r < d; ++r) {
      m.eh_proj.row_f32(r, row.data());
      float* dst = eh.data() + r * 2 * d2;
      for (size_t i = 0; i < d; ++i) {
        dst[i] = row[i];
        dst[d2 + i] = row[d + i];
      }
    }
    out[prefix(k) + "eh_proj.weight"] = std::move(eh);
    model::HostTensors block;
    model::widen_layer(plan, &m.block, prefix(k) + "block.", block);
    for (auto& [name, t] : block) {
      size_t n = 1;
      for (auto s : t.shape) n *= size_t(s);
      std::vector<float> v = t.values;
      if (v.empty()) v.assign(n, 0.f);
      out[name] = std::move(v);
    }
  }
  nlohmann::json training;
  auto it = src.metadata().find("training");
  if (it != src.metadata().end()) {
    try {
      training["original"] = parse_json(it->second, "drafter '" + src_path + "': training");
    } catch (const std::exception&) {
      training["original"] = it->second;
    }
  }
  training["widened"] = {{"from", src_path},
                         {"from_target", src_fingerprint},
                         {"exact", plan.exact()},
                         {"inexact", plan.inexact}};
  write_drafter(out_path, plan.dst, dst_fingerprint, src.config(), out, training, stored,
                /*vectors_f32=*/true);
}

}  // namespace mtp::drafter
