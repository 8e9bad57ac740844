#include "app/subprocess.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/error.h"

extern char** environ;

namespace mtp::app {

namespace fs = std::filesystem;

std::string self_executable() {
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : self.string();
}

std::string sibling_executable(const std::string& name) {
  const std::string self = self_executable();
  return self.empty() ? std::string() : (fs::path(self).parent_path() / name).string();
}

int run_process(const std::string& exe, const std::vector<std::string>& args,
                const ChildStdout& out) {
  std::vector<std::string> storage = {exe};
  storage.insert(storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : storage) argv.push_back(s.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (out.kind == ChildStdout::kFile) {
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, out.path.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
  } else if (out.kind == ChildStdout::kStderr) {
    posix_spawn_file_actions_adddup2(&fa, STDERR_FILENO, STDOUT_FILENO);
  }
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, exe.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) fail<IoError>("cannot run '{}': {}", exe, std::strerror(rc));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) fail<IoError>("waiting for '{}': {}", exe, std::strerror(errno));
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
}

}  // namespace mtp::app
