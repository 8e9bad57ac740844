// Hugging Face checkpoint folder -> (ModelConfig, ModelWeights).
//
// Order of work, so that errors are deterministic and cheap ones come first:
//   1. config.json (+ generation_config.json) -> ModelConfig (hf_config.cc);
//   2. open model.safetensors or the shards of model.safetensors.index.json;
//   3. list every tensor the config implies, with its shape, and check presence,
//      dtype (F32/BF16/F16) and shape of each; refuse tensors in the language
//      model's namespace that nothing would read (an unexpected bias or an extra
//      layer would otherwise be dropped silently and change the outputs);
//   4. per layer, in parallel: NaN/Inf check, norms to fp32, q/k/v and gate/up
//      fused row-wise and packed. The first error by layer order is reported.
// The embedding table stays in the memory map; the TensorSet is kept alive
// through ModelWeights::keep_alive.
#include <algorithm>
#include <cstring>
#include <exception>
#include <filesystem>
#include <set>

#include "core/error.h"
#include "core/thread_pool.h"
#include "io/safetensors.h"
#include "model/family.h"
#include "model/hf_config.h"
#include "model/layer_io.h"
#include "model/loader.h"

namespace fs = std::filesystem;

namespace mtp::model {

namespace {

using io::TensorSet;
using io::TensorView;
using kernels::PackedMatrix;

// Where the language model's tensors live. Text-only checkpoints use "model.";
// Gemma 3 multimodal ones "language_model.model." (transformers < 4.52) or
// "model.language_model." (later), with the lm_head beside them when untied.
struct Layout {
  std::string prefix;
  std::string lm_head;
};

Layout find_layout(const TensorSet& ts) {
  static const Layout layouts[] = {{"model.", "lm_head.weight"},
                                   {"model.language_model.", "lm_head.weight"},
                                   {"language_model.model.", "language_model.lm_head.weight"}};
  for (auto& l : layouts) {
    if (ts.contains(l.prefix + "embed_tokens.weight")) return l;
  }
  fail<FormatError>("'{}' has no embedding table (looked for model.embed_tokens.weight, "
                    "model.language_model.embed_tokens.weight, "
                    "language_model.model.embed_tokens.weight)", ts.source());
}

// Every tensor the config implies, with its expected [rows, cols] or [n] shape.
TensorShapes expected_tensors(const ModelConfig& c, const Layout& l) {
  const int64_t d = c.d_model, v = c.vocab;
  TensorShapes t;
  t.push_back({l.prefix + "embed_tokens.weight", {v, d}});
  if (c.ple_dim > 0) {
    const int64_t all = int64_t(c.n_layers) * c.ple_dim;
    t.push_back({l.prefix + "embed_tokens_per_layer.weight", {v, all}});
    t.push_back({l.prefix + "per_layer_model_projection.weight", {all, d}});
    t.push_back({l.prefix + "per_layer_projection_norm.weight", {c.ple_dim}});
  }
  for (int i = 0; i < c.n_layers; ++i) {
    for (auto& x : layer_tensor_shapes(c, l.prefix + "layers." + std::to_string(i) + ".", i)) {
      t.push_back(std::move(x));
    }
  }
  t.push_back({l.prefix + "norm.weight", {d}});
  if (!c.tie_embeddings) t.push_back({l.lm_head, {v, d}});
  return t;
}

// The native MTP head's tensors (mtp.*), when the config has the head and
// the checkpoint holds it (transformers' save_pretrained drops mtp.*: a
// checkpoint without them loads without the head).
bool has_native_mtp(const TensorSet& ts, const ModelConfig& c) {
  return c.mtp_layers > 0 && ts.contains("mtp.fc.weight");
}

// Stored tensors nobody reads: RoPE caches some converters keep, and the
// K/V projections and norms a layer reading another's K/V has no use for
// (Gemma 4 checkpoints keep them; transformers ignores them too).
bool ignorable(const ModelConfig& c, const Layout& l, const std::string& name) {
  if (name.ends_with(".rotary_emb.inv_freq")) return true;
  const std::string layers = l.prefix + "layers.";
  if (!name.starts_with(layers)) return false;
  const size_t dot = name.find('.', layers.size());
  if (dot == std::string::npos) return false;
  const std::string index = name.substr(layers.size(), dot - layers.size());
  if (index.empty() || index.size() > 6 || !std::all_of(index.begin(), index.end(), ::isdigit)) {
    return false;
  }
  const int layer = std::stoi(index);
  if (layer >= c.n_layers || c.layer_kind(layer).owns_kv()) return false;
  const std::string rest = name.substr(dot + 1);
  return rest.starts_with("self_attn.k_proj.") || rest.starts_with("self_attn.v_proj.") ||
         rest.starts_with("self_attn.k_norm.") || rest.starts_with("self_attn.v_norm.");
}

// The rows of a stored 2-D tensor, -1 when absent or not 2-D.
int64_t rows_of(const TensorSet& ts, const std::string& name) {
  const TensorView* v = ts.find(name);
  return v && v->shape.size() == 2 ? v->shape[0] : -1;
}

// Config fields whose value the tensors contradict, named with both values
// (before check_tensors would name only the tensor): the head widths, the
// per-layer embedding width and the shared-layer count.
void check_linear_facts(const TensorSet& ts, const ModelConfig& c, const Layout& l,
                        const std::string& config_path);

void check_layer_facts(const TensorSet& ts, const ModelConfig& c, const Layout& l,
                       const std::string& config_path) {
  const auto layer = [&](int i) { return l.prefix + "layers." + std::to_string(i) + "."; };
  const int64_t per_head = c.attn_gate ? 2 : 1;  // Qwen3.5: query and gate rows
  for (int i = 0; i < c.n_layers; ++i) {
    const LayerKind k = c.layer_kind(i);
    const int64_t q = rows_of(ts, layer(i) + "self_attn.q_proj.weight");
    if (q > 0 && q != per_head * c.n_heads * k.head_dim && q % (per_head * c.n_heads) == 0) {
      fail<ConfigError>("{}: {} = {} for layer {}, but tensor '{}' has {} rows = "
                        "num_attention_heads {} x {}{}", config_path,
                        k.sliding || c.layers.empty() || c.has_recurrent() ? "head_dim"
                                                                           : "global_head_dim",
                        k.head_dim, i, layer(i) + "self_attn.q_proj.weight", q, c.n_heads,
                        q / (per_head * c.n_heads), per_head == 2 ? " x 2 (query and gate)" : "");
    }
  }
  check_linear_facts(ts, c, l, config_path);
  if (c.ple_dim > 0 || ts.contains(layer(0) + "per_layer_input_gate.weight")) {
    const int64_t e = rows_of(ts, layer(0) + "per_layer_input_gate.weight");
    if (e != c.ple_dim) {
      fail<ConfigError>("{}: hidden_size_per_layer_input = {}, but the checkpoint's per-layer "
                        "embeddings are {} wide (tensor '{}')", config_path, c.ple_dim,
                        e < 0 ? 0 : e, layer(0) + "per_layer_input_gate.weight");
    }
  }
  // Shared layers: where the checkpoint's K projections end (the ones it
  // has), and where its MLPs double (use_double_wide_mlp).
  if (!family(c.arch).kv_sharing) return;
  int first_shared = c.n_layers, first_wide = c.n_layers;
  for (int i = c.n_layers - 1; i >= 0 && !c.layers.empty(); --i) {
    if (!c.layer_kind(i).owns_kv()) first_shared = i;
  }
  for (int i = 0; i < c.n_layers; ++i) {
    const bool has_k = ts.contains(layer(i) + "self_attn.k_proj.weight");
    const int64_t f = rows_of(ts, layer(i) + "mlp.gate_proj.weight");
    if (i < first_shared && !has_k) {
      fail<ConfigError>("{}: num_kv_shared_layers = {} makes layer {} compute its own K/V, but "
                        "it has no k_proj: the checkpoint shares from layer {} on "
                        "(num_kv_shared_layers = {})", config_path, c.n_layers - first_shared, i,
                        i, c.n_layers - i);
    }
    if (f == 2 * int64_t(c.ffn) && first_wide == c.n_layers) first_wide = i;
  }
  const bool wide = first_shared < c.n_layers &&
                    c.layer_kind(first_shared).ffn == 2 * c.ffn;
  if (wide && first_wide != first_shared) {
    fail<ConfigError>("{}: num_kv_shared_layers = {}, but the double-wide MLPs of the shared "
                      "layers start at layer {} (num_kv_shared_layers = {})", config_path,
                      c.n_layers - first_shared, first_wide, c.n_layers - first_wide);
  }
}

// The recurrent layers' shape keys against the first recurrent layer's
// tensors, named with both values: the conv kernel, the value heads and
// their width, the key heads x their width.
void check_linear_facts(const TensorSet& ts, const ModelConfig& c, const Layout& l,
                        const std::string& config_path) {
  int first = -1;
  for (int i = 0; i < c.n_layers && first < 0; ++i) {
    if (c.is_recurrent(i)) first = i;
  }
  if (first < 0) return;
  const std::string p = l.prefix + "layers." + std::to_string(first) + ".linear_attn.";
  const LinearAttn& a = c.linear;
  auto numel = [&](const std::string& n) -> int64_t {
    const TensorView* v = ts.find(p + n);
    return v ? int64_t(v->numel()) : -1;
  };
  if (const TensorView* conv = ts.find(p + "conv1d.weight");
      conv && conv->shape.size() == 3 && conv->shape[2] != a.conv_kernel) {
    fail<ConfigError>("{}: linear_conv_kernel_dim = {}, but tensor '{}' is a kernel of {} taps",
                      config_path, a.conv_kernel, p + "conv1d.weight", conv->shape[2]);
  }
  if (int64_t n = numel("A_log"); n >= 0 && n != a.v_heads) {
    fail<ConfigError>("{}: linear_num_value_heads = {}, but tensor '{}' has {} heads",
                      config_path, a.v_heads, p + "A_log", n);
  }
  if (int64_t n = numel("norm.weight"); n >= 0 && n != a.v_dim) {
    fail<ConfigError>("{}: linear_value_head_dim = {}, but tensor '{}' (the gated norm) has {} "
                      "values", config_path, a.v_dim, p + "norm.weight", n);
  }
  const int64_t qkv = rows_of(ts, p + "in_proj_qkv.weight");
  if (qkv >= 0 && qkv != a.conv_dim()) {
    fail<ConfigError>("{}: linear_num_key_heads {} x linear_key_head_dim {} (and the value heads) "
                      "imply {} rows of '{}', which has {}", config_path, a.k_heads, a.k_dim,
                      a.conv_dim(), p + "in_proj_qkv.weight", qkv);
  }
}

// Before any per-layer work: the weights the config implies, at 2 bytes per
// value (the smallest dtype a weight may have), must fit in the files. A
// num_hidden_layers of 1e9 or a vocab_size of 2^31 is refused here, naming the
// config, instead of building tables for tensors that cannot exist.
void check_config_fits_files(const TensorSet& ts, const ModelConfig& c, const Layout& l,
                             const std::string& config_path) {
  long double layers = 0;
  for (int i = 0; i < c.n_layers; ++i) {
    for (auto& [name, shape] : layer_tensor_shapes(c, l.prefix + "layers.0.", i)) {
      long double n = 1;
      for (int64_t s : shape) n *= (long double)s;
      layers += n;
    }
  }
  const long double embed = (long double)c.vocab * c.d_model;
  const long double ple = (long double)c.vocab * c.n_layers * c.ple_dim;
  const long double values = embed * (c.tie_embeddings ? 1 : 2) + ple + c.d_model + layers;
  long double have = 0;
  for (auto& f : ts.files()) have += (long double)f->file_size();
  if (2 * values > have) {
    fail<ConfigError>("{}: num_hidden_layers {}, hidden_size {}, intermediate_size {}, "
                      "vocab_size {} imply at least {:.0f} bytes of weights, but the "
                      "checkpoint's safetensors files in '{}' hold {:.0f} bytes",
                      config_path, c.n_layers, c.d_model, c.ffn, c.vocab, double(2 * values),
                      ts.source(), double(have));
  }
}

void check_tensors(const TensorSet& ts, const ModelConfig& c, const Layout& l,
                   const std::string& config_path) {
  auto expected = expected_tensors(c, l);
  if (has_native_mtp(ts, c)) {
    if (c.mtp_layers != 1) {
      fail<ConfigError>("{}: mtp_num_hidden_layers = {}; the native MTP head is read with 1 layer",
                        config_path, c.mtp_layers);
    }
    for (auto& x : native_mtp_tensors(c)) expected.push_back(std::move(x));
  }
  std::set<std::string> wanted;
  for (auto& [name, shape] : expected) {
    wanted.insert(name);
    const TensorView* v = ts.find(name);
    if (!v) {
      std::string why = name == l.lm_head ? " (config.json sets tie_word_embeddings=false)" : "";
      fail<FormatError>("tensor '{}' not found in '{}'{}", name, ts.source(), why);
    }
    if (v->dtype != DType::F32 && v->dtype != DType::BF16 && v->dtype != DType::F16) {
      fail<ShapeError>("tensor '{}' in '{}' has dtype {}; weights must be F32, BF16 or F16",
                       name, ts.file_of(name), dtype_name(v->dtype));
    }
    if (v->shape != shape) {
      fail<ShapeError>("tensor '{}' in '{}' has shape {}; {} implies {}", name,
                       ts.file_of(name), shape_str(v->shape), config_path, shape_str(shape));
    }
  }
  for (const std::string& name : ts.names()) {
    bool ours = name.compare(0, l.prefix.size(), l.prefix) == 0 || name == l.lm_head ||
                (has_native_mtp(ts, c) && name.starts_with("mtp."));
    if (!ours || wanted.count(name) || ignorable(c, l, name)) continue;
    if (name == l.lm_head && c.tie_embeddings) continue;  // transformers ties over it
    fail<FormatError>("tensor '{}' in '{}' is not part of a {} model as {} describes it (it "
                      "would be ignored, changing the outputs)", name, ts.file_of(name),
                      arch_name(c.arch), config_path);
  }
}


// Gemma 4 multiplies by sqrt(d) (and sqrt(ple_dim)) cast to the table's dtype.
float scale_in_dtype(float scale, DType t) {
  if (t == DType::BF16) return round_bf16(scale);
  if (t == DType::F16) return f16_to_f32(f32_to_f16(scale));
  return scale;
}

// The token tables (in place), final norm and head; the per-layer embedding
// projection.
void load_tables(const TensorSet& ts, const Layout& l, const LoadOptions& opt, ModelConfig& c,
                 ModelWeights& w) {
  const TensorView& e = finite_tensor(ts, l.prefix + "embed_tokens.weight");
  w.embed = EmbeddingTable{e.data, e.dtype, size_t(c.vocab), size_t(c.d_model)};
  w.embed.owner = ts.keep_alive();
  w.final_norm = load_norm(ts, l.prefix + "norm.weight", c.norm_one_plus);
  if (c.tie_embeddings) {
    // The tied head: the embedding's bits, in place or packed (a range error
    // of the hold names the tensor).
    w.lm_head = w.embed.head(opt.weights, opt.tied_head, "tensor " + e.name + " (the tied head)");
  } else {
    w.lm_head = pack_rows({&finite_tensor(ts, l.lm_head)}, opt.weights);
  }
  if (c.ple_dim > 0) {
    // Read by rows at decode, never copied: checked finite here, in place.
    const TensorView& t = finite_tensor(ts, l.prefix + "embed_tokens_per_layer.weight");
    w.ple_embed = EmbeddingTable{t.data, t.dtype, size_t(c.vocab),
                                 size_t(c.n_layers) * size_t(c.ple_dim)};
    w.ple_model_proj = load_matrix(ts, {l.prefix + "per_layer_model_projection.weight"},
                                   opt.weights);
    w.ple_proj_norm = load_norm(ts, l.prefix + "per_layer_projection_norm.weight",
                                c.norm_one_plus);
  }
}

void load_native_mtp(const TensorSet& ts, const ModelConfig& c, const LoadOptions& opt,
                     NativeMtpWeights& m) {
  const bool op = c.norm_one_plus;
  m.norm_embed = load_norm(ts, "mtp.pre_fc_norm_embedding.weight", op);
  m.norm_hidden = load_norm(ts, "mtp.pre_fc_norm_hidden.weight", op);
  m.norm = load_norm(ts, "mtp.norm.weight", op);
  m.fc = load_matrix(ts, {"mtp.fc.weight"}, opt.weights);
  m.layer = load_layer(ts, native_mtp_config(c), "mtp.layers.0.", opt.weights, nullptr, 0);
}

}  // namespace

LoadedModel load_hf(const std::string& dir, const LoadOptions& opt) {
  LoadedModel m;
  m.path = dir;
  m.config = read_hf_config(dir);
  ModelConfig& c = m.config;
  const std::string config_path = (fs::path(dir) / "config.json").string();
  const Family& fam = family(c.arch);

  // A multimodal checkpoint's towers are never opened or read.
  TensorSet ts = TensorSet::open_dir(dir, [&](std::string_view n) { return hf_tensor_skipped(fam, n); });
  const Layout l = find_layout(ts);
  if (fam.embed_scale_in_weight_dtype) {
    c.embed_scale = scale_in_dtype(c.embed_scale, ts.get(l.prefix + "embed_tokens.weight").dtype);
    if (const TensorView* t = ts.find(l.prefix + "embed_tokens_per_layer.weight")) {
      c.ple_embed_scale = scale_in_dtype(c.ple_embed_scale, t->dtype);
    }
  }
  check_config_fits_files(ts, c, l, config_path);
  check_layer_facts(ts, c, l, config_path);
  check_tensors(ts, c, l, config_path);

  ModelWeights& w = m.weights;
  w.layers.resize(c.n_layers);
  // Task 0: the tables, final norm, lm_head; task 1 + i: layer i.
  const size_t n_tasks = size_t(c.n_layers) + 1;
  auto task = [&](size_t t) {
    if (t > 0) {
      w.layers[t - 1] = load_layer(ts, c, l.prefix + "layers." + std::to_string(t - 1) + ".",
                                   opt.weights, nullptr, int(t - 1));
      return;
    }
    load_tables(ts, l, opt, c, w);
    if (has_native_mtp(ts, c)) load_native_mtp(ts, c, opt, w.mtp);
  };
  run_load_tasks(n_tasks, task);
  w.keep_alive.push_back(ts.keep_alive());  // the table views point into the maps

  for (const char* tok : {"tokenizer.json", "tokenizer.model", "tokenizer.bin"}) {
    fs::path p = fs::path(dir) / tok;
    if (fs::exists(p)) {
      m.tokenizer = p.string();
      break;
    }
  }
  return m;
}

}  // namespace mtp::model
