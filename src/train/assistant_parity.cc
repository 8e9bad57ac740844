#include "train/assistant_parity.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "drafter/assistant_runner.h"
#include "train/parity.h"

namespace mtp::train {

AssistantParity assistant_parity(const model::Model& target, const drafter::Gemma4Assistant& engine,
                                 const TorchAssistant& twin, const std::vector<torch::Tensor>& params,
                                 const std::vector<int32_t>& tokens, int K, int step_shift) {
  const int R = int(tokens.size());
  if (R < 3 || K < 1) fail<InputError>("assistant parity: {} tokens and {} steps (need >= 3, >= 1)", R, K);
  // Engine chain i is N = i + 2 committed tokens: the twin's row t = i + 1.
  const auto eng = drafter::assistant_teacher_forced(target, engine, tokens, 2, K, nullptr, true);
  std::vector<std::vector<int32_t>> feed(size_t(K - 1), std::vector<int32_t>(size_t(R), 0));
  for (size_t i = 0; i < eng.size(); ++i) {
    for (int j = 1; j < K; ++j) feed[size_t(j - 1)][i + 1] = eng[i][size_t(j - 1)].token;
  }
  const AssistantCapture cap = engine_capture(target, engine.config(), tokens, torch::kCPU);
  const std::vector<torch::Tensor> logits = twin.chain(params, tokens, cap, feed, step_shift);
  const drafter::AssistantConfig& a = engine.config();
  const double n = double(std::max({2 * a.backbone, a.block.ffn, a.block.n_heads * a.block.head_dim,
                                    a.block.d_model, R}));
  const size_t V = size_t(a.block.vocab);
  AssistantParity rep;
  rep.passed = true;
  for (int j = 0; j < K; ++j) {
    const torch::Tensor host = logits[size_t(j)].squeeze(0).contiguous().to(torch::kCPU);
    const float* L = host.data_ptr<float>();  // [R, V]
    AssistantStepParity s;
    for (const auto& chain : eng) {
      for (float v : chain[size_t(j)].logits) s.scale = std::max(s.scale, double(std::abs(v)));
    }
    s.tol = fp32_tolerance(j + 2, n, s.scale);
    std::vector<float> mine;
    for (size_t i = 0; i < eng.size(); ++i) {
      const drafter::AssistantDraft& e = eng[i][size_t(j)];
      const float* row = L + (i + 1) * V;
      mine.clear();
      for (size_t k = 0; k < e.logits.size(); ++k) {
        const float x = row[e.ids.empty() ? k : size_t(e.ids[k])];
        s.max_dlogit = std::max(s.max_dlogit, std::abs(double(x) - double(e.logits[k])));
        mine.push_back(x);
      }
      int32_t arg = 0;
      double margin = 0;
      top2(mine.data(), mine.size(), arg, margin);
      const int32_t tok = e.ids.empty() ? arg : e.ids[size_t(arg)];
      ++s.rows;
      if (margin > 2 * s.tol) {
        ++s.decided;
        s.agreed += tok == e.token;
      } else {
        ++s.near_ties;
      }
    }
    s.passed = s.rows > 0 && std::isfinite(s.max_dlogit) && s.max_dlogit <= s.tol &&
               s.agreed == s.decided;
    rep.passed = rep.passed && s.passed;
    rep.steps.push_back(s);
  }
  return rep;
}

std::string AssistantParity::text() const {
  std::string s = "assistant parity: libtorch chain vs the engine's live-chain inputs\n";
  s += fmt::format("{:>5} {:>11} {:>11} {:>17} {:>10}  {}\n", "step", "max|dlogit|", "tol",
                   "argmax agree", "near-ties", "result");
  for (size_t j = 0; j < steps.size(); ++j) {
    const AssistantStepParity& p = steps[j];
    s += fmt::format("{:>5} {:>11.3e} {:>11.3e} {:>10}/{:<6} {:>10}  {}\n", j + 1, p.max_dlogit,
                     p.tol, p.agreed, p.decided, p.near_ties, p.passed ? "ok" : "FAIL");
  }
  s += passed ? "assistant parity: PASS\n" : "assistant parity: FAIL\n";
  return s;
}

nlohmann::json AssistantParity::to_json() const {
  nlohmann::json st = nlohmann::json::array();
  for (const AssistantStepParity& p : steps) {
    st.push_back({{"max_abs_dlogit", p.max_dlogit}, {"tol", p.tol}, {"scale", p.scale},
                  {"rows", p.rows}, {"decided", p.decided}, {"agreed", p.agreed},
                  {"near_ties", p.near_ties}, {"passed", p.passed}});
  }
  return {{"passed", passed}, {"steps", st}};
}

}  // namespace mtp::train
