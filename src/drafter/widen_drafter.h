// Widening a drafter together with its target (issue 13, docs/WIDEN.md).
//
// Each module is widened like one target layer (model::widen_layer, same
// plan), its enorm/hnorm like the target's d-dim norms, and eh_proj
// [d, 2d] -> [d', 2d'] with output rows and the embedding half's columns at
// their indices and the hidden half's columns moved from d + i to d' + i
// (lane-preserving when d' - d is a multiple of 16, which every exact plan
// gives). The configuration (K, window, hidden dtype, draft vocabulary) is
// kept. The widened file names the widened target's fingerprint.
#pragma once
#include <string>

#include "core/dtype.h"
#include "drafter/drafter.h"
#include "model/widen.h"

namespace mtp::drafter {

// Loads the drafter at `src_path` (refused unless made for `src_fingerprint`,
// the source target's), widens it by `plan` and writes it to `out_path`:
// matrices stored as `stored` (F32, BF16 or ggml blocks), norms in F32, metadata naming
// `dst_fingerprint`; `training` records the original's summary and the plan.
void widen_drafter(const std::string& src_path, const std::string& src_fingerprint,
                   const model::WidenPlan& plan, const DrafterStorage& stored,
                   const std::string& dst_fingerprint,
                   const std::string& out_path);
// The same for a drafter already loaded (held F32, of the source target; so
// a caller can check it before it writes anything): `src_path` is recorded.
void widen_drafter(const Drafter& src, const std::string& src_path,
                   const std::string& src_fingerprint, const model::WidenPlan& plan,
                   const DrafterStorage& stored, const std::string& dst_fingerprint,
                   const std::string& out_path);

}  // namespace mtp::drafter
