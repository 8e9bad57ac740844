#include "train/parity.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <random>

#include "core/error.h"
#include "core/json.h"
#include "drafter/module_rows.h"
#include "drafter/mtp_runner.h"
#include "kernels/ops.h"
#include "train/data.h"
#include "train/torch_mtp.h"

namespace mtp::train {

// ---- Tolerances ---------------------------------------------------------------
// Both sides evaluate the same fp32 expression; they differ only in summation
// order (OpenBLAS vs the engine's fixed-order SIMD kernels) and in exp/tanh/
// rsqrt approximations (≤ 4 ulp). With unit roundoff u = 2^-24, a length-n dot
// product summed in two orders differs by ≤ γ_n·Σ|a_i·b_i| in the worst case and
// by about √n·u·Σ|a_i·b_i| in practice (rounding errors behave as a random walk:
// Higham & Mary, SIAM J. Sci. Comput. 2019). A module is a chain of ~8 such
// reductions (fusion, q/k/v, scores, softmax-weighted sum, o_proj, gate/up, down,
// head) separated by RMSNorms, which keep errors relative to the activations'
// scale. So for module k (whose input already carries module k−1's error):
//   tol_h(k)     = C·(k+1)·u·√n · max|h_k|
//   tol_logit(k) = C·(k+2)·u·√n · max_t‖rmsnorm(h_k[t])‖ · max_v‖W_v‖
// where n = the longest reduction in the module (2d, H·hd, ffn, or the rows
// attended), ‖W_v‖ the lm_head row norms (|logit_v| ≤ ‖W_v‖·‖x̂‖, and the
// soft-cap only shrinks differences), and C = 64 = 8 stages × 8 headroom for
// amplification through norms and softmax. Measured diffs on random and
// trained drafters sit 1–3 orders of magnitude below; a single perturbed
// weight lands orders of magnitude above.
// An argmax can flip only if the top-2 margin is below |Δa| + |Δb| ≤ 2·tol_logit:
// positions with a larger torch margin must agree exactly; the rest are near-ties.
double fp32_tolerance(double stages, double n, double scale) {
  constexpr double kU = 5.9604644775390625e-8;  // 2^-24
  constexpr double kC = 64.0;
  return kC * stages * kU * std::sqrt(n) * scale;
}

void top2(const float* x, size_t n, int32_t& arg, double& margin) {
  size_t a = kernels::argmax(x, n);  // ties: lowest index
  float second = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < n; ++i) {
    if (i != a && x[i] > second) second = x[i];
  }
  arg = int32_t(a);
  margin = double(x[a]) - double(second);
}

namespace {

struct Input {
  std::string source;
  std::vector<int32_t> tokens;  // [T]
  std::vector<float> capture;   // [T, d]
};

struct Row {
  int32_t torch_arg, engine_arg;
  double margin;
};

struct ModuleAcc {
  double max_dh = 0, max_dlogit = 0, ref_h = 0, ref_xnorm = 0;
  long n = 0;
  std::vector<Row> rows;
  std::vector<int32_t> engine_argmax;
};

}  // namespace

std::optional<model::Model> with_float_head(const model::Model& target) {
  const kernels::PackedMatrix& h = target.weights().lm_head;
  if (!h.is_composite() && !kernels::weight_type_quantized(h.hold())) return std::nullopt;
  model::LoadedModel lm = target.loaded();  // the matrices' storage is shared, not copied
  lm.weights.lm_head = drafter::float_matrix(h);  // [vocab, d]
  return model::Model(std::move(lm));
}

ParityReport run_parity(const model::Model& target_as_loaded, const drafter::Drafter& engine,
                        const std::map<std::string, std::vector<float>>& torch_tensors,
                        const ParityOptions& o, ThreadPool* pool) {
  torch::NoGradGuard ng;
  const std::optional<model::Model> float_head = with_float_head(target_as_loaded);
  const model::Model& target = float_head ? *float_head : target_as_loaded;
  if (o.threads > 0) set_threads(o.threads);
  const model::ModelConfig& c = target.config();
  const size_t d = size_t(c.d_model), V = size_t(c.vocab);
  const int K = engine.config().K;
  TorchMtp tm(target, engine.config(), torch::kCPU);
  const torch::Tensor flat_params = tm.to_flat(tm.layout().flatten(torch_tensors));
  const std::vector<torch::Tensor> flat = tm.views(flat_params, false);

  // ---- inputs ----
  std::vector<Input> inputs;
  ParityReport rep;
  std::mt19937_64 rng(o.seed);
  std::normal_distribution<float> normal(0.f, o.hidden_scale);
  for (int i = 0; i < o.random_sequences; ++i) {
    Input in;
    in.source = "random";
    const int T = std::max(3, o.random_len);
    for (int t = 0; t < T; ++t) in.tokens.push_back(int32_t(rng() % V));
    in.capture.resize(size_t(T) * d);
    for (auto& x : in.capture) x = normal(rng);
    inputs.push_back(std::move(in));
  }
  if (o.random_sequences > 0) {
    rep.inputs.push_back(fmt::format("random x{} ({} positions)", o.random_sequences,
                                     std::max(3, o.random_len)));
  }
  if ((o.data || !o.shards_dir.empty()) && o.shard_sequences > 0) {
    std::unique_ptr<ShardSet> own;
    if (!o.data) {
      std::string fp;
      try {
        const std::string where = "drafter '" + engine.path() + "': __metadata__['target']";
        fp = json_get<std::string>(parse_json(engine.metadata().at("target"), where),
                                   "fingerprint", where);
      } catch (const std::exception&) {
        fail<FormatError>("drafter '{}' records no target fingerprint", engine.path());
      }
      own = std::make_unique<ShardSet>(o.shards_dir, fp, c.d_model);
    }
    const TrainData& shards = o.data ? *o.data : *own;
    const Split sp = shards.size(Split::Heldout) > 0 ? Split::Heldout : Split::Train;
    const size_t n = std::min(shards.size(sp), size_t(o.shard_sequences));
    for (size_t i = 0; i < n; ++i) {
      Batch b = shards.gather(sp, {i});
      const int T = std::min(b.L, o.shard_len);
      if (T < 3) continue;
      Input in;
      in.source = o.data ? "online" : "shards";
      in.tokens.assign(b.tokens.begin(), b.tokens.begin() + T);
      in.capture.assign(b.hidden.begin(), b.hidden.begin() + size_t(T) * d);
      inputs.push_back(std::move(in));
    }
    rep.inputs.push_back(fmt::format("{} {} sequences of {} (≤ {} positions)", n,
                                     sp == Split::Heldout ? "held-out" : "training",
                                     o.data ? std::string("the online capture") : o.shards_dir,
                                     o.shard_len));
  }
  if (inputs.empty()) fail<InputError>("parity: no inputs (random sequences 0 and no shards)");

  // Largest lm_head row norm (the logits' scale), from the engine's own rows.
  double max_wnorm = 0;
  {
    std::vector<float> row(d);
    for (size_t v = 0; v < V; ++v) {
      target.weights().lm_head.row_f32(v, row.data());
      double s = 0;
      for (float x : row) s += double(x) * x;
      max_wnorm = std::max(max_wnorm, std::sqrt(s));
    }
  }

  std::vector<ModuleAcc> acc(static_cast<size_t>(K));
  for (const Input& in : inputs) {
    const int T = int(in.tokens.size());
    drafter::MtpRunner runner(target, engine, 1, T);
    const int q_max = runner.kv(0).q_max();
    torch::Tensor h_prev_t;          // torch h_{k-1} [1, R, d]
    std::vector<float> h_prev_e;     // engine h_{k-1} [R, d]
    for (int k = 0; k < K; ++k) {
      const int R = drafter::module_row_count(T, k);  // rows t = 0..T-2-k
      if (R <= 0) break;
      // torch
      const auto first = in.tokens.begin() + drafter::module_input_index(k, 0);
      std::vector<int32_t> toks(first, first + R);
      torch::Tensor h_in =
          k == 0 ? torch::from_blob(const_cast<float*>(in.capture.data()),
                                    {1, R, int64_t(d)}, torch::kFloat32)
                 : h_prev_t.narrow(1, 0, R);
      torch::Tensor h_t = tm.module_forward(k, flat, h_in, tm.embed(toks).view({1, R, int64_t(d)}));
      torch::Tensor lg_t = tm.logits(h_t[0]).contiguous();
      torch::Tensor xn = h_t[0] * torch::rsqrt(h_t[0].pow(2).mean(-1, true) + c.norm_eps) *
                         torch::from_blob(const_cast<float*>(target.weights().final_norm.data()),
                                          {int64_t(d)}, torch::kFloat32);
      // engine (rows in chunks of q_max, like teacher_forced)
      const size_t W = runner.logits_width();  // the draft vocabulary (or V)
      std::vector<float> h_e(size_t(R) * d), lg_e(size_t(R) * W);
      drafter::for_each_row_chunk(0, R, q_max, [&](int t0, int t1) {
        std::vector<model::Row> rows;
        for (int t = t0; t < t1; ++t) {
          rows.push_back({0, t, in.tokens[size_t(drafter::module_input_index(k, t))]});
        }
        const float* src = k == 0 ? in.capture.data() : h_prev_e.data();
        runner.forward(k, rows, src + size_t(t0) * d, h_e.data() + size_t(t0) * d,
                       lg_e.data() + size_t(t0) * W, nullptr, pool);
      });
      // compare
      ModuleAcc& a = acc[size_t(k)];
      const float* ht = h_t.contiguous().data_ptr<float>();
      const float* lt = lg_t.data_ptr<float>();
      for (size_t i = 0; i < size_t(R) * d; ++i) {
        a.max_dh = std::max(a.max_dh, std::fabs(double(h_e[i]) - ht[i]));
        a.ref_h = std::max(a.ref_h, std::fabs(double(ht[i])));
      }
      a.ref_xnorm = std::max(a.ref_xnorm, xn.pow(2).sum(-1).sqrt().max().item<double>());
      std::vector<float> lt_w(W);  // torch's logits of the draft vocabulary
      for (size_t r = 0; r < size_t(R); ++r) {
        for (size_t i = 0; i < W; ++i) {
          lt_w[i] = lt[r * V + size_t(runner.token_of(i))];
          a.max_dlogit = std::max(a.max_dlogit, std::fabs(double(lg_e[r * W + i]) - lt_w[i]));
        }
        Row row{};
        top2(lt_w.data(), W, row.torch_arg, row.margin);
        row.torch_arg = runner.token_of(size_t(row.torch_arg));
        row.engine_arg = runner.token_of(kernels::argmax(lg_e.data() + r * W, W));
        a.rows.push_back(row);
        a.engine_argmax.push_back(row.engine_arg);
      }
      // n: the longest reduction of this module's sums.
      a.n = std::max<long>({a.n, 2 * long(d), long(c.n_heads) * c.head_dim, long(c.ffn), long(R)});
      h_prev_t = h_t;
      h_prev_e = std::move(h_e);
    }
  }

  rep.passed = true;
  for (int k = 0; k < K; ++k) {
    const ModuleAcc& a = acc[size_t(k)];
    ModuleParity m;
    m.max_dh = a.max_dh;
    m.max_dlogit = a.max_dlogit;
    m.ref_h = a.ref_h;
    m.ref_logit = a.ref_xnorm * max_wnorm;
    m.tol_h = fp32_tolerance(k + 1, double(a.n), m.ref_h);
    m.tol_logit = fp32_tolerance(k + 2, double(a.n), m.ref_logit);
    m.positions = long(a.rows.size());
    for (const Row& r : a.rows) {
      if (r.margin > 2 * m.tol_logit) {
        ++m.decided;
        m.agreed += r.torch_arg == r.engine_arg;
      } else {
        ++m.near_ties;
        m.near_tie_agreed += r.torch_arg == r.engine_arg;
      }
    }
    m.engine_argmax = a.engine_argmax;
    m.passed = m.positions > 0 && m.max_dh <= m.tol_h && m.max_dlogit <= m.tol_logit &&
               m.agreed == m.decided;
    rep.passed = rep.passed && m.passed;
    rep.modules.push_back(std::move(m));
  }
  return rep;
}

std::string ParityReport::text() const {
  std::string s = "parity: libtorch modules vs engine modules on ";
  for (size_t i = 0; i < inputs.size(); ++i) s += (i ? " + " : "") + inputs[i];
  s += "\n";
  s += fmt::format("{:>6} {:>11} {:>11} {:>11} {:>11} {:>17} {:>10}  {}\n", "module", "max|dh|",
                   "tol_h", "max|dlogit|", "tol_logit", "argmax agree", "near-ties", "result");
  for (size_t k = 0; k < modules.size(); ++k) {
    const ModuleParity& m = modules[k];
    s += fmt::format("{:>6} {:>11.3e} {:>11.3e} {:>11.3e} {:>11.3e} {:>10}/{:<6} {:>4} ({} eq)  {}\n",
                     k, m.max_dh, m.tol_h, m.max_dlogit, m.tol_logit, m.agreed, m.decided,
                     m.near_ties, m.near_tie_agreed, m.passed ? "ok" : "FAIL");
  }
  s += passed ? "parity: PASS\n" : "parity: FAIL\n";
  return s;
}

nlohmann::json ParityReport::to_json() const {
  nlohmann::json mods = nlohmann::json::array();
  for (const ModuleParity& m : modules) {
    mods.push_back({{"max_abs_dh", m.max_dh}, {"tol_h", m.tol_h}, {"max_abs_dlogit", m.max_dlogit},
                    {"tol_logit", m.tol_logit}, {"ref_h", m.ref_h}, {"ref_logit", m.ref_logit},
                    {"positions", m.positions}, {"decided", m.decided}, {"agreed", m.agreed},
                    {"near_ties", m.near_ties}, {"near_tie_agreed", m.near_tie_agreed},
                    {"passed", m.passed}});
  }
  return {{"passed", passed}, {"inputs", inputs}, {"modules", mods}};
}

}  // namespace mtp::train
