#include "test_util.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <vector>

namespace fs = std::filesystem;

namespace mtp::test {

std::string shared_dir() {
  if (const char* e = std::getenv("MTPSPEC_SHARED")) return e;
  return MTPSPEC_SHARED_DIR;
}

std::string shared_path(const std::string& rel) {
  fs::path p = fs::path(shared_dir()) / rel;
  return fs::exists(p) ? p.string() : std::string();
}

namespace {
std::vector<fs::path>& temp_dirs() {
  static std::vector<fs::path> dirs;
  static bool registered = false;
  if (!registered) {
    registered = true;
    std::atexit([] {
      std::error_code ec;
      for (auto& d : temp_dirs()) fs::remove_all(d, ec);
    });
  }
  return dirs;
}
}  // namespace

std::string temp_dir(const std::string& tag) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lk(mu);
  fs::path base = fs::temp_directory_path();
  for (int i = 0;; ++i) {
    fs::path p = base / ("mtpspec-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(i));
    if (fs::create_directory(p)) {
      temp_dirs().push_back(p);
      return p.string();
    }
  }
}

std::vector<float> randn(size_t n, std::mt19937& rng, float scale) {
  std::normal_distribution<float> nd(0.f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = nd(rng);
  return v;
}

uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

}  // namespace mtp::test
