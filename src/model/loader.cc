// load_model: dispatch on what the path is. The loaders themselves live in
// load_hf.cc (Hugging Face folders) and load_llama2c.cc (llama2.c .bin files).
#include <filesystem>

#include "core/error.h"
#include "model/loader.h"

namespace fs = std::filesystem;

namespace mtp::model {

LoadedModel load_model(const std::string& path, const LoadOptions& opt) {
  std::error_code ec;
  const fs::path p(path);
  if (fs::is_directory(p, ec)) {
    if (fs::exists(p / "config.json", ec)) return load_hf(path, opt);
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
    if (hf_file && fs::exists(parent / "config.json", ec)) return load_hf(parent.string(), opt);
    return load_llama2c(path, opt);
  }
  fail<IoError>("no model at '{}'", path);
}

}  // namespace mtp::model
