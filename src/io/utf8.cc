#include "io/utf8.h"

#include <cstdint>

namespace mtp::io {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD
}  // namespace

Scan scan_utf8(std::string_view s, size_t i) {
  const auto b0 = static_cast<uint8_t>(s[i]);
  if (b0 < 0x80) return {1, true, false};
  size_t need;
  uint8_t lo = 0x80, hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 3;
    if (b0 == 0xE0) lo = 0xA0;  // overlong
    if (b0 == 0xED) hi = 0x9F;  // surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 4;
    if (b0 == 0xF0) lo = 0x90;  // overlong
    if (b0 == 0xF4) hi = 0x8F;  // above U+10FFFF
  } else {
    return {1, false, false};
  }
  for (size_t j = 1; j < need; ++j) {
    if (i + j >= s.size()) return {j, false, true};
    const auto b = static_cast<uint8_t>(s[i + j]);
    const uint8_t l = j == 1 ? lo : 0x80, h = j == 1 ? hi : 0xBF;
    if (b < l || b > h) return {j, false, false};
  }
  return {need, true, false};
}


std::string sanitize_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const Scan sc = scan_utf8(s, i);
    if (sc.complete) {
      out.append(s.substr(i, sc.len));
    } else {
      out.append(kReplacement);
    }
    i += sc.len;
  }
  return out;
}

bool is_valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const Scan sc = scan_utf8(s, i);
    if (!sc.complete) return false;
    i += sc.len;
  }
  return true;
}

std::string TextStream::push(std::string_view bytes) {
  pending_.append(bytes);
  std::string out;
  size_t i = 0;
  while (i < pending_.size()) {
    const Scan sc = scan_utf8(pending_, i);
    if (sc.truncated) break;  // wait for the rest of the character
    if (sc.complete) {
      out.append(pending_, i, sc.len);
    } else {
      out.append(kReplacement);
    }
    i += sc.len;
  }
  pending_.erase(0, i);
  return out;
}

std::string TextStream::flush() {
  std::string out = sanitize_utf8(pending_);
  pending_.clear();
  return out;
}

}  // namespace mtp::io
