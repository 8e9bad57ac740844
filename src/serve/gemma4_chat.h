// Gemma 4's chat format, rendered by our own code to the text its published
// Jinja template (tokenizer_config.json / chat_template.jinja, the GGUF's
// tokenizer.chat_template) gives for the messages the API accepts;
// tests/serve/gemma4_chat_test.cc compares the two through jinja2.
//
//   bos
//   <|turn>system\n [<|think|>\n] SYSTEM [<|tool>declaration:NAME{...}<tool|>]... <turn|>\n
//       (only with thinking on, tools, or a leading system message)
//   <|turn>user\nTEXT<turn|>\n
//   <|turn>model\n [<|channel>thought\nREASONING\n<channel|>]
//       [<|tool_call>call:NAME{ARGS}<tool_call|>]...
//       [<|tool_response>response:NAME{value:RESULT}<tool_response|>]...  (the tool
//       messages after it) TEXT <turn|>\n
//   prompt: <|turn>model\n, then <|channel>thought\n<channel|> (an empty thought)
//       unless thinking is on; none after tool calls (the model goes on after
//       their results, or is cued by <|tool_response>)
//
// Content given as an array of text parts: each part trimmed (a model turn's:
// stripped of thoughts) on its own, as the template does; a system message's
// parts are joined first (the template would print the array itself).
//
// Values inside declarations and calls are Gemma's own notation (format_value):
// strings in <|"|>...<|"|>, objects {key:value,...} with keys sorted, lists
// [a,b], true/false, numbers as Python prints them.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve/chat_template.h"

namespace mtp::serve {

// The prompt text (t.bos first). InputError for a role other than system,
// user, assistant and tool.
std::string render_gemma4(const ChatTemplate& t, const std::vector<ChatMessage>& messages,
                          const ChatExtras& extras, bool add_generation_prompt);

// What Jinja's {{ x }} prints for a JSON value in transformers' renderer:
// Python's str() of it (True, None, 1.0, ['a', 1], {'k': 'v'}).
std::string python_str(const nlohmann::json& v);

// A value in Gemma's notation; quote_keys: object keys in <|"|> too (the
// template's escape_keys).
std::string format_value(const nlohmann::json& v, bool quote_keys);

// The JSON object of a call's arguments as the model writes them between the
// braces of call:NAME{...}, e.g. `city:<|"|>Paris<|"|>,days:3`; nullopt when
// the text is not in that notation.
std::optional<nlohmann::json> parse_arguments(std::string_view text);

}  // namespace mtp::serve
