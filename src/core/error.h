// Typed exceptions carrying the offending values (CTranslate2 style).
// Every user-facing failure is one of these; the CLI prints what() and exits 2.
#pragma once
#include <fmt/format.h>

#include <stdexcept>
#include <string>

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

template <class E = Error, class... Args>
[[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) {
  throw E(fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace mtp
