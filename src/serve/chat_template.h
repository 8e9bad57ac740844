// Chat templates: messages -> the prompt text a chat model was trained on.
//
// We do not interpret Jinja. A model's chat_template (tokenizer_config.json)
// is RECOGNISED as one of the families below by its marker tokens, and our
// own formatter for that family renders it; tests/serve/chat_template_test.cc
// checks each formatter against an independent Jinja rendering of the real
// templates. A template of no known family is a ConfigError at start-up
// unless --chat-format names the family.
//
// Families and what they do with the roles (system, user, assistant):
//   llama3   bos, then <|start_header_id|>ROLE<|end_header_id|>\n\nTEXT<|eot_id|>
//            per message (TEXT trimmed); prompt <|start_header_id|>assistant...
//   chatml   <|im_start|>ROLE\nTEXT<|im_end|>\n (Qwen); the template's default
//            system prompt when the messages have none (Qwen 2.5); Qwen 3's
//            templates drop an assistant turn's <think>...</think> part.
//   gemma    bos, <start_of_turn>user|model\n...<end_of_turn>\n; no system role:
//            the system text + "\n\n" starts the first user turn; roles must
//            alternate user/assistant.
//   llama2   per user turn bos[INST] TEXT [/INST], assistant " TEXT eos"; the
//            system text in <<SYS>>\n...\n<</SYS>>\n\n inside the first user turn.
//   mistral  bos, [INST] TEXT [/INST], assistant TEXT eos; (the template has no
//            system role; we prepend the system text + "\n\n" to the first user turn).
//   gemma4   bos, <|turn>system|user|model\n...<turn|>\n: a system turn for the
//            system text, the tool declarations and the thinking switch; an
//            assistant's tool calls and the tool results after it in its own
//            turn; the prompt <|turn>model\n, with an empty thought channel
//            unless thinking is on (serve/gemma4_chat.h).
//   qwen35   ChatML with Qwen3.5's system turn of tool declarations, an
//            assistant's <think> part after the last query, tool calls as
//            <tool_call><function=NAME><parameter=P>..., tool results as
//            <tool_response> in a user turn; the prompt opens <think>\n
//            unless thinking is off (serve/qwen35_chat.h).
//   gemma4 and qwen35 are the formats that take tools, tool calls, tool
//   results and thinking.
//   plain    the messages' texts joined by "\n" (base models; no markers).
// The rendered text starts with the BOS text where the family has one; the
// server tokenizes it without adding another (prompt_ids: no double BOS).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"

namespace mtp::serve {

enum class ChatFormat { Llama3, ChatML, Gemma, Llama2, Mistral, Gemma4, Qwen35, Plain };

// "llama3" | "chatml" | "gemma" | "llama2" | "mistral" | "gemma4" | "qwen35" |
// "plain";
// InputError otherwise.
ChatFormat parse_chat_format(const std::string& name);
const char* chat_format_name(ChatFormat f);
// Every format's name, in the order above (the CLI's choices).
std::vector<std::string> chat_format_names();

// A tool call of an assistant message: OpenAI's {id, function: {name,
// arguments}}, the arguments as a JSON object in the client's key order (or,
// when a client sent text that is not one, that text).
struct ToolCall {
  std::string id, name;
  nlohmann::ordered_json arguments;
};

struct ChatMessage {
  std::string role;     // "system" | "user" | "assistant" | "tool"
  std::string content;
  std::vector<std::string> content_parts;  // the texts of a content array (its join: content)
  std::string reasoning;                // assistant: reasoning_content
  std::vector<ToolCall> tool_calls;     // assistant
  std::string tool_call_id, name;       // tool: the call it answers, the tool's name
};

// What a chat request adds to its messages: OpenAI's tools (an array of
// {"type": "function", "function": {name, description, parameters}}, checked
// by the API) and the template's thinking switch (chat_template_kwargs
// enable_thinking; absent: the template's default — gemma4 off, qwen35 on).
struct ChatExtras {
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();  // the client's key order
  std::optional<bool> enable_thinking;
  // Whether this request thinks in `format`.
  bool thinking(ChatFormat format) const {
    return enable_thinking.value_or(format == ChatFormat::Qwen35);
  }
};

struct ChatTemplate {
  ChatFormat format = ChatFormat::Plain;
  std::string bos, eos;        // the special tokens' text ("" if none)
  std::string default_system;  // chatml: used when the messages have no system turn
  bool strip_think = false;    // chatml: drop <think>...</think> of assistant turns

  // InputError for a role the family cannot take, a broken alternation, or
  // tools, tool calls or thinking given to a format without them (the tools
  // and the thinking switch: about setting "tools" / "enable_thinking").
  std::string render(const std::vector<ChatMessage>& messages,
                     bool add_generation_prompt = true) const;
  std::string render(const std::vector<ChatMessage>& messages, const ChatExtras& extras,
                     bool add_generation_prompt = true) const;
  // Texts that end an assistant turn: stop strings for chat completions
  // (gemma4: the end of the turn and the cue for a tool's result).
  std::vector<std::string> turn_ends() const;
  // Whether the generation prompt for `extras` ends inside the thinking part
  // (qwen35 with thinking on: the reply starts with the thinking).
  bool prompt_opens_thought(const ChatExtras& extras) const {
    return format == ChatFormat::Qwen35 && extras.thinking(format);
  }
};

// The family of a Jinja chat template (ConfigError naming `where` if none).
ChatTemplate recognise_template(const std::string& jinja, const std::string& where);

// The template for a model: tokenizer_config.json in `dir` (its chat_template,
// bos_token, eos_token) — chat_template.jinja beside it, where present, is the
// template instead, as transformers reads it (Gemma 4's checkpoints ship
// theirs so) — recognised, unless `override_name` is given (then only the
// special tokens are read). No template and no override: plain.
ChatTemplate load_chat_template(const std::string& dir, const std::string& override_name);
// The same from a GGUF file's tokenizer.chat_template (special tokens from
// tokenizer.ggml.tokens at the BOS/EOS ids).
ChatTemplate load_gguf_chat_template(const std::string& path, const std::string& override_name);
// The template of Jinja text `jinja` (may be empty: plain), named `where` in
// errors, or the override's format; bos/eos: the special tokens' text.
ChatTemplate chat_template_from(const std::string& jinja, const std::string& where,
                                const std::string& override_name, const std::string& bos,
                                const std::string& eos);

// The prompt ids for rendered chat text: special-token text recognised, one
// BOS at the front when the tokenizer adds BOS (never two).
std::vector<int32_t> encode_chat(const io::Tokenizer& tok, const std::string& text);

}  // namespace mtp::serve
