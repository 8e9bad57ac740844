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
#include "model/hf_config.h"
#include "model/loader.h"

namespace fs = std::filesystem;

namespace mtp::model {

namespace {

using io::TensorSet;
using io::TensorView;
using kernels::PackedMatrix;

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

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
std::vector<std::pair<std::string, std::vector<int64_t>>> expected_tensors(const ModelConfig& c,
                                                                           const Layout& l) {
  const int64_t d = c.d_model, hd = c.head_dim, q = int64_t(c.n_heads) * hd,
                kv = int64_t(c.n_kv_heads) * hd, f = c.ffn, v = c.vocab;
  std::vector<std::pair<std::string, std::vector<int64_t>>> t;
  t.push_back({l.prefix + "embed_tokens.weight", {v, d}});
  for (int i = 0; i < c.n_layers; ++i) {
    std::string p = l.prefix + "layers." + std::to_string(i) + ".";
    t.push_back({p + "input_layernorm.weight", {d}});
    t.push_back({p + "self_attn.q_proj.weight", {q, d}});
    t.push_back({p + "self_attn.k_proj.weight", {kv, d}});
    t.push_back({p + "self_attn.v_proj.weight", {kv, d}});
    t.push_back({p + "self_attn.o_proj.weight", {d, q}});
    if (c.qkv_bias) {
      t.push_back({p + "self_attn.q_proj.bias", {q}});
      t.push_back({p + "self_attn.k_proj.bias", {kv}});
      t.push_back({p + "self_attn.v_proj.bias", {kv}});
    }
    if (c.qk_norm) {
      t.push_back({p + "self_attn.q_norm.weight", {hd}});
      t.push_back({p + "self_attn.k_norm.weight", {hd}});
    }
    t.push_back({p + "post_attention_layernorm.weight", {d}});
    if (c.sandwich_norms) {
      t.push_back({p + "pre_feedforward_layernorm.weight", {d}});
      t.push_back({p + "post_feedforward_layernorm.weight", {d}});
    }
    t.push_back({p + "mlp.gate_proj.weight", {f, d}});
    t.push_back({p + "mlp.up_proj.weight", {f, d}});
    t.push_back({p + "mlp.down_proj.weight", {d, f}});
  }
  t.push_back({l.prefix + "norm.weight", {d}});
  if (!c.tie_embeddings) t.push_back({l.lm_head, {v, d}});
  return t;
}

// Stored tensors nobody reads: RoPE caches some converters keep.
bool ignorable(const std::string& name) {
  const std::string_view suffix = ".rotary_emb.inv_freq";
  return name.size() >= suffix.size() &&
         name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

void check_tensors(const TensorSet& ts, const ModelConfig& c, const Layout& l,
                   const std::string& config_path) {
  auto expected = expected_tensors(c, l);
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
    bool ours = name.compare(0, l.prefix.size(), l.prefix) == 0 || name == l.lm_head;
    if (!ours || wanted.count(name) || ignorable(name)) continue;
    if (name == l.lm_head && c.tie_embeddings) continue;  // transformers ties over it
    fail<FormatError>("tensor '{}' in '{}' is not part of a {} model as {} describes it (it "
                      "would be ignored, changing the outputs)", name, ts.file_of(name),
                      arch_name(c.arch), config_path);
  }
}

const TensorView& finite(const TensorSet& ts, const std::string& name) {
  const TensorView& v = ts.get(name);
  check_finite(v.data, v.dtype, v.numel(), fmt::format("tensor '{}' in '{}'", name, ts.file_of(name)));
  return v;
}

// Row-wise concatenation of [r_i, cols] tensors, packed as one matrix. Same
// source dtype: bytes are copied, so packing sees exactly the stored values;
// mixed dtypes go through fp32, which represents F32/BF16/F16 exactly.
PackedMatrix pack_rows(const std::vector<const TensorView*>& parts, kernels::WeightType hold) {
  const size_t cols = size_t(parts[0]->shape[1]);
  size_t rows = 0;
  bool same = true;
  for (auto* p : parts) {
    rows += size_t(p->shape[0]);
    same = same && p->dtype == parts[0]->dtype;
  }
  if (parts.size() == 1) return PackedMatrix::pack(parts[0]->data, parts[0]->dtype, rows, cols, hold);
  const DType dt = same ? parts[0]->dtype : DType::F32;
  const size_t es = dtype_size(dt);
  std::vector<uint8_t> buf(rows * cols * es);
  uint8_t* dst = buf.data();
  for (auto* p : parts) {
    if (same) {
      std::memcpy(dst, p->data, p->nbytes);
    } else {
      to_f32(p->data, p->dtype, p->numel(), reinterpret_cast<float*>(dst));
    }
    dst += p->numel() * es;
  }
  return PackedMatrix::pack(buf.data(), dt, rows, cols, hold);
}

std::vector<float> norm(const TensorSet& ts, const std::string& name, bool one_plus) {
  const TensorView& v = finite(ts, name);
  return norm_weight(v.data, v.dtype, v.numel(), one_plus);
}

LayerWeights load_layer(const TensorSet& ts, const ModelConfig& c, const Layout& l, int i,
                        kernels::WeightType hold) {
  const std::string p = l.prefix + "layers." + std::to_string(i) + ".";
  const bool op = c.norm_one_plus;
  LayerWeights w;
  w.attn_norm = norm(ts, p + "input_layernorm.weight", op);
  if (c.sandwich_norms) {  // Gemma: post_attention_layernorm is the sandwich norm
    w.post_attn_norm = norm(ts, p + "post_attention_layernorm.weight", op);
    w.ffn_norm = norm(ts, p + "pre_feedforward_layernorm.weight", op);
    w.post_ffn_norm = norm(ts, p + "post_feedforward_layernorm.weight", op);
  } else {  // Llama/Qwen: post_attention_layernorm is the pre-FFN norm
    w.ffn_norm = norm(ts, p + "post_attention_layernorm.weight", op);
  }
  if (c.qk_norm) {  // per-head norms: (1 + w) on Gemma 3, plain on Qwen3
    w.q_norm = norm(ts, p + "self_attn.q_norm.weight", op);
    w.k_norm = norm(ts, p + "self_attn.k_norm.weight", op);
  }
  if (c.qkv_bias) {
    for (const char* b : {"q", "k", "v"}) {
      const TensorView& v = finite(ts, p + "self_attn." + b + "_proj.bias");
      size_t off = w.qkv_bias.size();
      w.qkv_bias.resize(off + v.numel());
      to_f32(v.data, v.dtype, v.numel(), w.qkv_bias.data() + off);
    }
  }
  w.wqkv = pack_rows({&finite(ts, p + "self_attn.q_proj.weight"),
                      &finite(ts, p + "self_attn.k_proj.weight"),
                      &finite(ts, p + "self_attn.v_proj.weight")}, hold);
  w.wo = pack_rows({&finite(ts, p + "self_attn.o_proj.weight")}, hold);
  w.w_gate_up = pack_rows({&finite(ts, p + "mlp.gate_proj.weight"),
                           &finite(ts, p + "mlp.up_proj.weight")}, hold);
  w.w_down = pack_rows({&finite(ts, p + "mlp.down_proj.weight")}, hold);
  return w;
}

}  // namespace

LoadedModel load_hf(const std::string& dir, const LoadOptions& opt) {
  LoadedModel m;
  m.path = dir;
  m.config = read_hf_config(dir);
  const ModelConfig& c = m.config;
  const std::string config_path = (fs::path(dir) / "config.json").string();

  TensorSet ts = TensorSet::open_dir(dir);
  const Layout l = find_layout(ts);
  check_tensors(ts, c, l, config_path);

  ModelWeights& w = m.weights;
  w.layers.resize(c.n_layers);
  // Task 0: embedding (checked in place), final norm, lm_head; task 1 + i: layer i.
  const size_t n_tasks = size_t(c.n_layers) + 1;
  std::vector<std::exception_ptr> errors(n_tasks);
  auto task = [&](size_t t) {
    if (t > 0) {
      w.layers[t - 1] = load_layer(ts, c, l, int(t - 1), opt.weights);
      return;
    }
    const TensorView& e = finite(ts, l.prefix + "embed_tokens.weight");
    w.embed = EmbeddingTable{e.data, e.dtype, size_t(c.vocab), size_t(c.d_model)};
    w.final_norm = norm(ts, l.prefix + "norm.weight", c.norm_one_plus);
    if (c.tie_embeddings) {
      w.lm_head = PackedMatrix::pack(e.data, e.dtype, size_t(c.vocab), size_t(c.d_model),
                                     opt.weights);
    } else {
      w.lm_head = pack_rows({&finite(ts, l.lm_head)}, opt.weights);
    }
  };
  ThreadPool pool(std::max(1, std::min<int>(physical_cores(), int(n_tasks))));
  pool.parallel_for(n_tasks, [&](size_t b, size_t e, size_t) {
    for (size_t t = b; t < e; ++t) {
      try {
        task(t);
      } catch (...) {
        errors[t] = std::current_exception();
      }
    }
  });
  for (auto& err : errors) {
    if (err) std::rethrow_exception(err);
  }
  w.keep_alive.push_back(ts.keep_alive());  // the embedding view points into the maps

  for (const char* tok : {"tokenizer.json", "tokenizer.model"}) {
    fs::path p = fs::path(dir) / tok;
    if (fs::exists(p)) {
      m.tokenizer = p.string();
      break;
    }
  }
  return m;
}

}  // namespace mtp::model
