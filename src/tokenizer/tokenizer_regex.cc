#include "tokenizer/tokenizer_regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <memory>
#include <new>

#include "core/error.h"
#include "tokenizer/tokenizer_internal.h"

namespace mtp::io {

namespace {

constexpr const char* kWordItems = "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\x{200C}\\x{200D}";

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof buf);
  return reinterpret_cast<const char*>(buf);
}

// Per-thread match state: a match context with the limits, a JIT stack big
// enough for the HF patterns' lookaheads, and room for one match.
struct MatchState {
  pcre2_match_context* ctx = nullptr;
  pcre2_jit_stack* jit = nullptr;
  pcre2_match_data* data = nullptr;
  MatchState() {
    ctx = pcre2_match_context_create(nullptr);
    jit = pcre2_jit_stack_create(32 * 1024, 1024 * 1024, nullptr);
    data = pcre2_match_data_create(1, nullptr);
    if (!ctx || !jit || !data) throw std::bad_alloc();
    pcre2_jit_stack_assign(ctx, nullptr, jit);
    pcre2_set_depth_limit(ctx, BoundedRegex::kDepthLimit);
  }
  ~MatchState() {
    pcre2_match_data_free(data);
    pcre2_jit_stack_free(jit);
    pcre2_match_context_free(ctx);
  }
};

}  // namespace

std::string onig_to_pcre2(const std::string& p) {
  std::string out;
  out.reserve(p.size() + 32);
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char e = p[++i];
      switch (e) {
        case 's': out += "\\p{White_Space}"; break;
        case 'S': out += "\\P{White_Space}"; break;
        case 'w': out += in_class ? kWordItems : std::string("[") + kWordItems + "]"; break;
        case 'W':
          if (in_class) fail<ConfigError>("tokenizer regex '{}': \\W inside [...] is not supported", p);
          out += std::string("[^") + kWordItems + "]";
          break;
        case 'h': out += in_class ? "0-9A-Fa-f" : "[0-9A-Fa-f]"; break;
        case 'H':
          if (in_class) fail<ConfigError>("tokenizer regex '{}': \\H inside [...] is not supported", p);
          out += "[^0-9A-Fa-f]";
          break;
        default: out += '\\'; out += e;
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal member.
      if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
      if (i + 1 < p.size() && p[i + 1] == ']') out += p[++i];
      continue;
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return out;
}

BoundedRegex::BoundedRegex(const std::string& pattern) : pattern_(pattern) {
  const std::string pat = onig_to_pcre2(pattern);
  std::unique_ptr<pcre2_compile_context, void (*)(pcre2_compile_context*)> cc(
      pcre2_compile_context_create(nullptr), pcre2_compile_context_free);
  pcre2_set_newline(cc.get(), PCRE2_NEWLINE_ANY);
  int err = 0;
  PCRE2_SIZE at = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pat.data()), pat.size(),
                                   PCRE2_UTF | PCRE2_UCP, &err, &at, cc.get());
  if (!code) {
    fail<ConfigError>("tokenizer regex '{}' is not supported: {} at offset {}",
                      clip_value(pattern), pcre2_message(err), at);
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // the interpreter runs it where JIT fails
  code_ = code;
}

BoundedRegex::~BoundedRegex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

std::vector<std::pair<size_t, size_t>> BoundedRegex::find_all(std::string_view text) const {
  thread_local MatchState st;
  const auto* code = static_cast<const pcre2_code*>(code_);
  const uint64_t limit = kMatchLimit + uint64_t(kMatchLimitPerByte) * text.size();
  pcre2_set_match_limit(st.ctx, uint32_t(std::min<uint64_t>(limit, UINT32_MAX)));
  std::vector<std::pair<size_t, size_t>> out;
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  uint32_t options = 0;  // the first search checks the UTF-8 once; the rest skip it
  for (size_t start = 0; start <= text.size();) {
    const int rc = pcre2_match(code, subject, text.size(), start, options, st.data, st.ctx);
    options = PCRE2_NO_UTF_CHECK;
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT ||
        rc == PCRE2_ERROR_HEAPLIMIT || rc == PCRE2_ERROR_JIT_STACKLIMIT) {
      fail<InputError>("tokenizer regex '{}' needs more than its work limit on this input "
                       "({}: catastrophic backtracking in the tokenizer's pattern); refusing to "
                       "tokenize it", clip_value(pattern_), pcre2_message(rc));
    }
    if (rc < 0) {
      fail<InputError>("tokenizer regex '{}' failed on the input: {}", clip_value(pattern_),
                       pcre2_message(rc));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(st.data);
    const size_t b = ov[0], e = ov[1];
    if (e > b) {
      out.emplace_back(b, e);
      start = e;
    } else {
      if (b >= text.size()) break;
      start = b + std::max<size_t>(1, detail::utf8_len_at(text, b));
    }
  }
  return out;
}

}  // namespace mtp::io
