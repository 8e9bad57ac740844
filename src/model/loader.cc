// load_model: dispatch on what the path is. The loaders themselves live in
// load_hf.cc (Hugging Face folders), load_gguf.cc (GGUF files) and
// load_llama2c.cc (llama2.c .bin files).
#include <filesystem>
#include <utility>

#include "core/error.h"
#include "io/gguf.h"
#include "model/hf_config.h"
#include "model/loader.h"

namespace fs = std::filesystem;

namespace mtp::model {

namespace {

enum class Format { Hf, Gguf, Llama2c };

// What `path` holds, and the path to load it from.
std::pair<Format, std::string> resolve(const std::string& path) {
  std::error_code ec;
  const fs::path p(path);
  if (fs::is_directory(p, ec)) {
    if (fs::exists(p / "config.json", ec)) return {Format::Hf, path};
    fail<IoError>("no model at '{}': the folder has no config.json (a Hugging Face checkpoint "
                  "folder needs config.json and model.safetensors)", path);
  }
  if (fs::is_regular_file(p, ec)) {
    // A file inside a Hugging Face folder (config.json, a .safetensors shard,
    // the index) means that folder.
    const std::string name = p.filename().string();
    const fs::path parent = p.has_parent_path() ? p.parent_path() : fs::path(".");
    const bool hf_file = name == "config.json" || name == "model.safetensors.index.json" ||
                         (name.size() > 12 && name.ends_with(".safetensors"));
    if (hf_file && fs::exists(parent / "config.json", ec)) return {Format::Hf, parent.string()};
    // GGUF by its magic, whatever the file is called.
    if (io::GgufFile::has_magic(path)) return {Format::Gguf, path};
    return {Format::Llama2c, path};
  }
  fail<IoError>("no model at '{}'", path);
}

}  // namespace

LoadedModel load_model(const std::string& path, const LoadOptions& opt) {
  const auto [format, p] = resolve(path);
  LoadedModel m = format == Format::Gguf ? load_gguf(p, opt)
                  : format == Format::Hf ? load_hf(p, opt)
                                         : load_llama2c(p, opt);
  if (opt.weights && kernels::weight_type_quantized(*opt.weights)) {
    m.requantized = kernels::weight_type_name(*opt.weights);
  }
  return m;
}

ModelConfig read_model_config(const std::string& path) {
  const auto [format, p] = resolve(path);
  if (format == Format::Gguf) return read_gguf_config(p);
  return format == Format::Hf ? read_hf_config(p) : read_llama2c_config(p);
}

}  // namespace mtp::model
