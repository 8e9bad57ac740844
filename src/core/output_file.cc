#include "core/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <random>
#include <utility>

#include "core/error.h"
#include "core/mapped_file.h"

namespace mtp {

namespace {

// The temporary files alive now, for the signal handler: fixed storage, no
// allocation or lock in the handler (unlink is async-signal-safe). A file
// that finds no free slot is still removed on every other path.
constexpr int kSlots = 64;
constexpr size_t kPathMax = 4096;
struct TempSlot {
  std::atomic<int> state{0};  // 0 free, 1 being filled, 2 holds a path
  char path[kPathMax];
};
TempSlot g_temp[kSlots];

extern "C" void remove_temp_files_and_die(int sig) {
  for (TempSlot& s : g_temp) {
    if (s.state.load(std::memory_order_acquire) == 2) ::unlink(s.path);
  }
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

// Installs the handler for the signals that still have their default
// disposition (a command with its own handler, e.g. serve's graceful stop,
// keeps it: its destructors remove the files).
void install_handlers() {
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction old{};
    if (::sigaction(sig, nullptr, &old) != 0) continue;
    if ((old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL) continue;
    struct sigaction sa{};
    sa.sa_handler = remove_temp_files_and_die;
    sigemptyset(&sa.sa_mask);
    ::sigaction(sig, &sa, nullptr);
  }
}

int register_temp(const std::string& path) {
  static std::once_flag once;
  std::call_once(once, install_handlers);
  if (path.size() >= kPathMax) return -1;
  for (int i = 0; i < kSlots; ++i) {
    int expect = 0;
    if (g_temp[i].state.compare_exchange_strong(expect, 1)) {
      std::memcpy(g_temp[i].path, path.c_str(), path.size() + 1);
      g_temp[i].state.store(2, std::memory_order_release);
      return i;
    }
  }
  return -1;
}

void unregister_temp(int slot) {
  if (slot >= 0) g_temp[slot].state.store(0, std::memory_order_release);
}

bool under(const std::filesystem::path& p, const char* root) {
  const std::string s = p.string();
  const size_t n = std::strlen(root);
  return s.compare(0, n, root) == 0 && (s.size() == n || s[n] == '/');
}

}  // namespace

bool OutputFile::in_place(const std::string& path) {
  namespace fs = std::filesystem;
  struct stat st{};
  if (::stat(path.c_str(), &st) == 0 && (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode))) {
    return true;
  }
  std::error_code ec;
  fs::path dir = fs::absolute(fs::path(path), ec).parent_path();
  if (ec) return false;
  const fs::path real = fs::weakly_canonical(dir, ec);
  if (!ec) dir = real;
  return under(dir, "/dev") || under(dir, "/proc");
}

std::string OutputFile::refusal(const std::string& path) {
  if (path.empty() || path.back() == '/') return "it is a directory";
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) return "";
  if (S_ISDIR(st.st_mode)) return "it is a directory";
  if (S_ISBLK(st.st_mode)) return "it is a block device, not a file";
  if (S_ISSOCK(st.st_mode)) return "it is a socket, not a file";
  return "";
}

OutputFile::OutputFile(const std::string& path, uint64_t bytes) : path_(path) {
  if (std::string why = refusal(path); !why.empty()) fail<IoError>("cannot write '{}': {}", path, why);
  refuse_overwriting_inputs(path);
  if (in_place(path)) {
    fd_ = ::open(path.c_str(), O_WRONLY | O_APPEND | O_NOCTTY | O_CLOEXEC);
    if (fd_ < 0) fail<IoError>("cannot write '{}': {}", path, std::strerror(errno));
    return;
  }
  check_free_space(path, bytes);
  // Unique in the target's folder, so rename() is atomic and two writers
  // never share one; O_EXCL | O_NOFOLLOW: a name that exists (a stale file,
  // a link to an input) is never opened, another name is tried.
  // The name holds a per-process random part: names cannot be planted ahead.
  static const uint32_t salt = std::random_device{}();
  static std::atomic<uint64_t> counter{0};
  for (int tries = 0; fd_ < 0; ++tries) {
    tmp_ = fmt::format("{}.tmp-{}-{:08x}-{}", path, ::getpid(), salt, counter.fetch_add(1));
    slot_ = register_temp(tmp_);
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd_ >= 0) break;
    const int err = errno;
    unregister_temp(std::exchange(slot_, -1));
    if (err != EEXIST || tries >= 100) {
      tmp_.clear();
      fail<IoError>("cannot write '{}': {}", path, std::strerror(err));
    }
  }
}

OutputFile::~OutputFile() {
  if (done_) return;
  if (fd_ >= 0) ::close(fd_);
  if (!tmp_.empty()) ::unlink(tmp_.c_str());
  unregister_temp(slot_);
}

void OutputFile::fail_removing(const std::string& what, int err) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!tmp_.empty()) ::unlink(tmp_.c_str());
  unregister_temp(std::exchange(slot_, -1));
  done_ = true;
  fail<IoError>("{} '{}': {}", what, path_, std::strerror(err));
}

void OutputFile::write(const void* data, size_t n) {
  MTP_CHECK(!done_ && fd_ >= 0, "write after commit of '{}'", path_);
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd_, p, std::min<size_t>(n, size_t(1) << 30));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) fail_removing("write failed for", w < 0 ? errno : ENOSPC);
    p += w;
    n -= size_t(w);
  }
}

void OutputFile::commit() {
  MTP_CHECK(!done_ && fd_ >= 0, "second commit of '{}'", path_);
  const int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0) fail_removing("write failed for", errno);
  if (!tmp_.empty() && std::rename(tmp_.c_str(), path_.c_str()) != 0) {
    fail_removing("cannot rename the new", errno);
  }
  unregister_temp(std::exchange(slot_, -1));
  done_ = true;
}

}  // namespace mtp
