// OutputFile (core/output_file.h): outputs never replace devices, never write
// through a link left at a temporary name, and leave no temporary file behind
// on failure or on SIGINT / SIGTERM.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>

#include "core/error.h"
#include "core/mapped_file.h"
#include "core/output_file.h"
#include "test_util.h"

namespace mtp {
namespace {

namespace fs = std::filesystem;

size_t count_entries(const std::string& dir) {
  return size_t(std::distance(fs::directory_iterator(dir), fs::directory_iterator{}));
}

// A stale link where the old fixed temporary name was (`r.md.tmp ->
// prompts.jsonl`) made `bench --report r.md` overwrite its own input.
TEST(OutputFile, ALinkAtATemporaryNameIsNeverWrittenThrough) {
  const std::string dir = test::temp_dir("out-link");
  const std::string victim = dir + "/prompts.jsonl", out = dir + "/r.md";
  write_file_atomic(victim, "the input");
  fs::create_symlink(victim, out + ".tmp");
  for (int i = 0; i < 4; ++i) fs::create_symlink(victim, fmt::format("{}.tmp-{}-{}", out, ::getpid(), i));
  write_file_atomic(out, "the report");
  EXPECT_EQ(read_file(victim), "the input");
  EXPECT_EQ(read_file(out), "the report");
  EXPECT_FALSE(fs::is_symlink(out));
}

// `-o /dev/null` as root replaced the system's /dev/null with a regular file:
// a character device or a FIFO is written in place.
TEST(OutputFile, DevicesAndFifosAreWrittenInPlaceNeverReplaced) {
  write_file_atomic("/dev/null", "discarded");
  struct stat st{};
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  EXPECT_TRUE(OutputFile::in_place("/dev/stdout"));

  const std::string dir = test::temp_dir("out-fifo");
  const std::string fifo = dir + "/p";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string got;
  std::thread reader([&] { got = read_file(fifo); });
  write_file_atomic(fifo, "through the pipe");
  reader.join();
  EXPECT_EQ(got, "through the pipe");
  ASSERT_EQ(::stat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  EXPECT_EQ(count_entries(dir), 1u);
}

TEST(OutputFile, ASocketIsRefusedAndKept) {
  const std::string dir = test::temp_dir("out-sock");
  const std::string path = dir + "/s";
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  ASSERT_LT(path.size(), sizeof a.sun_path);
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  test::expect_error<IoError>([&] { write_file_atomic(path, "x"); }, {path, "socket"});
  struct stat st{};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(count_entries(dir), 1u);
  ::close(fd);
}

// Every write is checked: /dev/full is a device (written in place) whose
// writes fail with ENOSPC.
TEST(OutputFile, AFailedWriteIsAnError) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  test::expect_error<IoError>([] { write_file_atomic("/dev/full", std::string(1 << 16, 'x')); },
                              {"/dev/full", "No space left"});
}

// widen left a 300 MB model.safetensors.tmp-PID-0 behind after SIGINT.
TEST(OutputFile, ASignalRemovesTheTemporaryFile) {
  for (int sig : {SIGINT, SIGTERM}) {
    const std::string dir = test::temp_dir("out-signal");
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      OutputFile f(dir + "/model.safetensors", 0);
      f.write(std::string(1 << 20, 'x'));
      ::raise(sig);
      ::_exit(0);  // not reached
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    struct sigaction inherited{};
    ASSERT_EQ(::sigaction(sig, nullptr, &inherited), 0);
    if (inherited.sa_handler == SIG_IGN) {
      // Ignored when this process started (a background job of a
      // non-interactive shell ignores SIGINT; nohup, SIGHUP): the handler
      // leaves it ignored, so the child lives on to _exit(0).
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
      continue;
    }
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == sig) << "status " << status;
    EXPECT_EQ(count_entries(dir), 0u) << "signal " << sig;
  }
}

TEST(OutputFile, NotCommittedLeavesNothing) {
  const std::string dir = test::temp_dir("out-abandon");
  {
    OutputFile f(dir + "/x.bin", 3);
    f.write("abc");
  }
  EXPECT_EQ(count_entries(dir), 0u);
}

}  // namespace
}  // namespace mtp
