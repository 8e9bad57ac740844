// Typed exceptions carrying the offending values (CTranslate2 style).
// Every user-facing failure is an mtp::Error subclass: the CLI prints what()
// and exits 2. A violated invariant — a bug in mtpspec, never the user's
// input — is an InternalError (MTP_CHECK), which the CLI reports with its file
// and line and exit status 4 (cli/run_cli.h).
#pragma once
#include <fmt/format.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace mtp {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
// A file is missing, unreadable or shorter than its header promises.
class IoError : public Error {
 public:
  using Error::Error;
};
// A file's contents are malformed (bad header, bad JSON, NaN weights, ...).
class FormatError : public Error {
 public:
  using Error::Error;
};
// A model configuration we do not support (unknown architecture, rope type...).
class ConfigError : public Error {
 public:
  using Error::Error;
};
// A tensor has the wrong shape or dtype for its role.
class ShapeError : public Error {
 public:
  using Error::Error;
};
// Bad user input: prompt too long, invalid UTF-8, bad flag combination.
class InputError : public Error {
 public:
  using Error::Error;
};

// A violated invariant: a bug in mtpspec. Deliberately not an mtp::Error, so
// no handler of user errors swallows it.
class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

// A value quoted in a message, clipped: the first `max` bytes (never cutting
// a UTF-8 sequence) and how long it was. Error messages name the offending
// value; a 4 MB value is named by its start.
inline std::string clip_value(std::string_view s, size_t max = 120) {
  if (s.size() <= max) return std::string(s);
  size_t n = max;
  while (n > 0 && (uint8_t(s[n]) & 0xC0) == 0x80) --n;
  return fmt::format("{}... ({} bytes)", s.substr(0, n), s.size());
}

// The longest message fail() throws: a value no site clipped (a 4 MB token,
// key or string) is cut here, so no error dumps megabytes.
inline constexpr size_t kMaxErrorMessage = 2048;

template <class E = Error, class... Args>
[[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) {
  std::string m = fmt::format(f, std::forward<Args>(args)...);
  if (m.size() > kMaxErrorMessage) m = clip_value(m, kMaxErrorMessage);
  throw E(std::move(m));
}

namespace detail {
[[noreturn]] inline void check_failed(const char* file, int line, const char* cond,
                                      const std::string& msg) {
  throw InternalError(fmt::format("{}:{}: check `{}` failed: {} (this is a bug in mtpspec)",
                                  file, line, cond, msg));
}
}  // namespace detail

}  // namespace mtp

// MTP_CHECK(cond, "format {}", args...): throws mtp::InternalError naming the
// file, line and condition when cond is false. For invariants only; bad input
// is reported with fail<InputError>(...) and friends.
#define MTP_CHECK(cond, ...)                                                       \
  do {                                                                             \
    if (!(cond)) ::mtp::detail::check_failed(__FILE__, __LINE__, #cond,            \
                                             ::fmt::format(__VA_ARGS__));          \
  } while (0)
