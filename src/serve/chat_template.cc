#include "serve/chat_template.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "core/json.h"
#include "core/mapped_file.h"
#include "core/setting.h"
#include "io/gguf.h"
#include "model/family.h"
#include "serve/gemma4_chat.h"
#include "serve/qwen35_chat.h"

namespace fs = std::filesystem;

namespace mtp::serve {

namespace {

struct FormatName {
  ChatFormat f;
  const char* name;
};
constexpr FormatName kFormats[] = {{ChatFormat::Llama3, "llama3"},   {ChatFormat::ChatML, "chatml"},
                                   {ChatFormat::Gemma, "gemma"},     {ChatFormat::Llama2, "llama2"},
                                   {ChatFormat::Mistral, "mistral"}, {ChatFormat::Gemma4, "gemma4"},
                                   {ChatFormat::Qwen35, "qwen35"},   {ChatFormat::Plain, "plain"}};

// Jinja's `trim` / Python's str.strip() on ASCII whitespace.
std::string trim(const std::string& s) {
  const char* ws = " \t\n\r\v\f";
  size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return {};
  size_t e = s.find_last_not_of(ws);
  return s.substr(b, e - b + 1);
}

std::string lstrip_newlines(const std::string& s) {
  size_t b = s.find_first_not_of('\n');
  return b == std::string::npos ? std::string() : s.substr(b);
}
std::string strip_newlines(const std::string& s) {
  std::string t = lstrip_newlines(s);
  size_t e = t.find_last_not_of('\n');
  return e == std::string::npos ? std::string() : t.substr(0, e + 1);
}

// Splits off the leading system message (if any).
void split_system(const std::vector<ChatMessage>& msgs, std::string& system, bool& has_system,
                  std::vector<ChatMessage>& rest) {
  has_system = !msgs.empty() && msgs[0].role == "system";
  if (has_system) system = msgs[0].content;
  rest.assign(msgs.begin() + (has_system ? 1 : 0), msgs.end());
}

// user/assistant/user/..., as Gemma's, Llama 2's and Mistral's templates demand.
void check_alternation(const std::vector<ChatMessage>& msgs, const char* family) {
  for (size_t i = 0; i < msgs.size(); ++i) {
    const bool user = msgs[i].role == "user";
    if (user != (i % 2 == 0) || (!user && msgs[i].role != "assistant")) {
      fail<InputError>("messages[{}]: the {} chat format needs the roles to alternate "
                       "user/assistant/user/... after an optional system message; got '{}'",
                       i, family, msgs[i].role);
    }
  }
}

std::string render_chatml(const ChatTemplate& t, const std::vector<ChatMessage>& msgs) {
  std::string out;
  if ((msgs.empty() || msgs[0].role != "system") && !t.default_system.empty()) {
    out += "<|im_start|>system\n" + t.default_system + "<|im_end|>\n";
  }
  long last_user = long(msgs.size()) - 1;  // Qwen 3: the last user query
  for (long i = long(msgs.size()) - 1; i >= 0; --i) {
    if (msgs[size_t(i)].role == "user") {
      last_user = i;
      break;
    }
  }
  for (size_t i = 0; i < msgs.size(); ++i) {
    const ChatMessage& m = msgs[i];
    if (m.role != "assistant" || !t.strip_think) {
      out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
      continue;
    }
    std::string content = m.content, reasoning;
    const size_t end = content.find("</think>");
    if (end != std::string::npos) {
      std::string before = content.substr(0, end);
      const size_t last_end = content.rfind("</think>");
      content = lstrip_newlines(content.substr(last_end + 8));
      size_t e = before.find_last_not_of('\n');
      before = e == std::string::npos ? std::string() : before.substr(0, e + 1);
      const size_t open = before.rfind("<think>");
      reasoning = lstrip_newlines(open == std::string::npos ? before : before.substr(open + 7));
    }
    const bool after_query = long(i) > last_user;
    if (after_query && (i + 1 == msgs.size() || !reasoning.empty())) {
      out += "<|im_start|>assistant\n<think>\n" + strip_newlines(reasoning) + "\n</think>\n\n" +
             lstrip_newlines(content);
    } else {
      out += "<|im_start|>assistant\n" + content;
    }
    out += "<|im_end|>\n";
  }
  return out;
}

}  // namespace

ChatFormat parse_chat_format(const std::string& name) {
  for (const auto& f : kFormats) {
    if (name == f.name) return f.f;
  }
  fail<InputError>("--chat-format '{}' is not one of {}", name,
                   fmt::join(chat_format_names(), ", "));
}

std::vector<std::string> chat_format_names() {
  std::vector<std::string> out;
  for (const auto& f : kFormats) out.push_back(f.name);
  return out;
}

const char* chat_format_name(ChatFormat f) {
  for (const auto& x : kFormats) {
    if (x.f == f) return x.name;
  }
  return "?";
}

std::string ChatTemplate::render(const std::vector<ChatMessage>& msgs, bool gen) const {
  return render(msgs, ChatExtras{}, gen);
}

std::string ChatTemplate::render(const std::vector<ChatMessage>& msgs, const ChatExtras& extras,
                                 bool gen) const {
  if (format == ChatFormat::Gemma4) return render_gemma4(*this, msgs, extras, gen);
  if (format == ChatFormat::Qwen35) return render_qwen35(msgs, extras, gen);
  const std::string why = fmt::format("the {} chat format has", chat_format_name(format));
  if (!extras.tools.empty()) {
    fail_setting<InputError>("tools", "tools: {} no tools (gemma4 and qwen35 have)", why);
  }
  if (extras.enable_thinking.value_or(false)) {
    fail_setting<InputError>("enable_thinking", "enable_thinking: {} no thinking switch", why);
  }
  for (size_t i = 0; i < msgs.size(); ++i) {
    const std::string& r = msgs[i].role;
    if (r != "system" && r != "user" && r != "assistant") {
      fail<InputError>("messages[{}].role '{}' is not system, user or assistant", i, r);
    }
    if (!msgs[i].tool_calls.empty()) fail<InputError>("messages[{}].tool_calls: {} none", i, why);
  }
  std::string system, out;
  bool has_system = false;
  std::vector<ChatMessage> rest;
  switch (format) {
    case ChatFormat::Llama3:
      out = bos;
      for (const auto& m : msgs) {
        out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + trim(m.content) +
               "<|eot_id|>";
      }
      if (gen) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
      return out;
    case ChatFormat::ChatML:
      out = render_chatml(*this, msgs);
      if (gen) out += "<|im_start|>assistant\n";
      return out;
    case ChatFormat::Gemma:
      split_system(msgs, system, has_system, rest);
      check_alternation(rest, "gemma");
      out = bos;
      for (size_t i = 0; i < rest.size(); ++i) {
        out += "<start_of_turn>" + std::string(rest[i].role == "assistant" ? "model" : "user") +
               "\n" + (i == 0 && has_system ? system + "\n\n" : "") + trim(rest[i].content) +
               "<end_of_turn>\n";
      }
      if (gen) out += "<start_of_turn>model\n";
      return out;
    case ChatFormat::Llama2:
    case ChatFormat::Mistral: {
      const bool l2 = format == ChatFormat::Llama2;
      split_system(msgs, system, has_system, rest);
      check_alternation(rest, l2 ? "llama2" : "mistral");
      if (!l2) out = bos;
      for (size_t i = 0; i < rest.size(); ++i) {
        std::string c = rest[i].content;
        if (i == 0 && has_system) {
          c = l2 ? "<<SYS>>\n" + system + "\n<</SYS>>\n\n" + c : system + "\n\n" + c;
        }
        if (rest[i].role == "user") {
          out += l2 ? bos + "[INST] " + trim(c) + " [/INST]" : "[INST] " + c + " [/INST]";
        } else {
          out += l2 ? " " + trim(c) + " " + eos : c + eos;
        }
      }
      return out;  // the model's turn follows [/INST] directly
    }
    case ChatFormat::Gemma4:  // rendered above
    case ChatFormat::Qwen35:
    case ChatFormat::Plain:
      for (size_t i = 0; i < msgs.size(); ++i) out += (i ? "\n" : "") + msgs[i].content;
      return out;
  }
  return out;
}

std::vector<std::string> ChatTemplate::turn_ends() const {
  switch (format) {
    case ChatFormat::Llama3: return {"<|eot_id|>"};
    case ChatFormat::ChatML:
    case ChatFormat::Qwen35: return {"<|im_end|>"};
    case ChatFormat::Gemma: return {"<end_of_turn>"};
    case ChatFormat::Gemma4: return {"<turn|>", "<|tool_response>"};
    case ChatFormat::Llama2:
    case ChatFormat::Mistral: return eos.empty() ? std::vector<std::string>{} : std::vector{eos};
    case ChatFormat::Plain: return {};
  }
  return {};
}

namespace {
// A literal default system turn in the template's source,
//   '<|im_start|>system\nTEXT<|im_end|>\n'   (TEXT without ' or \),
// the first one; "" when there is none. One forward scan: each candidate's
// TEXT ends at the first quote or backslash, which is where the next
// candidate can start, so no byte is looked at twice (a std::regex recursed
// per character and overflowed the stack on a 50 KB prompt).
std::string literal_default_system(std::string_view j) {
  static constexpr std::string_view open = "'<|im_start|>system\\n", end = "<|im_end|>",
                                    tail = "\\n'";
  for (size_t at = j.find(open); at != std::string_view::npos; at = j.find(open, at)) {
    const size_t b = at + open.size();
    const size_t e = j.find_first_of("'\\", b);
    if (e == std::string_view::npos) return "";
    if (e - b >= end.size() && j.compare(e - end.size(), end.size(), end) == 0 &&
        j.compare(e, tail.size(), tail) == 0) {
      return std::string(j.substr(b, e - end.size() - b));
    }
    at = e;
  }
  return "";
}
}  // namespace

ChatTemplate recognise_template(const std::string& j, const std::string& where) {
  // The markers of each chat format live in the family table (model/family.h).
  const std::string format = model::chat_format_of(j);
  if (format.empty()) {
    fail<ConfigError>("{}: chat_template is of no family we render ({}); pass --chat-format NAME "
                      "to choose one", where, model::chat_format_names());
  }
  ChatTemplate t;
  t.format = parse_chat_format(format);
  if (t.format == ChatFormat::ChatML) {
    t.strip_think = j.find("</think>") != std::string::npos;
    t.default_system = literal_default_system(j);
  }
  return t;
}

namespace {
// A special token of tokenizer_config.json: a string or {"content": ...}.
std::string special_token(const nlohmann::json& cfg, const char* key) {
  if (!cfg.contains(key)) return "";
  const auto& v = cfg[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) {
    return v["content"].get<std::string>();
  }
  return "";
}
}  // namespace

ChatTemplate load_chat_template(const std::string& dir, const std::string& override_name) {
  const fs::path p = fs::path(dir) / "tokenizer_config.json";
  nlohmann::json cfg = nlohmann::json::object();
  if (fs::exists(p)) {
    cfg = parse_json(read_file(p.string()), p.string());
    if (!cfg.is_object()) {
      fail<FormatError>("{}: not a JSON object", p.string());
    }
  }
  std::string jinja;
  if (cfg.contains("chat_template")) {
    const auto& ct = cfg["chat_template"];
    if (ct.is_string()) jinja = ct.get<std::string>();
    // A list of named templates: the one named "default".
    if (ct.is_array()) {
      for (const auto& e : ct) {
        if (e.is_object() && e.value("name", "") == "default" && e.contains("template") &&
            e["template"].is_string()) {
          jinja = e["template"].get<std::string>();
        }
      }
    }
  }
  std::string where = p.string() + ": chat_template";
  if (const fs::path file = fs::path(dir) / "chat_template.jinja"; fs::exists(file)) {
    jinja = read_file(file.string());
    where = file.string();
  }
  return chat_template_from(jinja, where, override_name,
                            special_token(cfg, "bos_token"), special_token(cfg, "eos_token"));
}

ChatTemplate chat_template_from(const std::string& jinja, const std::string& where,
                                const std::string& override_name, const std::string& bos,
                                const std::string& eos) {
  ChatTemplate t;
  if (!override_name.empty()) {
    t.format = parse_chat_format(override_name);
    if (t.format == ChatFormat::ChatML && !jinja.empty()) {
      try {
        t = recognise_template(jinja, where);
      } catch (const ConfigError&) {
      }
      t.format = ChatFormat::ChatML;
    }
  } else if (!jinja.empty()) {
    t = recognise_template(jinja, where);
  }
  t.bos = bos;
  t.eos = eos;
  return t;
}

ChatTemplate load_gguf_chat_template(const std::string& path, const std::string& override_name) {
  const io::GgufFile f(path);
  const std::string jinja = f.get_string("tokenizer.chat_template").value_or("");
  // The special tokens' text: their pieces in tokenizer.ggml.tokens.
  auto piece = [&](const char* key) -> std::string {
    const auto id = f.get_int(key);
    const auto* tokens = f.get_array("tokenizer.ggml.tokens");
    if (!id || !tokens || *id < 0 || size_t(*id) >= tokens->size()) return "";
    const io::GgufValue& v = (*tokens)[size_t(*id)];
    return v.type == io::GgufType::String ? v.s : "";
  };
  return chat_template_from(jinja, path + ": tokenizer.chat_template", override_name,
                            piece("tokenizer.ggml.bos_token_id"),
                            piece("tokenizer.ggml.eos_token_id"));
}

std::vector<int32_t> encode_chat(const io::Tokenizer& tok, const std::string& text) {
  std::vector<int32_t> ids = tok.encode(text, /*add_special=*/false);
  const int32_t bos = tok.bos_id();
  if (tok.adds_bos() && bos >= 0 && (ids.empty() || ids[0] != bos)) ids.insert(ids.begin(), bos);
  return ids;
}

}  // namespace mtp::serve
