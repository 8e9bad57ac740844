#include "train/step.h"

#include <cmath>

#include "core/error.h"
#include "core/setting.h"
#include "drafter/module_rows.h"

namespace mtp::train {

namespace {

struct PassStats {
  std::vector<double> loss;         // [K] Σ CE over valid rows
  std::vector<long> rows, right;    // [K] valid rows, top-1 right
  std::vector<long> joint_rows, joint_right;  // [K] rows with targets 0..k valid / all right
  double objective = 0;             // Σ_k w_k · mean CE_k
  explicit PassStats(int K)
      : loss(size_t(K), 0.0), rows(size_t(K), 0), right(size_t(K), 0),
        joint_rows(size_t(K), 0), joint_right(size_t(K), 0) {}
  void add(const PassStats& o) {
    for (size_t k = 0; k < loss.size(); ++k) {
      loss[k] += o.loss[k];
      rows[k] += o.rows[k];
      right[k] += o.right[k];
      joint_rows[k] += o.joint_rows[k];
      joint_right[k] += o.joint_right[k];
    }
    objective += o.objective;
  }
};

// Runs the K modules teacher-forced over batch b with parameters P.
// The module-row contract (drafter/module_rows.h) at row t + s (s =
// offset_shift, 0 in real training; the indexing test shifts it to fail):
// module k, row t < R_k = L-2-k-s: input tok[t+k+1+s] and h_{k-1}[t];
// target tok[t+k+2+s] where its loss_mask is 1.
// train: the gradient of Σ_k w_k · mean loss_k goes to the leaves' .grad(),
// loss_k = CE against the labels, KL(target ‖ module) at o.kl_temp, or both
// (TrainOptions::loss).
// The head runs over row chunks (TorchMtp::head_chunk_rows) on a detached
// copy of h_k; each chunk's gradient w.r.t. h_k is collected, then one
// backward through the modules — never logits for all rows at once.
PassStats run_batch(const TorchMtp& tm, const std::vector<torch::Tensor>& P, const Batch& b,
                    const std::vector<double>& w, int s, bool train, const TrainOptions& o) {
  const bool use_ce = o.loss == "ce" || o.loss == "ce+kl";
  const bool use_kl = o.loss == "kl" || o.loss == "ce+kl";
  const double kl_t = o.kl_temp;
  const int K = tm.config().K;
  const int64_t B = b.B, L = b.L, d = b.d;
  const torch::Device dev = tm.device();
  PassStats st(K);
  torch::Tensor cap =
      torch::from_blob(const_cast<float*>(b.hidden.data()), {B, L, d}, torch::kFloat32).to(dev);
  std::vector<torch::Tensor> roots, grads;
  std::vector<std::vector<uint8_t>> right(static_cast<size_t>(K)), valid(static_cast<size_t>(K));
  std::vector<int64_t> R(size_t(K), 0);
  torch::Tensor h_prev;
  const int64_t chunk = tm.head_chunk_rows();
  for (int k = 0; k < K; ++k) {
    const int64_t Rk = drafter::module_scored_row_count(int(L) - s, k);
    if (Rk <= 0) break;
    R[size_t(k)] = Rk;
    const size_t n = size_t(B * Rk);
    std::vector<int32_t> in_tok(n);
    std::vector<int64_t> tgt(n);
    std::vector<float> vmask(n);
    auto& val = valid[size_t(k)];
    val.assign(n, 0);
    right[size_t(k)].assign(n, 0);
    long n_valid = 0;
    for (int64_t bi = 0; bi < B; ++bi) {
      for (int64_t t = 0; t < Rk; ++t) {
        const size_t i = size_t(bi * Rk + t), row = size_t(bi * L);
        const size_t in_at = size_t(drafter::module_input_index(k, int(t) + s));
        const size_t tgt_at = size_t(drafter::module_target_index(k, int(t) + s));
        in_tok[i] = b.tokens[row + in_at];
        tgt[i] = b.tokens[row + tgt_at];
        val[i] = b.mask[row + tgt_at] ? 1 : 0;
        vmask[i] = float(val[i]);
        n_valid += val[i];
      }
    }
    torch::Tensor h_in = k == 0 ? cap.narrow(1, 0, Rk) : h_prev.narrow(1, 0, Rk);
    torch::Tensor h = tm.module_forward(k, P, h_in, tm.embed(in_tok).view({B, Rk, d}));
    h_prev = h;
    if (n_valid == 0) continue;
    const double wk = w[size_t(k)] / double(n_valid);
    torch::Tensor hk = h.detach().reshape({B * Rk, d});
    torch::Tensor gh = train ? torch::zeros_like(hk) : torch::Tensor();
    torch::Tensor tgt_t = torch::from_blob(tgt.data(), {B * Rk}, torch::kInt64).to(dev);
    torch::Tensor vm_t = torch::from_blob(vmask.data(), {B * Rk}, torch::kFloat32).to(dev);
    double loss_sum = 0;
    for (int64_t r0 = 0; r0 < B * Rk; r0 += chunk) {
      const int64_t nr = std::min(chunk, B * Rk - r0);
      bool any = false;
      for (int64_t i = r0; i < r0 + nr && !any; ++i) any = val[size_t(i)] != 0;
      if (!any) continue;
      torch::Tensor hc = hk.narrow(0, r0, nr).clone();
      if (train) hc.requires_grad_(true);
      torch::Tensor lg = tm.logits(hc);  // [nr, V]
      torch::Tensor tg = tgt_t.narrow(0, r0, nr);
      torch::Tensor per_row = torch::zeros({nr}, lg.options());
      if (use_ce) per_row = per_row + (torch::logsumexp(lg, 1) - lg.gather(1, tg.unsqueeze(1)).squeeze(1));
      if (use_kl) {
        // The target's distribution for the token row i predicts: the capture
        // at the row's input position (module_input_index) through the frozen
        // final norm + head.
        std::vector<int64_t> cap_rows(static_cast<size_t>(nr));
        for (int64_t i = 0; i < nr; ++i) {
          const int64_t bi = (r0 + i) / Rk, t = (r0 + i) % Rk;
          cap_rows[size_t(i)] = bi * L + drafter::module_input_index(k, int(t) + s);
        }
        torch::Tensor idx = torch::from_blob(cap_rows.data(), {nr}, torch::kInt64).to(dev);
        torch::Tensor logp;
        {
          torch::NoGradGuard no_grad;
          torch::Tensor lt = tm.logits(cap.reshape({B * L, d}).index_select(0, idx));
          logp = torch::log_softmax(lt / kl_t, 1);
        }
        torch::Tensor logq = torch::log_softmax(lg / kl_t, 1);
        per_row = per_row + (logp.exp() * (logp - logq)).sum(1) * (kl_t * kl_t);
      }
      torch::Tensor loss = (per_row * vm_t.narrow(0, r0, nr)).sum();
      if (train) {
        (loss * wk).backward();
        gh.narrow(0, r0, nr).copy_(hc.grad());
      }
      loss_sum += loss.item<double>();
      torch::Tensor ok = (lg.detach().argmax(1) == tg).to(torch::kCPU).to(torch::kUInt8).contiguous();
      const uint8_t* okp = ok.data_ptr<uint8_t>();
      for (int64_t i = 0; i < nr; ++i) {
        const size_t j = size_t(r0 + i);
        right[size_t(k)][j] = uint8_t(okp[i] && val[j]);
        st.right[size_t(k)] += right[size_t(k)][j];
      }
    }
    st.loss[size_t(k)] = loss_sum;
    st.rows[size_t(k)] = n_valid;
    st.objective += w[size_t(k)] * loss_sum / double(n_valid);
    if (train) {
      roots.push_back(h);
      grads.push_back(gh.view({B, Rk, d}));
    }
  }
  if (train && !roots.empty()) torch::autograd::backward(roots, grads);
  // Joint correctness: row t counts for module k when targets 0..k are valid.
  for (int64_t bi = 0; bi < B; ++bi) {
    for (int64_t t = 0; t < R[0]; ++t) {
      bool all = true;
      for (int k = 0; k < K; ++k) {
        if (t >= R[size_t(k)]) break;
        const size_t i = size_t(bi * R[size_t(k)] + t);
        if (!valid[size_t(k)][i]) break;
        all = all && right[size_t(k)][i];
        ++st.joint_rows[size_t(k)];
        st.joint_right[size_t(k)] += all;
      }
    }
  }
  return st;
}

std::vector<size_t> micro_batch(const StepContext& c, DataOrder& order, long step, int m) {
  const uint64_t M = uint64_t(c.dist.world()) * uint64_t(c.o.accum), B = uint64_t(c.o.batch);
  std::vector<size_t> idx;
  for (uint64_t b = 0; b < B; ++b) idx.push_back(order.at((uint64_t(step) * M + uint64_t(m)) * B + b));
  return idx;
}

}  // namespace

double optimizer_step(OptimState& st, torch::Tensor& g, const FlatLayout& layout, double lr,
                      long step, const AdamWOptions& h) {
  torch::NoGradGuard ng;
  const double norm = g.norm().item<double>();
  if (!std::isfinite(norm)) {
    fail_setting<Error>("lr", "step {}: gradient norm is {} (diverged); lower the learning rate",
                        step + 1, norm);
  }
  if (h.clip > 0 && norm > h.clip) g.mul_(h.clip / (norm + 1e-6));

  // AdamW (decoupled weight decay on matrices only), bias-corrected.
  const double t = double(step + 1);
  const double bc1 = 1.0 - std::pow(h.beta1, t), bc2 = 1.0 - std::pow(h.beta2, t);
  st.m.mul_(h.beta1).add_(g, 1.0 - h.beta1);
  st.v.mul_(h.beta2).addcmul_(g, g, 1.0 - h.beta2);
  torch::Tensor denom = (st.v.sqrt() / std::sqrt(bc2)).add_(h.eps);
  if (h.weight_decay > 0) {
    if (!st.decay_mask.defined()) {
      std::vector<float> mask(size_t(layout.total), 0.f);
      for (const auto& e : layout.entries) {
        if (e.decay) std::fill(mask.begin() + e.offset, mask.begin() + e.offset + e.numel, 1.f);
      }
      st.decay_mask = layout.to_flat(mask, st.params.device());
    }
    st.params.mul_(1.0 - (lr * h.weight_decay) * st.decay_mask);
  }
  st.params.addcdiv_(st.m, denom, -lr / bc1);
  return norm;
}

double cosine_lr(double lr, double min_lr_ratio, long step, long total, long warmup) {
  if (step < warmup) return lr * double(step + 1) / double(warmup);
  const double p = double(step - warmup) / double(std::max(1L, total - warmup));
  const double cosine = 0.5 * (1.0 + std::cos(M_PI * std::min(1.0, p)));
  return lr * (min_lr_ratio + (1.0 - min_lr_ratio) * cosine);
}

StepResult train_step(const StepContext& c, OptimState& st, DataOrder& order, long step,
                      double lr) {
  const TrainOptions& o = c.o;
  const int K = c.tm.config().K;
  StepResult r;
  r.module_loss.assign(size_t(K), 0.0);
  // Micro-batch gradients summed in micro-batch order (the first one is taken
  // as is, not added to zeros, so a single process accumulating W·A
  // micro-batches and W ranks of A micro-batches give the same bits).
  torch::Tensor gsum;
  {
    const std::vector<torch::Tensor> leaves = c.tm.views(st.params, true);
    for (int a = 0; a < o.accum; ++a) {
      const int m = c.dist.rank() * o.accum + a;
      Batch b = c.data.gather(Split::Train, micro_batch(c, order, step, m));
      r.tokens += b.real_tokens;
      for (const auto& l : leaves) l.mutable_grad().reset();
      PassStats ps = run_batch(c.tm, leaves, b, c.loss_weights, o.offset_shift, true, o);
      r.objective += ps.objective / o.accum;
      for (int k = 0; k < K; ++k) {
        if (ps.rows[size_t(k)] > 0) {
          r.module_loss[size_t(k)] += ps.loss[size_t(k)] / double(ps.rows[size_t(k)]) / o.accum;
        }
      }
      torch::Tensor g = c.tm.flat_grad(leaves);
      if (a == 0) gsum = g;
      else gsum.add_(g);
    }
  }
  torch::NoGradGuard ng;
  if (c.dist.world() > 1) {
    gsum = c.dist.sum_in_rank_order(gsum);
  }
  gsum.div_(double(c.dist.world() * o.accum));
  r.grad_norm = optimizer_step(st, gsum, c.tm.layout(), lr, step,
                               {o.beta1, o.beta2, o.adam_eps, o.weight_decay, o.clip});
  if (st.ema.defined()) {
    const double decay = std::min(o.ema, (1.0 + double(step)) / (10.0 + double(step)));
    st.ema.mul_(decay).add_(st.params, 1.0 - decay);
  }
  return r;
}

nlohmann::json evaluate(const StepContext& c, const torch::Tensor& flat) {
  torch::NoGradGuard ng;
  const int K = c.tm.config().K;
  const std::vector<torch::Tensor> P = c.tm.views(flat, false);
  size_t n = c.data.size(Split::Heldout);
  if (c.o.eval_sequences > 0) n = std::min(n, size_t(c.o.eval_sequences));
  PassStats total(K);
  for (size_t i = 0; i < n; i += size_t(c.o.batch)) {
    std::vector<size_t> idx;
    for (size_t j = i; j < std::min(n, i + size_t(c.o.batch)); ++j) idx.push_back(j);
    total.add(run_batch(c.tm, P, c.data.gather(Split::Heldout, idx), c.loss_weights,
                        c.o.offset_shift, false, c.o));
  }
  nlohmann::json loss = nlohmann::json::array(), acc = loss, joint = loss, cond = loss,
                 rows = loss;
  double E = 1.0, prev = 1.0;
  for (int k = 0; k < K; ++k) {
    const size_t i = size_t(k);
    const double nr = double(std::max(1L, total.rows[i]));
    const double j = total.joint_rows[i] ? double(total.joint_right[i]) / total.joint_rows[i] : 0;
    loss.push_back(total.loss[i] / nr);
    acc.push_back(double(total.right[i]) / nr);
    joint.push_back(j);
    cond.push_back(prev > 0 ? j / prev : 0.0);
    rows.push_back(total.rows[i]);
    E += j;
    prev = j;
  }
  return {{"loss", loss}, {"acc", acc}, {"joint", joint}, {"cond", cond},
          {"E", E},       {"rows", rows}, {"sequences", n}};
}

}  // namespace mtp::train
