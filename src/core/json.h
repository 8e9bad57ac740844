// The one JSON reader: every JSON document mtpspec reads (config.json,
// tokenizer.json, safetensors headers, drafter metadata, shard manifests,
// checkpoint states, prompt and corpus lines, HTTP request bodies) is parsed
// by parse_json and read through json_get, so untrusted input has one set of
// limits and its errors one form.
//
// Contracts:
//  - parse_json never recurses on the document's depth: nlohmann's parser is
//    iterative, and a container nested deeper than kMaxJsonDepth is refused
//    while parsing (a FormatError naming `where` and the field path, e.g.
//    "messages[].content[][]..."), so nothing later (copies, dump, the
//    recursive builders of tokenizer.json pipelines) recurses deeper either.
//  - A syntax error is a FormatError naming `where`, clipped to a readable
//    length (never a dump of a 4 MB string).
//  - json_get<T>(j, key, where) reads a field of an object with a type check:
//    a missing field or one of another type is a FormatError naming `where`,
//    the field and (clipped) the value, never nlohmann's type_error (which
//    the CLI would report as a bug).
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include "core/error.h"

namespace mtp {

// Deep enough for every format we read (tokenizer.json pipelines nest about
// 8 levels, an OpenAI request about 6); far below what a thread's stack holds.
inline constexpr int kMaxJsonDepth = 64;

// Called for each object key at `depth` (1 = a key of the top-level object);
// may throw to refuse the document (safetensors refuses duplicate keys).
using JsonKeyCheck = std::function<void(int depth, const std::string& key)>;

// Parses `text`; `where` names the document in errors ("'config.json'",
// "'p.jsonl' line 3", "the request body").
nlohmann::json parse_json(std::string_view text, const std::string& where,
                          const JsonKeyCheck& on_key = nullptr, int max_depth = kMaxJsonDepth);

// The same, keeping each object's keys in the document's order (what a
// client's tools and tool-call arguments are rendered in: serve/qwen35_chat.h).
nlohmann::ordered_json parse_json_ordered(std::string_view text, const std::string& where,
                                          int max_depth = kMaxJsonDepth);

// The JSON type a value has, in words ("a string", "an object", ...).
std::string json_type_name(const nlohmann::json& v);
// A value as JSON text, clipped for a message.
std::string json_excerpt(const nlohmann::json& v);

namespace detail {
template <class T>
bool json_is(const nlohmann::json& v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v.is_boolean();
  } else if constexpr (std::is_same_v<T, std::string>) {
    return v.is_string();
  } else if constexpr (std::is_integral_v<T>) {
    if (v.is_number_unsigned()) {
      return v.get<uint64_t>() <= uint64_t(std::numeric_limits<T>::max());
    }
    if (v.is_number_integer()) {
      const int64_t x = v.get<int64_t>();
      return x >= int64_t(std::numeric_limits<T>::min()) &&
             (x < 0 || uint64_t(x) <= uint64_t(std::numeric_limits<T>::max()));
    }
    return false;
  } else if constexpr (std::is_floating_point_v<T>) {
    return v.is_number();
  } else if constexpr (std::is_same_v<T, nlohmann::json::object_t>) {
    return v.is_object();
  } else {
    static_assert(std::is_same_v<T, nlohmann::json::array_t>, "json_get: unsupported type");
    return v.is_array();
  }
}
template <class T>
const char* json_want() {
  if constexpr (std::is_same_v<T, bool>) return "a boolean";
  if constexpr (std::is_same_v<T, std::string>) return "a string";
  if constexpr (std::is_integral_v<T> && std::is_unsigned_v<T>) return "a whole number >= 0";
  if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) return "a whole number";
  if constexpr (std::is_floating_point_v<T>) return "a number";
  if constexpr (std::is_same_v<T, nlohmann::json::object_t>) return "an object";
  return "an array";
}
[[noreturn]] void json_type_error(const std::string& where, const std::string& field,
                                  const char* want, const nlohmann::json* got);
}  // namespace detail

// `v` (named `field` in errors) as T: bool, std::string, an integer type (in
// its range), float/double, json::object_t or json::array_t.
template <class T>
T json_as(const nlohmann::json& v, const std::string& field, const std::string& where) {
  if (!detail::json_is<T>(v)) detail::json_type_error(where, field, detail::json_want<T>(), &v);
  return v.get<T>();
}

// Field `key` of object `j`: required (missing: an error naming it).
template <class T>
T json_get(const nlohmann::json& j, const std::string& key, const std::string& where) {
  if (!j.is_object()) detail::json_type_error(where, "(top level)", "an object", &j);
  auto it = j.find(key);
  if (it == j.end()) detail::json_type_error(where, key, detail::json_want<T>(), nullptr);
  return json_as<T>(*it, key, where);
}

// Field `key` of object `j`, or nullopt when absent or null.
template <class T>
std::optional<T> json_find(const nlohmann::json& j, const std::string& key,
                           const std::string& where) {
  if (!j.is_object()) detail::json_type_error(where, "(top level)", "an object", &j);
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  return json_as<T>(*it, key, where);
}

// Field `key` of object `j`, or `def` when absent or null.
template <class T>
T json_value(const nlohmann::json& j, const std::string& key, T def, const std::string& where) {
  return json_find<T>(j, key, where).value_or(std::move(def));
}

}  // namespace mtp
