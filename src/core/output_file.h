// OutputFile: the one way mtpspec writes a file (write_file_atomic, the
// safetensors and GGUF writers, reports, checkpoints all go through it).
//
// Contracts:
//  - A new file, or an existing regular file, is written to a temporary file
//    beside it — a unique name created with O_CREAT | O_EXCL | O_NOFOLLOW, so
//    it is never opened through a link left there nor shared with another
//    writer — and renamed over the target on commit(): the whole file or
//    nothing. The temporary file is removed on any failure, by the destructor
//    when not committed, and on SIGINT / SIGTERM / SIGHUP (a handler is
//    installed for a signal whose disposition is the default; it removes the
//    temporary files, then dies of the signal as before).
//  - An existing character device or FIFO (/dev/null, a terminal, a pipe),
//    and any path under /dev/ or /proc/ (/dev/stdout redirected to a file), is
//    written in place, appending: the user means the stream, and nothing is
//    created or renamed there. Any other existing non-regular target (a
//    directory, a block device, a socket) is refused before a byte is
//    written; so are a file this process maps (an input) and a write larger
//    than the folder's free space (check_before_write).
//  - Every write is checked: a short write (ENOSPC, EFBIG under ulimit -f) is
//    an IoError naming the path.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace mtp {

class OutputFile {
 public:
  // `bytes`: the size about to be written (for the free-space check; 0 when
  // unknown).
  OutputFile(const std::string& path, uint64_t bytes);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  void write(const void* data, size_t n);
  void write(std::string_view s) { write(s.data(), s.size()); }
  // Closes and renames the temporary file over the target (in place: closes).
  void commit();

  // True when `path` is written in place (an existing device, FIFO, or a path
  // under /dev/ or /proc/).
  static bool in_place(const std::string& path);
  // The refusal of an existing target that can be neither replaced nor
  // written in place; "" when `path` is fine. For the flag checks.
  static std::string refusal(const std::string& path);

 private:
  [[noreturn]] void fail_removing(const std::string& what, int err);
  std::string path_;
  std::string tmp_;   // "" when written in place
  int fd_ = -1;
  int slot_ = -1;     // the temporary file's entry for the signal handler
  bool done_ = false;
};

}  // namespace mtp
