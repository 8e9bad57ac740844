// Prompt sets for drift and bench: JSON Lines, one object per line:
//   {"prompt": "Once upon a time", "lang": "en"}
// "lang" is optional (reported per prompt); blank lines are skipped.
#pragma once
#include <string>
#include <vector>

namespace mtp::io {

struct PromptEntry {
  std::string prompt;
  std::string lang;
};

// Throws IoError / FormatError naming the file and line.
std::vector<PromptEntry> read_prompts(const std::string& path);

}  // namespace mtp::io
