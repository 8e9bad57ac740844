#include "io/prompts.h"

#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "core/mapped_file.h"
#include "io/utf8.h"

namespace mtp::io {

std::vector<PromptEntry> read_prompts(const std::string& path) {
  std::istringstream in(read_file(path));
  std::vector<PromptEntry> out;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      fail<FormatError>("{}:{}: not JSON ({})", path, n, e.what());
    }
    if (!j.is_object() || !j.contains("prompt") || !j["prompt"].is_string()) {
      fail<FormatError>("{}:{}: expected {{\"prompt\": \"...\", \"lang\": \"..\"}}", path, n);
    }
    auto optional_string = [&](const char* key) -> std::string {
      if (!j.contains(key) || j[key].is_null()) return "";
      if (!j[key].is_string()) {
        fail<FormatError>("{}:{}: \"{}\" must be a string, got {}", path, n, key, j[key].dump());
      }
      return j[key].get<std::string>();
    };
    PromptEntry e{j["prompt"].get<std::string>(), optional_string("lang"), optional_string("kind")};
    if (!is_valid_utf8(e.prompt)) fail<InputError>("{}:{}: prompt is not valid UTF-8", path, n);
    out.push_back(std::move(e));
  }
  if (out.empty()) fail<InputError>("'{}' holds no prompts", path);
  return out;
}

}  // namespace mtp::io
