#include "io/safetensors.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "core/error.h"
#include "core/json.h"
#include "core/mapped_file.h"
#include "core/output_file.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace mtp::io {

namespace {

// Largest header we accept (the reference implementation uses the same 100 MB
// limit); anything bigger is not a safetensors file.
constexpr uint64_t kMaxHeader = 100'000'000;

// Element size of every dtype the safetensors spec defines, including the ones
// mtpspec cannot hold (those open fine but refuse lookup). 0 = unknown.
size_t spec_dtype_size(std::string_view s) {
  static const std::pair<std::string_view, size_t> table[] = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"F8_E8M0", 1},
      {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},     {"U32", 4},
      {"F32", 4},  {"I64", 8}, {"U64", 8}, {"F64", 8}};
  for (auto& [n, sz] : table) {
    if (n == s) return sz;
  }
  return 0;
}

bool mtp_supports(std::string_view s) {
  return s == "F32" || s == "BF16" || s == "F16" || s == "I32" || s == "I64" || s == "U8";
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// numel * elem_size with overflow detection; false on overflow.
bool checked_bytes(const std::vector<int64_t>& shape, size_t elem, uint64_t* out) {
  uint64_t n = elem;
  for (int64_t d : shape) {
    if (__builtin_mul_overflow(n, uint64_t(d), &n)) return false;
  }
  *out = n;
  return true;
}

}  // namespace

size_t TensorView::numel() const {
  size_t n = 1;
  for (int64_t d : shape) n *= size_t(d);
  return n;
}

// ---------------------------------------------------------------- reading

SafetensorsFile::SafetensorsFile(const std::string& path, const SkipTensor& skip) : map_(path) {
  const size_t size = map_.size();
  if (size < 8) {
    fail<IoError>("'{}' is truncated: {} bytes, too short for the 8-byte safetensors header "
                  "length", path, size);
  }
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | map_.data()[i];  // little-endian
  if (n > kMaxHeader) {
    fail<FormatError>("'{}' is not a safetensors file: header length {} exceeds the {}-byte "
                      "limit", path, n, kMaxHeader);
  }
  if (n > size - 8) {
    fail<IoError>("'{}' is truncated: the header needs {} bytes but only {} follow the length "
                  "field", path, n, size - 8);
  }
  const char* hbeg = reinterpret_cast<const char*>(map_.data() + 8);
  if (n < 2 || hbeg[0] != '{') {
    fail<FormatError>("'{}' has a corrupt safetensors header: it must be a JSON object", path);
  }
  // nlohmann keeps the last of duplicate keys; the reference implementation
  // refuses them, and so do we (two entries for one tensor name, or two
  // __metadata__ keys, would otherwise pick one silently).
  std::set<std::string> seen;
  auto no_duplicates = [&](int depth, const std::string& key) {
    if (depth == 1 && !seen.insert(key).second) {
      fail<FormatError>("'{}' has a corrupt safetensors header: key '{}' appears twice", path,
                        clip_value(key));
    }
  };
  const json header =
      parse_json(std::string_view(hbeg, n), fmt::format("'{}' has a corrupt JSON header", path),
                 no_duplicates);
  if (!header.is_object()) {
    fail<FormatError>("'{}' has a corrupt safetensors header: not a JSON object", path);
  }

  const uint8_t* data = map_.data() + 8 + n;
  const uint64_t data_size = size - 8 - n;
  struct Span {
    uint64_t b, e;
    const std::string* name;
  };
  std::vector<Span> spans;
  bool any_skipped = false;

  for (auto& item : header.items()) {
    // (not a structured binding: clang < 16 cannot capture one in a lambda)
    const std::string& name = item.key();
    const json& entry = item.value();
    if (name == "__metadata__") {
      if (!entry.is_object()) fail<FormatError>("'{}': __metadata__ is not a JSON object", path);
      for (auto& [k, v] : entry.items()) {
        if (!v.is_string()) {
          fail<FormatError>("'{}': __metadata__ value for '{}' is not a string", path, k);
        }
        metadata_[k] = v.get<std::string>();
      }
      continue;
    }
    if (skip && skip(name)) {  // never looked at
      any_skipped = true;
      continue;
    }
    auto bad = [&](std::string_view why) {
      fail<FormatError>("'{}': tensor '{}' has a malformed header entry: {}", path, name, why);
    };
    if (!entry.is_object()) bad("not a JSON object");
    auto dt = entry.find("dtype");
    auto sh = entry.find("shape");
    auto off = entry.find("data_offsets");
    if (dt == entry.end() || !dt->is_string()) bad("missing string 'dtype'");
    if (sh == entry.end() || !sh->is_array()) bad("missing array 'shape'");
    if (off == entry.end() || !off->is_array() || off->size() != 2) {
      bad("'data_offsets' must be an array [begin, end]");
    }
    std::string dtype = dt->get<std::string>();
    size_t elem = spec_dtype_size(dtype);
    if (elem == 0) {
      fail<FormatError>("'{}': tensor '{}' has unknown dtype '{}'", path, name, dtype);
    }
    std::vector<int64_t> shape;
    for (auto& d : *sh) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > uint64_t(INT64_MAX)) {
        bad("shape entries must be non-negative integers");
      }
      shape.push_back(int64_t(d.get<uint64_t>()));
    }
    if (!(*off)[0].is_number_unsigned() || !(*off)[1].is_number_unsigned()) {
      bad("data_offsets must be non-negative integers");
    }
    uint64_t b = (*off)[0].get<uint64_t>(), e = (*off)[1].get<uint64_t>();
    if (b > e) {
      fail<FormatError>("'{}': tensor '{}' has data_offsets [{}, {}] with begin > end", path,
                        name, b, e);
    }
    if (e > data_size) {
      fail<IoError>("'{}' is truncated or corrupt: tensor '{}' data_offsets [{}, {}] reach past "
                    "the {}-byte data section", path, name, b, e, data_size);
    }
    uint64_t want = 0;
    bool fits = checked_bytes(shape, elem, &want);
    if (!fits || want != e - b) {
      fail<FormatError>("'{}': tensor '{}' ({} {}) needs {} bytes but data_offsets [{}, {}] span "
                        "{}", path, name, dtype, shape_str(shape),
                        fits ? std::to_string(want) : "too many", b, e, e - b);
    }
    const std::string* key;
    if (!mtp_supports(dtype)) {
      key = &unsupported_.emplace(name, dtype).first->first;
    } else {
      TensorView v{name, dtype_from_name(dtype), std::move(shape), data + b, size_t(e - b)};
      key = &tensors_.emplace(name, std::move(v)).first->first;
    }
    spans.push_back({b, e, key});  // map nodes are stable: the key pointer stays valid
  }
  // The tensors must tile the data section exactly, as the reference
  // implementation requires: no two share bytes (a writer bug or a crafted
  // file), no bytes between them and none after the last (a file with bytes
  // nobody describes is damaged or not what its header says).
  std::sort(spans.begin(), spans.end(), [](const Span& x, const Span& y) {
    return std::tie(x.b, x.e) < std::tie(y.b, y.e);
  });
  // With skipped tensors, only the tensors read must not overlap: the bytes
  // between them may be a skipped tensor's, whatever its header says.
  uint64_t pos = 0;
  const Span* prev = nullptr;
  for (const Span& s : spans) {
    if (s.b < pos) {
      fail<FormatError>("'{}': tensors '{}' and '{}' overlap in the data section", path,
                        *prev->name, *s.name);
    }
    if (s.b > pos && !any_skipped) {
      fail<FormatError>("'{}': bytes [{}, {}) of the data section belong to no tensor (before "
                        "'{}')", path, pos, s.b, *s.name);
    }
    if (s.e > pos || !prev) prev = &s;
    pos = std::max(pos, s.e);
  }
  if (pos != data_size && !any_skipped) {
    fail<FormatError>("'{}': {} trailing bytes after the last tensor (the header describes {} "
                      "of the {}-byte data section)", path, data_size - pos, pos, data_size);
  }
}

const TensorView* SafetensorsFile::find(std::string_view name) const {
  if (auto it = tensors_.find(name); it != tensors_.end()) return &it->second;
  if (auto it = unsupported_.find(name); it != unsupported_.end()) {
    fail<ShapeError>("tensor '{}' in '{}' has dtype {}, which mtpspec does not support "
                     "(supported: F32, BF16, F16, I32, I64, U8)", name, path(), it->second);
  }
  return nullptr;
}

const TensorView& SafetensorsFile::get(std::string_view name) const {
  if (const TensorView* v = find(name)) return *v;
  fail<FormatError>("tensor '{}' not found in '{}'", name, path());
}

bool SafetensorsFile::contains(std::string_view name) const {
  return tensors_.count(name) || unsupported_.count(name);
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  out.reserve(num_tensors());
  for (auto& [k, v] : tensors_) out.push_back(k);
  for (auto& [k, v] : unsupported_) out.push_back(k);
  std::sort(out.begin(), out.end());
  return out;
}

// ---------------------------------------------------------------- sharded sets

struct TensorSet::State {
  std::string source;
  std::vector<std::shared_ptr<const SafetensorsFile>> files;
  std::map<std::string, size_t, std::less<>> where;  // tensor -> index into files
  // in_memory(): the views (instead of files), their metadata and storage.
  std::map<std::string, TensorView, std::less<>> memory;
  Metadata memory_metadata;
  std::shared_ptr<const void> owner;
};

TensorSet TensorSet::in_memory(std::string source, std::vector<TensorView> views,
                               Metadata metadata, std::shared_ptr<const void> owner) {
  TensorSet ts;
  ts.state_ = std::make_shared<State>();
  ts.state_->source = std::move(source);
  for (TensorView& v : views) {
    if (v.nbytes != v.numel() * dtype_size(v.dtype)) {
      fail<ShapeError>("in-memory tensor '{}' has {} bytes; its shape and dtype need {}", v.name,
                       v.nbytes, v.numel() * dtype_size(v.dtype));
    }
    std::string name = v.name;
    if (!ts.state_->memory.emplace(name, std::move(v)).second) {
      fail<InputError>("tensor '{}' appears twice in {}", name, ts.state_->source);
    }
  }
  ts.state_->memory_metadata = std::move(metadata);
  ts.state_->owner = std::move(owner);
  return ts;
}

TensorSet TensorSet::open_file(const std::string& path) {
  TensorSet ts;
  ts.state_ = std::make_shared<State>();
  ts.state_->source = path;
  auto f = std::make_shared<const SafetensorsFile>(path);
  for (auto& n : f->names()) ts.state_->where.emplace(n, 0);
  ts.state_->files.push_back(std::move(f));
  return ts;
}

TensorSet TensorSet::open_dir(const std::string& dir, const SkipTensor& skip) {
  fs::path single = fs::path(dir) / "model.safetensors";
  fs::path index = fs::path(dir) / "model.safetensors.index.json";
  if (fs::exists(single)) {
    TensorSet ts;
    ts.state_ = std::make_shared<State>();
    ts.state_->source = dir;
    auto f = std::make_shared<const SafetensorsFile>(single.string(), skip);
    for (auto& n : f->names()) ts.state_->where.emplace(n, 0);
    ts.state_->files.push_back(std::move(f));
    return ts;
  }
  if (!fs::exists(index)) {
    std::string hint = fs::exists(fs::path(dir) / "pytorch_model.bin") ||
                               fs::exists(fs::path(dir) / "pytorch_model.bin.index.json")
                           ? " (PyTorch .bin checkpoints are not supported; convert to safetensors)"
                           : "";
    fail<IoError>("no model.safetensors or model.safetensors.index.json in '{}'{}", dir, hint);
  }
  const json j = parse_json(read_file(index.string()), "'" + index.string() + "'");
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object()) {
    fail<FormatError>("'{}' has no \"weight_map\" object", index.string());
  }
  TensorSet ts;
  ts.state_ = std::make_shared<State>();
  State& st = *ts.state_;
  st.source = dir;
  // Open each shard once, in sorted file-name order (deterministic messages).
  std::map<std::string, std::vector<std::string>> by_file;
  for (auto& [tensor, file] : j["weight_map"].items()) {
    if (!file.is_string()) {
      fail<FormatError>("'{}': weight_map entry for '{}' is not a file name", index.string(),
                        tensor);
    }
    std::string f = file.get<std::string>();
    if (f.empty() || f.find('/') != std::string::npos || f == "." || f == "..") {
      fail<FormatError>("'{}': weight_map names '{}', which is not a file in the checkpoint "
                        "folder", index.string(), f);
    }
    if (!skip || !skip(tensor)) by_file[f].push_back(tensor);
  }
  for (auto& [file, tensors] : by_file) {
    auto sf = std::make_shared<const SafetensorsFile>((fs::path(dir) / file).string(), skip);
    size_t idx = st.files.size();
    for (auto& t : tensors) {
      if (!sf->contains(t)) {
        fail<FormatError>("'{}' maps tensor '{}' to '{}', which does not hold it",
                          index.string(), t, file);
      }
    }
    // Every tensor the shard holds is reachable, listed in the index or not.
    for (auto& n : sf->names()) {
      auto [it, ok] = st.where.emplace(n, idx);
      if (!ok) {
        fail<FormatError>("tensor '{}' appears in both '{}' and '{}' in '{}'", n,
                          fs::path(st.files[it->second]->path()).filename().string(), file, dir);
      }
    }
    st.files.push_back(std::move(sf));
  }
  return ts;
}

const TensorView* TensorSet::find(std::string_view name) const {
  if (!state_) return nullptr;
  if (auto m = state_->memory.find(name); m != state_->memory.end()) return &m->second;
  auto it = state_->where.find(name);
  if (it == state_->where.end()) return nullptr;
  return state_->files[it->second]->find(name);
}

const TensorView& TensorSet::get(std::string_view name) const {
  if (const TensorView* v = find(name)) return *v;
  fail<FormatError>("tensor '{}' not found in '{}'", name, source());
}

std::vector<std::string> TensorSet::names() const {
  std::vector<std::string> out;
  if (!state_) return out;
  for (auto& [k, v] : state_->where) out.push_back(k);
  for (auto& [k, v] : state_->memory) out.push_back(k);
  std::sort(out.begin(), out.end());
  return out;
}

const std::string& TensorSet::file_of(std::string_view name) const {
  if (state_) {
    if (auto it = state_->where.find(name); it != state_->where.end()) {
      return state_->files[it->second]->path();
    }
    if (state_->memory.count(name)) return state_->source;
  }
  fail<FormatError>("tensor '{}' not found in '{}'", name, source());
}

const std::string& TensorSet::source() const {
  static const std::string none = "(empty tensor set)";
  return state_ ? state_->source : none;
}

std::vector<std::shared_ptr<const SafetensorsFile>> TensorSet::files() const {
  return state_ ? state_->files : std::vector<std::shared_ptr<const SafetensorsFile>>{};
}

Metadata TensorSet::metadata() const {
  Metadata m;
  if (state_) {
    for (auto& f : state_->files) m.insert(f->metadata().begin(), f->metadata().end());
    m.insert(state_->memory_metadata.begin(), state_->memory_metadata.end());
  }
  return m;
}

std::shared_ptr<void> TensorSet::keep_alive() const { return state_; }

// ---------------------------------------------------------------- writing

void write_safetensors(const std::string& path, const std::vector<TensorView>& tensors,
                       const Metadata& metadata) {
  std::vector<const TensorView*> order;
  order.reserve(tensors.size());
  for (auto& t : tensors) order.push_back(&t);
  std::sort(order.begin(), order.end(),
            [](const TensorView* a, const TensorView* b) { return a->name < b->name; });

  json header = json::object();
  if (!metadata.empty()) {
    json m = json::object();
    for (auto& [k, v] : metadata) m[k] = v;
    header["__metadata__"] = std::move(m);
  }
  uint64_t offset = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    const TensorView& t = *order[i];
    if (t.name.empty() || t.name == "__metadata__") {
      fail<InputError>("cannot write '{}': invalid tensor name '{}'", path, t.name);
    }
    if (i > 0 && order[i - 1]->name == t.name) {
      fail<InputError>("cannot write '{}': tensor '{}' given twice", path, t.name);
    }
    for (int64_t d : t.shape) {
      if (d < 0) fail<ShapeError>("cannot write '{}': tensor '{}' has a negative dimension", path, t.name);
    }
    uint64_t want = 0;
    if (!checked_bytes(t.shape, dtype_size(t.dtype), &want) || want != t.nbytes) {
      fail<ShapeError>("cannot write '{}': tensor '{}' ({} {}) needs {} bytes but {} were given",
                       path, t.name, dtype_name(t.dtype), shape_str(t.shape), want, t.nbytes);
    }
    if (t.nbytes > 0 && t.data == nullptr) {
      fail<InputError>("cannot write '{}': tensor '{}' has no data", path, t.name);
    }
    header[t.name] = {{"dtype", std::string(dtype_name(t.dtype))},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + t.nbytes}}};
    offset += t.nbytes;
  }
  std::string h;
  try {
    h = header.dump();
  } catch (const json::exception& e) {  // names/metadata must be valid UTF-8
    fail<InputError>("cannot write '{}': {}", path, e.what());
  }
  h.append((8 - h.size() % 8) % 8, ' ');  // data section starts 8-aligned
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = uint8_t(uint64_t(h.size()) >> (8 * i));

  uint64_t total = 8 + h.size();
  for (const TensorView* t : order) total += t->nbytes;
  OutputFile f(path, total);
  f.write(len, 8);
  f.write(h);
  for (const TensorView* t : order) {
    if (t->nbytes > 0) f.write(t->data, t->nbytes);
  }
  f.commit();
}

}  // namespace mtp::io
