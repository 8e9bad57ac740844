// GGUF metadata -> ModelConfig, following llama.cpp's conventions
// (docs/FORMATS.md "GGUF"): the keys convert_hf_to_gguf.py writes, the values
// llama.cpp's loader (src/llama-model.cpp) hard-codes for Gemma 2/3, and the
// llama3 RoPE scaling that arrives as the per-frequency tensor rope_freqs.weight.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/ggml_type.h"
#include "io/gguf.h"
#include "model/family.h"
#include "model/loader.h"

namespace mtp::model {

namespace {

constexpr int kMaxLayers = 1 << 16;

// Metadata access with the architecture prefix and messages naming the file.
struct Meta {
  const io::GgufFile& f;
  std::string prefix;  // "llama."

  std::string key(const char* k) const { return prefix + k; }
  int req_int(const char* k) const {
    auto v = f.get_int(key(k));
    if (!v) fail<ConfigError>("GGUF file '{}': missing required key '{}'", f.path(), key(k));
    return to_int(k, *v);
  }
  int get_int(const char* k, int def) const {
    auto v = f.get_int(key(k));
    return v ? to_int(k, *v) : def;
  }
  double get_float(const char* k, double def) const { return f.get_float(key(k)).value_or(def); }
  int to_int(const char* k, int64_t v) const {
    if (v < 0 || v > INT32_MAX) {
      fail<ConfigError>("GGUF file '{}': '{}' = {} is out of range", f.path(), key(k), v);
    }
    return int(v);
  }
};

// The per-frequency factors llama.cpp's converter writes for llama3 scaling
// (LlamaModel.generate_extra_tensors): fp32 arithmetic, as torch does it.
std::vector<float> llama3_factors(float theta, int head_dim, float factor, float low, float high,
                                  float old_ctx) {
  std::vector<float> out;
  const float low_wl = old_ctx / low, high_wl = old_ctx / high;
  for (int i = 0; i < head_dim / 2; ++i) {
    const float freq = 1.0f / std::pow(theta, float(2 * i) / float(head_dim));
    const float wl = float(2 * M_PI) / freq;
    if (wl < high_wl) {
      out.push_back(1.0f);
    } else if (wl > low_wl) {
      out.push_back(factor);
    } else {
      const float smooth = (old_ctx / wl - low) / (high - low);
      out.push_back(1.0f / ((1 - smooth) / factor + smooth));
    }
  }
  return out;
}

// rope_freqs.weight -> the llama3 parameters that produce it. The GGUF keeps
// only the factors, so the parameters are recovered by trying the values
// released checkpoints use; a match within 1e-5 (relative) on every frequency
// identifies them, and the forward then computes Hugging Face's llama3
// frequencies from them (the bits of the HF checkpoint). Anything else is
// refused rather than approximated.
RopeScaling recover_llama3(const io::GgufFile& f, const io::GgufTensor& t, const ModelConfig& c,
                           std::optional<int64_t> orig_key) {
  const size_t half = size_t(c.head_dim) / 2;
  if (t.type != uint32_t(GgmlType::F32) || t.dims.size() != 1 || t.row_elems() != half) {
    fail<ConfigError>("GGUF file '{}': rope_freqs.weight must be F32 of {} values (head_dim / 2), "
                      "got {} with dims of {} values", f.path(), half, ggml_type_name(t.type),
                      t.numel());
  }
  std::vector<float> got(half);
  std::memcpy(got.data(), t.data, half * sizeof(float));
  float factor = 1.0f;
  for (float v : got) {
    if (!(v >= 1.0f) || !std::isfinite(v)) {
      fail<ConfigError>("GGUF file '{}': rope_freqs.weight holds {}; llama3 factors are >= 1",
                        f.path(), v);
    }
    factor = std::max(factor, v);
  }
  RopeScaling r;
  if (factor == 1.0f) return r;  // every frequency unscaled
  std::vector<int> origs = {8192, 4096, 2048, 16384, 32768, 65536, 131072};
  if (orig_key && *orig_key > 0 && *orig_key <= INT32_MAX) origs.insert(origs.begin(), int(*orig_key));
  for (int orig : origs) {
    for (float low : {1.0f, 2.0f, 4.0f, 8.0f}) {
      for (float high : {4.0f, 2.0f, 8.0f, 16.0f, 32.0f}) {
        if (!(high > low)) continue;
        auto want = llama3_factors(c.rope_theta, c.head_dim, factor, low, high, float(orig));
        bool ok = true;
        for (size_t i = 0; i < half && ok; ++i) ok = std::fabs(want[i] - got[i]) <= 1e-5f * got[i];
        if (!ok) continue;
        r.type = RopeScaling::Type::Llama3;
        r.factor = factor;
        r.low_freq_factor = low;
        r.high_freq_factor = high;
        r.original_max_position = orig;
        return r;
      }
    }
  }
  fail<ConfigError>("GGUF file '{}': rope_freqs.weight (max factor {}) is not llama3 RoPE scaling "
                    "with any standard low/high frequency factors and original context; "
                    "mtpspec does not apply arbitrary per-frequency factors", f.path(), factor);
}

// rope_freqs.weight of a proportional-RoPE family -> the rotated fraction:
// [global head_dim / 2] F32 divisors, 1 for the first k pairs, >= 1e29
// (llama.cpp's converter: 1e30, an angle of ~0) for the others.
float recover_proportional(const io::GgufFile& f, const io::GgufTensor& t, int full_hd) {
  const size_t half = size_t(full_hd) / 2;
  if (t.type != uint32_t(GgmlType::F32) || t.dims.size() != 1 || t.row_elems() != half) {
    fail<ConfigError>("GGUF file '{}': rope_freqs.weight must be F32 of {} values (the full "
                      "layers' head_dim / 2), got {} with {} values", f.path(), half,
                      ggml_type_name(t.type), t.numel());
  }
  std::vector<float> v(half);
  std::memcpy(v.data(), t.data, half * sizeof(float));
  size_t k = 0;
  while (k < half && v[k] == 1.0f) ++k;
  for (size_t i = k; i < half; ++i) {
    if (!(v[i] >= 1e29f) || k == 0) {
      fail<ConfigError>("GGUF file '{}': rope_freqs.weight holds {} at {}; proportional RoPE "
                        "stores 1 for the rotated pairs, then >= 1e29", f.path(), v[i], i);
    }
  }
  const float partial = float(k) / float(half);
  if (size_t(std::floor(double(partial) * full_hd / 2)) != k) {
    fail<ConfigError>("GGUF file '{}': rope_freqs.weight rotates {} of {} pairs, which no "
                      "partial_rotary_factor expresses exactly", f.path(), k, half);
  }
  return partial;
}

// The source's own key of a config field: messages name GGUF keys.
FieldName gguf_field_names(const std::string& arch) {
  return [arch](const char* hf) -> std::string {
    static const std::pair<const char*, const char*> map[] = {
        {"hidden_size", "embedding_length"},
        {"num_hidden_layers", "block_count"},
        {"num_attention_heads", "attention.head_count"},
        {"num_key_value_heads", "attention.head_count_kv"},
        {"head_dim", "attention.key_length"},
        {"intermediate_size", "feed_forward_length"},
        {"max_position_embeddings", "context_length"},
        {"rms_norm_eps", "attention.layer_norm_rms_epsilon"},
        {"rope_theta", "rope.freq_base"},
        {"rope_local_base_freq", "rope.freq_base_swa"},
        {"sliding_window", "attention.sliding_window"},
        {"attn_logit_softcapping", "attn_logit_softcapping"},
        {"final_logit_softcapping", "final_logit_softcapping"},
        {"rope_scaling.factor", "rope.scaling.factor"},
        {"hidden_size_per_layer_input", "embedding_length_per_layer_input"},
    };
    for (auto& [from, to] : map) {
      if (std::string_view(hf) == from) return arch + "." + to;
    }
    static const std::pair<const char*, const char*> linear[] = {
        {"linear_conv_kernel_dim", "ssm.conv_kernel"},
        {"linear_num_key_heads", "ssm.group_count"},
        {"linear_num_value_heads", "ssm.time_step_rank"},
        {"linear_key_head_dim", "ssm.state_size"},
        {"linear_value_head_dim", "ssm.inner_size / ssm.time_step_rank"},
        {"partial_rotary_factor", "rope.dimension_count"},
    };
    const Family* fam = family_by_gguf_arch(arch);
    for (auto& [from, to] : linear) {
      if (fam && fam->linear_attention && std::string_view(hf) == from) return arch + "." + to;
    }
    if (std::string_view(hf) == "vocab_size") return "token_embd.weight (its rows)";
    if (std::string_view(hf).starts_with("rope_scaling.") ||
        std::string_view(hf) == "partial_rotary_factor") {
      return "rope_freqs.weight";
    }
    return std::string(hf) + " (derived from the metadata)";
  };
}

void gguf_sizes(const Meta& m, ModelConfig& c) {
  const io::GgufFile& f = m.f;
  c.d_model = m.req_int("embedding_length");
  c.n_layers = m.req_int("block_count");
  if (c.n_layers <= 0 || c.n_layers > kMaxLayers) {
    fail<ConfigError>("GGUF file '{}': {} must be in 1..{}, got {}", f.path(),
                      m.key("block_count"), kMaxLayers, c.n_layers);
  }
  // llama.cpp writes expert_count for mixture-of-experts layers (Mixtral,
  // Gemma 4 26B-A4B): their expert tensors would be left unread.
  if (const int experts = m.get_int("expert_count", 0); experts > 0) {
    fail<ConfigError>("GGUF file '{}': {} = {}: mixture-of-experts layers (as Gemma 4 26B-A4B's) "
                      "are not supported", f.path(), m.key("expert_count"), experts);
  }
  c.n_heads = m.req_int("attention.head_count");
  if (c.n_heads <= 0) {
    fail<ConfigError>("GGUF file '{}': {} must be positive", f.path(), m.key("attention.head_count"));
  }
  c.max_position = m.req_int("context_length");
  c.norm_eps = float(m.get_float("attention.layer_norm_rms_epsilon", 1e-5));
  if (!f.find(m.key("attention.layer_norm_rms_epsilon"))) {
    fail<ConfigError>("GGUF file '{}': missing required key '{}'", f.path(),
                      m.key("attention.layer_norm_rms_epsilon"));
  }
  // The vocabulary is the embedding's row count.
  const io::GgufTensor* embd = f.tensor("token_embd.weight");
  if (!embd || embd->dims.size() != 2) {
    fail<FormatError>("GGUF file '{}' has no 2-D token_embd.weight", f.path());
  }
  if (embd->dims[1] > INT32_MAX) {
    fail<ConfigError>("GGUF file '{}': token_embd.weight has {} rows", f.path(), embd->dims[1]);
  }
  c.vocab = int(embd->dims[1]);
  if (auto v = f.get_int(m.key("vocab_size")); v && *v != c.vocab) {
    fail<ShapeError>("GGUF file '{}': {} = {} but token_embd.weight has {} rows", f.path(),
                     m.key("vocab_size"), *v, c.vocab);
  }
  c.tie_embeddings = f.tensor("output.weight") == nullptr;
}

// The head and MLP widths of families whose layers are alike.
void gguf_uniform_shapes(const Meta& m, ModelConfig& c) {
  const io::GgufFile& f = m.f;
  c.ffn = m.req_int("feed_forward_length");
  c.n_kv_heads = m.get_int("attention.head_count_kv", c.n_heads);
  c.head_dim = m.get_int("attention.key_length", c.d_model / c.n_heads);
  if (m.get_int("attention.value_length", c.head_dim) != c.head_dim) {
    fail<ConfigError>("GGUF file '{}': {} = {} differs from {} = {} (not supported)", f.path(),
                      m.key("attention.value_length"), m.get_int("attention.value_length", 0),
                      m.key("attention.key_length"), c.head_dim);
  }
  if (int rot = m.get_int("rope.dimension_count", c.head_dim); rot != c.head_dim) {
    fail<ConfigError>("GGUF file '{}': {} = {} (partial RoPE) is not supported; head_dim is {}",
                      f.path(), m.key("rope.dimension_count"), rot, c.head_dim);
  }
}

// A key holding one value for every layer, or a per-layer array of them
// (llama.cpp's get_key_or_arr). Absent: `def` (< 0: required).
std::vector<int> per_layer(const Meta& m, const char* k, int n, int def) {
  const io::GgufFile& f = m.f;
  const io::GgufValue* v = f.find(m.key(k));
  if (!v) {
    if (def < 0) fail<ConfigError>("GGUF file '{}': missing required key '{}'", f.path(), m.key(k));
    return std::vector<int>(size_t(n), def);
  }
  if (v->type != io::GgufType::Array) return std::vector<int>(size_t(n), m.req_int(k));
  if (int64_t(v->arr.size()) != n) {
    fail<ConfigError>("GGUF file '{}': {} lists {} values for {} = {} layers", f.path(),
                      m.key(k), v->arr.size(), m.key("block_count"), n);
  }
  std::vector<int> out;
  for (const io::GgufValue& x : v->arr) {
    const int64_t i = x.type == io::GgufType::Bool ? int64_t(x.u)
                      : !x.is_integer()            ? -1
                      : x.type == io::GgufType::I8 || x.type == io::GgufType::I16 ||
                              x.type == io::GgufType::I32 || x.type == io::GgufType::I64
                          ? x.i
                          : int64_t(x.u);
    if (i < 0 || i > INT32_MAX) {
      fail<ConfigError>("GGUF file '{}': {} holds {} (an integer >= 0 per layer)", f.path(),
                        m.key(k), x.describe());
    }
    out.push_back(int(i));
  }
  return out;
}

// Gemma 4 (llama.cpp's gemma4 keys): the sliding pattern, each kind's head
// width and kv heads (K = V where a full layer has no attn_v), the MLP width
// per layer, the shared layers, the per-layer embedding width.
void gguf_layer_shapes(const Meta& m, const Family& fam, ModelConfig& c) {
  const io::GgufFile& f = m.f;
  const int n = c.n_layers;
  const std::vector<int> swa = per_layer(m, "attention.sliding_window_pattern", n, -1);
  const std::vector<int> kv = per_layer(m, "attention.head_count_kv", n, c.n_heads);
  const std::vector<int> ffn = per_layer(m, "feed_forward_length", n, -1);
  const int full_hd = m.req_int("attention.key_length");
  const int swa_hd = m.get_int("attention.key_length_swa", full_hd);
  for (const char* suffix : {"", "_swa"}) {
    const std::string vk = std::string("attention.value_length") + suffix;
    const int want = *suffix ? swa_hd : full_hd;
    if (int got = m.get_int(vk.c_str(), want); got != want) {
      fail<ConfigError>("GGUF file '{}': {} = {} differs from the key length {} (not supported)",
                        f.path(), m.key(vk.c_str()), got, want);
    }
  }
  if (int rot = m.get_int("rope.dimension_count", full_hd); rot != full_hd) {
    fail<ConfigError>("GGUF file '{}': {} = {}, but gemma4's full layers rotate their whole "
                      "head ({} = {}; rope_freqs.weight makes it proportional)", f.path(),
                      m.key("rope.dimension_count"), rot, m.key("attention.key_length"), full_hd);
  }
  if (int rot = m.get_int("rope.dimension_count_swa", swa_hd); rot != swa_hd) {
    fail<ConfigError>("GGUF file '{}': {} = {} (partial RoPE on sliding layers) is not "
                      "supported; {} is {}", f.path(), m.key("rope.dimension_count_swa"), rot,
                      m.key("attention.key_length_swa"), swa_hd);
  }
  std::vector<uint8_t> sliding(swa.begin(), swa.end());
  if (fam.last_layer_full) sliding.back() = 0;
  c.head_dim = swa_hd;
  c.ffn = ffn[0];
  c.n_kv_heads = kv[0];
  c.set_uniform_layers(sliding);
  for (int l = 0; l < n; ++l) {
    LayerKind& k = c.layers[size_t(l)];
    k.head_dim = k.sliding ? swa_hd : full_hd;
    k.n_kv_heads = kv[size_t(l)];
    k.ffn = ffn[size_t(l)];
    const std::string blk = "blk." + std::to_string(l) + ".";
    k.k_eq_v = !k.sliding && f.tensor(blk + "attn_k.weight") && !f.tensor(blk + "attn_v.weight");
  }
  for (int l = 0; l < n; ++l) {  // the MLP width of the family's own layers: the first sliding
    if (c.layers[size_t(l)].sliding) {
      c.ffn = ffn[size_t(l)], c.n_kv_heads = kv[size_t(l)];
      break;
    }
  }
  const int shared = m.get_int("attention.shared_kv_layers", 0);
  if (shared >= n) {
    fail<ConfigError>("GGUF file '{}': {} = {} leaves no layer to own K/V ({} = {})", f.path(),
                      m.key("attention.shared_kv_layers"), shared, m.key("block_count"), n);
  }
  for (int l = n - shared; l < n; ++l) {
    LayerKind& k = c.layers[size_t(l)];
    for (int o = n - shared - 1; o >= 0 && k.kv_source < 0; --o) {
      if (c.layers[size_t(o)].sliding == k.sliding) k.kv_source = o;
    }
    if (k.kv_source < 0) {
      fail<ConfigError>("GGUF file '{}': {} = {} leaves no earlier {} layer to own layer {}'s "
                        "K/V", f.path(), m.key("attention.shared_kv_layers"), shared,
                        k.sliding ? "sliding" : "full", l);
    }
    const LayerKind& o = c.layers[size_t(k.kv_source)];
    k.k_eq_v = o.k_eq_v;
  }
  c.ple_dim = m.get_int("embedding_length_per_layer_input", 0);
  c.sliding_window = m.req_int("attention.sliding_window");
  c.final_softcap = float(m.get_float("final_logit_softcapping", 0.0));
  c.rope_local_theta = float(m.get_float("rope.freq_base_swa", 10000.0));
}

// The ssm.* keys against the first Gated DeltaNet layer's tensors, named
// with both values (the loader's shape check would name only the tensor).
void gguf_check_linear_tensors(const Meta& m, const ModelConfig& c) {
  int first = -1;
  for (int l = 0; l < c.n_layers && first < 0; ++l) {
    if (c.is_recurrent(l)) first = l;
  }
  if (first < 0) return;
  const io::GgufFile& f = m.f;
  const std::string b = "blk." + std::to_string(first) + ".";
  auto dims = [&](const char* n) {
    const io::GgufTensor* t = f.tensor(b + n);
    return t ? t->shape() : std::vector<int64_t>{};
  };
  const LinearAttn& a = c.linear;
  if (const auto s = dims("ssm_conv1d.weight"); s.size() == 2 && s[1] != a.conv_kernel) {
    fail<ConfigError>("GGUF file '{}': {} = {}, but tensor '{}' is a kernel of {} taps", f.path(),
                      m.key("ssm.conv_kernel"), a.conv_kernel, b + "ssm_conv1d.weight", s[1]);
  }
  if (const auto s = dims("ssm_a"); s.size() == 1 && s[0] != a.v_heads) {
    fail<ConfigError>("GGUF file '{}': {} = {}, but tensor '{}' has {} heads", f.path(),
                      m.key("ssm.time_step_rank"), a.v_heads, b + "ssm_a", s[0]);
  }
  if (const auto s = dims("ssm_norm.weight"); s.size() == 1 && s[0] != a.v_dim) {
    fail<ConfigError>("GGUF file '{}': {} / {} = {}, but tensor '{}' (the gated norm) has {} "
                      "values", f.path(), m.key("ssm.inner_size"), m.key("ssm.time_step_rank"),
                      a.v_dim, b + "ssm_norm.weight", s[0]);
  }
  if (const auto s = dims("attn_qkv.weight"); s.size() == 2 && s[0] != a.conv_dim()) {
    fail<ConfigError>("GGUF file '{}': {} {} x {} {} (and the value heads) imply {} rows of '{}', "
                      "which has {}", f.path(), m.key("ssm.group_count"), a.k_heads,
                      m.key("ssm.state_size"), a.k_dim, a.conv_dim(), b + "attn_qkv.weight", s[0]);
  }
}

// Qwen3.5 (llama.cpp's qwen35 keys): block_count counts the native MTP
// layers (nextn_predict_layers) after the trunk's; attention.recurrent_layers
// (when present) or else every full_attention_interval-th layer is full
// attention, the others Gated
// DeltaNet with the ssm.* shape; the value heads stored in llama.cpp's tiled
// order; partial rotary over rope.dimension_count dims.
void gguf_linear_layers(const Meta& m, ModelConfig& c) {
  const io::GgufFile& f = m.f;
  c.mtp_layers = m.get_int("nextn_predict_layers", 0);
  if (c.mtp_layers > 1) {  // as mtp_num_hidden_layers (load_hf.cc)
    fail<ConfigError>("GGUF file '{}': {} = {}; the native MTP head is read with 1 layer",
                      f.path(), m.key("nextn_predict_layers"), c.mtp_layers);
  }
  if (c.mtp_layers >= c.n_layers) {
    fail<ConfigError>("GGUF file '{}': {} = {} leaves no trunk layer of {} = {}", f.path(),
                      m.key("nextn_predict_layers"), c.mtp_layers, m.key("block_count"),
                      c.n_layers);
  }
  c.n_layers -= c.mtp_layers;
  c.ffn = m.req_int("feed_forward_length");
  c.n_kv_heads = m.get_int("attention.head_count_kv", c.n_heads);
  c.head_dim = m.req_int("attention.key_length");
  if (int v = m.get_int("attention.value_length", c.head_dim); v != c.head_dim) {
    fail<ConfigError>("GGUF file '{}': {} = {} differs from {} = {} (not supported)", f.path(),
                      m.key("attention.value_length"), v, m.key("attention.key_length"),
                      c.head_dim);
  }
  c.rope_rotary_dim = m.get_int("rope.dimension_count", c.head_dim);
  const int every = m.get_int("full_attention_interval", 4);
  if (every <= 0) {
    fail<ConfigError>("GGUF file '{}': {} must be positive, got {}", f.path(),
                      m.key("full_attention_interval"), every);
  }
  c.set_uniform_layers(std::vector<uint8_t>(size_t(c.n_layers), 0));
  for (int i = 0; i < c.n_layers; ++i) c.layers[size_t(i)].recurrent = (i + 1) % every != 0;
  // The converter's layer_types, when the checkpoint has them: one flag per
  // block (the MTP blocks' false), over the interval rule.
  if (const auto* kinds = f.get_array(m.key("attention.recurrent_layers"), io::GgufType::Bool)) {
    if (kinds->size() != size_t(c.n_layers + c.mtp_layers)) {
      fail<ConfigError>("GGUF file '{}': {} has {} entries, {} = {}", f.path(),
                        m.key("attention.recurrent_layers"), kinds->size(), m.key("block_count"),
                        c.n_layers + c.mtp_layers);
    }
    for (int i = 0; i < c.n_layers; ++i) c.layers[size_t(i)].recurrent = (*kinds)[size_t(i)].u != 0;
  }
  LinearAttn& a = c.linear;
  a.conv_kernel = m.req_int("ssm.conv_kernel");
  a.k_dim = m.req_int("ssm.state_size");
  a.k_heads = m.req_int("ssm.group_count");
  a.v_heads = m.req_int("ssm.time_step_rank");
  const int inner = m.req_int("ssm.inner_size");
  if (a.v_heads <= 0 || inner % a.v_heads != 0) {
    fail<ConfigError>("GGUF file '{}': {} = {} is not a multiple of {} = {}", f.path(),
                      m.key("ssm.inner_size"), inner, m.key("ssm.time_step_rank"), a.v_heads);
  }
  a.v_dim = inner / a.v_heads;
  a.v_tiled = true;
  gguf_check_linear_tensors(m, c);
}

// RoPE. llama.cpp stores Llama's Q/K rows permuted for its interleaved
// rotation; the loader undoes that, so every family runs rotate-half here.
void gguf_rope(const Meta& m, const Family& fam, ModelConfig& c) {
  const io::GgufFile& f = m.f;
  c.rope_interleaved = false;
  c.rope_theta = float(m.get_float("rope.freq_base", 10000.0));  // llama.cpp's default
  const std::string scaling = f.get_string(m.key("rope.scaling.type")).value_or("none");
  double lin = m.get_float("rope.scale_linear", 1.0);  // older converters' key
  if (scaling == "linear") {
    lin = m.get_float("rope.scaling.factor", 0.0);
    if (!(lin > 0)) {
      fail<ConfigError>("GGUF file '{}': {} must be positive with rope.scaling.type linear",
                        f.path(), m.key("rope.scaling.factor"));
    }
  } else if (scaling != "none") {
    fail<ConfigError>("GGUF file '{}': {} '{}' is not supported (supported: none, linear)",
                      f.path(), m.key("rope.scaling.type"), scaling);
  }
  if (lin != 1.0) {
    c.rope_scaling.type = RopeScaling::Type::Linear;
    c.rope_scaling.factor = float(lin);
  }
  if (const io::GgufTensor* rf = f.tensor("rope_freqs.weight");
      rf && fam.gguf_rope_freqs == RopeFreqs::Proportional) {
    int full_hd = c.head_dim;
    for (int l = 0; l < c.n_layers; ++l) {
      if (!c.layer_kind(l).sliding) full_hd = c.layer_kind(l).head_dim;
    }
    c.rope_partial = recover_proportional(f, *rf, full_hd);
  } else if (rf) {
    if (fam.gguf_rope_freqs != RopeFreqs::Llama3 ||
        c.rope_scaling.type != RopeScaling::Type::None) {
      fail<ConfigError>("GGUF file '{}': rope_freqs.weight is only supported as llama3 scaling on "
                        "llama without other RoPE scaling", f.path());
    }
    c.rope_scaling = recover_llama3(f, *rf, c, f.get_int(m.key("rope.scaling.original_context_length")));
  }
  if (fam.rope_scaling_everywhere && c.rope_scaling.type != RopeScaling::Type::None) {
    fail<ConfigError>("GGUF file '{}': RoPE scaling on {} is not supported", f.path(), fam.name);
  }
}

// Gemma: the values llama.cpp hard-codes instead of storing, and the sliding
// layers. Stored norms already hold 1 + w (the converter adds it); the loader
// reads them as they are. norm_one_plus keeps its meaning for the family's
// other norms (a drafter's modules store w).
void gguf_gemma(const Meta& m, const Family& fam, ModelConfig& c) {
  // llama.cpp: 1/sqrt(head_dim), except the 27B models, whose
  // query_pre_attn_scalar is d_model/heads.
  const double qpas = c.n_layers == fam.gguf_big_layers ? double(c.d_model / c.n_heads)
                                                        : double(c.head_dim);
  c.query_scale = float(std::pow(qpas, -0.5));
  c.attn_softcap = float(m.get_float("attn_logit_softcapping", fam.attn_softcap));
  c.final_softcap = float(m.get_float("final_logit_softcapping", fam.final_softcap));
  // Gemma 3: with a sliding window, every 6th layer global and local RoPE
  // base 10000 on the others; without one (absent or 0, as newer llama.cpp
  // reads it), every layer global. Gemma 2: even layers local, the window
  // defaulting to 4096.
  c.sliding_window = m.get_int("attention.sliding_window", fam.gguf_window);
  std::vector<uint8_t> sliding(size_t(c.n_layers), 0);
  if (c.sliding_window > 0 || fam.sliding == SlidingPattern::EvenLayers) {
    sliding = sliding_flags(fam, c.n_layers, 6);
  }
  if (c.sliding_window > 0 && fam.local_rope) c.rope_local_theta = 10000.f;
  if (c.sliding_window <= 0) c.sliding_window = fam.gguf_window > 0 ? c.max_position : 0;
  c.set_uniform_layers(sliding);
}

// Special tokens: BOS, and EOS ∪ EOT ∪ EOM (each ends generation).
void gguf_special_tokens(const io::GgufFile& f, ModelConfig& c) {
  auto id = [&](const char* k) -> int32_t {
    auto v = f.get_int(k);
    if (!v) return -1;
    if (*v < 0 || *v >= c.vocab) {
      fail<ConfigError>("GGUF file '{}': '{}' = {} is outside the vocabulary of {}", f.path(), k,
                        *v, c.vocab);
    }
    return int32_t(*v);
  };
  c.bos_id = id("tokenizer.ggml.bos_token_id");
  for (const char* k : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
                        "tokenizer.ggml.eom_token_id"}) {
    if (int32_t e = id(k); e >= 0 && std::find(c.eos_ids.begin(), c.eos_ids.end(), e) == c.eos_ids.end())
      c.eos_ids.push_back(e);
  }
  std::sort(c.eos_ids.begin(), c.eos_ids.end());
}

}  // namespace

ModelConfig gguf_model_config(const io::GgufFile& f) {
  const auto arch_name = f.get_string("general.architecture");
  if (!arch_name) fail<ConfigError>("GGUF file '{}' has no general.architecture", f.path());
  const Family* fam = family_by_gguf_arch(*arch_name);
  if (!fam) {
    fail<ConfigError>("GGUF file '{}': general.architecture '{}'{} is not supported (supported: "
                      "{})", f.path(), *arch_name,
                      arch_name->ends_with("moe") ? " (mixture of experts)" : "",
                      supported_gguf_archs());
  }
  const Meta m{f, *arch_name + "."};
  ModelConfig c;
  c.arch = fam->arch;
  c.source = "gguf";
  gguf_sizes(m, c);
  if (fam->linear_attention) {
    gguf_linear_layers(m, c);
  } else if (fam->global_layer_shapes) {
    gguf_layer_shapes(m, *fam, c);
  } else {
    gguf_uniform_shapes(m, c);
  }
  gguf_rope(m, *fam, c);
  apply_family(*fam, c);
  if (fam->sliding != SlidingPattern::None && !fam->global_layer_shapes) gguf_gemma(m, *fam, c);
  if (c.ple_dim > 0) c.ple_embed_scale = std::sqrt(float(c.ple_dim));
  if (fam->embed_scale_in_weight_dtype) {
    // As transformers casts sqrt(d) to the table's dtype; a quantized or F32
    // table keeps the fp32 value (llama.cpp's).
    auto in_dtype = [&](float v, const char* tensor) {
      const io::GgufTensor* t = f.tensor(tensor);
      if (t && t->type == uint32_t(GgmlType::BF16)) return round_bf16(v);
      if (t && t->type == uint32_t(GgmlType::F16)) return f16_to_f32(f32_to_f16(v));
      return v;
    };
    c.embed_scale = in_dtype(c.embed_scale, "token_embd.weight");
    c.ple_embed_scale = in_dtype(c.ple_embed_scale, "per_layer_token_embd.weight");
  }
  gguf_special_tokens(f, c);
  c.validate("GGUF file '" + f.path() + "'", gguf_field_names(*arch_name));
  return c;
}

float gguf_rope_partial(const io::GgufFile& f, int full_head_dim) {
  const io::GgufTensor* rf = f.tensor("rope_freqs.weight");
  if (!rf) {
    fail<FormatError>("GGUF file '{}' has no rope_freqs.weight (its full layers' proportional "
                      "RoPE)", f.path());
  }
  return recover_proportional(f, *rf, full_head_dim);
}

ModelConfig read_gguf_config(const std::string& path) { return gguf_model_config(io::GgufFile(path)); }

}  // namespace mtp::model
