// Qwen3.5's chat format, rendered by our own code to the text its published
// Jinja template (chat_template.jinja / tokenizer_config.json, the GGUF's
// tokenizer.chat_template) gives for the messages the API accepts;
// tests/serve/qwen35_chat_test.cc compares the two through transformers.
//
//   [<|im_start|>system\n# Tools ... <tools>\nTOOL_JSON...\n</tools>INSTRUCTIONS
//       [\n\nSYSTEM]<|im_end|>\n]                      (with tools)
//   [<|im_start|>system\nSYSTEM<|im_end|>\n]            (without; a leading system only)
//   <|im_start|>user\nTEXT<|im_end|>\n
//   <|im_start|>assistant\n [<think>\nREASONING\n</think>\n\n] TEXT    (the think part only
//       after the last real user query)
//       [\n\n]<tool_call>\n<function=NAME>\n<parameter=P>\nVALUE\n</parameter>\n
//       </function>\n</tool_call> ... <|im_end|>\n
//   <|im_start|>user\n<tool_response>\nRESULT\n</tool_response>...<|im_end|>\n
//       (consecutive tool messages share one user turn)
//   prompt: <|im_start|>assistant\n<think>\n, or with thinking off
//       <|im_start|>assistant\n<think>\n\n</think>\n\n
//
// TEXT is the message's text trimmed (a content array's text parts joined);
// an assistant's reasoning is its reasoning_content, else the part of its
// text before </think>. TOOL_JSON and object or list VALUEs are Python's
// json.dumps (", " and ": " separators, non-ASCII kept), other VALUEs
// Python's str(); keys in the client's order, as transformers keeps them
// (the API reads tools and arguments with parse_json_ordered).
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve/chat_template.h"

namespace mtp::serve {

// The prompt text. InputError, as the template raises, for no messages, a
// system message after the first, or no user query (every user message a
// tool response).
std::string render_qwen35(const std::vector<ChatMessage>& messages, const ChatExtras& extras,
                          bool add_generation_prompt);

// Python's json.dumps(v, ensure_ascii=False): transformers' tojson filter
// (keys in v's order).
std::string python_json(const nlohmann::ordered_json& v);

// A call as the model writes it between <tool_call> and </tool_call>:
// "\n<function=NAME>\n<parameter=P>\nVALUE\n</parameter>\n...</function>\n".
// Each VALUE is JSON where it reads as JSON and the tool's declared type of P
// (in `tools`, OpenAI's array) is not "string", else the text; nullopt when
// the text is not in that form.
struct ParsedCall {
  std::string name;
  nlohmann::json arguments;
};
std::optional<ParsedCall> parse_qwen35_call(std::string_view body, const nlohmann::json& tools);

}  // namespace mtp::serve
