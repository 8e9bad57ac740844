// UTF-8 checking, repair and streaming reassembly: the text rules every
// tokenizer, prompt reader and output stream share. No tokenizer dependency,
// so file-format readers (corpora, prompt sets) use it without linking one.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace mtp::io {

// Result of scanning one UTF-8 sequence at s[i]: `len` bytes form either a
// complete character (complete=true) or the maximal invalid subpart
// (complete=false). Replacing each maximal subpart by one U+FFFD is the
// Unicode-recommended practice (also what Python's errors="replace" does).
// `truncated` is set when the subpart was valid so far and only ended because
// the input did. Requires i < s.size().
struct Scan {
  size_t len;
  bool complete;
  bool truncated;
};
Scan scan_utf8(std::string_view s, size_t i);

// Incremental UTF-8 assembly for streaming output: push token bytes, get back
// the complete characters so far; invalid sequences become U+FFFD.
class TextStream {
 public:
  std::string push(std::string_view bytes);
  std::string flush();  // whatever is left (an incomplete tail becomes U+FFFD)

 private:
  std::string pending_;
};

// Replaces invalid UTF-8 with U+FFFD.
std::string sanitize_utf8(std::string_view s);
// True if s is valid UTF-8.
bool is_valid_utf8(std::string_view s);

}  // namespace mtp::io
