#include "core/json.h"

#include <vector>

namespace mtp {

using nlohmann::json;

namespace {

// The field path of a container at `depth`, from the keys and container kinds
// seen above it: "messages[].content[][]" (array elements are not numbered).
std::string field_path(int depth, const std::vector<std::string>& keys,
                       const std::vector<char>& in_array) {
  std::string out;
  for (int d = 1; d <= depth && out.size() < 200; ++d) {
    if (in_array[size_t(d - 1)]) {
      out += "[]";
    } else {
      if (!out.empty()) out += '.';
      out += clip_value(keys[size_t(d)], 40);
    }
  }
  return out.empty() ? "(top level)" : clip_value(out, 200);
}

}  // namespace

namespace {
template <class J>
J parse_as(std::string_view text, const std::string& where, const JsonKeyCheck& on_key,
           int max_depth) {
  std::vector<std::string> keys;  // keys[d]: the last key read at depth d
  std::vector<char> in_array;     // in_array[d]: the open container at depth d is an array
  auto watch = [&](int depth, typename J::parse_event_t ev, J& parsed) {
    if (ev == J::parse_event_t::object_start || ev == J::parse_event_t::array_start) {
      if (depth >= max_depth) {
        fail<FormatError>("{}: JSON nested deeper than {} levels (at '{}')", where, max_depth,
                          field_path(depth, keys, in_array));
      }
      in_array.resize(size_t(depth) + 1);
      in_array[size_t(depth)] = ev == J::parse_event_t::array_start;
    } else if (ev == J::parse_event_t::key) {
      keys.resize(size_t(depth) + 1);
      keys[size_t(depth)] = parsed.template get<std::string>();
      if (on_key) on_key(depth, keys[size_t(depth)]);
    }
    return true;
  };
  try {
    return J::parse(text.begin(), text.end(), watch);
  } catch (const nlohmann::json::exception& e) {
    fail<FormatError>("{}: not valid JSON: {}", where, clip_value(e.what(), 200));
  }
}
}  // namespace

json parse_json(std::string_view text, const std::string& where, const JsonKeyCheck& on_key,
                int max_depth) {
  return parse_as<json>(text, where, on_key, max_depth);
}

nlohmann::ordered_json parse_json_ordered(std::string_view text, const std::string& where,
                                          int max_depth) {
  return parse_as<nlohmann::ordered_json>(text, where, nullptr, max_depth);
}

std::string json_type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::object: return "an object";
    case json::value_t::array: return "an array";
    case json::value_t::string: return "a string";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "a whole number";
    case json::value_t::number_float: return "a number";
    default: return "a binary value";
  }
}

std::string json_excerpt(const json& v) {
  // An object or array is named by its start: dumping it whole could be
  // megabytes; dump() of a bounded-depth value is safe.
  return clip_value(v.dump(-1, ' ', /*ensure_ascii=*/false, json::error_handler_t::replace), 80);
}

namespace detail {
void json_type_error(const std::string& where, const std::string& field, const char* want,
                     const json* got) {
  if (!got) fail<FormatError>("{}: field '{}' is missing (it must be {})", where, field, want);
  if (got->is_number() && std::string(want).find("whole") != std::string::npos &&
      got->is_number_integer()) {
    fail<FormatError>("{}: field '{}' must be {} in range; got {}", where, field, want,
                      json_excerpt(*got));
  }
  fail<FormatError>("{}: field '{}' must be {}; got {} {}", where, field, want,
                    json_type_name(*got), json_excerpt(*got));
}
}  // namespace detail

}  // namespace mtp
