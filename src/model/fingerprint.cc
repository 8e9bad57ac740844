#include "model/fingerprint.h"

#include <openssl/evp.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json.h"
#include "core/mapped_file.h"
#include "core/ggml_type.h"
#include "io/gguf.h"
#include "io/safetensors.h"

namespace fs = std::filesystem;

namespace mtp::model {

namespace {

class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new(), EVP_MD_CTX_free) {
    if (!ctx_ || EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr) != 1) {
      fail<Error>("cannot initialise SHA-256 (OpenSSL)");
    }
  }
  void update(const void* p, size_t n) {
    // Feed in 64 MiB pieces so a huge tensor never needs one giant call.
    const auto* b = static_cast<const uint8_t*>(p);
    while (n > 0) {
      size_t m = std::min<size_t>(n, 64u << 20);
      EVP_DigestUpdate(ctx_.get(), b, m);
      b += m;
      n -= m;
    }
  }
  void update(const std::string& s) { update(s.data(), s.size()); }
  std::string hex() {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned len = 0;
    EVP_DigestFinal_ex(ctx_.get(), md, &len);
    static const char* digits = "0123456789abcdef";
    std::string out;
    for (unsigned i = 0; i < len; ++i) {
      out += digits[md[i] >> 4];
      out += digits[md[i] & 15];
    }
    return out;
  }

 private:
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx_;
};

void hash_tensor(Sha256& h, const std::string& name, std::string_view dtype,
                 const std::vector<int64_t>& shape, const void* data, size_t nbytes) {
  std::string head = name + '\0' + std::string(dtype) + '\0';
  for (size_t i = 0; i < shape.size(); ++i) head += (i ? "," : "") + std::to_string(shape[i]);
  head += '\0' + std::to_string(nbytes) + '\0';
  h.update(head);
  h.update(data, nbytes);
}

// The files whose bytes the fingerprint covers.
std::vector<std::string> weight_files(const LoadedModel& lm) {
  if (lm.config.source == "random") return {};
  if (fs::is_directory(lm.path)) {
    std::vector<std::string> files;
    for (const auto& f : io::TensorSet::open_dir(lm.path).files()) files.push_back(f->path());
    files.push_back((fs::path(lm.path) / "config.json").string());
    return files;
  }
  return {lm.path};
}

std::string cache_key(const std::vector<std::string>& files) {
  std::string key;
  for (const auto& f : files) {
    struct stat st{};
    if (::stat(f.c_str(), &st) != 0) return "";
    std::error_code ec;
    auto real = fs::canonical(f, ec);
    key += (ec ? f : real.string()) + "|" + std::to_string(st.st_size) + "|" +
           std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec) + ";";
  }
  return key;
}

std::string compute(const LoadedModel& lm) {
  Sha256 h;
  h.update("mtpspec-target-fingerprint-v1\n" + lm.config.to_json().dump() + "\n");
  if (lm.config.source == "random") {  // generated in memory: the spec and seed name it
    h.update(lm.path);
  } else if (lm.config.source == "gguf") {
    // The stored bytes, in the stored types (a Q8_0 or F16 copy of a
    // checkpoint is another target than the checkpoint).
    io::GgufFile f(lm.path);
    std::vector<const io::GgufTensor*> ts;
    for (const auto& t : f.tensors()) ts.push_back(&t);
    std::sort(ts.begin(), ts.end(), [](auto* a, auto* b) { return a->name < b->name; });
    for (const io::GgufTensor* t : ts) {
      hash_tensor(h, t->name, "ggml:" + ggml_type_name(t->type), t->shape(), t->data, t->nbytes);
    }
  } else if (fs::is_directory(lm.path)) {
    io::TensorSet ts = io::TensorSet::open_dir(lm.path);
    for (const auto& name : ts.names()) {
      const io::TensorView& t = ts.get(name);
      hash_tensor(h, name, dtype_name(t.dtype), t.shape, t.data, t.nbytes);
    }
  } else {
    MappedFile f(lm.path);
    if (f.size() < 28) fail<IoError>("'{}' is truncated", lm.path);
    size_t n = f.size() - 28;
    hash_tensor(h, "llama2c.payload", "U8", {int64_t(n)}, f.data() + 28, n);
  }
  return h.hex();
}

}  // namespace

std::string sha256_hex(const std::string& bytes) {
  Sha256 h;
  h.update(bytes);
  return h.hex();
}

std::string cache_dir() {
  fs::path base;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) base = x;
  else if (const char* home = std::getenv("HOME"); home && *home) base = fs::path(home) / ".cache";
  else base = fs::temp_directory_path();
  fs::path dir = base / "mtpspec";
  std::error_code ec;
  fs::create_directories(dir, ec);
  return dir.string();
}

static std::string stored_fingerprint(const LoadedModel& lm, bool use_cache);

std::string target_fingerprint(const LoadedModel& lm, bool use_cache) {
  const std::string stored = stored_fingerprint(lm, use_cache);
  if (lm.requantized.empty()) return stored;
  // Requantized at load: the held bytes are a function of the stored ones and
  // of mtpspec's quantizer for that type (its version named here).
  return sha256_hex(stored + "|requantized:" + lm.requantized + "|quantizer:mtpspec-rtn-1");
}

static std::string stored_fingerprint(const LoadedModel& lm, bool use_cache) {
  if (lm.config.source == "random") use_cache = false;
  std::string key = use_cache ? cache_key(weight_files(lm)) : "";
  key += "#" + sha256_hex(lm.config.to_json().dump());
  fs::path cache = fs::path(cache_dir()) / "fingerprints.json";
  nlohmann::json db = nlohmann::json::object();
  if (use_cache) {
    try {
      db = parse_json(read_file(cache.string()), "'" + cache.string() + "'");
      if (db.contains(key)) return db[key].get<std::string>();
    } catch (const std::exception&) {
      db = nlohmann::json::object();  // missing or unreadable cache: recompute
    }
  }
  std::string fp = compute(lm);
  if (use_cache) {
    try {
      db[key] = fp;
      write_file_atomic(cache.string(), db.dump(1));
    } catch (const std::exception&) {
      // A read-only cache is not an error: the fingerprint is still right.
    }
  }
  return fp;
}

}  // namespace mtp::model
