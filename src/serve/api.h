// The OpenAI request bodies we accept, parsed and checked in one place (the
// HTTP fuzz target feeds this function arbitrary bytes), and the OpenAI
// error body. Unknown fields are ignored; a field that is present with the
// wrong type or range is an ApiError (HTTP 400) naming it as `param`. null
// counts as absent. A `model` naming another model is accepted and served by
// ours (the response's `model` says which). Extensions (not OpenAI's):
// top_k, min_p, "drafter": false (plain decoding for this request) and
// "spec_sampling": "coupled" | "rejection"; as vLLM and llama.cpp,
// "chat_template_kwargs": {"enable_thinking": bool}. Chat messages may carry
// OpenAI's tool_calls (assistant; arguments a JSON object's text),
// reasoning_content (assistant; also as vLLM's "reasoning") and role "tool" (tool_call_id, name); a
// request's "tools" are functions ({"type": "function", "function": {"name",
// "description", "parameters"}}); "tool_choice" "auto" (the default) offers them,
// "none" does not, a forced choice is refused.
#pragma once
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve/chat_template.h"
#include "speculative/cycle/sampler.h"

namespace mtp::serve {

// An error the client sees: HTTP status and OpenAI's {"error": {...}} fields.
struct ApiError : std::runtime_error {
  ApiError(int status, std::string message, std::string param = "",
           std::string type = "invalid_request_error", std::string code = "")
      : std::runtime_error(message), status(status), type(std::move(type)),
        param(std::move(param)), code(std::move(code)) {}
  int status;
  std::string type, param, code;
};

// {"error": {"message", "type", "param", "code"}} (param/code null when empty).
nlohmann::json error_body(const ApiError& e);

enum class Endpoint { Completions, Chat };

struct ApiRequest {
  Endpoint endpoint = Endpoint::Completions;
  std::string model;                   // as sent ("" if absent)
  // Completions: the prompt as text, or as token ids (prompt_is_ids).
  std::string prompt;
  std::vector<int64_t> prompt_ids;
  bool prompt_is_ids = false;
  std::vector<ChatMessage> messages;   // Chat
  ChatExtras extras;                   // Chat: tools, thinking
  bool stream = false, include_usage = false;
  int64_t max_tokens = 0;              // 0 = not given: to the context
  std::vector<std::string> stop;
  speculative::SamplerOptions sampling;  // temperature defaults to 1.0 (OpenAI)
  bool seed_given = false;
  std::optional<bool> drafter;
  speculative::SpecSampling mode = speculative::SpecSampling::Coupled;
};

// Parses and checks a request body (any bytes). Throws ApiError only.
ApiRequest parse_request(std::string_view body, Endpoint endpoint);

}  // namespace mtp::serve
