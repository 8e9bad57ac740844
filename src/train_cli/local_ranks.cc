#include "train_cli/local_ranks.h"

#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>

#include "core/error.h"
#include "core/mapped_file.h"
#include "core/progress.h"

namespace mtp::train_cli {

namespace fs = std::filesystem;

std::vector<std::string> own_arguments() {
  const std::string raw = read_file("/proc/self/cmdline");
  std::vector<std::string> out;
  size_t b = 0;
  while (b < raw.size()) {
    const size_t e = raw.find('\0', b);
    out.push_back(raw.substr(b, e == std::string::npos ? std::string::npos : e - b));
    if (e == std::string::npos) break;
    b = e + 1;
  }
  if (!out.empty()) out.erase(out.begin());
  return out;
}

namespace {

// args without --nproc N / --nproc=N.
std::vector<std::string> without_nproc(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--nproc") {
      ++i;
      continue;
    }
    if (args[i].rfind("--nproc=", 0) == 0) continue;
    out.push_back(args[i]);
  }
  return out;
}

pid_t spawn(const std::vector<std::string>& args) {
  std::vector<std::string> storage = {"/proc/self/exe"};
  storage.insert(storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : storage) argv.push_back(s.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = ::fork();
  if (pid < 0) fail<IoError>("cannot start a rank: {}", std::strerror(errno));
  if (pid == 0) {
    ::execv("/proc/self/exe", argv.data());
    _exit(127);
  }
  return pid;
}

int exit_status(int st) { return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st); }

}  // namespace

int run_local_ranks(int n, const std::vector<std::string>& args, const std::string& run_dir,
                    int grace_s) {
  fs::create_directories(run_dir);
  const std::string store = (fs::path(run_dir) / fmt::format("dist-store-{}", ::getpid())).string();
  fs::remove(store);
  const std::vector<std::string> base = without_nproc(args);
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    std::vector<std::string> a = base;
    a.insert(a.end(), {"--world-size", std::to_string(n), "--rank", std::to_string(r),
                       "--dist-file", store});
    pids.push_back(spawn(a));
  }
  int first_failed = -1, failed_status = 0;
  std::chrono::steady_clock::time_point failed_at;
  int running = n;
  while (running > 0) {
    int st = 0;
    const pid_t p = ::waitpid(-1, &st, WNOHANG);
    if (p > 0) {
      for (int r = 0; r < n; ++r) {
        if (pids[size_t(r)] != p) continue;
        pids[size_t(r)] = -1;
        --running;
        if (exit_status(st) != 0 && first_failed < 0) {
          first_failed = r;
          failed_status = exit_status(st);
          failed_at = std::chrono::steady_clock::now();
          note("rank {} of {} exited with status {}; the other ranks stop at their next "
               "collective\n", r, n, failed_status);
        }
      }
      continue;
    }
    if (p < 0 && errno != EINTR) break;
    if (first_failed >= 0 && std::chrono::steady_clock::now() - failed_at >
                                 std::chrono::seconds(grace_s)) {
      for (int r = 0; r < n; ++r) {
        if (pids[size_t(r)] > 0) {
          note("rank {} still runs {} s after rank {} failed: stopping it\n", r, grace_s,
               first_failed);
          ::kill(pids[size_t(r)], SIGTERM);
        }
      }
      failed_at = std::chrono::steady_clock::now() + std::chrono::hours(24);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::error_code ec;
  fs::remove(store, ec);
  return first_failed < 0 ? 0 : failed_status;
}

}  // namespace mtp::train_cli
