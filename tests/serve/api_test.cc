// parse_request: every field's type and range check, null as absent, unknown
// fields ignored, OpenAI's error body.
#include <gtest/gtest.h>

#include "serve/api.h"

namespace mtp::serve {
namespace {

// The ApiError of parsing `body`; fails the test when it parses.
ApiError error_of(const std::string& body, Endpoint ep = Endpoint::Completions) {
  try {
    parse_request(body, ep);
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "parsed: " << body;
  return ApiError(0, "");
}

TEST(Api, Defaults) {
  ApiRequest r = parse_request(R"({"prompt": "hi", "whatever": {"x": 1}})", Endpoint::Completions);
  EXPECT_EQ(r.prompt, "hi");
  EXPECT_FALSE(r.stream);
  EXPECT_EQ(r.max_tokens, 0);
  EXPECT_EQ(r.sampling.temperature, 1.0f);  // OpenAI's default
  EXPECT_EQ(r.sampling.top_p, 1.0f);
  EXPECT_FALSE(r.seed_given);
  EXPECT_EQ(r.mode, speculative::SpecSampling::Coupled);
  EXPECT_FALSE(r.drafter.has_value());
}

TEST(Api, Fields) {
  ApiRequest r = parse_request(
      R"({"model": "gpt-4o", "messages": [{"role": "system", "content": "s"},
          {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}],
          "stream": true, "stream_options": {"include_usage": true}, "max_completion_tokens": 7,
          "stop": ["x", "y"], "temperature": 0, "top_p": 0.5, "seed": -3, "n": 1,
          "drafter": false, "spec_sampling": "rejection", "max_tokens": null})",
      Endpoint::Chat);
  EXPECT_EQ(r.model, "gpt-4o");
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[1].content, "ab");
  EXPECT_TRUE(r.stream && r.include_usage);
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"x", "y"}));
  EXPECT_TRUE(r.sampling.greedy());
  EXPECT_EQ(r.sampling.top_p, 0.5f);
  EXPECT_TRUE(r.seed_given);
  EXPECT_EQ(r.sampling.seed, uint64_t(-3));
  EXPECT_EQ(r.drafter, false);
  EXPECT_EQ(r.mode, speculative::SpecSampling::Rejection);
}

TEST(Api, PromptForms) {
  EXPECT_EQ(parse_request(R"({"prompt": ["one"]})", Endpoint::Completions).prompt, "one");
  ApiRequest ids = parse_request(R"({"prompt": [1, 2, 3]})", Endpoint::Completions);
  EXPECT_TRUE(ids.prompt_is_ids);
  EXPECT_EQ(ids.prompt_ids, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(error_of(R"({"prompt": ["a", "b"]})").param, "prompt");
  EXPECT_EQ(error_of(R"({"prompt": [1, "b"]})").param, "prompt");
  EXPECT_EQ(error_of(R"({})").param, "prompt");
}

TEST(Api, WrongTypesAndRangesName400AndTheParam) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"prompt": 5})", "prompt"},
      {R"({"prompt": "a", "stream": "yes"})", "stream"},
      {R"({"prompt": "a", "max_tokens": -1})", "max_tokens"},
      {R"({"prompt": "a", "max_tokens": 2.5})", "max_tokens"},
      {R"({"prompt": "a", "max_tokens": 0})", "max_tokens"},  // ran to the context before
      {R"({"prompt": "a", "temperature": "hot"})", "temperature"},
      {R"({"prompt": "a", "temperature": 2.5})", "temperature"},
      {R"({"prompt": "a", "top_p": 0})", "top_p"},
      {R"({"prompt": "a", "seed": "x"})", "seed"},
      {R"({"prompt": "a", "n": 2})", "n"},
      {R"({"prompt": "a", "stop": 3})", "stop"},
      {R"({"prompt": "a", "stop": ["a", 1]})", "stop"},
      {R"({"prompt": "a", "stream_options": 1})", "stream_options"},
      {R"({"prompt": "a", "stream_options": {"include_usage": 1}})", "stream_options.include_usage"},
      {R"({"prompt": "a", "model": 1})", "model"},
      {R"({"prompt": "a", "spec_sampling": "greedy"})", "spec_sampling"},
  };
  for (const auto& [body, param] : cases) {
    ApiError e = error_of(body);
    EXPECT_EQ(e.status, 400) << body;
    EXPECT_EQ(e.param, param) << body;
  }
  EXPECT_EQ(error_of(R"({"messages": []})", Endpoint::Chat).param, "messages");
  EXPECT_EQ(error_of(R"({"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": 0})",
                     Endpoint::Chat).param,
            "max_completion_tokens");
  EXPECT_EQ(error_of(R"({"messages": [{"role": "function", "content": "x"}]})", Endpoint::Chat).param,
            "messages[0].role");
  EXPECT_EQ(error_of(R"({"messages": [{"role": "tool", "content": "x", "tool_call_id": 3}]})",
                     Endpoint::Chat).param,
            "messages[0].tool_call_id");
  EXPECT_EQ(error_of(R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})",
                     Endpoint::Chat).param,
            "messages[0].content[0].type");
}

TEST(Api, MalformedBodies) {
  for (const char* body : {"", "{", "[1, 2]", "\"str\"", "{\"prompt\": \"\xff\"}", "nul"}) {
    ApiError e = error_of(body);
    EXPECT_EQ(e.status, 400) << body;
    EXPECT_EQ(e.param, "") << body;
  }
}

TEST(Api, ErrorBodyIsOpenAIShaped) {
  nlohmann::json j = error_body(ApiError(400, "bad 'n'", "n"));
  ASSERT_TRUE(j.contains("error"));
  EXPECT_EQ(j["error"]["message"], "bad 'n'");
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_EQ(j["error"]["param"], "n");
  EXPECT_TRUE(j["error"]["code"].is_null());
}

// A body whose bytes are not UTF-8 (the fuzz target's finding: a key with
// 0xFF bytes) is refused with 400, and the error body that quotes it
// serializes with the strict dump (the invalid bytes replaced by U+FFFD).
TEST(Api, ErrorBodyOfABodyThatIsNotUtf8Serializes) {
  const std::string body = "{\"mes\xff\xff\xff\xff\xff\xff\"sages\": [{\"role\": 1}]}";
  const ApiError e = error_of(body, Endpoint::Chat);
  EXPECT_EQ(e.status, 400);
  std::string out;
  EXPECT_NO_THROW(out = error_body(e).dump());
  EXPECT_EQ(nlohmann::json::parse(out)["error"]["type"], "invalid_request_error") << out;
  const nlohmann::json j = error_body(ApiError(400, "key '\xff'", "\xff\xfe"));
  EXPECT_NO_THROW((void)j.dump());
  EXPECT_EQ(j["error"]["param"], "\xEF\xBF\xBD\xEF\xBF\xBD");
}

}  // namespace
}  // namespace mtp::serve
