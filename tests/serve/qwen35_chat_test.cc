// Qwen3.5's chat format (serve/qwen35_chat.h, serve/reply_parser.h):
//   - our rendering equals transformers' rendering (render_jinja_template) of
//     Qwen3.5's published template — llama.cpp's
//     models/templates/Qwen3.5-4B.jinja — on thinking on/off/default, system
//     and developer turns, inline and separate reasoning before and after the
//     last query, tool declarations, tool calls (arguments as objects or
//     JSON text, every kind of value) and their results: the renderings
//     checked in beside this file by chat_expected.py, and the same cases
//     rendered now by python3's jinja2 when bench/real-models.sh --install
//     put the template in the `real` venv;
//   - what the template refuses is an InputError;
//   - the reply parser turns the thinking into reasoning and tool calls into
//     JSON arguments (typed by the tool's schema), whole or byte by byte;
//   - the server (over a scripted engine) opens the thinking in the prompt
//     and returns reasoning_content and tool_calls, streamed or not.
#include <gtest/gtest.h>


#include "core/error.h"
#include "serve/api.h"
#include "serve/chat_reference.h"
#include "serve/qwen35_chat.h"
#include "serve/reply_parser.h"
#include "serve/script_server.h"

namespace mtp::serve::qwen35_chat_test {
namespace {

using nlohmann::json;

const test::ChatReference kRef{"qwen35_chat_expected.json", ChatFormat::Qwen35, ""};

const json& case_named(const std::string& name) { return kRef.case_named(name); }

TEST(Qwen35Chat, RendersAsTransformersRendersThePublishedTemplate) {
  kRef.expect_transformers_renderings("Qwen3.5-4B.jinja", 20);
}

// The same cases rendered now, by python3's jinja2, from the template that
// bench/real-models.sh --install put in the `real` venv (skipped when absent).
TEST(Qwen35Chat, RendersAsThePublishedTemplateRenderedNow) {
  kRef.expect_renderings_now("Qwen3.5-4B.jinja", 20);
}

// Qwen3.5's markers pick the format; Qwen 3's template (no <function=) and
// Qwen3-Coder's (no thinking switch) stay ChatML.
TEST(Qwen35Chat, RecognisedByItsMarkers) {
  const std::string qwen35 =
      "{{- '<|im_start|>' }}<tool_call>\\n<function={%- if enable_thinking is defined %}";
  EXPECT_EQ(recognise_template(qwen35, "t").format, ChatFormat::Qwen35);
  EXPECT_EQ(recognise_template("<|im_start|><|im_end|><think>{% if enable_thinking %}", "t").format,
            ChatFormat::ChatML);
  EXPECT_EQ(recognise_template("<|im_start|><|im_end|><function=", "t").format, ChatFormat::ChatML);
  EXPECT_EQ(parse_chat_format("qwen35"), ChatFormat::Qwen35);
  EXPECT_EQ(ChatTemplate{.format = ChatFormat::Qwen35}.turn_ends(),
            std::vector<std::string>{"<|im_end|>"});
}

TEST(Qwen35Chat, WhatTheTemplateRefusesIsAnInputError) {
  ChatTemplate t;
  t.format = ChatFormat::Qwen35;
  auto msg = [](std::string role, std::string content) {
    ChatMessage m;
    m.role = std::move(role);
    m.content = std::move(content);
    return m;
  };
  EXPECT_THROW(t.render({}), InputError);
  EXPECT_THROW(t.render({msg("user", "a"), msg("system", "late")}), InputError);
  EXPECT_THROW(t.render({msg("user", "<tool_response>\nx\n</tool_response>")}), InputError);
  ChatMessage call = msg("assistant", "");
  call.tool_calls.push_back({"c", "f", json("not an object")});
  EXPECT_THROW(t.render({msg("user", "a"), call}), InputError);
}

// Tools of the reply tests: get_weather's city is a string, days an integer.
json weather_tools() { return case_named("tools").at("tools"); }

constexpr std::string_view kReply =
    "The user wants Paris.\n</think>\n\nChecking.\n\n<tool_call>\n<function=get_weather>\n"
    "<parameter=city>\n75001\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n"
    "</tool_call>";

void expect_reply(const ReplyDelta& r) {
  EXPECT_EQ(r.reasoning, "The user wants Paris.");
  EXPECT_EQ(r.content, "Checking.");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "get_weather");
  // city is declared a string: "75001" stays text; days reads as JSON.
  EXPECT_EQ(json::parse(r.calls[0].arguments), json({{"city", "75001"}, {"days", 3}}));
}

TEST(Qwen35Chat, ReplyParserReadsThinkingAndCallsWholeOrByteByByte) {
  ReplyParser whole(ChatFormat::Qwen35, /*in_thought=*/true, weather_tools());
  ReplyDelta r = whole.feed(kReply);
  r.append(whole.finish());
  expect_reply(r);

  ReplyParser bytes(ChatFormat::Qwen35, true, weather_tools());
  ReplyDelta b;
  for (char ch : kReply) {
    ReplyDelta d = bytes.feed(std::string_view(&ch, 1));
    EXPECT_EQ(d.content.find('<'), std::string::npos) << "a marker leaked: " << d.content;
    b.append(std::move(d));
  }
  b.append(bytes.finish());
  expect_reply(b);

  // Thinking off: content, unless the model opens a think part itself;
  // without a schema a value is JSON where it reads as JSON.
  ReplyParser off(ChatFormat::Qwen35, false);
  ReplyDelta o = off.feed("<think>\nhm\n</think>\n\nHi <b>\n<tool_call>\n<function=f>\n"
                          "<parameter=x>\n[1, 2]\n</parameter>\n<parameter=y>\nParis\n</parameter>\n"
                          "</function>\n</tool_call>");
  o.append(off.finish());
  EXPECT_EQ(o.reasoning, "hm");
  EXPECT_EQ(o.content, "Hi <b>");
  ASSERT_EQ(o.calls.size(), 1u);
  EXPECT_EQ(json::parse(o.calls[0].arguments), json({{"x", {1, 2}}, {"y", "Paris"}}));

  // Text that is no call stays content as written; an unfinished thought is reasoning.
  ReplyParser odd(ChatFormat::Qwen35, false);
  ReplyDelta d = odd.feed("a <tool_call>\nnot a call\n</tool_call> b <think>still");
  d.append(odd.finish());
  EXPECT_EQ(d.content, "a <tool_call>\nnot a call\n</tool_call> b ");
  EXPECT_EQ(d.reasoning, "still");
  EXPECT_TRUE(d.calls.empty());
}

TEST(Qwen35Chat, ServerReturnsToolCallsAndReasoning) {
  test::ScriptServer s(ChatFormat::Qwen35, std::string(kReply));
  httplib::Client& c = s.client;
  const std::string body = json({{"messages", {{{"role", "user"}, {"content", "Weather?"}}}},
                                 {"tools", weather_tools()}})
                               .dump();
  auto r = c.Post("/v1/chat/completions", body, "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const std::string prompt = s.engine.last_prompt();
  EXPECT_NE(prompt.find("<tools>\n{\"function\": {"), std::string::npos) << prompt;
  EXPECT_TRUE(prompt.ends_with("<|im_start|>assistant\n<think>\n")) << prompt;
  const json j = json::parse(r->body);
  const json& m = j["choices"][0]["message"];
  EXPECT_EQ(j["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_EQ(m["reasoning_content"], "The user wants Paris.");
  EXPECT_EQ(m["content"], "Checking.");
  ASSERT_EQ(m["tool_calls"].size(), 1u) << m.dump();
  EXPECT_EQ(m["tool_calls"][0]["function"]["name"], "get_weather");
  const json args = json::parse(m["tool_calls"][0]["function"]["arguments"].get<std::string>());
  EXPECT_EQ(args, json({{"city", "75001"}, {"days", 3}}));

  json sb = json::parse(body);
  sb["stream"] = true;
  r = c.Post("/v1/chat/completions", sb.dump(), "application/json");
  ASSERT_TRUE(r);
  const test::StreamedReply st = test::read_stream(r->body);
  EXPECT_EQ(st.content, "Checking.");
  EXPECT_EQ(st.reasoning, "The user wants Paris.");
  ASSERT_EQ(st.calls.size(), 1u);
  EXPECT_EQ(json::parse(st.calls[0]["function"]["arguments"].get<std::string>()), args);
  EXPECT_EQ(st.finish, "tool_calls");

  // Thinking off: the prompt closes an empty think part; the reply is content.
  sb["stream"] = false;
  sb["chat_template_kwargs"] = {{"enable_thinking", false}};
  r = c.Post("/v1/chat/completions", sb.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_TRUE(s.engine.last_prompt().ends_with("<think>\n\n</think>\n\n"));
  EXPECT_FALSE(json::parse(r->body)["choices"][0]["message"].contains("reasoning_content"));
}

}  // namespace
}  // namespace mtp::serve::qwen35_chat_test
