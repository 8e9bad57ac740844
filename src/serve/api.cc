#include "serve/api.h"

#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/json.h"

namespace mtp::serve {

namespace {
// s with every byte that is not part of valid UTF-8 replaced by U+FFFD: an
// error may quote what the client sent (a key, a parser's view of the body),
// and the body must serialize whatever it quotes.
std::string valid_utf8(const std::string& s) {
  const std::string quoted =
      nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return nlohmann::json::parse(quoted).get<std::string>();
}
}  // namespace

nlohmann::json error_body(const ApiError& e) {
  nlohmann::json err = {{"message", valid_utf8(e.what())}, {"type", e.type}, {"param", nullptr},
                        {"code", nullptr}};
  if (!e.param.empty()) err["param"] = valid_utf8(e.param);
  if (!e.code.empty()) err["code"] = e.code;
  return {{"error", err}};
}

namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& param, const std::string& what) {
  throw ApiError(400, "'" + param + "' " + what, param);
}

// The field if present and not null.
const json* field(const json& o, const char* key) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) return nullptr;
  return &*it;
}

bool get_bool(const json& o, const char* key, bool def) {
  const json* v = field(o, key);
  if (!v) return def;
  if (!v->is_boolean()) bad(key, "must be a boolean");
  return v->get<bool>();
}

double get_number(const json& o, const char* key, double def, double lo, double hi) {
  const json* v = field(o, key);
  if (!v) return def;
  if (!v->is_number()) bad(key, "must be a number");
  const double x = v->get<double>();
  if (!std::isfinite(x) || x < lo || x > hi) {
    bad(key, "must be in [" + json(lo).dump() + ", " + json(hi).dump() + "], got " + v->dump());
  }
  return x;
}

int64_t get_int(const json& o, const char* key, int64_t def, int64_t lo, int64_t hi) {
  const json* v = field(o, key);
  if (!v) return def;
  // 3.0 is accepted as 3 (JSON has one number type); 3.5 is not.
  if (v->is_number_float()) {
    const double d = v->get<double>();
    if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) > 9.0e15) {
      bad(key, "must be an integer");
    }
    if (d < double(lo) || d > double(hi)) bad(key, "is out of range: " + v->dump());
    return int64_t(d);
  }
  if (!v->is_number_integer()) bad(key, "must be an integer");
  if (v->is_number_unsigned()) {
    const uint64_t u = v->get<uint64_t>();
    if (u > uint64_t(hi) || (lo > 0 && u < uint64_t(lo))) bad(key, "is out of range: " + v->dump());
    return int64_t(u);
  }
  const int64_t x = v->get<int64_t>();
  if (x < lo || x > hi) bad(key, "is out of range: " + v->dump());
  return x;
}

// The text of a message's content; `parts` receives each text part's own
// text when the content is an array of them (gemma4 renders them one by one).
std::string text_of_content(const json& c, const std::string& param,
                            std::vector<std::string>* parts) {
  if (c.is_null()) return "";
  if (c.is_string()) return c.get<std::string>();
  if (!c.is_array()) bad(param, "must be a string or an array of content parts");
  std::string out;
  for (size_t i = 0; i < c.size(); ++i) {
    const json& part = c[i];
    const std::string p = param + "[" + std::to_string(i) + "]";
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string()) {
      bad(p, "must be an object with a string 'type'");
    }
    if (part["type"] != "text") bad(p + ".type", "'" + clip_value(part["type"].get<std::string>()) +
                                                   "' is not supported (text only)");
    if (!part.contains("text") || !part["text"].is_string()) bad(p + ".text", "must be a string");
    out += part["text"].get<std::string>();
    parts->push_back(part["text"].get<std::string>());
  }
  return out;
}

void parse_prompt(const json& body, ApiRequest& r) {
  const json* p = field(body, "prompt");
  if (!p) bad("prompt", "is required");
  if (p->is_string()) {
    r.prompt = p->get<std::string>();
    return;
  }
  if (!p->is_array()) bad("prompt", "must be a string, an array of one string or of token ids");
  const json* a = p;
  if (p->size() == 1 && ((*p)[0].is_string() || (*p)[0].is_array())) a = &(*p)[0];
  if (a->is_string()) {
    r.prompt = a->get<std::string>();
    return;
  }
  if (p->size() > 1 && (*p)[0].is_string()) {
    bad("prompt", "holds several prompts; this server takes one per request");
  }
  r.prompt_is_ids = true;
  for (const json& t : *a) {
    if (!t.is_number_integer()) bad("prompt", "must be a string, an array of one string or of "
                                              "token ids");
    r.prompt_ids.push_back(t.is_number_unsigned() && t.get<uint64_t>() > INT64_MAX
                               ? INT64_MAX : t.get<int64_t>());
  }
}

std::string string_field(const json& o, const char* key, const std::string& param) {
  const json* v = field(o, key);
  if (!v) return "";
  if (!v->is_string()) bad(param + "." + key, "must be a string");
  return v->get<std::string>();
}

// An assistant message's tool_calls: [{id, type: "function", function: {name,
// arguments}}]; arguments the text of a JSON object (kept as text otherwise).
std::vector<ToolCall> parse_tool_calls(const json& e, const std::string& p) {
  std::vector<ToolCall> out;
  const json* tc = field(e, "tool_calls");
  if (!tc) return out;
  if (!tc->is_array()) bad(p + ".tool_calls", "must be an array");
  for (size_t i = 0; i < tc->size(); ++i) {
    const std::string q = p + ".tool_calls[" + std::to_string(i) + "]";
    const json& c = (*tc)[i];
    if (!c.is_object()) bad(q, "must be an object");
    const json* fn = field(c, "function");
    if (!fn || !fn->is_object()) bad(q + ".function", "must be an object");
    ToolCall call;
    call.id = string_field(c, "id", q);
    call.name = string_field(*fn, "name", q + ".function");
    if (call.name.empty()) bad(q + ".function.name", "must be a non-empty string");
    if (const json* a = field(*fn, "arguments")) {
      if (a->is_object()) {
        call.arguments = *a;
      } else if (a->is_string()) {
        call.arguments = *a;
        try {
          json parsed = parse_json(a->get<std::string>(), q + ".function.arguments");
          if (parsed.is_object()) call.arguments = std::move(parsed);
        } catch (const FormatError&) {
          // not JSON: rendered as the text it is, as the template does
        }
      } else {
        bad(q + ".function.arguments", "must be a string (a JSON object's text) or an object");
      }
    } else {
      call.arguments = json::object();
    }
    out.push_back(std::move(call));
  }
  return out;
}

// tools: [{"type": "function", "function": {"name", "description"?, "parameters"?}}].
// tool_choice "none": the tools are not offered.
void parse_tools(const json& body, ApiRequest& r) {
  bool offered = true;
  if (const json* c = field(body, "tool_choice")) {
    if (!c->is_string() || (*c != "auto" && *c != "none")) {
      bad("tool_choice", "must be \"auto\" or \"none\" (a forced tool choice is not supported)");
    }
    offered = *c == "auto";
  }
  const json* tools = field(body, "tools");
  if (!tools) return;
  if (!tools->is_array()) bad("tools", "must be an array");
  for (size_t i = 0; i < tools->size(); ++i) {
    const std::string p = "tools[" + std::to_string(i) + "]";
    const json& t = (*tools)[i];
    if (!t.is_object()) bad(p, "must be an object");
    if (string_field(t, "type", p) != "function") bad(p + ".type", "must be \"function\"");
    const json* fn = field(t, "function");
    if (!fn || !fn->is_object()) bad(p + ".function", "must be an object");
    if (string_field(*fn, "name", p + ".function").empty()) {
      bad(p + ".function.name", "must be a non-empty string");
    }
    string_field(*fn, "description", p + ".function");
    const json* params = field(*fn, "parameters");
    if (params && !params->is_object()) bad(p + ".function.parameters", "must be an object");
  }
  if (offered) r.extras.tools = *tools;
}

void parse_messages(const json& body, ApiRequest& r) {
  const json* m = field(body, "messages");
  if (!m) bad("messages", "is required");
  if (!m->is_array() || m->empty()) bad("messages", "must be a non-empty array");
  for (size_t i = 0; i < m->size(); ++i) {
    const json& e = (*m)[i];
    const std::string p = "messages[" + std::to_string(i) + "]";
    if (!e.is_object()) bad(p, "must be an object");
    if (!e.contains("role") || !e["role"].is_string()) bad(p + ".role", "must be a string");
    ChatMessage cm;
    cm.role = e["role"].get<std::string>();
    if (cm.role == "developer") cm.role = "system";  // OpenAI's newer name for it
    if (cm.role != "system" && cm.role != "user" && cm.role != "assistant" && cm.role != "tool") {
      bad(p + ".role", "'" + clip_value(cm.role) + "' is not system, user, assistant or tool");
    }
    cm.content = text_of_content(e.contains("content") ? e["content"] : json(), p + ".content",
                                 &cm.content_parts);
    if (cm.role == "assistant") {
      cm.reasoning = string_field(e, "reasoning_content", p);
      if (cm.reasoning.empty()) cm.reasoning = string_field(e, "reasoning", p);  // vLLM's name
      cm.tool_calls = parse_tool_calls(e, p);
    }
    if (cm.role == "tool") {
      cm.tool_call_id = string_field(e, "tool_call_id", p);
      cm.name = string_field(e, "name", p);
    }
    r.messages.push_back(std::move(cm));
  }
  parse_tools(body, r);
  if (const json* k = field(body, "chat_template_kwargs")) {
    if (!k->is_object()) bad("chat_template_kwargs", "must be an object");
    const json* t = field(*k, "enable_thinking");
    if (t && !t->is_boolean()) bad("chat_template_kwargs.enable_thinking", "must be a boolean");
    if (t) r.extras.enable_thinking = t->get<bool>();
  }
}

// The tools and tool-call arguments again, in the client's key order (a
// template may render them so: serve/qwen35_chat.h); the request was checked
// above, so each value read here is where that check found it.
void keep_client_order(std::string_view body, ApiRequest& r) {
  bool calls = false;
  for (const ChatMessage& m : r.messages) calls = calls || !m.tool_calls.empty();
  if (r.extras.tools.empty() && !calls) return;
  try {
    const nlohmann::ordered_json o = parse_json_ordered(body, "the request body");
    if (!r.extras.tools.empty()) r.extras.tools = o.at("tools");
    for (size_t i = 0; i < r.messages.size(); ++i) {
      for (size_t k = 0; k < r.messages[i].tool_calls.size(); ++k) {
        ToolCall& c = r.messages[i].tool_calls[k];
        if (!c.arguments.is_object() || c.arguments.empty()) continue;  // text, or nothing to order
        const auto& a = o.at("messages").at(i).at("tool_calls").at(k).at("function").at("arguments");
        c.arguments = a.is_object() ? a : parse_json_ordered(a.get<std::string>(), "arguments");
      }
    }
  } catch (const nlohmann::json::exception&) {
    // not where the check found it: the keys stay sorted
  }
}

}  // namespace

ApiRequest parse_request(std::string_view body, Endpoint endpoint) {
  json j;
  try {
    j = parse_json(body, "the request body");
  } catch (const FormatError& e) {  // not JSON, or nested too deep
    throw ApiError(400, e.what());
  }
  if (!j.is_object()) throw ApiError(400, "the request body must be a JSON object");
  ApiRequest r;
  r.endpoint = endpoint;
  if (const json* m = field(j, "model")) {
    if (!m->is_string()) bad("model", "must be a string");
    r.model = m->get<std::string>();
  }
  if (endpoint == Endpoint::Completions) {
    parse_prompt(j, r);
  } else {
    parse_messages(j, r);
    keep_client_order(body, r);
  }
  if (get_int(j, "n", 1, std::numeric_limits<int64_t>::min(), INT64_MAX) != 1) {
    bad("n", "must be 1 (one choice per request)");
  }
  r.stream = get_bool(j, "stream", false);
  if (const json* so = field(j, "stream_options")) {
    if (!so->is_object()) bad("stream_options", "must be an object");
    const json* iu = field(*so, "include_usage");
    if (iu && !iu->is_boolean()) bad("stream_options.include_usage", "must be a boolean");
    r.include_usage = iu && iu->get<bool>();
  }
  const int64_t kMaxTokens = int64_t(1) << 31;
  // Absent: up to the context (0). Given: at least 1, as OpenAI and vLLM
  // require (a given 0 must not read as absent and run to the context).
  r.max_tokens = get_int(j, "max_tokens", 0, 1, kMaxTokens);
  if (endpoint == Endpoint::Chat && field(j, "max_completion_tokens")) {
    r.max_tokens = get_int(j, "max_completion_tokens", 0, 1, kMaxTokens);
  }
  if (const json* s = field(j, "stop")) {
    if (s->is_string()) {
      r.stop.push_back(s->get<std::string>());
    } else if (s->is_array()) {
      for (const json& e : *s) {
        if (!e.is_string()) bad("stop", "must be a string or an array of strings");
        r.stop.push_back(e.get<std::string>());
      }
    } else {
      bad("stop", "must be a string or an array of strings");
    }
    if (r.stop.size() > 16) bad("stop", "holds more than 16 strings");
  }
  auto& s = r.sampling;
  s.temperature = float(get_number(j, "temperature", 1.0, 0.0, 2.0));
  s.top_p = float(get_number(j, "top_p", 1.0, 0.0, 1.0));
  if (s.top_p <= 0.f) bad("top_p", "must be in (0.0, 1.0], got " + j.at("top_p").dump());
  s.top_k = int(get_int(j, "top_k", 0, 0, std::numeric_limits<int>::max()));
  s.min_p = float(get_number(j, "min_p", 0.0, 0.0, 0.999999));
  if (field(j, "seed")) {
    s.seed = uint64_t(get_int(j, "seed", 0, std::numeric_limits<int64_t>::min(), INT64_MAX));
    r.seed_given = true;
  }
  if (field(j, "drafter")) r.drafter = get_bool(j, "drafter", true);
  if (const json* m = field(j, "spec_sampling")) {
    if (*m == "coupled") {
      r.mode = speculative::SpecSampling::Coupled;
    } else if (*m == "rejection") {
      r.mode = speculative::SpecSampling::Rejection;
    } else {
      bad("spec_sampling", "must be \"coupled\" or \"rejection\"");
    }
  }
  try {
    s.validate();
  } catch (const InputError& e) {
    throw ApiError(400, e.what());
  }
  return r;
}

}  // namespace mtp::serve
