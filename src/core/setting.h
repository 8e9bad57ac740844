// Errors and warnings about one setting of a library call (the thread count,
// a tree shape, the temperature, ...). The message names the value in words
// — "the temperature must be a finite number >= 0, got -1" — and setting()
// names the option by its library name ("temperature"), so each front end
// adds its own spelling of it: the CLI its flag (cli/setting_flags.h), while
// the C API and serve pass the message on as it is. Library layers never
// spell a front end's flags (tests/core/no_flags_test.cc checks the sources).
#pragma once
#include <fmt/format.h>

#include <cstdio>
#include <exception>
#include <functional>
#include <string>
#include <utility>

#include "core/error.h"

namespace mtp {

// What SettingError<E> adds to E; found with setting_of.
class AboutSetting {
 public:
  virtual ~AboutSetting() = default;
  virtual const char* setting() const noexcept = 0;
};

// An E (InputError, ConfigError, ...) about `setting` (a string literal):
// caught as an E like any other.
template <class E>
class SettingError final : public E, public AboutSetting {
 public:
  SettingError(const char* setting, const std::string& what) : E(what), setting_(setting) {}
  const char* setting() const noexcept override { return setting_; }

 private:
  const char* setting_;
};

// The setting an error is about, or nullptr.
inline const char* setting_of(const std::exception& e) {
  const auto* s = dynamic_cast<const AboutSetting*>(&e);
  return s ? s->setting() : nullptr;
}

template <class E = InputError, class... Args>
[[noreturn]] void fail_setting(const char* setting, fmt::format_string<Args...> f,
                               Args&&... args) {
  throw SettingError<E>(setting, fmt::format(f, std::forward<Args>(args)...));
}

// Runs f(); an mtp::Error it throws is thrown again as the same type, its
// message unchanged, about `setting` (replacing the setting it named, if
// any): for a caller that knows which of its options a call's errors are
// about (a list of tree shapes, the tokenizer a model loads).
template <class F>
decltype(auto) about_setting(const char* setting, F&& f) {
  try {
    return std::forward<F>(f)();
  } catch (const InputError& e) {
    throw SettingError<InputError>(setting, e.what());
  } catch (const ConfigError& e) {
    throw SettingError<ConfigError>(setting, e.what());
  } catch (const FormatError& e) {
    throw SettingError<FormatError>(setting, e.what());
  } catch (const ShapeError& e) {
    throw SettingError<ShapeError>(setting, e.what());
  } catch (const IoError& e) {
    throw SettingError<IoError>(setting, e.what());
  } catch (const Error& e) {
    throw SettingError<Error>(setting, e.what());
  }
}

// Where warnings go: (setting or nullptr, message). The default prints
// "warning: MESSAGE" on stderr; a front end may install its own (the CLI
// names its flag) and must reset it (nullptr) before it goes away.
using WarningSink = std::function<void(const char* setting, const std::string& message)>;

inline WarningSink& warning_sink() {
  static WarningSink sink;
  return sink;
}

inline void set_warning_sink(WarningSink sink) { warning_sink() = std::move(sink); }

inline void warn_setting(const char* setting, const std::string& message) {
  if (const WarningSink& sink = warning_sink()) {
    sink(setting, message);
  } else {
    fmt::print(stderr, "warning: {}\n", message);
  }
  std::fflush(stderr);
}

}  // namespace mtp
