// Read-only memory map of a whole file. Weights (embeddings, norms) are used in
// place from it; the mapping lives as long as the model that holds it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

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
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// Whole file as a string; throws IoError naming the path.
std::string read_file(const std::string& path);
// Writes atomically: temp file in the same folder, then rename.
void write_file_atomic(const std::string& path, const std::string& bytes);

}  // namespace mtp
