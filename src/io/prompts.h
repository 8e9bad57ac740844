// Prompt sets for drift and bench: JSON Lines, one object per line:
//   {"prompt": "Once upon a time", "lang": "en", "kind": "free"}
// "lang" and "kind" are optional strings ("kind": what sort of text the prompt
// asks for, e.g. free / quote / structured: bench --sources reports per kind);
// blank lines are skipped.
#pragma once
#include <string>
#include <vector>

namespace mtp::io {

struct PromptEntry {
  std::string prompt;
  std::string lang;
  std::string kind;
};

// Throws IoError / FormatError naming the file and line.
std::vector<PromptEntry> read_prompts(const std::string& path);

}  // namespace mtp::io
