// llama2.c legacy checkpoints (run.c's format): a header of 7 int32 fields
// (dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len) then
// fp32 tensors in a fixed order. A negative vocab_size means the classifier is
// stored separately (unshared). RoPE pairs are interleaved (x[2i], x[2i+1]).
#include <cstring>
#include <filesystem>
#include <memory>

#include "core/error.h"
#include "core/mapped_file.h"
#include "model/layer_io.h"
#include "model/loader.h"

namespace fs = std::filesystem;

namespace mtp::model {

namespace {

// Sequential reader over the mapped fp32 payload with bounds checks.
class Cursor {
 public:
  Cursor(const MappedFile& f, size_t offset) : f_(f), off_(offset) {}
  const float* take(size_t n, const char* what) {
    size_t bytes = n * sizeof(float);
    if (off_ + bytes > f_.size()) {
      fail<IoError>("llama2.c checkpoint '{}' is truncated: {} needs {} bytes at offset {}, "
                    "the file has {}", f_.path(), what, bytes, off_, f_.size());
    }
    const float* p = reinterpret_cast<const float*>(f_.data() + off_);
    off_ += bytes;
    return p;
  }
  void skip(size_t n, const char* what) { take(n, what); }

 private:
  const MappedFile& f_;
  size_t off_;
};

std::vector<float> checked(const float* p, size_t n, const std::string& what) {
  check_finite(p, n, what);
  return std::vector<float>(p, p + n);
}

// The config a header describes (validated). `shared`: whether the classifier
// is the embedding (vocab_size > 0).
ModelConfig header_config(const MappedFile& file, bool& shared) {
  const std::string& path = file.path();
  if (file.size() < 7 * sizeof(int32_t)) {
    fail<IoError>("llama2.c checkpoint '{}' is truncated: {} bytes, the header alone is 28",
                  path, file.size());
  }
  int32_t h[7];
  std::memcpy(h, file.data(), sizeof h);
  // Every field must be positive (vocab_size may be negative: its sign only
  // says the classifier is stored separately) and the heads must divide dim
  // and each other; then the sizes they imply must be the file's size exactly.
  const int64_t vocab = h[5] < 0 ? -int64_t(h[5]) : int64_t(h[5]);
  auto bad = [&](const std::string& why) {
    fail<FormatError>("'{}' is not a llama2.c checkpoint: {} (header: dim {}, hidden_dim {}, "
                      "n_layers {}, n_heads {}, n_kv_heads {}, vocab_size {}, seq_len {})",
                      path, why, h[0], h[1], h[2], h[3], h[4], h[5], h[6]);
  };
  static const char* const names[7] = {"dim", "hidden_dim", "n_layers", "n_heads",
                                       "n_kv_heads", "vocab_size", "seq_len"};
  for (int i = 0; i < 7; ++i) {
    if ((i == 5 ? vocab : int64_t(h[i])) <= 0) {
      bad(fmt::format("{} must be {}, got {}", names[i], i == 5 ? "non-zero" : "positive", h[i]));
    }
  }
  if (h[0] % h[3] != 0) bad(fmt::format("dim {} is not a multiple of n_heads {}", h[0], h[3]));
  if (h[3] % h[4] != 0) {
    bad(fmt::format("n_heads {} is not a multiple of n_kv_heads {}", h[3], h[4]));
  }
  if (vocab > INT32_MAX) bad("vocab_size out of range");
  {
    // run.c's layout, counted in floats (long double: no overflow for any header).
    const long double d = h[0], f = h[1], L = h[2], hd = h[0] / h[3], kvd = hd * h[4],
                      V = (long double)vocab, S = h[6];
    const long double floats = V * d + L * (2 * d + 2 * d * d + 2 * kvd * d + 3 * f * d) + d +
                               S * hd + (h[5] < 0 ? V * d : 0);
    const long double want = 7 * sizeof(int32_t) + floats * sizeof(float);
    if (want > (long double)file.size()) {
      fail<IoError>("llama2.c checkpoint '{}' is truncated or its header is wrong: the header "
                    "(dim {}, hidden_dim {}, n_layers {}, n_heads {}, n_kv_heads {}, vocab_size "
                    "{}, seq_len {}) implies {:.0f} bytes, the file has {}", path, h[0], h[1],
                    h[2], h[3], h[4], h[5], h[6], double(want), file.size());
    }
    if (want < (long double)file.size()) {
      bad(fmt::format("the header implies {:.0f} bytes but the file has {} ({} bytes follow the "
                      "last tensor)", double(want), file.size(),
                      double((long double)file.size() - want)));
    }
  }
  ModelConfig c;
  c.arch = Arch::Llama;
  c.source = "llama2c";
  c.d_model = h[0];
  c.ffn = h[1];
  c.n_layers = h[2];
  c.n_heads = h[3];
  c.n_kv_heads = h[4];
  shared = h[5] > 0;
  c.vocab = int(vocab);
  c.max_position = h[6];
  c.head_dim = c.d_model / c.n_heads;
  c.norm_eps = 1e-5f;
  c.rope_interleaved = true;
  c.rope_theta = 10000.f;
  c.tie_embeddings = shared;
  c.bos_id = 1;
  c.eos_ids = {2};
  c.validate(path);
  return c;
}

}  // namespace

ModelConfig read_llama2c_config(const std::string& path) {
  bool shared = false;
  return header_config(MappedFile(path), shared);
}

LoadedModel load_llama2c(const std::string& path, const LoadOptions& opt) {
  auto file = std::make_shared<MappedFile>(path);
  bool shared = false;
  LoadedModel m;
  m.path = path;
  m.config = header_config(*file, shared);
  const ModelConfig& c = m.config;

  const size_t d = c.d_model, L = c.n_layers, V = c.vocab, ffn = c.ffn;
  const size_t qd = size_t(c.n_heads) * c.head_dim, kvd = size_t(c.n_kv_heads) * c.head_dim;
  Cursor cur(*file, 7 * sizeof(int32_t));
  const float* emb = cur.take(V * d, "token_embedding_table");
  const float* att_norm = cur.take(L * d, "rms_att_weight");
  const float* wq = cur.take(L * qd * d, "wq");
  const float* wk = cur.take(L * kvd * d, "wk");
  const float* wv = cur.take(L * kvd * d, "wv");
  const float* wo = cur.take(L * d * qd, "wo");
  const float* ffn_norm = cur.take(L * d, "rms_ffn_weight");
  const float* w1 = cur.take(L * ffn * d, "w1");
  const float* w2 = cur.take(L * d * ffn, "w2");
  const float* w3 = cur.take(L * ffn * d, "w3");
  const float* final_norm = cur.take(d, "rms_final_weight");
  cur.skip(size_t(c.max_position) * c.head_dim, "freq_cis");  // real and imag halves
  const float* wcls = shared ? emb : cur.take(V * d, "wcls");

  ModelWeights& w = m.weights;
  check_finite(emb, V * d, "token_embedding_table");
  w.embed = EmbeddingTable{emb, DType::F32, V, d};
  w.layers.resize(L);
  std::vector<float> buf;
  for (size_t l = 0; l < L; ++l) {
    LayerWeights& lw = w.layers[l];
    std::string tag = "layer " + std::to_string(l);
    lw.attn_norm = checked(att_norm + l * d, d, tag + " rms_att_weight");
    lw.ffn_norm = checked(ffn_norm + l * d, d, tag + " rms_ffn_weight");
    buf.assign(wq + l * qd * d, wq + (l + 1) * qd * d);
    buf.insert(buf.end(), wk + l * kvd * d, wk + (l + 1) * kvd * d);
    buf.insert(buf.end(), wv + l * kvd * d, wv + (l + 1) * kvd * d);
    check_finite(buf.data(), buf.size(), tag + " wq/wk/wv");
    lw.wqkv = pack_float_matrix(buf.data(), DType::F32, qd + 2 * kvd, d, opt.weights, tag + " wq/wk/wv");
    check_finite(wo + l * d * qd, d * qd, tag + " wo");
    lw.wo = pack_float_matrix(wo + l * d * qd, DType::F32, d, qd, opt.weights, tag + " wo");
    buf.assign(w1 + l * ffn * d, w1 + (l + 1) * ffn * d);
    buf.insert(buf.end(), w3 + l * ffn * d, w3 + (l + 1) * ffn * d);
    check_finite(buf.data(), buf.size(), tag + " w1/w3");
    lw.w_gate_up = pack_float_matrix(buf.data(), DType::F32, 2 * ffn, d, opt.weights, tag + " w1/w3");
    check_finite(w2 + l * d * ffn, d * ffn, tag + " w2");
    lw.w_down = pack_float_matrix(w2 + l * d * ffn, DType::F32, d, ffn, opt.weights, tag + " w2");
  }
  w.final_norm = checked(final_norm, d, "rms_final_weight");
  if (!shared) check_finite(wcls, V * d, "wcls");
  w.lm_head = pack_float_matrix(wcls, DType::F32, V, d, opt.weights, "wcls");
  w.keep_alive.push_back(file);

  fs::path dir = fs::path(path).parent_path();
  for (auto name : {std::string("tokenizer.bin"), "tok" + std::to_string(V) + ".bin"}) {
    if (fs::exists(dir / name)) {
      m.tokenizer = (dir / name).string();
      break;
    }
  }
  return m;
}

}  // namespace mtp::model
