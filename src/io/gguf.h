// GGUF files (llama.cpp / ggml): reading (memory-mapped, fully validated) and
// writing (tests and tools: every value type, tensors of any ggml type).
//
// Layout (versions 2 and 3, little-endian; docs/FORMATS.md "GGUF"):
//   "GGUF" u32 version, u64 n_tensors, u64 n_kv,
//   n_kv × (string key, u32 value type, value),
//   n_tensors × (string name, u32 n_dims, u64 dims[n_dims], u32 ggml type,
//                u64 offset relative to the data section),
//   padding to `general.alignment` (u32, a power of two, default 32),
//   the data section: each tensor at its (aligned) offset.
// A string is u64 length + bytes (no terminator); an array is u32 element
// type, u64 count, elements (arrays may nest). dims[0] is the row length
// (ggml's ne0, the fastest-varying index), so a [rows, cols] matrix is stored
// with dims {cols, rows}; a row of a quantized type is a whole number of
// blocks (core/ggml_type.h).
//
// Reading validates everything before allocating or handing out a view:
// every count and string length against the bytes left in the file (a hostile
// count is refused, never reserved; at most 2^23 array elements in all, as
// each is held unpacked), the version and byte order, duplicate
// keys and tensor names, the alignment, n_dims ≤ 4, dims ≥ 0 and their product
// against overflow, each tensor's type (others refused, named as ggml names
// them: "tensor X has ggml type 17 (IQ2_XS), which mtpspec does not support")
// and its row length against the
// block size, each offset aligned and its bytes inside the file, and no two
// tensors overlapping. A short file is an IoError, a malformed one a
// FormatError; both name the file and the key or tensor.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mtp::io {

inline constexpr uint32_t kGgufMaxDims = 4;  // ggml's GGML_MAX_DIMS

enum class GgufType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, Bool = 7,
  String = 8, Array = 9, U64 = 10, I64 = 11, F64 = 12,
};
const char* gguf_type_name(GgufType t);  // "u32", "string", "array", ...

// One metadata value. Integers are kept in `u` (unsigned types, bool) or `i`
// (signed types), floats in `f` (an F32 value is exactly representable), a
// string in `s`, an array's elements (all of type `elem`) in `arr`.
struct GgufValue {
  GgufType type = GgufType::U8;
  GgufType elem = GgufType::U8;  // arrays only
  uint64_t u = 0;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<GgufValue> arr;

  static GgufValue of(GgufType t, uint64_t u);  // unsigned types and Bool
  static GgufValue of_signed(GgufType t, int64_t i);
  static GgufValue of_float(GgufType t, double f);
  static GgufValue u32(uint32_t v) { return of(GgufType::U32, v); }
  static GgufValue i32(int32_t v) { return of_signed(GgufType::I32, v); }
  static GgufValue f32(float v) { return of_float(GgufType::F32, v); }
  static GgufValue boolean(bool v) { return of(GgufType::Bool, v ? 1 : 0); }
  static GgufValue str(std::string v);
  static GgufValue array(GgufType elem, std::vector<GgufValue> items);
  static GgufValue strings(const std::vector<std::string>& v);
  static GgufValue f32s(const std::vector<float>& v);
  static GgufValue i32s(const std::vector<int32_t>& v);

  bool is_integer() const;  // U8..I64 except F32/Bool/String/Array/F64
  std::string describe() const;  // short text for messages: `u32 7`, `string "llama"`
};

using GgufMetadata = std::vector<std::pair<std::string, GgufValue>>;

// A tensor in place in the data section.
struct GgufTensor {
  std::string name;
  std::vector<int64_t> dims;  // ggml order: dims[0] = row length
  uint32_t type = 0;          // ggml type id (core/ggml_type.h)
  uint64_t offset = 0;        // relative to the data section
  const uint8_t* data = nullptr;
  size_t nbytes = 0;

  size_t row_elems() const { return dims.empty() ? 1 : size_t(dims[0]); }
  size_t rows() const;                 // product of dims[1..] (1 for a vector)
  size_t numel() const { return row_elems() * rows(); }
  std::vector<int64_t> shape() const;  // row-major: dims reversed
};

// What GgufFile reads: everything (a model), or the header and metadata only
// (a tokenizer: its vocabulary is metadata, so a file whose tensors mtpspec
// cannot read — IQ2_XS, TQ1_0 ... — still gives its tokenizer; tensors() is
// then empty).
enum class GgufRead { Everything, MetadataOnly };

class GgufFile {
 public:
  // Throws IoError (missing, unreadable, truncated) or FormatError.
  explicit GgufFile(const std::string& path, GgufRead what = GgufRead::Everything);
  // True when the file begins with the GGUF magic (false when unreadable).
  static bool has_magic(const std::string& path);

  const std::string& path() const { return path_; }
  size_t file_size() const { return size_; }
  uint32_t version() const { return version_; }
  size_t alignment() const { return alignment_; }
  size_t data_offset() const { return data_offset_; }

  const GgufMetadata& metadata() const { return kv_; }
  const GgufValue* find(std::string_view key) const;  // nullptr when absent
  // Typed access. Absent -> nullopt; present with another type -> FormatError
  // naming the file, the key and the value. get_int accepts every integer type
  // (range-checked into int64), get_float F32 and F64, get_uint every
  // non-negative integer.
  std::optional<int64_t> get_int(std::string_view key) const;
  std::optional<uint64_t> get_uint(std::string_view key) const;
  std::optional<double> get_float(std::string_view key) const;
  std::optional<bool> get_bool(std::string_view key) const;
  std::optional<std::string> get_string(std::string_view key) const;
  // An array whose elements have type `elem` (any element type when nullopt);
  // nullptr when absent.
  const std::vector<GgufValue>* get_array(std::string_view key,
                                          std::optional<GgufType> elem = std::nullopt) const;

  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  const GgufTensor* tensor(std::string_view name) const;  // nullptr when absent

  // Keeps the memory map (and every tensor view) alive.
  std::shared_ptr<void> keep_alive() const { return owner_; }

 private:
  void parse(GgufRead what);
  std::string path_;
  std::shared_ptr<void> owner_;
  const uint8_t* base_ = nullptr;
  size_t size_ = 0;
  uint32_t version_ = 0;
  size_t alignment_ = 32, data_offset_ = 0;
  GgufMetadata kv_;
  std::vector<GgufTensor> tensors_;
  std::map<std::string, size_t, std::less<>> by_name_;  // name -> index in tensors_
};

// A tensor to write: `bytes` are the stored bytes (row-major, dims[0] fastest),
// or, when `bytes` is empty, `view`: bytes held elsewhere (e.g. the memory map
// of the file being rewritten), which must outlive the write.
struct GgufWriteTensor {
  std::string name;
  std::vector<int64_t> dims;  // ggml order
  uint32_t type = 0;
  std::string bytes;
  std::string_view view;
  std::string_view data() const { return bytes.empty() ? view : std::string_view(bytes); }
};

// The bytes of a GGUF file. Alignment: `general.alignment` when the metadata
// sets it, else 32. Tensors are laid out in the given order, each at an
// aligned offset. Throws InputError for a duplicate key or name, a bad
// alignment, or bytes that disagree with the dims and a known type (unknown
// type ids are written as given, for tests of the reader).
std::string gguf_bytes(const GgufMetadata& metadata, const std::vector<GgufWriteTensor>& tensors,
                       uint32_t version = 3);
// Writes gguf_bytes atomically to `path` (IoError when it cannot be written),
// streamed: the header, then each tensor's bytes as given (no copy of the
// whole file in memory).
void write_gguf(const std::string& path, const GgufMetadata& metadata,
                const std::vector<GgufWriteTensor>& tensors, uint32_t version = 3);

}  // namespace mtp::io
