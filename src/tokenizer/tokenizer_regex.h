// The regexes of Hugging Face tokenizer.json files (Split pre-tokenizers,
// Replace normalizers, the GPT-2 ByteLevel pattern), run with PCRE2 (JIT when
// the platform has it) under bounded work.
//
// Contracts:
//  - Patterns are Oniguruma's as HF stores them. \s / \S are rewritten to
//    \p{White_Space} / \P{White_Space} (what Oniguruma means by them), \w / \W
//    to the class [\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}], \h / \H
//    (Oniguruma: a hex digit) to [0-9A-Fa-f]; \p{L}, \p{N}, lookahead,
//    (?i:...) and the rest are PCRE2's own. Compiled with UTF and UCP; `.`
//    and `$` know every Unicode line terminator.
//  - find_all gives the non-empty matches, leftmost first, non-overlapping;
//    after an empty match the search goes on one code point later.
//  - Work is bounded: a search that needs more than kMatchLimit backtracking
//    steps plus kMatchLimitPerByte per byte of the text, or backtracks deeper
//    than kDepthLimit, is refused with an InputError naming the pattern (a
//    `(a+)+$` Split made a 41-byte prompt tokenise for more than 20 s).
//  - A pattern PCRE2 cannot compile is a ConfigError naming it.
//  - Thread-safe: one compiled pattern, per-thread match state.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mtp::io {

class BoundedRegex {
 public:
  static constexpr uint32_t kMatchLimit = 10'000'000;
  static constexpr uint32_t kMatchLimitPerByte = 64;
  static constexpr uint32_t kDepthLimit = 100'000;

  explicit BoundedRegex(const std::string& pattern);
  ~BoundedRegex();
  BoundedRegex(const BoundedRegex&) = delete;
  BoundedRegex& operator=(const BoundedRegex&) = delete;

  std::vector<std::pair<size_t, size_t>> find_all(std::string_view text) const;
  const std::string& pattern() const { return pattern_; }

 private:
  std::string pattern_;
  void* code_ = nullptr;  // pcre2_code_8
};

// Oniguruma escapes rewritten for PCRE2 (see the header comment).
std::string onig_to_pcre2(const std::string& pattern);

}  // namespace mtp::io
