// Widening: the shape grammar, the plan (index maps, scales) and its
// exactness analysis. The tensors and files are in widen_write.cc.
#include "model/widen.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "core/error.h"
#include "core/setting.h"
#include "model/family.h"

namespace mtp::model {

namespace {

// 4^k for some k >= 0, returned as k; -1 otherwise.
int log4(long ratio) {
  int k = 0;
  while (ratio > 1 && ratio % 4 == 0) {
    ratio /= 4;
    ++k;
  }
  return ratio == 1 ? k : -1;
}

int parse_positive(const std::string& key, const std::string& value, const std::string& spec) {
  char* end = nullptr;
  long v = std::strtol(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || v <= 0 || v > (1 << 20)) {
    fail_setting<InputError>("widen_shape", "the widening shape '{}': {}={} must be a positive "
                             "integer", spec, key, value);
  }
  return int(v);
}

}  // namespace

WidenShape parse_widen_shape(const std::string& spec, const ModelConfig& src) {
  WidenShape s;
  if (spec == "1b") {
    // ~1 B parameters of memory traffic for stories260K (d 64, hd 8): d 1024,
    // 32 layers, ffn 8192, 128 query heads of head_dim 8 over 64 kv heads.
    s.d_model = 1024;
    s.n_layers = 32;
    s.ffn = 8192;
    s.head_dim = src.head_dim;
    s.n_heads = std::max(src.n_heads, 1024 / std::max(1, src.head_dim));
    const int group = src.n_kv_heads > 0 ? src.n_heads / src.n_kv_heads : 1;
    s.n_kv_heads = std::max(src.n_kv_heads, s.n_heads / std::max(1, group));
    return s;
  }
  size_t at = 0;
  while (at <= spec.size()) {
    size_t comma = spec.find(',', at);
    if (comma == std::string::npos) comma = spec.size();
    const std::string item = spec.substr(at, comma - at);
    const size_t eq = item.find('=');
    if (eq == std::string::npos) {
      fail_setting<InputError>("widen_shape",
                               "the widening shape '{}': '{}' is neither a preset (known: 1b) "
                               "nor key=value (keys: d_model, layers, ffn, heads, kv_heads, "
                               "head_dim)", spec, item);
    }
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    const int v = parse_positive(key, value, spec);
    if (key == "d_model") s.d_model = v;
    else if (key == "layers") s.n_layers = v;
    else if (key == "ffn") s.ffn = v;
    else if (key == "heads") s.n_heads = v;
    else if (key == "kv_heads") s.n_kv_heads = v;
    else if (key == "head_dim") s.head_dim = v;
    else {
      fail_setting<InputError>("widen_shape", "the widening shape '{}': unknown key '{}' (keys: "
                               "d_model, layers, ffn, heads, kv_heads, head_dim)", spec, key);
    }
    at = comma + 1;
  }
  return s;
}

WidenPlan plan_widen(const ModelConfig& src, const WidenShape& shape, bool allow_inexact) {
  if (src.source == "gguf") {
    // The widened checkpoint is written as a Hugging Face folder from the
    // source's config.json (or as a Llama for llama2.c); a GGUF has neither.
    fail<ConfigError>("widen: a GGUF source is not supported; widen the Hugging Face checkpoint "
                      "it was converted from");
  }
  for (int l = 0; l < src.n_layers; ++l) {
    LayerKind k = src.layer_kind(l), plain;
    plain.sliding = k.sliding;
    plain.head_dim = src.head_dim, plain.n_kv_heads = src.n_kv_heads, plain.ffn = src.ffn;
    if (!(k == plain) || src.ple_dim > 0 || src.layer_scalar || src.v_norm) {
      fail<ConfigError>("widen: a {} source is not supported (layers of several kinds, "
                        "per-layer embeddings or layer scalars)", arch_name(src.arch));
    }
  }
  WidenShape s = shape;
  if (!s.d_model) s.d_model = src.d_model;
  if (!s.n_layers) s.n_layers = src.n_layers;
  if (!s.ffn) s.ffn = src.ffn;
  if (!s.n_heads) s.n_heads = src.n_heads;
  if (!s.n_kv_heads) s.n_kv_heads = src.n_kv_heads;
  if (!s.head_dim) s.head_dim = src.head_dim;
  auto not_narrower = [](const char* field, int have, int want) {
    if (want < have) {
      fail<ShapeError>("widen: {} = {} is narrower than the source's {} (a widening can only add)",
                       field, want, have);
    }
  };
  not_narrower("d_model", src.d_model, s.d_model);
  not_narrower("layers", src.n_layers, s.n_layers);
  not_narrower("ffn", src.ffn, s.ffn);
  not_narrower("heads", src.n_heads, s.n_heads);
  not_narrower("kv_heads", src.n_kv_heads, s.n_kv_heads);
  if (s.head_dim != src.head_dim) {
    fail<ShapeError>("widen: head_dim = {} differs from the source's {} (head_dim is kept: it "
                     "fixes the RoPE frequencies and the score scale 1/sqrt(head_dim))",
                     s.head_dim, src.head_dim);
  }
  if (s.n_heads % s.n_kv_heads != 0) {
    fail<ShapeError>("widen: heads = {} is not a multiple of kv_heads = {}", s.n_heads,
                     s.n_kv_heads);
  }
  const int g = src.n_heads / src.n_kv_heads, g2 = s.n_heads / s.n_kv_heads;
  if (g2 < g) {
    fail<ShapeError>("widen: heads = {} over kv_heads = {} gives {} query heads per kv head; "
                     "the source's {} real query heads share each kv head {} at a time, so they "
                     "cannot keep their kv heads (need heads / kv_heads >= {})",
                     s.n_heads, s.n_kv_heads, g2, src.n_heads, g, g);
  }

  WidenPlan p;
  p.src = src;
  ModelConfig& d = p.dst;
  d = src;
  d.source = "hf";
  d.d_model = s.d_model;
  d.n_layers = s.n_layers;
  d.ffn = s.ffn;
  d.n_heads = s.n_heads;
  d.n_kv_heads = s.n_kv_heads;
  d.rope_interleaved = false;
  d.tie_embeddings = false;  // the head is written out in the matrix dtype
  if (!d.layers.empty()) {
    // Appended (zero) layers: the family's kind for a new layer, the real
    // layers' sizes (the shape keeps head_dim; widths grow).
    LayerKind extra = d.layers.back();
    extra.sliding = family(src.arch).sliding == SlidingPattern::AllLayers;
    d.layers.resize(size_t(s.n_layers), extra);
    for (LayerKind& k : d.layers) {
      k.n_kv_heads = s.n_kv_heads;
      k.ffn = s.ffn;
    }
  }
  if (src.source == "llama2c") {  // run.c stops on BOS too: carry it as an EOS id
    d.eos_ids.push_back(src.bos_id >= 0 ? src.bos_id : 1);
    std::sort(d.eos_ids.begin(), d.eos_ids.end());
    d.eos_ids.erase(std::unique(d.eos_ids.begin(), d.eos_ids.end()), d.eos_ids.end());
  }
  p.q_head.resize(size_t(src.n_heads));
  for (int h = 0; h < src.n_heads; ++h) p.q_head[size_t(h)] = (h / g) * g2 + h % g;
  p.permute_rope = src.rope_interleaved;

  // --- widths and norms
  std::vector<std::string> shape_reasons;
  const double ratio = double(s.d_model) / double(src.d_model);
  p.norm_scale = std::sqrt(1.0 / ratio);
  d.norm_eps = float(double(src.norm_eps) / ratio);
  if (s.d_model != src.d_model) {
    const int k = s.d_model % src.d_model == 0 ? log4(s.d_model / src.d_model) : -1;
    if (k < 0) {
      shape_reasons.push_back(fmt::format(
          "d_model {} -> {}: the ratio is not a power of 4, so RMSNorm's 1/sqrt(mean + eps) "
          "is not the original's times a power of 2", src.d_model, s.d_model));
    } else if (src.d_model % 64 != 0) {
      shape_reasons.push_back(fmt::format(
          "d_model {} is not a multiple of 64: RMSNorm's sum of squares would group the real "
          "dims into other vectors than the original's", src.d_model));
    }
    if (src.qk_norm) p.qk_scale = p.norm_scale;  // q/k scaled so per-head norms see eps'
    if (family(src.arch).embed_scale_sqrt_d) {
      p.embed_scale = double(std::sqrt(float(src.d_model))) / double(std::sqrt(float(s.d_model)));
    }
    if (src.norm_one_plus) {
      p.inexact.push_back("Gemma (1 + w) norm weights: the stored w' = (1 + w)·sqrt(d/d') - 1 "
                          "is rounded to fp32");
    }
  }
  d.embed_scale = family(src.arch).embed_scale_sqrt_d ? std::sqrt(float(d.d_model))
                                                      : src.embed_scale;
  // o_proj columns: a real head's column keeps its kernel lane (index mod 16)
  // only if it moves by a multiple of 16.
  for (int h = 0; h < src.n_heads; ++h) {
    if ((long(p.q_head[size_t(h)] - h) * src.head_dim) % 16 != 0) {
      shape_reasons.push_back(fmt::format(
          "query head {} moves to {}: its o_proj columns change kernel lane (heads/kv_heads {} "
          "-> {} with head_dim {})", h, p.q_head[size_t(h)], g, g2, src.head_dim));
      break;
    }
  }
  if (!shape_reasons.empty() && !allow_inexact) {
    std::string all;
    for (auto& r : shape_reasons) all += "\n  - " + r;
    fail_setting<ShapeError>("allow_inexact",
                             "widen to d_model={}, layers={}, ffn={}, heads={}, kv_heads={}, "
                             "head_dim={} would not be bitwise exact (allow an inexact widening "
                             "to accept results within rounding):{}",
                             s.d_model, s.n_layers, s.ffn, s.n_heads, s.n_kv_heads, s.head_dim,
                             all);
  }
  for (auto& r : shape_reasons) p.inexact.push_back(r);
  if (p.permute_rope) {
    p.inexact.push_back("llama2.c interleaved RoPE written as rotate-half: q/k rows permuted "
                        "within each head, so q·k sums its terms in another order");
  }
  d.validate();
  return p;
}

}  // namespace mtp::model
