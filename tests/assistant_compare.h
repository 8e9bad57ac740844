// Gemma 4 assistant drafts (drafter::AssistantDraft chains: token, the
// selected ids — empty for the whole vocabulary — and their logits) against
// transformers' own (tests/drafter/assistant_transformers.py's "chains"),
// forward by forward. Header-only: test_drafter and test_train both use it
// and the shared test support links the model layer only.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <vector>

#include "model_util.h"

namespace mtp::test {

// max |ours - transformers| / the fp32 tolerance over every compared score;
// the centroid head's selected set must be transformers' unmasked one, and
// the chosen tokens equal wherever the top two are apart by more than 4×
// the tolerance (a chain is compared up to its first near tie). *tokens:
// the drafts compared.
template <class Draft>
double compare_with_transformers(const nlohmann::json& hf,
                                 const std::vector<std::vector<Draft>>& eng, long* tokens) {
  EXPECT_EQ(hf.size(), eng.size());
  double worst = 0;
  *tokens = 0;
  for (size_t i = 0; i < hf.size() && i < eng.size(); ++i) {
    for (size_t j = 0; j < eng[i].size(); ++j) {
      const std::vector<double> h = hf[i][j].at("logits").template get<std::vector<double>>();
      const Draft& e = eng[i][j];
      std::vector<int32_t> ids = e.ids;
      if (ids.empty()) {
        for (size_t k = 0; k < h.size(); ++k) ids.push_back(int32_t(k));
      } else {  // transformers' mask value: below every selected score
        const double mask = *std::min_element(h.begin(), h.end());
        std::vector<int32_t> selected;
        for (size_t k = 0; k < h.size(); ++k) {
          if (h[k] != mask) selected.push_back(int32_t(k));
        }
        EXPECT_EQ(selected, ids) << "chain " << i << " step " << j + 1;
        if (selected != ids) return INFINITY;
      }
      double scale = 0;
      for (int32_t id : ids) scale = std::max(scale, std::abs(h[size_t(id)]));
      const double tol = fp32_forward_tolerance(256, 9, scale);
      std::vector<double> sel;
      for (size_t k = 0; k < ids.size(); ++k) {
        worst = std::max(worst, std::abs(double(e.logits[k]) - h[size_t(ids[k])]) / tol);
        sel.push_back(h[size_t(ids[k])]);
      }
      std::nth_element(sel.begin(), sel.begin() + 1, sel.end(), std::greater<>());
      if (sel[0] - sel[1] <= 4 * tol) break;  // a near tie: the next inputs may differ
      EXPECT_EQ(e.token, hf[i][j].at("token").template get<int32_t>()) << "chain " << i;
      if (e.token != hf[i][j].at("token").template get<int32_t>()) break;
      ++*tokens;
    }
  }
  return worst;
}

}  // namespace mtp::test
