// Prompt sets for generate --prompts, drift and bench: JSON Lines, one object
// per line:
//   {"prompt": "Once upon a time", "lang": "en", "kind": "free", "id": "q-17"}
// "lang" and "kind" are optional strings ("kind": what sort of text the prompt
// asks for, e.g. free / quote / structured: bench --sources reports per kind);
// "id" is an optional string or number, echoed back with the prompt's output
// (as batch APIs echo a custom id); blank lines are skipped.
#pragma once
#include <nlohmann/json.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace mtp::io {

struct PromptEntry {
  std::string prompt;
  std::string lang;
  std::string kind;
  nlohmann::json id;  // the line's "id" (string or number); null when absent

  // The id to report for the prompt at `index` (0-based) of its file: the
  // user's id, else the index.
  nlohmann::json id_or(size_t index) const;
  // The user's id as text for messages ("q-17", "42"), else `number`.
  std::string label(size_t number) const;
};

// Throws IoError / FormatError naming the file, line, field and value.
std::vector<PromptEntry> read_prompts(const std::string& path);

}  // namespace mtp::io
