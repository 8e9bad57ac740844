#include "qwen35_reference.h"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "core/mapped_file.h"
#include "io/safetensors.h"

namespace mtp::test {

namespace {

using nlohmann::json;

int num(const json& j, const char* k, int def) {
  return j.contains(k) && !j.at(k).is_null() ? j.at(k).get<int>() : def;
}

// A checkpoint's tensors by Hugging Face name, as doubles.
struct Tensors {
  io::TensorSet ts;
  std::string prefix;  // the language model's: "model." or "model.language_model."
  Q35Vec get(const std::string& name) const {
    const io::TensorView& v = ts.get(name);
    std::vector<float> f(v.numel());
    to_f32(v.data, v.dtype, f.size(), f.data());
    return {f.begin(), f.end()};
  }
  Q35Vec lm(const std::string& name) const { return get(prefix + name); }
};

Tensors open_tensors(const std::string& dir) {
  Tensors t{io::TensorSet::open_dir(dir, [](std::string_view n) { return n.starts_with("model.visual."); }),
            ""};
  t.prefix = t.ts.contains("model.language_model.embed_tokens.weight") ? "model.language_model."
                                                                        : "model.";
  return t;
}

Q35Vec mat_vec(const Q35Vec& w, size_t rows, const Q35Vec& x) {
  Q35Vec y(rows, 0.0);
  for (size_t r = 0; r < rows; ++r) {
    double a = 0;
    for (size_t c = 0; c < x.size(); ++c) a += w[r * x.size() + c] * x[c];
    y[r] = a;
  }
  return y;
}

// Qwen3_5RMSNorm: x · (mean(x²) + eps)^-0.5 · (1 + w); plain: · w.
Q35Vec norm(const double* x, size_t n, const double* w, double eps, bool one_plus) {
  double ss = 0;
  for (size_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const double inv = 1.0 / std::sqrt(ss / double(n) + eps);
  Q35Vec y(n);
  for (size_t i = 0; i < n; ++i) y[i] = x[i] * inv * (one_plus ? 1.0 + w[i] : w[i]);
  return y;
}
Q35Vec norm(const Q35Vec& x, const Q35Vec& w, double eps, bool one_plus) {
  return norm(x.data(), x.size(), w.data(), eps, one_plus);
}

double silu(double x) { return x / (1 + std::exp(-x)); }
double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }
double softplus(double x) { return x > 20 ? x : std::log1p(std::exp(x)); }

// Rotate-half over the first `rot` dims: pairs (i, i + rot/2), theta^(-2i/rot).
void rope(double* x, int pos, int rot, double theta) {
  const int half = rot / 2;
  for (int i = 0; i < half; ++i) {
    const double a = pos * std::pow(theta, -2.0 * i / rot), c = std::cos(a), s = std::sin(a);
    const double x0 = x[i], x1 = x[i + half];
    x[i] = x0 * c - x1 * s;
    x[i + half] = x1 * c + x0 * s;
  }
}

// One gated full-attention layer's attention over the tokens so far: q_proj's
// per-head [query; gate], q/k norms, partial rotary, GQA, causal softmax.
struct AttnLayer {
  Q35Vec wq, wk, wv, wo, qn, kn;
  std::vector<Q35Vec> K, V;  // [position][KV · hd]
  void load(const Tensors& t, const std::string& p) {
    wq = t.get(p + "self_attn.q_proj.weight");
    wk = t.get(p + "self_attn.k_proj.weight");
    wv = t.get(p + "self_attn.v_proj.weight");
    wo = t.get(p + "self_attn.o_proj.weight");
    qn = t.get(p + "self_attn.q_norm.weight");
    kn = t.get(p + "self_attn.k_norm.weight");
  }
  Q35Vec step(const Q35Config& c, const Q35Vec& h, int pos, const Q35Perturb& p) {
    const int hd = c.hd, rot = p.full_rotation ? hd : c.rot;
    const bool op = !p.plain_norms;
    const Q35Vec qg = mat_vec(wq, size_t(2 * c.H * hd), h);
    Q35Vec k = mat_vec(wk, size_t(c.KV * hd), h), v = mat_vec(wv, size_t(c.KV * hd), h);
    for (int g = 0; g < c.KV; ++g) {
      Q35Vec y = norm(k.data() + g * hd, size_t(hd), kn.data(), c.eps, op);
      rope(y.data(), pos, rot, c.theta);
      std::copy(y.begin(), y.end(), k.begin() + g * hd);
    }
    K.resize(size_t(pos));
    V.resize(size_t(pos));
    K.push_back(k);
    V.push_back(v);
    Q35Vec att(size_t(c.H * hd), 0.0);
    for (int hh = 0; hh < c.H; ++hh) {
      Q35Vec q = norm(qg.data() + hh * 2 * hd, size_t(hd), qn.data(), c.eps, op);
      rope(q.data(), pos, rot, c.theta);
      const int g = hh / (c.H / c.KV);
      std::vector<double> sc;
      for (int s = 0; s <= pos; ++s) {
        double dot = 0;
        for (int i = 0; i < hd; ++i) dot += q[size_t(i)] * K[size_t(s)][size_t(g * hd + i)];
        sc.push_back(dot / std::sqrt(double(hd)));
      }
      const double mx = *std::max_element(sc.begin(), sc.end());
      double z = 0;
      for (double& e : sc) z += (e = std::exp(e - mx));
      for (int s = 0; s <= pos; ++s) {
        for (int i = 0; i < hd; ++i) {
          att[size_t(hh * hd + i)] += sc[size_t(s)] / z * V[size_t(s)][size_t(g * hd + i)];
        }
      }
      for (int i = 0; i < hd && !p.no_gate; ++i) {
        att[size_t(hh * hd + i)] *= sigmoid(qg[size_t(hh * 2 * hd + hd + i)]);
      }
    }
    return mat_vec(wo, size_t(c.d), att);
  }
};

// One Gated DeltaNet layer, token by token: its conv history and state.
struct LinearLayer {
  Q35Vec wqkv, wz, wb, wa, conv, dt, alog, gn, wout;
  std::vector<Q35Vec> hist;  // conv inputs so far
  Q35Vec S;                  // [nv, dk, dv]
  void load(const Tensors& t, const std::string& p, const Q35Config& c) {
    wqkv = t.get(p + "linear_attn.in_proj_qkv.weight");
    wz = t.get(p + "linear_attn.in_proj_z.weight");
    wb = t.get(p + "linear_attn.in_proj_b.weight");
    wa = t.get(p + "linear_attn.in_proj_a.weight");
    conv = t.get(p + "linear_attn.conv1d.weight");  // [C, 1, kc]
    dt = t.get(p + "linear_attn.dt_bias");
    alog = t.get(p + "linear_attn.A_log");
    gn = t.get(p + "linear_attn.norm.weight");
    wout = t.get(p + "linear_attn.out_proj.weight");
    S.assign(size_t(c.nv * c.dk * c.dv), 0.0);
  }
  Q35Vec step(const Q35Config& c, const Q35Vec& h, const Q35Perturb& p) {
    const int key = c.nk * c.dk, C = 2 * key + c.nv * c.dv;
    hist.push_back(mat_vec(wqkv, size_t(C), h));
    const Q35Vec z = mat_vec(wz, size_t(c.nv * c.dv), h);
    const Q35Vec b = mat_vec(wb, size_t(c.nv), h), a = mat_vec(wa, size_t(c.nv), h);
    // Causal depthwise conv over the last kc inputs (zeros before the start), silu.
    Q35Vec x(size_t(C), 0.0);
    const int n = int(hist.size());
    for (int ch = 0; ch < C; ++ch) {
      double acc = 0;
      for (int i = 0; i < c.kc; ++i) {
        const int t = n - c.kc + i;
        if (t < 0 || (p.no_conv && i != c.kc - 1)) continue;
        acc += conv[size_t(ch * c.kc + i)] * hist[size_t(t)][size_t(ch)];
      }
      x[size_t(ch)] = silu(acc);
    }
    // l2norm of each q and k head; q / sqrt(dk).
    for (int part = 0; part < 2 && !p.no_qk_l2norm; ++part) {
      for (int hh = 0; hh < c.nk; ++hh) {
        double* v = x.data() + part * key + hh * c.dk;
        double ss = 0;
        for (int i = 0; i < c.dk; ++i) ss += v[i] * v[i];
        for (int i = 0; i < c.dk; ++i) v[i] /= std::sqrt(ss + 1e-6);
      }
    }
    for (int i = 0; i < key; ++i) x[size_t(i)] /= std::sqrt(double(c.dk));
    Q35Vec o(size_t(c.nv * c.dv), 0.0);
    for (int hh = 0; hh < c.nv; ++hh) {
      const int kh = p.tiled_heads ? hh % c.nk : hh / (c.nv / c.nk);
      const double* q = x.data() + kh * c.dk;
      const double* k = x.data() + key + kh * c.dk;
      const double* v = x.data() + 2 * key + hh * c.dv;
      const double beta = sigmoid(b[size_t(hh)]);
      const double g = -std::exp(alog[size_t(hh)]) * softplus(a[size_t(hh)] + dt[size_t(hh)]);
      double* s = S.data() + size_t(hh) * size_t(c.dk * c.dv);
      if (!p.no_decay) {
        for (int i = 0; i < c.dk * c.dv; ++i) s[i] *= std::exp(g);
      }
      for (int j = 0; j < c.dv; ++j) {
        double mem = 0;
        for (int i = 0; i < c.dk; ++i) mem += s[i * c.dv + j] * k[i];
        const double delta = (v[j] - mem) * beta;
        for (int i = 0; i < c.dk; ++i) s[i * c.dv + j] += k[i] * delta;
      }
      for (int j = 0; j < c.dv; ++j) {
        double acc = 0;
        for (int i = 0; i < c.dk; ++i) acc += s[i * c.dv + j] * q[i];
        o[size_t(hh * c.dv + j)] = acc;
      }
      // The gated norm: rmsnorm(o_h) · w · silu(z_h).
      Q35Vec y = norm(o.data() + hh * c.dv, size_t(c.dv), gn.data(), c.eps, false);
      for (int j = 0; j < c.dv; ++j) o[size_t(hh * c.dv + j)] = y[size_t(j)] * silu(z[size_t(hh * c.dv + j)]);
    }
    return mat_vec(wout, size_t(c.d), o);
  }
};

// x += MLP(norm(x)).
void mlp(const Q35Config& c, const Tensors& t, const std::string& p, Q35Vec& x, bool op) {
  const Q35Vec h = norm(x, t.get(p + "post_attention_layernorm.weight"), c.eps, op);
  const Q35Vec g = mat_vec(t.get(p + "mlp.gate_proj.weight"), size_t(c.ffn), h);
  const Q35Vec u = mat_vec(t.get(p + "mlp.up_proj.weight"), size_t(c.ffn), h);
  Q35Vec a(size_t(c.ffn));
  for (int i = 0; i < c.ffn; ++i) a[size_t(i)] = silu(g[size_t(i)]) * u[size_t(i)];
  const Q35Vec y = mat_vec(t.get(p + "mlp.down_proj.weight"), size_t(c.d), a);
  for (int i = 0; i < c.d; ++i) x[size_t(i)] += y[size_t(i)];
}

Q35Vec head(const Q35Config& c, const Tensors& t, const Q35Vec& normed) {
  return mat_vec(t.get(c.tie ? t.prefix + "embed_tokens.weight" : "lm_head.weight"), size_t(c.V),
                 normed);
}

Q35Vec embed(const Q35Config& c, const Q35Vec& table, int32_t tok) {
  return Q35Vec(table.begin() + long(size_t(tok) * size_t(c.d)),
                table.begin() + long(size_t(tok + 1) * size_t(c.d)));
}

}  // namespace

Q35Config read_q35_config(const std::string& dir) {
  const json top = json::parse(read_file(dir + "/config.json"));
  const json c = top.contains("text_config") ? top.at("text_config") : top;
  Q35Config r;
  r.d = c.at("hidden_size");
  r.L = c.at("num_hidden_layers");
  r.H = num(c, "num_attention_heads", 16);
  r.KV = num(c, "num_key_value_heads", 4);
  r.hd = num(c, "head_dim", 256);
  r.V = num(c, "vocab_size", 248320);
  r.ffn = c.at("intermediate_size");
  r.eps = c.value("rms_norm_eps", 1e-6);
  const json rp = c.value("rope_parameters", json::object());
  r.theta = rp.value("rope_theta", c.value("rope_theta", 10000.0));
  const double partial = rp.value("partial_rotary_factor", c.value("partial_rotary_factor", 0.25));
  r.rot = int(r.hd * partial);
  r.kc = num(c, "linear_conv_kernel_dim", 4);
  r.nk = num(c, "linear_num_key_heads", 16);
  r.nv = num(c, "linear_num_value_heads", 32);
  r.dk = num(c, "linear_key_head_dim", 128);
  r.dv = num(c, "linear_value_head_dim", 128);
  r.tie = c.contains("tie_word_embeddings") ? c.at("tie_word_embeddings").get<bool>()
                                            : top.value("tie_word_embeddings", false);
  const int every = num(c, "full_attention_interval", 4);
  for (int i = 0; i < r.L; ++i) {
    r.linear.push_back(c.contains("layer_types") && !c.at("layer_types").is_null()
                           ? c.at("layer_types").at(size_t(i)) == "linear_attention"
                           : (i + 1) % every != 0);
  }
  return r;
}

Q35Out q35_reference(const std::string& dir, const std::vector<int32_t>& toks,
                     const Q35Perturb& p) {
  const Q35Config c = read_q35_config(dir);
  const Tensors t = open_tensors(dir);
  const bool op = !p.plain_norms;
  const Q35Vec table = t.lm("embed_tokens.weight");
  std::vector<Q35Vec> x;
  for (int32_t tok : toks) x.push_back(embed(c, table, tok));
  Q35Out out;
  for (int l = 0; l < c.L; ++l) {
    const std::string pre = t.prefix + "layers." + std::to_string(l) + ".";
    const Q35Vec in_norm = t.get(pre + "input_layernorm.weight");
    LinearLayer lin;
    AttnLayer att;
    if (c.linear[size_t(l)]) lin.load(t, pre, c);
    else att.load(t, pre);
    for (size_t i = 0; i < toks.size(); ++i) {
      const Q35Vec h = norm(x[i], in_norm, c.eps, op);
      const Q35Vec y = c.linear[size_t(l)] ? lin.step(c, h, p) : att.step(c, h, int(i), p);
      for (int j = 0; j < c.d; ++j) x[i][size_t(j)] += y[size_t(j)];
      mlp(c, t, pre, x[i], op);
    }
    if (c.linear[size_t(l)]) out.states.push_back(lin.S);
  }
  const Q35Vec fnorm = t.lm("norm.weight");
  for (size_t i = 0; i < toks.size(); ++i) {
    out.hidden.push_back(x[i]);
    out.post.push_back(norm(x[i], fnorm, c.eps, op));
    out.logits.push_back(head(c, t, out.post.back()));
  }
  return out;
}

struct Q35MtpReference::Impl {
  Q35Config c;
  Tensors t;
  Q35Vec table, fc, ne, nh, nrm;
  AttnLayer att;
  int pos = 0;
};

Q35MtpReference::Q35MtpReference(const std::string& dir) : impl_(new Impl{read_q35_config(dir), open_tensors(dir)}) {
  Impl& m = *impl_;
  m.table = m.t.lm("embed_tokens.weight");
  m.fc = m.t.get("mtp.fc.weight");
  m.ne = m.t.get("mtp.pre_fc_norm_embedding.weight");
  m.nh = m.t.get("mtp.pre_fc_norm_hidden.weight");
  m.nrm = m.t.get("mtp.norm.weight");
  m.att.load(m.t, "mtp.layers.0.");
}

Q35MtpReference::~Q35MtpReference() { delete impl_; }

void Q35MtpReference::truncate(int n) { impl_->pos = n; }

// x = fc · [norm_e(embed(tok)); norm_h(hidden)], one decoder layer at the
// row's position, out = mtp.norm(x), logits = lm_head(out) (vLLM's
// Qwen3_5MultiTokenPredictor and compute_logits).
void Q35MtpReference::row(int32_t tok, const Q35Vec& hidden, Q35Vec& out, Q35Vec& logits) {
  Impl& m = *impl_;
  const Q35Config& c = m.c;
  Q35Vec cat = norm(embed(c, m.table, tok), m.ne, c.eps, true);
  const Q35Vec hn = norm(hidden, m.nh, c.eps, true);
  cat.insert(cat.end(), hn.begin(), hn.end());
  Q35Vec x = mat_vec(m.fc, size_t(c.d), cat);
  const std::string pre = "mtp.layers.0.";
  const Q35Vec h = norm(x, m.t.get(pre + "input_layernorm.weight"), c.eps, true);
  const Q35Vec y = m.att.step(c, h, m.pos++, {});
  for (int j = 0; j < c.d; ++j) x[size_t(j)] += y[size_t(j)];
  mlp(c, m.t, pre, x, true);
  out = norm(x, m.nrm, c.eps, true);
  logits = head(c, m.t, out);
}

}  // namespace mtp::test
