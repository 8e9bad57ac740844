#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/output_file.h"

namespace mtp {

namespace {
// (device, inode) of every file mapped now, one entry per MappedFile.
std::mutex g_mapped_mu;
std::multiset<std::pair<dev_t, ino_t>> g_mapped;
}  // namespace

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
  id_ = {st.st_dev, st.st_ino};
  registered_ = true;
  std::lock_guard<std::mutex> lock(g_mapped_mu);
  g_mapped.insert(id_);
}

void MappedFile::release() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
  if (registered_) {
    std::lock_guard<std::mutex> lock(g_mapped_mu);
    if (auto it = g_mapped.find(id_); it != g_mapped.end()) g_mapped.erase(it);
  }
  registered_ = false;
}

MappedFile::~MappedFile() { release(); }

MappedFile::MappedFile(MappedFile&& o) noexcept
    : path_(std::move(o.path_)), data_(std::exchange(o.data_, nullptr)),
      size_(std::exchange(o.size_, 0)), id_(o.id_),
      registered_(std::exchange(o.registered_, false)) {}

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
  if (this != &o) {
    release();
    path_ = std::move(o.path_);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    id_ = o.id_;
    registered_ = std::exchange(o.registered_, false);
  }
  return *this;
}

void check_free_space(const std::string& path, uint64_t bytes) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path dir = fs::path(path).parent_path();
  if (dir.empty()) dir = ".";
  const fs::space_info sp = fs::space(dir, ec);
  if (ec) return;  // unknown: the write itself reports a full disk
  // A file being replaced frees its bytes only after the rename.
  if (bytes > sp.available) {
    fail<IoError>("cannot write '{}': it needs {:.2f} GB and '{}' has {:.2f} GB free", path,
                  double(bytes) / 1e9, dir.string(), double(sp.available) / 1e9);
  }
}

void refuse_overwriting_inputs(const std::string& path) {
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) return;  // nothing there yet
  std::lock_guard<std::mutex> lock(g_mapped_mu);
  if (g_mapped.count({st.st_dev, st.st_ino}) > 0) {
    fail<InputError>("refusing to write '{}': this command is reading it (the same file is one of "
                     "its inputs); write the output to another path", path);
  }
}

void check_before_write(const std::string& path, uint64_t bytes) {
  refuse_overwriting_inputs(path);
  check_free_space(path, bytes);
}

std::string read_file(const std::string& path) { return read_file(path, kMaxPipeBytes, ""); }

std::string read_file(const std::string& path, size_t max_bytes, const std::string& why) {
  auto too_big = [&] {
    if (why.empty()) {
      fail<IoError>("cannot read '{}': a pipe that gave more than {} MiB", path, max_bytes >> 20);
    }
    fail<InputError>("'{}' is more than {} bytes, {}", path, max_bytes, why);
  };
  // An ifstream opens a directory and reads nothing: it would be an empty
  // file (an empty prompt, an empty config) instead of an error.
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    fail<IoError>("cannot read '{}': it is a directory, not a file", path);
  }
  // A device never ends (/dev/zero, /dev/urandom: the read grew by 200 MB/s
  // until killed); a pipe (`-f <(cmd)`) is read, up to kMaxPipeBytes.
  struct stat st{};
  const bool known = ::stat(path.c_str(), &st) == 0;  // else the open below says why
  const bool regular = known && S_ISREG(st.st_mode);
  if (known && !regular && !S_ISFIFO(st.st_mode)) {
    fail<IoError>("cannot read '{}': it is a device, not a file", path);
  }
  std::ifstream f(path, std::ios::binary);
  if (!f) fail<IoError>("cannot open '{}': {}", path, std::strerror(errno));
  if (regular) {
    if (!why.empty() && uint64_t(st.st_size) > max_bytes) too_big();
    std::ostringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
  std::string out;
  std::vector<char> buf(size_t(1) << 16);
  while (f.read(buf.data(), std::streamsize(std::min(buf.size(), max_bytes + 1 - out.size()))) ||
         f.gcount() > 0) {
    out.append(buf.data(), size_t(f.gcount()));
    if (out.size() > max_bytes) too_big();
  }
  return out;
}

void write_file_atomic(const std::string& path, const std::string& bytes) {
  OutputFile f(path, bytes.size());
  f.write(bytes);
  f.commit();
}

}  // namespace mtp
