#include "io/prompts.h"

#include <sstream>

#include "core/error.h"
#include "core/json.h"
#include "core/mapped_file.h"
#include "io/utf8.h"

namespace mtp::io {

std::vector<PromptEntry> read_prompts(const std::string& path) {
  std::istringstream in(read_file(path));
  std::vector<PromptEntry> out;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = fmt::format("{}:{}", path, n);
    const nlohmann::json j = parse_json(line, where);
    if (!j.is_object()) {
      fail<FormatError>("{}: expected {{\"prompt\": \"...\", \"lang\": \"..\"}}", where);
    }
    PromptEntry e{json_get<std::string>(j, "prompt", where),
                  json_value<std::string>(j, "lang", "", where),
                  json_value<std::string>(j, "kind", "", where)};
    if (auto it = j.find("id"); it != j.end() && !it->is_null()) {
      if (!it->is_string() && !it->is_number()) {
        fail<FormatError>("{}: field 'id' must be a string or a number; got {} {}", where,
                          json_type_name(*it), json_excerpt(*it));
      }
      e.id = *it;
    }
    if (!is_valid_utf8(e.prompt)) fail<InputError>("{}: prompt is not valid UTF-8", where);
    out.push_back(std::move(e));
  }
  if (out.empty()) fail<InputError>("'{}' holds no prompts", path);
  return out;
}

nlohmann::json PromptEntry::id_or(size_t index) const {
  return id.is_null() ? nlohmann::json(index) : id;
}

std::string PromptEntry::label(size_t number) const {
  if (id.is_null()) return std::to_string(number);
  return id.is_string() ? clip_value(id.get<std::string>(), 60) : id.dump();
}

}  // namespace mtp::io
