#include "io/gguf.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>

#include "core/error.h"
#include "core/ggml_type.h"
#include "core/mapped_file.h"
#include "core/output_file.h"

namespace mtp::io {

namespace {

constexpr uint8_t kMagic[4] = {'G', 'G', 'U', 'F'};
constexpr size_t kDefaultAlignment = 32;
// Nesting deeper than this is no real file's and would recurse without bound.
constexpr int kMaxArrayDepth = 8;
// Array elements over all metadata. Each is held as a GgufValue (~90 bytes)
// however small it is in the file, so a count bounded by the file size alone
// could still ask for ~90× a multi-GB file; real files hold ~1.5 M (a 262 k
// vocabulary's tokens, scores and types plus its merges).
constexpr uint64_t kMaxArrayElements = uint64_t(1) << 23;
// Metadata entries and tensors, for the same reason (real files: tens of
// keys, at most tens of thousands of tensors).
constexpr uint64_t kMaxEntries = uint64_t(1) << 20;

// Smallest encoded size of one value of type t (the bound a count is checked
// against before anything is reserved).
size_t min_value_bytes(GgufType t) {
  switch (t) {
    case GgufType::U8: case GgufType::I8: case GgufType::Bool: return 1;
    case GgufType::U16: case GgufType::I16: return 2;
    case GgufType::U32: case GgufType::I32: case GgufType::F32: return 4;
    case GgufType::U64: case GgufType::I64: case GgufType::F64: return 8;
    case GgufType::String: return 8;
    case GgufType::Array: return 12;
  }
  return 1;
}

bool known_type(uint32_t t) { return t <= uint32_t(GgufType::F64); }

// Little-endian cursor over the mapped bytes; running past the end is an
// IoError naming what was being read.
class Cursor {
 public:
  Cursor(const uint8_t* p, size_t n, const std::string& path) : p_(p), n_(n), path_(path) {}
  size_t pos() const { return pos_; }
  size_t left() const { return n_ - pos_; }

  void need(size_t k, const std::string& what) const {
    if (k > left()) {
      fail<IoError>("GGUF file '{}' is truncated: {} needs {} bytes at offset {}, the file has "
                    "{} bytes", path_, what, k, pos_, n_);
    }
  }
  template <class T>
  T read(const std::string& what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, p_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string string(const std::string& what) {
    const auto len = read<uint64_t>(what + " (string length)");
    if (len > left()) {
      fail<IoError>("GGUF file '{}' is truncated or corrupt: {} has length {} at offset {}, but "
                    "only {} bytes follow", path_, what, len, pos_ - 8, left());
    }
    std::string s(reinterpret_cast<const char*>(p_ + pos_), size_t(len));
    pos_ += size_t(len);
    return s;
  }

 private:
  const uint8_t* p_;
  size_t n_;
  const std::string& path_;
  size_t pos_ = 0;
};

GgufValue read_value(Cursor& c, GgufType t, const std::string& what, const std::string& path,
                     int depth, uint64_t& elems_left) {
  GgufValue v;
  v.type = t;
  switch (t) {
    case GgufType::U8: v.u = c.read<uint8_t>(what); break;
    case GgufType::I8: v.i = c.read<int8_t>(what); break;
    case GgufType::U16: v.u = c.read<uint16_t>(what); break;
    case GgufType::I16: v.i = c.read<int16_t>(what); break;
    case GgufType::U32: v.u = c.read<uint32_t>(what); break;
    case GgufType::I32: v.i = c.read<int32_t>(what); break;
    case GgufType::U64: v.u = c.read<uint64_t>(what); break;
    case GgufType::I64: v.i = c.read<int64_t>(what); break;
    case GgufType::F32: v.f = c.read<float>(what); break;
    case GgufType::F64: v.f = c.read<double>(what); break;
    case GgufType::Bool: {
      const auto b = c.read<uint8_t>(what);
      if (b > 1) fail<FormatError>("GGUF file '{}': {} is a bool with byte value {}", path, what, b);
      v.u = b;
      break;
    }
    case GgufType::String: v.s = c.string(what); break;
    case GgufType::Array: {
      if (depth >= kMaxArrayDepth) {
        fail<FormatError>("GGUF file '{}': {} nests arrays deeper than {}", path, what,
                          kMaxArrayDepth);
      }
      const auto et = c.read<uint32_t>(what + " (array element type)");
      if (!known_type(et)) {
        fail<FormatError>("GGUF file '{}': {} is an array of unknown value type {}", path, what, et);
      }
      v.elem = GgufType(et);
      const auto n = c.read<uint64_t>(what + " (array length)");
      if (n > c.left() / min_value_bytes(v.elem)) {
        fail<IoError>("GGUF file '{}' is truncated or corrupt: {} claims {} elements of type {}, "
                      "but only {} bytes follow", path, what, n, gguf_type_name(v.elem), c.left());
      }
      if (n > elems_left) {
        fail<FormatError>("GGUF file '{}': {} brings the metadata's array elements past {} in "
                          "total, more than any real file holds", path, what, kMaxArrayElements);
      }
      elems_left -= n;
      v.arr.reserve(size_t(n));
      for (uint64_t k = 0; k < n; ++k) {
        v.arr.push_back(read_value(c, v.elem, what, path, depth + 1, elems_left));
      }
      break;
    }
  }
  return v;
}

size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

}  // namespace

const char* gguf_type_name(GgufType t) {
  static const char* names[] = {"u8",  "i8",  "u16",    "i16",   "u32", "i32", "f32",
                                "bool", "string", "array", "u64", "i64", "f64"};
  return known_type(uint32_t(t)) ? names[uint32_t(t)] : "unknown";
}

GgufValue GgufValue::of(GgufType t, uint64_t u) {
  GgufValue v;
  v.type = t;
  v.u = u;
  return v;
}
GgufValue GgufValue::of_signed(GgufType t, int64_t i) {
  GgufValue v;
  v.type = t;
  v.i = i;
  return v;
}
GgufValue GgufValue::of_float(GgufType t, double f) {
  GgufValue v;
  v.type = t;
  v.f = f;
  return v;
}
GgufValue GgufValue::str(std::string s) {
  GgufValue v;
  v.type = GgufType::String;
  v.s = std::move(s);
  return v;
}
GgufValue GgufValue::array(GgufType elem, std::vector<GgufValue> items) {
  GgufValue v;
  v.type = GgufType::Array;
  v.elem = elem;
  v.arr = std::move(items);
  return v;
}
GgufValue GgufValue::strings(const std::vector<std::string>& s) {
  std::vector<GgufValue> items;
  items.reserve(s.size());
  for (auto& x : s) items.push_back(str(x));
  return array(GgufType::String, std::move(items));
}
GgufValue GgufValue::f32s(const std::vector<float>& s) {
  std::vector<GgufValue> items;
  items.reserve(s.size());
  for (float x : s) items.push_back(f32(x));
  return array(GgufType::F32, std::move(items));
}
GgufValue GgufValue::i32s(const std::vector<int32_t>& s) {
  std::vector<GgufValue> items;
  items.reserve(s.size());
  for (int32_t x : s) items.push_back(i32(x));
  return array(GgufType::I32, std::move(items));
}

bool GgufValue::is_integer() const {
  switch (type) {
    case GgufType::U8: case GgufType::I8: case GgufType::U16: case GgufType::I16:
    case GgufType::U32: case GgufType::I32: case GgufType::U64: case GgufType::I64:
      return true;
    default:
      return false;
  }
}

std::string GgufValue::describe() const {
  switch (type) {
    case GgufType::I8: case GgufType::I16: case GgufType::I32: case GgufType::I64:
      return fmt::format("{} {}", gguf_type_name(type), i);
    case GgufType::F32: case GgufType::F64: return fmt::format("{} {}", gguf_type_name(type), f);
    case GgufType::Bool: return u ? "bool true" : "bool false";
    case GgufType::String:
      return fmt::format("string \"{}\"", s.size() > 60 ? s.substr(0, 60) + "..." : s);
    case GgufType::Array:
      return fmt::format("array of {} {}", arr.size(), gguf_type_name(elem));
    default: return fmt::format("{} {}", gguf_type_name(type), u);
  }
}

size_t GgufTensor::rows() const {
  size_t r = 1;
  for (size_t k = 1; k < dims.size(); ++k) r *= size_t(dims[k]);
  return r;
}

std::vector<int64_t> GgufTensor::shape() const { return {dims.rbegin(), dims.rend()}; }

bool GgufFile::has_magic(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  char m[4] = {};
  return f.read(m, 4) && std::memcmp(m, kMagic, 4) == 0;
}

GgufFile::GgufFile(const std::string& path, GgufRead what) : path_(path) {
  auto map = std::make_shared<MappedFile>(path);  // IoError when missing
  base_ = map->data();
  size_ = map->size();
  owner_ = map;
  parse(what);
}

void GgufFile::parse(GgufRead what) {
  Cursor c(base_, size_, path_);
  c.need(4, "the magic");
  if (std::memcmp(base_, kMagic, 4) != 0) {
    fail<FormatError>("'{}' is not a GGUF file: it starts with bytes {:02x} {:02x} {:02x} {:02x}, "
                      "not \"GGUF\"", path_, base_[0], base_[1], base_[2], base_[3]);
  }
  c.read<uint32_t>("the magic");
  version_ = c.read<uint32_t>("the version");
  if (version_ != 0 && (version_ & 0xFFFF) == 0) {
    fail<FormatError>("GGUF file '{}' is big-endian (its version field reads 0x{:08x}); mtpspec "
                      "reads little-endian GGUF only", path_, version_);
  }
  if (version_ == 1) {
    fail<FormatError>("GGUF file '{}' has version 1 (32-bit counts), which mtpspec does not read; "
                      "convert it again with a current llama.cpp (versions 2 and 3 are read)", path_);
  }
  if (version_ < 2 || version_ > 3) {
    fail<FormatError>("GGUF file '{}' has version {}; mtpspec reads versions 2 and 3", path_,
                      version_);
  }
  const auto n_tensors = c.read<uint64_t>("the tensor count");
  const auto n_kv = c.read<uint64_t>("the metadata count");
  // Each key/value takes at least 13 bytes, each tensor info at least 24.
  if (n_kv > c.left() / 13) {
    fail<IoError>("GGUF file '{}' is truncated or corrupt: it claims {} metadata entries, but only "
                  "{} bytes follow the header", path_, n_kv, c.left());
  }
  if (n_kv > kMaxEntries || n_tensors > kMaxEntries) {
    fail<FormatError>("GGUF file '{}' claims {} metadata entries and {} tensors; mtpspec reads at "
                      "most {} of each (no real file has more)", path_, n_kv, n_tensors, kMaxEntries);
  }
  std::set<std::string, std::less<>> keys;
  uint64_t elems_left = kMaxArrayElements;
  kv_.reserve(size_t(n_kv));
  for (uint64_t k = 0; k < n_kv; ++k) {
    std::string key = c.string(fmt::format("metadata key #{}", k));
    if (key.empty()) fail<FormatError>("GGUF file '{}': metadata key #{} is empty", path_, k);
    if (!keys.insert(key).second) {
      fail<FormatError>("GGUF file '{}': metadata key '{}' appears twice", path_, key);
    }
    const auto t = c.read<uint32_t>("the value type of '" + key + "'");
    if (!known_type(t)) {
      fail<FormatError>("GGUF file '{}': metadata key '{}' has unknown value type {}", path_, key, t);
    }
    GgufValue v = read_value(c, GgufType(t), "metadata value '" + key + "'", path_, 0, elems_left);
    kv_.emplace_back(std::move(key), std::move(v));
  }
  if (const GgufValue* a = find("general.alignment")) {
    if (a->type != GgufType::U32) {
      fail<FormatError>("GGUF file '{}': general.alignment must be a u32, got {}", path_,
                        a->describe());
    }
    if (a->u == 0 || (a->u & (a->u - 1)) != 0) {
      fail<FormatError>("GGUF file '{}': general.alignment must be a power of two, got {}", path_,
                        a->u);
    }
    alignment_ = size_t(a->u);
  } else {
    alignment_ = kDefaultAlignment;
  }

  if (what == GgufRead::MetadataOnly) return;
  if (n_tensors > c.left() / 24) {
    fail<IoError>("GGUF file '{}' is truncated or corrupt: it claims {} tensors, but only {} bytes "
                  "follow the metadata", path_, n_tensors, c.left());
  }
  tensors_.reserve(size_t(n_tensors));
  for (uint64_t k = 0; k < n_tensors; ++k) {
    GgufTensor t;
    t.name = c.string(fmt::format("the name of tensor #{}", k));
    if (t.name.empty()) fail<FormatError>("GGUF file '{}': tensor #{} has an empty name", path_, k);
    if (!by_name_.emplace(t.name, tensors_.size()).second) {
      fail<FormatError>("GGUF file '{}': tensor '{}' appears twice", path_, t.name);
    }
    const std::string what = "tensor '" + t.name + "'";
    const auto n_dims = c.read<uint32_t>(what + " (n_dims)");
    if (n_dims > kGgufMaxDims) {
      fail<FormatError>("GGUF file '{}': {} has {} dimensions (at most {})", path_, what, n_dims,
                        kGgufMaxDims);
    }
    size_t numel = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const auto dim = c.read<int64_t>(what + " (dims)");
      if (dim < 0) fail<FormatError>("GGUF file '{}': {} has dimension {} = {}", path_, what, d, dim);
      if (dim > 0 && numel > size_t(std::numeric_limits<int64_t>::max()) / size_t(dim)) {
        fail<FormatError>("GGUF file '{}': {} has dimensions whose product overflows", path_, what);
      }
      numel *= size_t(dim);
      t.dims.push_back(dim);
    }
    t.type = c.read<uint32_t>(what + " (type)");
    t.offset = c.read<uint64_t>(what + " (offset)");
    const GgmlTypeInfo info = ggml_type_info(t.type);
    if (!info.name) {
      const char* named = ggml_unsupported_type_name(t.type);  // IQ2_XS, TQ1_0 ...
      fail<FormatError>("GGUF file '{}': tensor {} has ggml type {}{}, which mtpspec does not "
                        "support", path_, t.name, t.type,
                        named ? fmt::format(" ({})", named) : std::string());
    }
    if (t.row_elems() % info.block_elems != 0) {
      fail<FormatError>("GGUF file '{}': tensor {} has type {} (blocks of {} values) but rows of "
                        "{} values, not a multiple of the block size", path_, t.name, info.name,
                        info.block_elems, t.row_elems());
    }
    const size_t row_bytes = ggml_row_bytes(t.type, t.row_elems());
    const size_t rows = t.rows();
    if (rows > 0 && row_bytes > std::numeric_limits<size_t>::max() / rows) {
      fail<FormatError>("GGUF file '{}': {} is too large", path_, what);
    }
    t.nbytes = row_bytes * rows;
    tensors_.push_back(std::move(t));
  }
  data_offset_ = align_up(c.pos(), alignment_);
  // The data section: every tensor aligned, inside the file, none overlapping.
  for (GgufTensor& t : tensors_) {
    if (t.offset % alignment_ != 0) {
      fail<FormatError>("GGUF file '{}': tensor {} has offset {}, not a multiple of the alignment "
                        "{}", path_, t.name, t.offset, alignment_);
    }
    if (data_offset_ > size_ || t.offset > size_ - data_offset_ ||
        t.nbytes > size_ - data_offset_ - t.offset) {
      fail<IoError>("GGUF file '{}' is truncated: tensor {} needs bytes {}..{} of the data section "
                    "(which starts at {}), the file has {} bytes", path_, t.name, t.offset,
                    t.offset + t.nbytes, data_offset_, size_);
    }
    t.data = base_ + data_offset_ + t.offset;
  }
  std::vector<const GgufTensor*> by_offset;
  for (auto& t : tensors_) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(),
            [](auto* a, auto* b) { return a->offset < b->offset; });
  for (size_t k = 1; k < by_offset.size(); ++k) {
    const GgufTensor *a = by_offset[k - 1], *b = by_offset[k];
    if (a->nbytes > 0 && b->nbytes > 0 && a->offset + a->nbytes > b->offset) {
      fail<FormatError>("GGUF file '{}': tensors {} (bytes {}..{}) and {} (from {}) overlap", path_,
                        a->name, a->offset, a->offset + a->nbytes, b->name, b->offset);
    }
  }
}

const GgufValue* GgufFile::find(std::string_view key) const {
  for (auto& [k, v] : kv_) {
    if (k == key) return &v;
  }
  return nullptr;
}

const GgufTensor* GgufFile::tensor(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

std::optional<int64_t> GgufFile::get_int(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (!v->is_integer()) {
    fail<FormatError>("GGUF file '{}': '{}' must be an integer, got {}", path_, key, v->describe());
  }
  const bool is_unsigned = v->type == GgufType::U8 || v->type == GgufType::U16 ||
                           v->type == GgufType::U32 || v->type == GgufType::U64;
  if (is_unsigned) {
    if (v->u > uint64_t(std::numeric_limits<int64_t>::max())) {
      fail<FormatError>("GGUF file '{}': '{}' is out of range: {}", path_, key, v->describe());
    }
    return int64_t(v->u);
  }
  return v->i;
}

std::optional<uint64_t> GgufFile::get_uint(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  const std::optional<int64_t> i = get_int(key);
  if (*i < 0) fail<FormatError>("GGUF file '{}': '{}' must not be negative, got {}", path_, key, *i);
  return uint64_t(*i);
}

std::optional<double> GgufFile::get_float(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != GgufType::F32 && v->type != GgufType::F64) {
    fail<FormatError>("GGUF file '{}': '{}' must be a float, got {}", path_, key, v->describe());
  }
  return v->f;
}

std::optional<bool> GgufFile::get_bool(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != GgufType::Bool) {
    fail<FormatError>("GGUF file '{}': '{}' must be a bool, got {}", path_, key, v->describe());
  }
  return v->u != 0;
}

std::optional<std::string> GgufFile::get_string(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != GgufType::String) {
    fail<FormatError>("GGUF file '{}': '{}' must be a string, got {}", path_, key, v->describe());
  }
  return v->s;
}

const std::vector<GgufValue>* GgufFile::get_array(std::string_view key,
                                                  std::optional<GgufType> elem) const {
  const GgufValue* v = find(key);
  if (!v) return nullptr;
  if (v->type != GgufType::Array || (elem && v->elem != *elem)) {
    fail<FormatError>("GGUF file '{}': '{}' must be an array of {}, got {}", path_, key,
                      elem ? gguf_type_name(*elem) : "values", v->describe());
  }
  return &v->arr;
}

// ---------------------------------------------------------------- writing

namespace {

template <class T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof(T));
}
void put_string(std::string& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  out += s;
}

void put_value(std::string& out, const GgufValue& v) {
  switch (v.type) {
    case GgufType::U8: put<uint8_t>(out, uint8_t(v.u)); break;
    case GgufType::I8: put<int8_t>(out, int8_t(v.i)); break;
    case GgufType::U16: put<uint16_t>(out, uint16_t(v.u)); break;
    case GgufType::I16: put<int16_t>(out, int16_t(v.i)); break;
    case GgufType::U32: put<uint32_t>(out, uint32_t(v.u)); break;
    case GgufType::I32: put<int32_t>(out, int32_t(v.i)); break;
    case GgufType::U64: put<uint64_t>(out, v.u); break;
    case GgufType::I64: put<int64_t>(out, v.i); break;
    case GgufType::F32: put<float>(out, float(v.f)); break;
    case GgufType::F64: put<double>(out, v.f); break;
    case GgufType::Bool: put<uint8_t>(out, v.u ? 1 : 0); break;
    case GgufType::String: put_string(out, v.s); break;
    case GgufType::Array:
      put<uint32_t>(out, uint32_t(v.elem));
      put<uint64_t>(out, v.arr.size());
      for (auto& x : v.arr) {
        if (x.type != v.elem) {
          fail<InputError>("GGUF writer: an array of {} holds a {}", gguf_type_name(v.elem),
                           gguf_type_name(x.type));
        }
        put_value(out, x);
      }
      break;
  }
}

}  // namespace

namespace {

// The header of a GGUF file holding `tensors` (metadata, tensor infos and the
// padding up to the data section); `alignment` receives the data alignment.
std::string gguf_header(const GgufMetadata& metadata, const std::vector<GgufWriteTensor>& tensors,
                        uint32_t version, size_t& alignment) {
  alignment = kDefaultAlignment;
  std::set<std::string> keys, names;
  for (auto& [k, v] : metadata) {
    if (!keys.insert(k).second) fail<InputError>("GGUF writer: metadata key '{}' given twice", k);
    if (k == "general.alignment") {
      if (v.type != GgufType::U32 || v.u == 0 || (v.u & (v.u - 1)) != 0) {
        fail<InputError>("GGUF writer: general.alignment must be a u32 power of two, got {}",
                         v.describe());
      }
      alignment = size_t(v.u);
    }
  }
  std::string out(reinterpret_cast<const char*>(kMagic), 4);
  put<uint32_t>(out, version);
  put<uint64_t>(out, tensors.size());
  put<uint64_t>(out, metadata.size());
  for (auto& [k, v] : metadata) {
    put_string(out, k);
    put<uint32_t>(out, uint32_t(v.type));
    put_value(out, v);
  }
  uint64_t offset = 0;
  for (auto& t : tensors) {
    if (!names.insert(t.name).second) fail<InputError>("GGUF writer: tensor '{}' given twice", t.name);
    const size_t n = t.data().size();
    if (ggml_type_info(t.type).name) {
      size_t rows = 1;
      for (size_t d = 1; d < t.dims.size(); ++d) rows *= size_t(t.dims[d]);
      const size_t row = ggml_row_bytes(t.type, t.dims.empty() ? 1 : size_t(t.dims[0]));
      if (row * rows != n) {
        fail<InputError>("GGUF writer: tensor '{}' of type {} holds {} bytes; its dims imply {}",
                         t.name, ggml_type_name(t.type), n, row * rows);
      }
    }
    put_string(out, t.name);
    put<uint32_t>(out, uint32_t(t.dims.size()));
    for (int64_t d : t.dims) put<int64_t>(out, d);
    put<uint32_t>(out, t.type);
    put<uint64_t>(out, offset);
    offset = align_up(offset + n, alignment);
  }
  out.resize(align_up(out.size(), alignment), '\0');
  return out;
}

}  // namespace

std::string gguf_bytes(const GgufMetadata& metadata, const std::vector<GgufWriteTensor>& tensors,
                       uint32_t version) {
  size_t alignment = 0;
  std::string out = gguf_header(metadata, tensors, version, alignment);
  for (auto& t : tensors) {
    out += t.data();
    out.resize(align_up(out.size(), alignment), '\0');
  }
  return out;
}

void write_gguf(const std::string& path, const GgufMetadata& metadata,
                const std::vector<GgufWriteTensor>& tensors, uint32_t version) {
  size_t alignment = 0;
  const std::string header = gguf_header(metadata, tensors, version, alignment);
  uint64_t total = header.size();
  for (auto& t : tensors) total = align_up(total + t.data().size(), alignment);
  OutputFile out(path, total);
  out.write(header);
  const std::string zeros(alignment, '\0');
  uint64_t at = header.size();
  for (auto& t : tensors) {
    out.write(t.data());
    at += t.data().size();
    const uint64_t pad = align_up(at, alignment) - at;
    out.write(zeros.data(), size_t(pad));
    at += pad;
  }
  out.commit();
}

}  // namespace mtp::io
