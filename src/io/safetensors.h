// Safetensors files: reading (memory-mapped, fully validated), sharded
// Hugging Face checkpoints, and writing.
//
// Format (https://github.com/huggingface/safetensors): an 8-byte little-endian
// u64 N, then N bytes of UTF-8 JSON, then the data section. The JSON maps each
// tensor name to {"dtype", "shape", "data_offsets": [begin, end]} (offsets are
// relative to the data section start); the optional "__metadata__" key maps
// strings to strings. Tensors are row-major, little-endian.
//
// Reading validates everything before handing out a view: the header length
// against the file size, the JSON, every dtype, every offset pair against the
// data section, end - begin == numel * dtype size, and no two tensors overlap.
// A damaged or truncated file is an IoError (shorter than its header promises)
// or a FormatError (malformed header), never a crash.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/mapped_file.h"

namespace mtp::io {

// A tensor in place: `data` points into a memory map (reading) or into the
// caller's buffer (writing). nbytes == numel() * dtype_size(dtype).
struct TensorView {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  size_t nbytes = 0;

  size_t numel() const;  // product of shape (1 for a scalar, shape [])
};

using Metadata = std::map<std::string, std::string>;

// Names of tensors a reader never reads (a multimodal checkpoint's towers):
// true = skip. Their header entries are not validated beyond taking up bytes
// of the data section, they are not listed, and a shard holding only such
// tensors is not opened.
using SkipTensor = std::function<bool(std::string_view name)>;

// One memory-mapped .safetensors file. Views stay valid while this object lives.
class SafetensorsFile {
 public:
  // Throws IoError (missing, unreadable, truncated) or FormatError (bad header)
  // about any tensor but those `skip` names.
  explicit SafetensorsFile(const std::string& path, const SkipTensor& skip = {});

  const std::string& path() const { return map_.path(); }
  size_t file_size() const { return map_.size(); }

  // nullptr when absent. Throws ShapeError when present with a safetensors dtype
  // mtpspec cannot hold (F64, I8, F8_*, ...): such files open fine as long as
  // nobody asks for those tensors.
  const TensorView* find(std::string_view name) const;
  // Throws FormatError naming the tensor and the file when absent.
  const TensorView& get(std::string_view name) const;
  bool contains(std::string_view name) const;
  // Every tensor name (including unsupported-dtype ones), sorted.
  std::vector<std::string> names() const;
  size_t num_tensors() const { return tensors_.size() + unsupported_.size(); }
  const Metadata& metadata() const { return metadata_; }

 private:
  MappedFile map_;
  std::map<std::string, TensorView, std::less<>> tensors_;
  std::map<std::string, std::string, std::less<>> unsupported_;  // name -> dtype string
  Metadata metadata_;
};

// The tensors of a checkpoint that may be split over several files. Cheap to
// copy (shared state). Views stay valid as long as any copy, or any keep_alive()
// handle, lives.
class TensorSet {
 public:
  TensorSet() = default;
  // dir/model.safetensors if present, else every shard named in
  // dir/model.safetensors.index.json ("weight_map": tensor -> file). Every
  // weight_map entry must exist in the file it names (FormatError otherwise); a
  // tensor found in two shards is a FormatError. IoError when neither file exists.
  // Tensors `skip` names are left out unread (SkipTensor).
  static TensorSet open_dir(const std::string& dir, const SkipTensor& skip = {});
  // A single .safetensors file.
  static TensorSet open_file(const std::string& path);
  // Tensors already in memory (a drafter built by training or in a test, a
  // widened or requantized model): the same reader code then serves them as a
  // file's. `owner` keeps the views' storage alive as long as the set lives;
  // `source` names it in messages. InputError for duplicate names.
  static TensorSet in_memory(std::string source, std::vector<TensorView> views, Metadata metadata,
                             std::shared_ptr<const void> owner);

  const TensorView* find(std::string_view name) const;  // nullptr when absent
  // Throws FormatError naming the tensor and the checkpoint when absent.
  const TensorView& get(std::string_view name) const;
  bool contains(std::string_view name) const { return find(name) != nullptr; }
  std::vector<std::string> names() const;  // sorted, across all files
  // The file holding `name` (FormatError when absent; source() for an
  // in-memory set).
  const std::string& file_of(std::string_view name) const;
  // What was opened (directory or file), for messages.
  const std::string& source() const;
  std::vector<std::shared_ptr<const SafetensorsFile>> files() const;
  // Metadata of the single file, or the union over shards (first one wins).
  Metadata metadata() const;
  // A handle that keeps every map (and so every view) alive.
  std::shared_ptr<void> keep_alive() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

// Writes a safetensors file: tensors sorted by name, laid out contiguously in
// that order, header padded with spaces so the data section starts at a
// multiple of 8. Streams to a temporary file in the same folder and renames it
// into place, so readers never see a partial file. Throws ShapeError when a
// view's nbytes disagrees with its shape and dtype, InputError for duplicate or
// reserved names ("__metadata__"), IoError when the file cannot be written.
void write_safetensors(const std::string& path, const std::vector<TensorView>& tensors,
                       const Metadata& metadata = {});

// Convenience for writers: a view of a contiguous buffer of T (size checked).
template <class T>
TensorView make_view(std::string name, DType dtype, std::vector<int64_t> shape,
                     const std::vector<T>& buf) {
  return TensorView{std::move(name), dtype, std::move(shape), buf.data(), buf.size() * sizeof(T)};
}

}  // namespace mtp::io
