#include "drafter/drafter.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <mutex>
#include <random>
#include <set>

#include "core/error.h"
#include "core/json.h"
#include "core/setting.h"
#include "core/ggml_type.h"
#include "kernels/quant_blocks.h"
#include "model/family.h"
#include "model/fingerprint.h"
#include "model/layer_io.h"

namespace mtp::drafter {

namespace {
std::string prefix(int k) { return "mtp." + std::to_string(k) + "."; }

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

nlohmann::json parse_meta(const io::Metadata& m, const std::string& key, const std::string& path) {
  auto it = m.find(key);
  if (it == m.end()) fail<FormatError>("drafter '{}': __metadata__ has no '{}'", path, key);
  const nlohmann::json j =
      parse_json(it->second, fmt::format("drafter '{}': __metadata__['{}']", path, key));
  if (!j.is_object()) {
    fail<FormatError>("drafter '{}': __metadata__['{}'] is not a JSON object: {}", path, key,
                      clip_value(it->second, 80));
  }
  return j;
}
// Fills `ids` (sized from the config) from the I32 tensor draft_vocab and
// checks it: sorted, unique, every id < vocab.
void read_draft_vocab(const io::TensorSet& ts, const std::string& path, int vocab,
                      std::vector<int32_t>& ids) {
  const io::TensorView* v = ts.find(kDraftVocabTensor);
  if (ids.empty()) {
    if (v) fail<FormatError>("drafter '{}' has a draft_vocab tensor but its config says 0", path);
    return;
  }
  if (!v || v->dtype != DType::I32 || v->shape != std::vector<int64_t>{int64_t(ids.size())}) {
    fail<FormatError>("drafter '{}': the config says draft_vocab = {}, so it needs an I32 "
                      "tensor '{}' of shape [{}]", path, ids.size(), kDraftVocabTensor, ids.size());
  }
  std::memcpy(ids.data(), v->data, ids.size() * sizeof(int32_t));
  check_draft_vocab(ids, vocab, "drafter '" + path + "'");
}

// __metadata__["quantized"] (absent: none): {name: {"type": "q8_0", "shape":
// [rows, cols]}} for the matrices stored as ggml blocks; every name must be
// a matrix of this drafter and every type a block type.
model::BlockTensors read_block_tensors(const io::Metadata& meta, const model::TensorShapes& shapes,
                                       const std::string& path) {
  model::BlockTensors out;
  if (meta.find("quantized") == meta.end()) return out;
  const nlohmann::json q = parse_meta(meta, "quantized", path);
  for (const auto& item : q.items()) {
    // Named, not a structured binding: clang 14 cannot capture those in the lambda.
    const std::string& name = item.key();
    const nlohmann::json& e = item.value();
    auto sh = std::find_if(shapes.begin(), shapes.end(), [&](const auto& x) { return x.first == name; });
    if (sh == shapes.end() || sh->second.size() != 2) {
      fail<FormatError>("drafter '{}': __metadata__['quantized'] names '{}', which is not a "
                        "weight matrix of this drafter", path, name);
    }
    const std::string type = e.is_object() && e.contains("type") && e["type"].is_string()
                                 ? e["type"].get<std::string>() : std::string();
    kernels::WeightType wt = kernels::WeightType::F32;
    try {
      wt = kernels::parse_weight_type(type);
    } catch (const InputError&) {
    }
    if (!kernels::weight_type_quantized(wt)) {
      fail<FormatError>("drafter '{}': __metadata__['quantized']['{}'] has type '{}'; expected "
                        "one of q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k", path, name, type);
    }
    const auto& shape = e.contains("shape") ? e["shape"] : nlohmann::json();
    if (!shape.is_array() || shape.size() != 2 || !shape[0].is_number_integer() ||
        !shape[1].is_number_integer()) {
      fail<FormatError>("drafter '{}': __metadata__['quantized']['{}'] needs \"shape\": [rows, "
                        "cols]", path, name);
    }
    const int64_t rows = shape[0], cols = shape[1];
    const GgmlType gt = kernels::weight_ggml_type(wt);
    if (rows <= 0 || cols <= 0 || cols % int64_t(ggml_type_info(uint32_t(gt)).block_elems) != 0) {
      fail<FormatError>("drafter '{}': tensor '{}' is recorded as {} [{}, {}]; cols must be a "
                        "positive multiple of its block of {}", path, name, type, rows, cols,
                        ggml_type_info(uint32_t(gt)).block_elems);
    }
    out[name] = {gt, rows, cols};
  }
  return out;
}
}  // namespace

DrafterStorage DrafterStorage::parse(const std::string& name) {
  if (name == "fp32") return DType::F32;
  if (name == "bf16") return DType::BF16;
  DrafterStorage s(DType::BF16);
  try {
    s.blocks = kernels::parse_weight_type(name);
  } catch (const InputError&) {
  }
  if (!s.quantized()) {
    fail<InputError>("drafter storage '{}': expected fp32, bf16 or a block type q8_0, q4_0, "
                     "q5_0, q5_1, q4_k, q5_k, q6_k", name);
  }
  return s;
}

std::string DrafterStorage::name() const {
  if (quantized()) return kernels::weight_type_name(blocks);
  return floats == DType::BF16 ? "bf16" : "fp32";
}

void check_draft_vocab(const std::vector<int32_t>& ids, int vocab, const std::string& what) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab) {
      fail<FormatError>("{}: draft vocabulary id {} at index {} is outside the vocabulary [0, {})",
                        what, ids[i], i, vocab);
    }
    if (i > 0 && ids[i] <= ids[i - 1]) {
      fail<FormatError>("{}: draft vocabulary is not sorted and unique (index {}: {} after {})",
                        what, i, ids[i], ids[i - 1]);
    }
  }
}

nlohmann::json DrafterConfig::to_json() const {
  return {{"K", K},
          {"window", window},
          {"hidden_dtype", std::string(dtype_name(hidden_dtype))},
          {"draft_vocab", draft_vocab.size()},
          {"fusion", "eh_proj·[enorm(embed); hnorm(h)]"},
          {"module_input", "module k row t: (h_{k-1}[t], embed(tok[t+k+1])) -> tok[t+k+2]"}};
}

DrafterConfig DrafterConfig::from_json(const nlohmann::json& j, const std::string& where) {
  DrafterConfig d;
  // Integers only: nlohmann would truncate K = 2.5 to 2 and wrap 2^40.
  auto integer = [&](const char* key, int64_t def, int64_t lo, int64_t hi) -> int64_t {
    if (!j.is_object()) fail<FormatError>("{}: not a JSON object", where);
    auto it = j.find(key);
    if (it == j.end()) {
      if (def < lo) fail<FormatError>("{}: missing '{}'", where, key);
      return def;
    }
    if (!it->is_number_integer() || it->get<int64_t>() < lo || it->get<int64_t>() > hi) {
      fail<FormatError>("{}: {} = {} (must be an integer in {}..{})", where, key,
                        json_excerpt(*it), lo, hi);
    }
    return it->get<int64_t>();
  };
  d.K = int(integer("K", 0, 1, 16));
  d.window = int(integer("window", 0, 0, INT32_MAX));
  // The ids follow from the tensor; the size is checked against the target's
  // vocabulary before anything is read.
  d.draft_vocab.resize(size_t(integer("draft_vocab", 0, 0, 1 << 24)));
  try {
    d.hidden_dtype =
        dtype_from_name(json_value<std::string>(j, "hidden_dtype", std::string("BF16"), where));
  } catch (const FormatError& e) {
    if (std::string_view(e.what()).find(where) == 0) throw;
    fail<FormatError>("{}: hidden_dtype: {}", where, e.what());
  }
  if (d.K < 1 || d.K > 16) fail<FormatError>("{}: K = {} (must be 1..16)", where, d.K);
  if (d.window < 0) fail<FormatError>("{}: window = {} (must be >= 0)", where, d.window);
  if (d.hidden_dtype != DType::BF16 && d.hidden_dtype != DType::F16 &&
      d.hidden_dtype != DType::F32) {
    fail<FormatError>("{}: hidden_dtype {} (must be BF16, F16 or F32)", where,
                      dtype_name(d.hidden_dtype));
  }
  return d;
}

model::ModelConfig module_block_config(const model::ModelConfig& target, const DrafterConfig& d) {
  model::ModelConfig c = target;
  c.n_layers = 1;
  c.sliding_window = d.window;
  if (model::family(target.arch).global_layer_shapes && d.window == 0) {
    c.sliding_window = target.sliding_window;
  }
  c.layers.clear();
  c.set_uniform_layers({uint8_t(c.sliding_window > 0 ? 1 : 0)});
  c.ple_dim = 0;  // a module's layer takes no per-layer embedding input
  return c;
}

std::vector<std::pair<std::string, std::vector<int64_t>>> drafter_tensor_shapes(
    const model::ModelConfig& target, const DrafterConfig& d) {
  const int64_t dm = target.d_model;
  std::vector<std::pair<std::string, std::vector<int64_t>>> out;
  model::ModelConfig bc = module_block_config(target, d);
  for (int k = 0; k < d.K; ++k) {
    out.push_back({prefix(k) + "enorm.weight", {dm}});
    out.push_back({prefix(k) + "hnorm.weight", {dm}});
    out.push_back({prefix(k) + "eh_proj.weight", {dm, 2 * dm}});
    for (auto& t : model::layer_tensor_shapes(bc, prefix(k) + "block.")) out.push_back(t);
  }
  return out;
}

Drafter Drafter::load(const std::string& path, const model::LoadedModel& target,
                      kernels::WeightType hold, TargetMismatch mismatch) {
  return load(path, target.config, model::target_fingerprint(target), hold, mismatch);
}

Drafter Drafter::load(const std::string& path, const model::ModelConfig& target,
                      const std::string& target_fingerprint, kernels::WeightType hold,
                      TargetMismatch mismatch) {
  return from_tensor_set(io::TensorSet::open_file(path), path, target, target_fingerprint, hold,
                         mismatch);
}

Drafter Drafter::from_tensor_set(const io::TensorSet& ts, const std::string& path,
                                 const model::ModelConfig& target,
                                 const std::string& target_fingerprint, kernels::WeightType hold,
                                 TargetMismatch mismatch) {
  Drafter dr;
  dr.heads_ = std::make_shared<HeadCache>();
  dr.path_ = path;
  dr.meta_ = ts.metadata();
  auto fmt_it = dr.meta_.find("format");
  if (fmt_it == dr.meta_.end() || fmt_it->second != kFormat) {
    fail<FormatError>("'{}' is not an mtpspec drafter file (__metadata__ format is '{}', "
                      "expected '{}')", path, fmt_it == dr.meta_.end() ? "" : fmt_it->second,
                      kFormat);
  }
  int version = 0;
  try {
    version = std::stoi(dr.meta_.at("format_version"));
  } catch (const std::exception&) {
    fail<FormatError>("drafter '{}': missing or bad format_version", path);
  }
  if (version < 1 || version > kFormatVersion) {
    fail<FormatError>("drafter '{}' has format version {}; this mtpspec reads versions 1..{}",
                      path, version, kFormatVersion);
  }
  nlohmann::json tgt = parse_meta(dr.meta_, "target", path);
  auto str = [&](const char* key, const char* def) {
    auto it = tgt.find(key);
    return it != tgt.end() && it->is_string() ? it->get<std::string>() : std::string(def);
  };
  std::string fp = str("fingerprint", "");
  check_drafter_target(path, fp, str("architecture", ""), target, {target_fingerprint, mismatch});
  dr.cfg_ = DrafterConfig::from_json(parse_meta(dr.meta_, "config", path),
                                     fmt::format("drafter '{}': __metadata__['config']", path));
  if (dr.cfg_.draft_vocab.size() > size_t(target.vocab)) {
    fail<FormatError>("drafter '{}': draft_vocab = {} exceeds the target's vocabulary of {}",
                      path, dr.cfg_.draft_vocab.size(), target.vocab);
  }
  dr.block_cfg_ = module_block_config(target, dr.cfg_);
  const auto shapes = drafter_tensor_shapes(target, dr.cfg_);
  const model::BlockTensors blocks = read_block_tensors(dr.meta_, shapes, path);
  // The shapes come from the target (a drafter of another target's width
  // fails here: said "drafter X implies [320]" where the target implied it).
  const std::string implied =
      fmt::format("a drafter for this target (d_model {}, vocab {})", target.d_model, target.vocab);
  model::check_tensor_shapes(ts, shapes, implied, &blocks);
  // Every tensor must be one the config describes: a module mtp.K.* beyond
  // the metadata's K (or any stray tensor) means config and file disagree.
  {
    std::set<std::string> known{std::string(kDraftVocabTensor)};
    for (auto& [name, shape] : shapes) known.insert(name);
    for (const std::string& name : ts.names()) {
      if (known.count(name)) continue;
      fail<FormatError>("drafter '{}': tensor '{}' is not part of a K = {} drafter (the "
                        "metadata config says K = {}; the file holds more)", path, name,
                        dr.cfg_.K, dr.cfg_.K);
    }
  }
  read_draft_vocab(ts, path, target.vocab, dr.cfg_.draft_vocab);
  const bool op = target.norm_one_plus;
  for (int k = 0; k < dr.cfg_.K; ++k) {
    // A module stored in BF16 is held in BF16 whatever `hold` asks: the values
    // are exactly the stored ones either way, and half the bytes per draft.
    // One stored as blocks holds them as stored and its BF16 fallback
    // matrices in BF16 (DrafterStorage).
    const DType eh = ts.get(prefix(k) + "eh_proj.weight").dtype;
    const kernels::WeightType module_hold =
        eh == DType::BF16 || eh == DType::U8 ? kernels::WeightType::BF16 : hold;
    MtpModule m;
    m.enorm = model::load_norm(ts, prefix(k) + "enorm.weight", op);
    m.hnorm = model::load_norm(ts, prefix(k) + "hnorm.weight", op);
    m.eh_proj = model::load_matrix(ts, {prefix(k) + "eh_proj.weight"}, module_hold, &blocks);
    m.block = model::load_layer(ts, dr.block_cfg_, prefix(k) + "block.", module_hold, &blocks);
    dr.modules_.push_back(std::move(m));
  }
  return dr;
}

struct Drafter::HeadCache {
  std::mutex mu;
  // (the full head — a copy sharing its storage, so the storage a key points
  // to cannot be freed and reused by another head —, its draft rows)
  std::vector<std::pair<kernels::PackedMatrix, std::unique_ptr<kernels::PackedMatrix>>> heads;
};

const kernels::PackedMatrix* Drafter::draft_head(const kernels::PackedMatrix& lm_head) const {
  if (cfg_.draft_vocab.empty()) return nullptr;
  MTP_CHECK(heads_ != nullptr, "Drafter::draft_head on a drafter that was not loaded");
  std::lock_guard<std::mutex> lock(heads_->mu);
  for (auto& [head, rows] : heads_->heads) {
    if (head.data() == lm_head.data()) return rows.get();
  }
  heads_->heads.emplace_back(lm_head, std::make_unique<kernels::PackedMatrix>(
                                          sub_head(lm_head, cfg_.draft_vocab)));
  return heads_->heads.back().second.get();
}

kernels::PackedMatrix sub_head(const kernels::PackedMatrix& head, std::span<const int32_t> ids) {
  // Rows as the kernel holds them (exact), repacked in the same precision:
  // the kernel's per-row reduction then gives the same bits as the full head.
  // Block-quantized heads copy their rows' blocks (requantizing dequantized
  // values need not give the same blocks back).
  const size_t cols = head.cols();
  for (int32_t id : ids) {
    if (id < 0 || size_t(id) >= head.rows()) {
      fail<InputError>("draft vocabulary id {} is outside the head's {} rows", id, head.rows());
    }
  }
  if (!head.is_composite() && kernels::weight_type_quantized(head.hold())) {
    const GgmlType t = kernels::weight_ggml_type(head.hold());
    const size_t rb = ggml_row_bytes(static_cast<uint32_t>(t), cols);
    std::vector<uint8_t> blocks(ids.size() * rb);
    for (size_t i = 0; i < ids.size(); ++i) head.row_blocks(size_t(ids[i]), blocks.data() + i * rb);
    return kernels::PackedMatrix::pack_blocks(blocks.data(), t, ids.size(), cols);
  }
  MTP_CHECK(!head.is_composite(), "a draft vocabulary of a composite head");
  std::vector<float> rows(ids.size() * cols);
  for (size_t i = 0; i < ids.size(); ++i) head.row_f32(size_t(ids[i]), rows.data() + i * cols);
  return kernels::PackedMatrix::pack(rows.data(), DType::F32, ids.size(), cols, head.hold());
}

namespace {
// A drafter as its file holds it: views (into `tensors`, or into bf16
// copies owned here) and __metadata__.
struct Encoded {
  std::vector<std::vector<uint16_t>> bf;
  std::vector<std::vector<uint8_t>> blocks;
  std::vector<io::TensorView> views;
  io::Metadata meta;
};

// The matrix `v` [rows, cols] as PackedMatrix::pack holds it in `blocks`
// (one rule for file and memory; its hold() may be a fallback type).
kernels::PackedMatrix pack_as_blocks(const std::vector<float>& v, const std::vector<int64_t>& shape,
                                     kernels::WeightType blocks) {
  return kernels::PackedMatrix::pack(v.data(), DType::F32, size_t(shape[0]), size_t(shape[1]),
                                     blocks);
}

std::shared_ptr<Encoded> encode_drafter(const model::ModelConfig& target,
                                        const std::string& target_fingerprint,
                                        const DrafterConfig& d,
                                        const std::map<std::string, std::vector<float>>& tensors,
                                        const nlohmann::json& training,
                                        const DrafterStorage& st, bool vectors_f32) {
  if (st.floats != DType::F32 && st.floats != DType::BF16) {
    fail<InputError>("drafter tensors are stored as F32 or BF16, not {}", dtype_name(st.floats));
  }
  // Block storage: vectors F32, matrices the blocks cannot hold in BF16.
  const DType stored = st.quantized() ? DType::BF16 : st.floats;
  vectors_f32 = vectors_f32 || st.quantized();
  nlohmann::json quantized = nlohmann::json::object();
  auto shapes = drafter_tensor_shapes(target, d);
  if (tensors.size() != shapes.size()) {
    fail<ShapeError>("drafter has {} tensors; a K={} drafter for this target has {}",
                     tensors.size(), d.K, shapes.size());
  }
  auto e = std::make_shared<Encoded>();
  e->bf.resize(shapes.size());
  e->blocks.reserve(shapes.size());  // views point into these buffers
  for (size_t i = 0; i < shapes.size(); ++i) {
    const auto& [name, shape] = shapes[i];
    auto it = tensors.find(name);
    if (it == tensors.end()) fail<ShapeError>("drafter tensor '{}' is missing", name);
    size_t n = 1;
    for (auto s : shape) n *= size_t(s);
    if (it->second.size() != n) {
      fail<ShapeError>("drafter tensor '{}' has {} values; its shape needs {}", name,
                       it->second.size(), n);
    }
    if (st.quantized() && shape.size() == 2) {
      const kernels::PackedMatrix m = pack_as_blocks(it->second, shape, st.blocks);
      if (kernels::weight_type_quantized(m.hold())) {
        const size_t rb = ggml_row_bytes(static_cast<uint32_t>(kernels::weight_ggml_type(m.hold())),
                                         m.cols());
        std::vector<uint8_t> rows(m.rows() * rb);
        for (size_t r = 0; r < m.rows(); ++r) m.row_blocks(r, rows.data() + r * rb);
        e->blocks.push_back(std::move(rows));
        e->views.push_back(io::make_view(name, DType::U8, {shape[0], int64_t(rb)}, e->blocks.back()));
        quantized[name] = {{"type", kernels::weight_type_name(m.hold())}, {"shape", shape}};
        continue;
      }
    }
    if (stored == DType::F32 || (vectors_f32 && shape.size() == 1)) {
      e->views.push_back(io::make_view(name, DType::F32, shape, it->second));
    } else {
      e->bf[i].resize(n);
      for (size_t j = 0; j < n; ++j) e->bf[i][j] = f32_to_bf16(it->second[j]);
      e->views.push_back(io::make_view(name, DType::BF16, shape, e->bf[i]));
    }
  }
  check_draft_vocab(d.draft_vocab, target.vocab, "write_drafter");
  if (!d.draft_vocab.empty()) {
    e->views.push_back(io::make_view(kDraftVocabTensor, DType::I32,
                                     {int64_t(d.draft_vocab.size())}, d.draft_vocab));
  }
  io::Metadata& meta = e->meta;
  meta["format"] = kFormat;
  meta["format_version"] = std::to_string(kFormatVersion);
  meta["config"] = d.to_json().dump();
  meta["target"] = nlohmann::json{{"fingerprint", target_fingerprint},
                                  {"architecture", model::arch_name(target.arch)},
                                  {"config_hash", model::sha256_hex(target.to_json().dump())},
                                  {"config", target.to_json()}}
                       .dump();
  if (!quantized.empty()) meta["quantized"] = quantized.dump();
  meta["capture"] = kCapture;
  meta["training"] = training.dump();
  meta["created"] = utc_now();
  return e;
}
}  // namespace

void write_drafter(const std::string& path, const model::ModelConfig& target,
                   const std::string& target_fingerprint, const DrafterConfig& d,
                   const std::map<std::string, std::vector<float>>& tensors,
                   const nlohmann::json& training, const DrafterStorage& stored,
                   bool vectors_f32) {
  auto e = encode_drafter(target, target_fingerprint, d, tensors, training, stored, vectors_f32);
  io::write_safetensors(path, e->views, e->meta);
}

Drafter Drafter::from_tensors(const model::ModelConfig& target,
                              const std::string& target_fingerprint, const DrafterConfig& d,
                              const std::map<std::string, std::vector<float>>& tensors,
                              const nlohmann::json& training, const DrafterStorage& stored,
                              kernels::WeightType hold) {
  auto e = encode_drafter(target, target_fingerprint, d, tensors, training, stored, false);
  const std::string label = "(in memory)";
  io::TensorSet ts = io::TensorSet::in_memory(label, e->views, e->meta, e);
  return from_tensor_set(ts, label, target, target_fingerprint, hold);
}

void round_to_storage(std::map<std::string, std::vector<float>>& tensors,
                      const model::ModelConfig& target, const DrafterConfig& d,
                      const DrafterStorage& s) {
  if (!s.quantized()) {
    if (s.floats != DType::F32) for (auto& [name, v] : tensors) round_to(s.floats, v.data(), v.size());
    return;
  }
  for (const auto& [name, shape] : drafter_tensor_shapes(target, d)) {
    auto it = tensors.find(name);
    if (it == tensors.end() || shape.size() != 2) continue;  // vectors stay F32
    const kernels::PackedMatrix m = pack_as_blocks(it->second, shape, s.blocks);
    for (size_t r = 0; r < size_t(shape[0]); ++r) m.row_f32(r, it->second.data() + r * size_t(shape[1]));
  }
}

kernels::PackedMatrix float_matrix(const kernels::PackedMatrix& m) {
  if (!m.is_composite() && !kernels::weight_type_quantized(m.hold())) return m;
  std::vector<float> v(m.rows() * m.cols());  // [rows, cols]
  for (size_t r = 0; r < m.rows(); ++r) m.row_f32(r, v.data() + r * m.cols());
  return kernels::PackedMatrix::pack(v.data(), DType::F32, m.rows(), m.cols(), kernels::WeightType::F32);
}

Drafter Drafter::with_float_matrices() const {
  Drafter out = *this;
  auto to_f32 = [](kernels::PackedMatrix& m) { m = float_matrix(m); };
  for (MtpModule& mod : out.modules_) {
    to_f32(mod.eh_proj);
    for (kernels::PackedMatrix* x : {&mod.block.wqkv, &mod.block.wo, &mod.block.w_gate_up, &mod.block.w_down})
      to_f32(*x);
  }
  out.heads_ = std::make_shared<HeadCache>();
  return out;
}

std::map<std::string, std::vector<float>> random_drafter_tensors(const model::ModelConfig& target,
                                                                 const DrafterConfig& d,
                                                                 uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::map<std::string, std::vector<float>> out;
  for (auto& [name, shape] : drafter_tensor_shapes(target, d)) {
    size_t n = 1;
    for (auto s : shape) n *= size_t(s);
    std::vector<float> v(n);
    const bool is_norm = name.find("norm") != std::string::npos;
    const bool is_bias = name.size() > 5 && name.compare(name.size() - 5, 5, ".bias") == 0;
    const bool is_scalar = name.size() > 12 && name.compare(name.size() - 12, 12, "layer_scalar") == 0;
    if (is_norm) {
      std::fill(v.begin(), v.end(), target.norm_one_plus ? 0.f : 1.f);
    } else if (is_scalar) {
      std::fill(v.begin(), v.end(), 1.f);  // Gemma 4's layer scalar: the identity
    } else if (!is_bias) {
      float sd = 1.0f / std::sqrt(float(shape.back()));
      for (auto& x : v) x = sd * normal(rng);
    }
    out[name] = std::move(v);
  }
  return out;
}

}  // namespace mtp::drafter
