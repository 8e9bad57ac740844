#include "serve/gemma4_chat.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "core/error.h"
#include "core/json.h"

namespace mtp::serve {

using nlohmann::json;

namespace {

constexpr std::string_view kQuote = "<|\"|>";

std::string quoted(const std::string& s) { return std::string(kQuote) + s + std::string(kQuote); }

std::string trim(const std::string& s) {
  const char* ws = " \t\n\r\v\f";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return {};
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

std::string upper(std::string s) {
  for (char& c : s) c = char(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// Jinja's truth of a looked-up value (absent, null, false, 0, "", [] and {} are false).
bool truthy(const json* v) {
  if (!v || v->is_null()) return false;
  if (v->is_boolean()) return v->get<bool>();
  if (v->is_number()) return v->get<double>() != 0;
  if (v->is_string() || v->is_array() || v->is_object()) return !v->empty();
  return true;
}

// v[key] when v is an object holding it, else nullptr (Jinja's undefined).
const json* at(const json& v, const char* key) {
  if (!v.is_object()) return nullptr;
  auto it = v.find(key);
  return it == v.end() ? nullptr : &*it;
}


// `value['type'] | upper`: "" when absent.
std::string type_upper(const json& v) {
  const json* t = at(v, "type");
  return t ? upper(python_str(*t)) : std::string();
}

// Object items in Jinja's dictsort order: by key, case-insensitively (none
// for a value that is not an object: a client's schema may hold anything).
std::vector<std::pair<std::string, const json*>> dictsort(const json& o) {
  std::vector<std::pair<std::string, const json*>> items;
  if (!o.is_object()) return items;
  for (auto it = o.begin(); it != o.end(); ++it) items.emplace_back(it.key(), &*it);
  std::stable_sort(items.begin(), items.end(), [](const auto& a, const auto& b) {
    return std::lexicographical_compare(
        a.first.begin(), a.first.end(), b.first.begin(), b.first.end(),
        [](char x, char y) { return std::tolower(uint8_t(x)) < std::tolower(uint8_t(y)); });
  });
  return items;
}

std::string required_list(const json& req) {
  std::string out = "required:[";
  if (req.is_array()) {
    for (size_t i = 0; i < req.size(); ++i) out += (i ? "," : "") + quoted(python_str(req[i]));
  }
  return out + "]";
}

// Appends "," before every field of a property but its first.
struct Fields {
  std::string& out;
  bool any = false;
  void add(const std::string& s) {
    out += (any ? "," : "") + s;
    any = true;
  }
};

std::string format_parameters(const json& properties);

// The `items` of an ARRAY property.
std::string format_items(const json& items) {
  std::string out = "items:{";
  bool first = true;
  for (const auto& [key, v] : dictsort(items)) {
    if (v->is_null()) continue;
    out += first ? "" : ",";
    first = false;
    if (key == "properties") {
      out += "properties:{" + (v->is_object() ? format_parameters(*v) : "") + "}";
    } else if (key == "required") {
      out += required_list(*v);
    } else if (key == "type") {
      json up = v->is_string() ? json(upper(v->get<std::string>())) : json::array();
      if (v->is_array()) {
        for (const json& t : *v) up.push_back(upper(python_str(t)));
      }
      out += "type:" + format_value(up, true);
    } else {
      out += key + ":" + format_value(*v, true);
    }
  }
  return out + "}";
}

// The template's format_parameters: every property but the schema's own keys.
std::string format_parameters(const json& properties) {
  static const char* kStandard[] = {"description", "type", "properties", "required", "nullable"};
  std::string out;
  bool first = true;
  for (const auto& [key, v] : dictsort(properties)) {
    if (std::find(std::begin(kStandard), std::end(kStandard), key) != std::end(kStandard)) continue;
    out += (first ? "" : ",") + key + ":{";
    first = false;
    Fields f{out};
    const json* desc = at(*v, "description");
    if (truthy(desc)) f.add("description:" + quoted(python_str(*desc)));
    const std::string type = type_upper(*v);
    if (type == "STRING" && truthy(at(*v, "enum"))) {
      f.add("enum:" + format_value(*at(*v, "enum"), true));
    } else if (type == "ARRAY") {
      const json* items = at(*v, "items");
      if (items && items->is_object() && !items->empty()) f.add(format_items(*items));
    }
    if (truthy(at(*v, "nullable"))) f.add("nullable:true");
    if (type == "OBJECT") {
      const json* props = at(*v, "properties");
      f.add("properties:{" + format_parameters(props && props->is_object() ? *props : *v) + "}");
      const json* req = at(*v, "required");
      if (truthy(req)) f.add(required_list(*req));
    }
    f.add("type:" + quoted(type) + "}");
  }
  return out;
}

// The template's format_function_declaration (its unclosed braces included).
std::string format_declaration(const json& tool) {
  const json& fn = tool.at("function");
  const json* desc = at(fn, "description");
  std::string out = "declaration:" + python_str(fn.at("name")) + "{description:" +
                    quoted(desc ? python_str(*desc) : "");
  const json* params = at(fn, "parameters");
  if (truthy(params)) {
    out += ",parameters:{";
    const json* props = at(*params, "properties");
    if (truthy(props)) out += "properties:{" + format_parameters(*props) + "},";
    const json* req = at(*params, "required");
    if (truthy(req)) out += required_list(*req) + ",";
    if (truthy(at(*params, "type"))) out += "type:" + quoted(type_upper(*params)) + "}";
  }
  if (const json* resp = at(fn, "response")) {
    out += ",response:{";
    const json* rd = at(*resp, "description");
    if (truthy(rd)) out += "description:" + quoted(python_str(*rd)) + ",";
    if (type_upper(*resp) == "OBJECT") out += "type:" + quoted("OBJECT") + "}";
  }
  return out + "}";
}

// The template's strip_thinking: a model turn's text without its thought channels.
std::string strip_thinking(const std::string& text) {
  std::string out;
  size_t at_pos = 0;
  for (;;) {
    const size_t close = text.find("<channel|>", at_pos);
    const std::string part = text.substr(at_pos, close == std::string::npos ? close : close - at_pos);
    const size_t open = part.find("<|channel>");
    out += open == std::string::npos ? part : part.substr(0, open);
    if (close == std::string::npos) break;
    at_pos = close + 10;
  }
  return trim(out);
}

std::string call_text(const ToolCall& c) {
  std::string args;
  const json arguments(c.arguments);  // Gemma's notation sorts the keys
  if (arguments.is_object()) {
    bool first = true;
    for (const auto& [key, v] : dictsort(arguments)) {
      args += (first ? "" : ",") + key + ":" + format_value(*v, false);
      first = false;
    }
  } else if (arguments.is_string()) {
    args = arguments.get<std::string>();
  }
  return "<|tool_call>call:" + c.name + "{" + args + "}<tool_call|>";
}

}  // namespace

std::string python_str(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "None";
  if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
  if (v.is_number_float()) {
    std::string s = fmt::format("{}", v.get<double>());
    if (s.find_first_of(".eni") == std::string::npos) s += ".0";  // repr(1.0) == "1.0"
    return s;
  }
  if (v.is_number()) return v.dump();
  std::string out = v.is_array() ? "[" : "{";
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (it != v.begin()) out += ", ";
    if (v.is_object()) out += "'" + it.key() + "': ";
    out += it->is_string() ? "'" + it->get<std::string>() + "'" : python_str(*it);
  }
  return out + (v.is_array() ? "]" : "}");
}

std::string format_value(const json& v, bool quote_keys) {
  if (v.is_string()) return quoted(v.get<std::string>());
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_object()) {
    std::string out = "{";
    bool first = true;
    for (const auto& [key, x] : dictsort(v)) {
      out += (first ? "" : ",") + (quote_keys ? quoted(key) : key) + ":" +
             format_value(*x, quote_keys);
      first = false;
    }
    return out + "}";
  }
  if (v.is_array()) {
    std::string out = "[";
    for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + format_value(v[i], quote_keys);
    return out + "]";
  }
  return python_str(v);
}

std::string render_gemma4(const ChatTemplate& t, const std::vector<ChatMessage>& msgs,
                          const ChatExtras& x, bool gen) {
  for (size_t i = 0; i < msgs.size(); ++i) {
    const std::string& r = msgs[i].role;
    if (r != "system" && r != "user" && r != "assistant" && r != "tool") {
      fail<InputError>("messages[{}].role '{}' is not system, user, assistant or tool", i, r);
    }
  }
  enum class Prev { None, Other, ToolCall, ToolResponse } prev = Prev::None;
  std::string out = t.bos;
  const bool system = !msgs.empty() && msgs[0].role == "system";
  const bool thinking = x.thinking(ChatFormat::Gemma4);
  if (thinking || !x.tools.empty() || system) {
    out += "<|turn>system\n";
    if (thinking) out += "<|think|>\n", prev = Prev::Other;
    if (system) out += trim(msgs[0].content);
    for (const auto& tool : x.tools) out += "<|tool>" + trim(format_declaration(json(tool))) + "<tool|>";
    if (!x.tools.empty()) prev = Prev::Other;
    out += "<turn|>\n";
  }
  const std::vector<ChatMessage> rest(msgs.begin() + (system ? 1 : 0), msgs.end());
  long last_user = -1;
  for (size_t i = 0; i < rest.size(); ++i) {
    if (rest[i].role == "user") last_user = long(i);
  }
  for (size_t i = 0; i < rest.size(); ++i) {
    const ChatMessage& m = rest[i];
    if (m.role == "tool") continue;  // rendered after the calls they answer
    prev = Prev::None;
    const bool model = m.role == "assistant";
    std::string prev_role;  // the previous message that is not a tool's
    for (size_t j = i; j-- > 0 && prev_role.empty();) {
      if (rest[j].role != "tool") prev_role = rest[j].role;
    }
    if (!(model && prev_role == "assistant")) out += "<|turn>" + (model ? "model" : m.role) + "\n";
    if (!m.reasoning.empty() && long(i) > last_user && !m.tool_calls.empty()) {
      out += "<|channel>thought\n" + m.reasoning + "\n<channel|>";
    }
    for (const ToolCall& c : m.tool_calls) out += call_text(c), prev = Prev::ToolCall;
    bool responded = false;
    for (size_t k = i + 1; !m.tool_calls.empty() && k < rest.size() && rest[k].role == "tool"; ++k) {
      std::string name = rest[k].name.empty() ? "unknown" : rest[k].name;
      for (const ToolCall& c : m.tool_calls) {
        if (c.id == rest[k].tool_call_id) name = c.name;
      }
      out += "<|tool_response>response:" + name + "{value:" + quoted(rest[k].content) +
             "}<tool_response|>";
      responded = true;
      prev = Prev::ToolResponse;
    }
    // A content array: each text part on its own, as the template renders it.
    if (m.content_parts.empty()) {
      out += model ? strip_thinking(m.content) : trim(m.content);
    }
    for (const std::string& part : m.content_parts) out += model ? strip_thinking(part) : trim(part);
    if (prev == Prev::ToolCall && !responded) {
      out += "<|tool_response>";
    } else if (!(responded && m.content.empty() && m.content_parts.empty())) {
      out += "<turn|>\n";
    }
  }
  if (gen && prev != Prev::ToolResponse && prev != Prev::ToolCall) {
    out += "<|turn>model\n";
    if (!thinking) out += "<|channel>thought\n<channel|>";
  }
  return out;
}

namespace {

// A recursive-descent reader of Gemma's value notation.
struct ArgReader {
  std::string_view s;
  size_t i = 0;
  int depth = 0;

  bool eat(std::string_view t) {
    if (s.substr(i, t.size()) != t) return false;
    i += t.size();
    return true;
  }
  std::optional<std::string> string() {
    if (!eat(kQuote)) return std::nullopt;
    const size_t end = s.find(kQuote, i);
    if (end == std::string_view::npos) return std::nullopt;
    std::string out(s.substr(i, end - i));
    i = end + kQuote.size();
    return out;
  }
  std::optional<std::string> key() {
    if (s.substr(i, kQuote.size()) == kQuote) return string();
    const size_t end = s.find(':', i);
    if (end == std::string_view::npos || end == i) return std::nullopt;
    std::string out(s.substr(i, end - i));
    if (out.find_first_of("{}[],<") != std::string::npos) return std::nullopt;
    i = end;
    return out;
  }
  std::optional<json> object() {  // after '{'
    json o = json::object();
    if (eat("}")) return o;
    for (;;) {
      auto k = key();
      if (!k || !eat(":")) return std::nullopt;
      auto v = value();
      if (!v) return std::nullopt;
      o[*k] = std::move(*v);
      if (eat("}")) return o;
      if (!eat(",")) return std::nullopt;
    }
  }
  std::optional<json> value() {
    if (++depth > 64) return std::nullopt;
    struct Leave {
      int& d;
      ~Leave() { --d; }
    } leave{depth};
    if (s.substr(i, kQuote.size()) == kQuote) {
      auto str = string();
      return str ? std::optional<json>(json(*str)) : std::nullopt;
    }
    if (eat("{")) return object();
    if (eat("[")) {
      json a = json::array();
      if (eat("]")) return a;
      for (;;) {
        auto v = value();
        if (!v) return std::nullopt;
        a.push_back(std::move(*v));
        if (eat("]")) return a;
        if (!eat(",")) return std::nullopt;
      }
    }
    for (auto [word, v] : {std::pair<std::string_view, json>{"true", true}, {"false", false},
                           {"null", nullptr}, {"None", nullptr}}) {
      if (eat(word)) return v;
    }
    const size_t end = s.find_first_of(",}]", i);
    const std::string num(s.substr(i, end == std::string_view::npos ? end : end - i));
    json n;
    try {
      n = parse_json(num, "a tool call's argument", nullptr, /*max_depth=*/1);
    } catch (const FormatError&) {
      return std::nullopt;
    }
    if (!n.is_number()) return std::nullopt;
    i += num.size();
    return n;
  }
};

}  // namespace

std::optional<json> parse_arguments(std::string_view text) {
  const std::string braced = std::string(text) + "}";
  ArgReader r{braced};
  auto o = r.object();
  if (!o || r.i != braced.size()) return std::nullopt;
  return o;
}

}  // namespace mtp::serve
