// Read-only memory map of a whole file. Weights (embeddings, norms) are used in
// place from it; the mapping lives as long as the model that holds it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include <sys/types.h>

namespace mtp {

class MappedFile {
 public:
  MappedFile() = default;
  explicit MappedFile(const std::string& path);  // throws IoError
  ~MappedFile();
  MappedFile(MappedFile&& o) noexcept;
  MappedFile& operator=(MappedFile&& o) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  void release();
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::pair<dev_t, ino_t> id_{};  // in the registry of mapped files while registered_
  bool registered_ = false;
};

// Whole file as a string; throws IoError naming the path. A device (e.g.
// /dev/zero) is refused; a pipe is read to its end, at most kMaxPipeBytes.
inline constexpr size_t kMaxPipeBytes = size_t(1) << 30;
std::string read_file(const std::string& path);
// The same, but a file (or pipe) of more than `max_bytes` is an InputError
// naming it, the bound and `why` (what the bound is), found before it is read
// whole: a never-ending FIFO is read only to the bound.
std::string read_file(const std::string& path, size_t max_bytes, const std::string& why);
// Writes the whole file or nothing (core/output_file.h: a unique temporary
// file beside it renamed over it; devices and FIFOs written in place).
void write_file_atomic(const std::string& path, const std::string& bytes);

// Every file writer calls this before it writes `bytes` to `path` (both
// checks below): one rule for write_file_atomic and io::write_safetensors.
void check_before_write(const std::string& path, uint64_t bytes);
// An InputError when
// `path` is a file this process has memory-mapped now (a MappedFile: the
// weights of a target or drafter being read, a checkpoint), compared by
// device and inode, so another spelling or a link is the same file.
// (Without it `init-drafter -m M -o M/model.safetensors` would replace the
// target it reads with a drafter and report success.)
void refuse_overwriting_inputs(const std::string& path);
// An IoError when the folder of `path` has less free space than `bytes`, before a byte is written
// (so `widen --shape layers=100000` fails before it fills the disk).
void check_free_space(const std::string& path, uint64_t bytes);

}  // namespace mtp
