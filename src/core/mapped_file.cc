#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "core/error.h"

namespace mtp {

MappedFile::MappedFile(const std::string& path) : path_(path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) fail<IoError>("cannot open '{}': {}", path, std::strerror(errno));
  struct stat st{};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail<IoError>("'{}' is not a regular file", path);
  }
  size_ = size_t(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      fail<IoError>("cannot map '{}': {}", path, std::strerror(errno));
    }
    data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

MappedFile::MappedFile(MappedFile&& o) noexcept
    : path_(std::move(o.path_)), data_(std::exchange(o.data_, nullptr)),
      size_(std::exchange(o.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
  if (this != &o) {
    if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
    path_ = std::move(o.path_);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

std::string read_file(const std::string& path) {
  // An ifstream opens a directory and reads nothing: it would be an empty
  // file (an empty prompt, an empty config) instead of an error.
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    fail<IoError>("cannot read '{}': it is a directory, not a file", path);
  }
  std::ifstream f(path, std::ios::binary);
  if (!f) fail<IoError>("cannot open '{}': {}", path, std::strerror(errno));
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void write_file_atomic(const std::string& path, const std::string& bytes) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (path.empty() || path.back() == '/' || fs::is_directory(path, ec)) {
    fail<IoError>("cannot write '{}': it is a directory", path);
  }
  const std::string tmp = path + ".tmp";
  // Any failure removes the temporary file: nothing partial is left behind
  // (and nothing blocks a rerun).
  auto fail_removing = [&](const std::string& what, int err) {
    std::remove(tmp.c_str());
    fail<IoError>("{} '{}': {}", what, path, std::strerror(err));
  };
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) fail<IoError>("cannot write '{}': {}", tmp, std::strerror(errno));
  bool ok = bytes.empty() || std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  int err = ok ? 0 : errno;
  if (std::fclose(f) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (!ok) fail_removing("write failed for", err);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) fail_removing("cannot rename the new", errno);
}

}  // namespace mtp
