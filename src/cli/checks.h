// Numeric flag checks with readable messages, for both executables.
//
// CLI11's own NonNegativeNumber / PositiveNumber / Range print their bounds as
// raw doubles ("not in range 0.000000 to 1797693134862315708145...": 309
// digits) and let NaN through ranges. These say the range in words, refuse NaN
// and infinities, and are what every numeric flag uses (one rule, one place;
// tests/app/cli_contract_test.cc checks the messages). The value is checked as
// text before CLI11 converts it, so an integer flag given "1.5" still fails
// CLI11's own conversion afterwards.
#pragma once
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <filesystem>
#include <cstdlib>
#include <initializer_list>
#include <limits>
#include <string>
#include <utility>

#include "core/error.h"
#include "core/output_file.h"

namespace mtp::cli {

namespace detail {

// THE number syntax of every numeric flag, in both executables: decimal
// only — an optional sign, digits, and for a real number an optional
// fraction and exponent ("-3", "0.5", "1e-3"). Refused: "" (CLI11 read it as
// 0 or the default), trailing junk ("5x"), hex ("0x10"), "inf" / "nan".
// Leading zeros are dropped ("010" -> "10"): CLI11 converts integers with
// base detection and read "010" as octal 8. Returns "" and normalises `s` on
// success, else the message.
inline std::string decimal_number(std::string& s, bool integer) {
  const std::string what = integer ? "a whole number" : "a number";
  size_t i = 0;
  std::string sign;
  if (i < s.size() && (s[i] == '-' || s[i] == '+')) sign = s[i++] == '-' ? "-" : "";
  const size_t int_begin = i;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
  const size_t int_end = i;
  size_t frac_digits = 0;
  if (!integer && i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i, ++frac_digits;
  }
  bool ok = int_end > int_begin || frac_digits > 0;
  if (ok && !integer && i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
    const size_t exp_begin = i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
    ok = i > exp_begin;
  }
  if (!ok || i != s.size()) {
    return s.empty() ? fmt::format("must be {}; got an empty value", what)
                     : fmt::format("must be {} in decimal; got '{}'", what, s);
  }
  size_t z = int_begin;
  while (z + 1 < int_end && s[z] == '0') ++z;
  s = sign + s.substr(z);
  return "";
}

// Parses s (decimal_number syntax) as a finite number; "" on success, else
// the message.
inline std::string parse_finite(const std::string& text, double& v) {
  std::string s = text;
  if (std::string err = decimal_number(s, /*integer=*/false); !err.empty()) return err;
  v = std::strtod(s.c_str(), nullptr);
  if (!std::isfinite(v)) return fmt::format("must be a finite number; got '{}'", text);
  return "";
}

// Bound as a user writes it: 0, 1, 0.5, 1e+06.
inline std::string bound(double x) { return fmt::format("{}", x); }

}  // namespace detail

// lo <= value <= hi (either bound may be infinite: then it is not mentioned).
inline CLI::Validator Range(double lo, double hi) {
  const double inf = std::numeric_limits<double>::infinity();
  std::string desc;
  if (lo > -inf && hi < inf) {
    desc = fmt::format("{} to {}", detail::bound(lo), detail::bound(hi));
  } else if (lo > -inf) {
    desc = fmt::format(">= {}", detail::bound(lo));
  } else {
    desc = fmt::format("<= {}", detail::bound(hi));
  }
  return CLI::Validator(
      [lo, hi, inf](std::string& s) -> std::string {
        double v = 0;
        if (std::string err = detail::parse_finite(s, v); !err.empty()) return err;
        if (v < lo || v > hi) {
          if (lo > -inf && hi < inf)
            return fmt::format("must be between {} and {}; got {}", detail::bound(lo),
                               detail::bound(hi), s);
          if (lo > -inf) return fmt::format("must be at least {}; got {}", detail::bound(lo), s);
          return fmt::format("must be at most {}; got {}", detail::bound(hi), s);
        }
        return "";
      },
      desc, "RANGE");
}

// Puts decimal_number in front of every option of an integer or real type
// (CLI11's type names INT, UINT, FLOAT), in every subcommand: called by
// run_cli before parsing, so no numeric flag can miss it.
inline void strict_numbers(CLI::App& app) {
  for (CLI::Option* o : app.get_options()) {
    if (o->get_type_size() == 0) continue;  // a switch
    const std::string type = o->get_type_name().substr(0, o->get_type_name().find(':'));
    if (type != "INT" && type != "UINT" && type != "FLOAT") continue;
    const bool integer = type != "FLOAT";
    o->transform(CLI::Validator(
        [integer](std::string& s) { return detail::decimal_number(s, integer); }, "", "DECIMAL"));
  }
  for (CLI::App* sub : app.get_subcommands({})) strict_numbers(*sub);
}

// value >= 0.
inline const CLI::Validator NonNegative = Range(0, std::numeric_limits<double>::infinity());
// Seeds, checked as whole numbers in words: the plain conversion wraps an
// unsigned seed given -1 to 2^64 - 1 and clamps a sampling seed past 2^63 - 1
// to it, so different values would give the same run. sampling: int64 with
// -1 = random.
inline CLI::Validator Seed(bool sampling) {
  return CLI::Validator(
      [sampling](std::string& s) -> std::string {
        const std::string range = sampling ? "a whole number from 0 to 2^63 - 1, or -1 (random)"
                                           : "a whole number from 0 to 2^64 - 1";
        const bool neg = !s.empty() && s[0] == '-';
        const std::string digits = neg ? s.substr(1) : s;
        if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos ||
            (neg && (!sampling || digits != "1"))) {
          return "must be " + range + "; got '" + s + "'";
        }
        errno = 0;
        const unsigned long long v = std::strtoull(digits.c_str(), nullptr, 10);
        if (errno == ERANGE || (sampling && v > 9223372036854775807ULL)) {
          return "must be " + range + "; got a larger number";
        }
        return "";
      },
      "", "SEED");
}
inline const CLI::Validator kSeedRange = Seed(false);

// value > 0 (for integer flags: at least 1).
inline const CLI::Validator Positive = CLI::Validator(
    [](std::string& s) -> std::string {
      double v = 0;
      if (std::string err = detail::parse_finite(s, v); !err.empty()) return err;
      if (!(v > 0)) return fmt::format("must be greater than 0; got {}", s);
      return "";
    },
    "> 0", "POSITIVE");

// A non-empty string (e.g. --stop: an empty stop string could never match, so
// it would be accepted and silently do nothing).
inline const CLI::Validator NonEmpty = CLI::Validator(
    [](std::string& s) -> std::string { return s.empty() ? "must not be empty" : ""; },
    "", "NONEMPTY");

// Output paths, checked when the flags are parsed — before any work — so a run
// that cannot write its result never starts (and leaves nothing behind):
//  - OutputFile: not an existing directory, block device or socket (nor a
//    name ending in '/'), in a folder that exists and that we may write to —
//    or a path written in place (a character device, a FIFO, /dev/stdout);
//  - OutputDir: not an existing file; created by the command if absent, so
//    only its nearest existing ancestor must be writable.
// A full disk or a file-size limit is still found when writing
// (write_file_atomic: clear error, no partial file).
namespace detail {
inline std::string writable_folder(const std::filesystem::path& dir, const std::string& what) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    return fmt::format("the folder '{}' of {} does not exist", dir.string(), what);
  if (::access(dir.c_str(), W_OK) != 0)
    return fmt::format("cannot write into '{}' (permission denied)", dir.string());
  return "";
}
}  // namespace detail

inline const CLI::Validator OutputFile = CLI::Validator(
    [](std::string& s) -> std::string {
      namespace fs = std::filesystem;
      std::error_code ec;
      if (s.empty()) return "needs a file name";
      if (s.back() == '/' || fs::is_directory(s, ec))
        return fmt::format("'{}' is a directory; give a file name", s);
      // A device, FIFO or /dev/stdout is written in place, a socket or block
      // device refused (core/output_file.h: the one rule).
      if (std::string why = OutputFile::refusal(s); !why.empty()) {
        return fmt::format("cannot write '{}': {}", s, why);
      }
      if (OutputFile::in_place(s)) return "";
      fs::path parent = fs::path(s).parent_path();
      if (parent.empty()) parent = ".";
      return detail::writable_folder(parent, "'" + s + "'");
    },
    "FILE", "OUTPUT_FILE");

inline const CLI::Validator OutputDir = CLI::Validator(
    [](std::string& s) -> std::string {
      namespace fs = std::filesystem;
      std::error_code ec;
      if (s.empty()) return "needs a folder name";
      if (fs::exists(s, ec) && !fs::is_directory(s, ec))
        return fmt::format("'{}' exists and is not a folder", s);
      fs::path p = fs::absolute(fs::path(s), ec);
      while (!p.empty() && !fs::exists(p, ec)) {
        if (p == p.parent_path()) break;
        p = p.parent_path();
      }
      if (!fs::is_directory(p, ec)) return fmt::format("'{}' is below a file", s);
      if (::access(p.c_str(), W_OK) != 0)
        return fmt::format("cannot create or write '{}': '{}' is not writable", s, p.string());
      return "";
    },
    "DIR", "OUTPUT_DIR");

// An output (a file, or a folder the command writes into) that is one of
// the command's inputs, or — for a folder — the folder an input lies in, is
// refused before any work: `widen -m M -o M` overwrote M's weights and config
// before it failed, `bench --report P` with P the --prompts file replaced the
// prompts with the report. Inputs are (flag, path) pairs, empty paths
// skipped; a path that does not exist yet is no input of anything.
// (Files mapped while an output is written are also refused at the writer:
// core/mapped_file.h refuse_overwriting_inputs.)
inline void refuse_output_over_inputs(
    const char* out_flag, const std::string& out, bool out_is_folder,
    std::initializer_list<std::pair<const char*, const std::string*>> inputs) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (out.empty() || !fs::exists(out, ec)) return;
  for (const auto& [flag, path] : inputs) {
    if (path->empty() || !fs::exists(*path, ec)) continue;
    if (fs::equivalent(out, *path, ec)) {
      fail<InputError>("{} '{}' is the {} input: write it elsewhere", out_flag, out, flag);
    }
    if (!out_is_folder) continue;
    fs::path dir = fs::is_directory(*path, ec) ? fs::path(*path) : fs::path(*path).parent_path();
    if (dir.empty()) dir = ".";
    if (fs::equivalent(out, dir, ec)) {
      fail<InputError>("{} '{}' holds the {} input '{}': write to another folder", out_flag, out,
                       flag, *path);
    }
  }
}

}  // namespace mtp::cli
