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
  for (int i = 0; i < c.n_layers; ++i) {
    for (auto& x : layer_tensor_shapes(c, l.prefix + "layers." + std::to_string(i) + ".")) {
      t.push_back(std::move(x));
    }
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

// Before any per-layer work: the weights the config implies, at 2 bytes per
// value (the smallest dtype a weight may have), must fit in the files. A
// num_hidden_layers of 1e9 or a vocab_size of 2^31 is refused here, naming the
// config, instead of building tables for tensors that cannot exist.
void check_config_fits_files(const TensorSet& ts, const ModelConfig& c, const Layout& l,
                             const std::string& config_path) {
  long double per_layer = 0;
  for (auto& [name, shape] : layer_tensor_shapes(c, l.prefix + "layers.0.")) {
    long double n = 1;
    for (int64_t s : shape) n *= (long double)s;
    per_layer += n;
  }
  const long double embed = (long double)c.vocab * c.d_model;
  const long double values =
      embed * (c.tie_embeddings ? 1 : 2) + c.d_model + per_layer * c.n_layers;
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

}  // namespace

LoadedModel load_hf(const std::string& dir, const LoadOptions& opt) {
  LoadedModel m;
  m.path = dir;
  m.config = read_hf_config(dir);
  const ModelConfig& c = m.config;
  const std::string config_path = (fs::path(dir) / "config.json").string();

  TensorSet ts = TensorSet::open_dir(dir);
  const Layout l = find_layout(ts);
  check_config_fits_files(ts, c, l, config_path);
  check_tensors(ts, c, l, config_path);

  ModelWeights& w = m.weights;
  w.layers.resize(c.n_layers);
  // Task 0: embedding (checked in place), final norm, lm_head; task 1 + i: layer i.
  const size_t n_tasks = size_t(c.n_layers) + 1;
  auto task = [&](size_t t) {
    if (t > 0) {
      w.layers[t - 1] = load_layer(ts, c, l.prefix + "layers." + std::to_string(t - 1) + ".", opt.weights);
      return;
    }
    const TensorView& e = finite_tensor(ts, l.prefix + "embed_tokens.weight");
    w.embed = EmbeddingTable{e.data, e.dtype, size_t(c.vocab), size_t(c.d_model)};
    w.final_norm = load_norm(ts, l.prefix + "norm.weight", c.norm_one_plus);
    if (c.tie_embeddings) {
      // The tied head: the embedding's bits packed as a matrix (a range error
      // of the hold names the tensor).
      w.lm_head = w.embed.pack(opt.weights, "tensor " + e.name + " (the tied head)");
    } else {
      w.lm_head = pack_rows({&finite_tensor(ts, l.lm_head)}, opt.weights);
    }
  };
  run_load_tasks(n_tasks, task);
  w.keep_alive.push_back(ts.keep_alive());  // the embedding view points into the maps

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
