#include "serve/qwen35_chat.h"

#include "core/error.h"
#include "core/json.h"
#include "serve/gemma4_chat.h"

namespace mtp::serve {

using nlohmann::json;

namespace {

// The system turn's text after the tool declarations, as the template has it.
constexpr std::string_view kToolsHead =
    "<|im_start|>system\n# Tools\n\nYou have access to the following functions:\n\n<tools>";
constexpr std::string_view kToolsTail =
    "\n</tools>\n\nIf you choose to call a function ONLY reply in the following format with NO "
    "suffix:\n\n<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\n"
    "value_1\n</parameter>\n<parameter=example_parameter_2>\nThis is the value for the second "
    "parameter\nthat can span\nmultiple lines\n</parameter>\n</function>\n</tool_call>\n\n"
    "<IMPORTANT>\nReminder:\n- Function calls MUST follow the specified format: an inner "
    "<function=...></function> block must be nested within <tool_call></tool_call> XML tags\n"
    "- Required parameters MUST be specified\n- You may provide optional reasoning for your "
    "function call in natural language BEFORE the function call, but NOT after\n- If there is "
    "no function call available, answer the question like normal with your current knowledge "
    "and do not tell the user about function calls\n</IMPORTANT>";

// Jinja's `trim` (Python's str.strip() on ASCII whitespace).
std::string strip(std::string_view s) {
  const char* ws = " \t\n\r\v\f";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  return std::string(s.substr(b, s.find_last_not_of(ws) - b + 1));
}
std::string lstrip_nl(std::string_view s) {
  const size_t b = s.find_first_not_of('\n');
  return b == std::string_view::npos ? std::string() : std::string(s.substr(b));
}
std::string rstrip_nl(std::string_view s) {
  const size_t e = s.find_last_not_of('\n');
  return e == std::string_view::npos ? std::string() : std::string(s.substr(0, e + 1));
}

bool is_tool_response(const std::string& text) {
  return text.starts_with("<tool_response>") && text.ends_with("</tool_response>");
}

// The index of the last user message that is a query (not a wrapped tool
// response): the think part is rendered only after it.
size_t last_query(const std::vector<ChatMessage>& msgs) {
  for (size_t i = msgs.size(); i-- > 0;) {
    if (msgs[i].role == "user" && !is_tool_response(strip(msgs[i].content))) return i;
  }
  fail<InputError>("messages: the qwen35 chat format needs a user query (every user message "
                   "is a <tool_response>)");
}

std::string call_text(const ToolCall& c, bool first, bool after_text, const std::string& where) {
  std::string out = first ? (after_text ? "\n\n<tool_call>\n<function=" : "<tool_call>\n<function=")
                          : "\n<tool_call>\n<function=";
  out += c.name + ">\n";
  if (!c.arguments.is_object()) {
    fail<InputError>("{}.function.arguments: the qwen35 chat format needs the text of a JSON "
                     "object", where);
  }
  for (const auto& [key, v] : c.arguments.items()) {
    out += "<parameter=" + key + ">\n";
    out += v.is_object() || v.is_array() ? python_json(v) : python_str(json(v));
    out += "\n</parameter>\n";
  }
  return out + "</function>\n</tool_call>";
}

void render_assistant(const ChatMessage& m, bool after_query, const std::string& where,
                      std::string& out) {
  std::string content = strip(m.content), reasoning = m.reasoning;
  if (reasoning.empty()) {
    if (const size_t end = content.find("</think>"); end != std::string::npos) {
      const std::string before = rstrip_nl(content.substr(0, end));
      const size_t open = before.rfind("<think>");
      reasoning = lstrip_nl(open == std::string::npos ? before : before.substr(open + 7));
      content = lstrip_nl(content.substr(content.rfind("</think>") + 8));
    }
  }
  reasoning = strip(reasoning);
  out += "<|im_start|>assistant\n";
  if (after_query) out += "<think>\n" + reasoning + "\n</think>\n\n";
  out += content;
  const bool text = !strip(content).empty();
  for (size_t k = 0; k < m.tool_calls.size(); ++k) {
    out += call_text(m.tool_calls[k], k == 0, text, where + ".tool_calls[" + std::to_string(k) + "]");
  }
  out += "<|im_end|>\n";
}

}  // namespace

std::string python_json(const nlohmann::ordered_json& v) {
  if (v.is_object()) {
    std::string out = "{";
    for (auto it = v.begin(); it != v.end(); ++it) {
      out += (it == v.begin() ? "" : ", ") + json(it.key()).dump() + ": " + python_json(*it);
    }
    return out + "}";
  }
  if (v.is_array()) {
    std::string out = "[";
    for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + python_json(v[i]);
    return out + "]";
  }
  if (v.is_null()) return "null";
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_number_float()) return python_str(json(v));  // repr(float)
  return v.dump();
}

std::string render_qwen35(const std::vector<ChatMessage>& msgs, const ChatExtras& x, bool gen) {
  if (msgs.empty()) fail<InputError>("messages: the qwen35 chat format needs at least one");
  const bool system = msgs[0].role == "system";
  std::string out;
  if (!x.tools.empty()) {
    out += kToolsHead;
    for (const auto& tool : x.tools) out += "\n" + python_json(tool);
    out += kToolsTail;
    if (system && !strip(msgs[0].content).empty()) out += "\n\n" + strip(msgs[0].content);
    out += "<|im_end|>\n";
  } else if (system) {
    out += "<|im_start|>system\n" + strip(msgs[0].content) + "<|im_end|>\n";
  }
  const size_t query = last_query(msgs);
  for (size_t i = 0; i < msgs.size(); ++i) {
    const ChatMessage& m = msgs[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (m.role == "system") {
      if (i != 0) {
        fail<InputError>("{}: the qwen35 chat format takes a system message only first", where);
      }
    } else if (m.role == "user") {
      out += "<|im_start|>user\n" + strip(m.content) + "<|im_end|>\n";
    } else if (m.role == "assistant") {
      render_assistant(m, i > query, where, out);
    } else if (m.role == "tool") {
      if (i > 0 && msgs[i - 1].role != "tool") out += "<|im_start|>user";
      out += "\n<tool_response>\n" + strip(m.content) + "\n</tool_response>";
      if (i + 1 == msgs.size() || msgs[i + 1].role != "tool") out += "<|im_end|>\n";
    } else {
      fail<InputError>("{}.role '{}' is not system, user, assistant or tool", where, m.role);
    }
  }
  if (gen) {
    out += "<|im_start|>assistant\n";
    out += x.thinking(ChatFormat::Qwen35) ? "<think>\n" : "<think>\n\n</think>\n\n";
  }
  return out;
}

namespace {

// The declared JSON type of parameter `param` of tool `name` ("" if none).
std::string declared_type(const json& tools, const std::string& name, const std::string& param) {
  if (!tools.is_array()) return "";
  for (const json& t : tools) {
    const json* fn = t.is_object() && t.contains("function") ? &t["function"] : nullptr;
    if (!fn || !fn->is_object() || fn->value("name", json()) != json(name)) continue;
    const json* props = fn->contains("parameters") && (*fn)["parameters"].is_object() &&
                                (*fn)["parameters"].contains("properties")
                            ? &(*fn)["parameters"]["properties"]
                            : nullptr;
    if (!props || !props->is_object() || !props->contains(param)) return "";
    const json& p = (*props)[param];
    return p.is_object() && p.contains("type") && p["type"].is_string() ? p["type"].get<std::string>()
                                                                        : "";
  }
  return "";
}

void skip_ws(std::string_view s, size_t& i) {
  while (i < s.size() && (s[i] == ' ' || s[i] == '\n' || s[i] == '\r' || s[i] == '\t')) ++i;
}

// Reads "<TAG=NAME>" at i into `name`.
bool read_open(std::string_view s, size_t& i, std::string_view tag, std::string& name) {
  if (s.substr(i, tag.size()) != tag) return false;
  const size_t close = s.find('>', i + tag.size());
  if (close == std::string_view::npos || close == i + tag.size()) return false;
  name = std::string(s.substr(i + tag.size(), close - i - tag.size()));
  if (name.find_first_of("<\n") != std::string::npos) return false;
  i = close + 1;
  return true;
}

}  // namespace

std::optional<ParsedCall> parse_qwen35_call(std::string_view s, const json& tools) {
  ParsedCall call;
  call.arguments = json::object();
  size_t i = 0;
  skip_ws(s, i);
  if (!read_open(s, i, "<function=", call.name)) return std::nullopt;
  for (;;) {
    skip_ws(s, i);
    std::string param;
    if (s.substr(i) == "</function>" ||
        (s.substr(i).starts_with("</function>") && strip(s.substr(i + 11)).empty())) {
      return call;
    }
    if (!read_open(s, i, "<parameter=", param)) return std::nullopt;
    const size_t end = s.find("</parameter>", i);
    if (end == std::string_view::npos) return std::nullopt;
    std::string_view value = s.substr(i, end - i);
    if (value.starts_with('\n')) value.remove_prefix(1);
    if (value.ends_with('\n')) value.remove_suffix(1);
    i = end + 12;
    json v = std::string(value);
    if (declared_type(tools, call.name, param) != "string") {
      try {
        v = parse_json(value, "a qwen35 tool call's parameter");
      } catch (const FormatError&) {
        // not JSON: the text
      }
    }
    call.arguments[param] = std::move(v);
  }
}

}  // namespace mtp::serve
