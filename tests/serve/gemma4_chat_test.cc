// Gemma 4's chat format (serve/gemma4_chat.h, serve/reply_parser.h):
//   - our rendering equals transformers' rendering (apply_chat_template's
//     render_jinja_template) of Gemma 4's published template — llama.cpp's
//     models/templates/google-gemma-4-31B-it.jinja — on system and developer
//     turns, thinking, tool declarations (flat and nested schemas), tool calls
//     (arguments as objects, nested, or as OpenAI's JSON text; reasoning as
//     reasoning_content or vLLM's reasoning) and their results: the
//     renderings checked in beside this file by chat_expected.py, and
//     the same cases rendered now by python3's jinja2 when
//     bench/real-models.sh --install put the template in the `real` venv;
//   - the reply parser turns thought channels into reasoning and tool calls
//     into JSON arguments, whole or fed one byte at a time;
//   - the server (over a scripted engine) offers the tools in the prompt and
//     returns the calls as OpenAI tool_calls and the thinking as
//     reasoning_content, streamed or not.
#include <gtest/gtest.h>
#include <httplib.h>

#include <cstdlib>
#include <fstream>
#include <thread>

#include "cli_util.h"
#include "core/error.h"
#include "serve/api.h"
#include "serve/chat_reference.h"
#include "serve/gemma4_chat.h"
#include "serve/reply_parser.h"
#include "serve/script_server.h"
#include "serve/serve_util.h"
#include "serve/server.h"
#include "test_util.h"
#include "venv_util.h"

namespace mtp::serve::gemma4_chat_test {
namespace {

using nlohmann::json;

const test::ChatReference kRef{"gemma4_chat_expected.json", ChatFormat::Gemma4, "<bos>"};

const json& case_named(const std::string& name) { return kRef.case_named(name); }

TEST(Gemma4Chat, RendersAsTransformersRendersThePublishedTemplate) {
  kRef.expect_transformers_renderings("google-gemma-4-31B-it.jinja", 15);
}

// The same cases rendered now, by python3's jinja2, from the template that
// bench/real-models.sh --install put in the `real` venv (skipped when absent).
TEST(Gemma4Chat, RendersAsThePublishedTemplateRenderedNow) {
  kRef.expect_renderings_now("google-gemma-4-31B-it.jinja", 15);
}

// Gemma 4's checkpoints ship their template as chat_template.jinja; as in
// transformers, it wins over tokenizer_config.json's chat_template.
TEST(Gemma4Chat, ChatTemplateJinjaBesideTheConfigIsTheTemplate) {
  const std::string dir = test::temp_dir("gemma4_chat_jinja");
  std::ofstream(dir + "/tokenizer_config.json")
      << json{{"chat_template", "{% for m in messages %}<|im_start|>{{ m.content }}<|im_end|>"
                                "{% endfor %}"},
              {"bos_token", "<bos>"}}.dump();
  EXPECT_EQ(load_chat_template(dir, "").format, ChatFormat::ChatML);
  std::ofstream(dir + "/chat_template.jinja")
      << "{{ bos_token }}{% for m in messages %}<|turn>{{ m.role }}\n{{ m.content }}<turn|>\n"
         "{% endfor %}";
  const ChatTemplate t = load_chat_template(dir, "");
  EXPECT_EQ(t.format, ChatFormat::Gemma4);
  EXPECT_EQ(t.bos, "<bos>");
}

// The names serve's --chat-format accepts are the formats' own (gemma4 among them).
TEST(Gemma4Chat, FormatNamesRoundTrip) {
  const std::vector<std::string> names = chat_format_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "gemma4"), names.end());
  for (const std::string& n : names) EXPECT_EQ(chat_format_name(parse_chat_format(n)), n);
}

TEST(Gemma4Chat, OtherFormatsRefuseToolsAndThinking) {
  ChatTemplate t;
  t.format = ChatFormat::ChatML;
  for (const json& c : kRef.doc().at("cases")) {
    const ApiRequest r = kRef.request(c);
    const bool gemma4_only = !r.extras.tools.empty() || r.extras.enable_thinking.value_or(false);
    if (gemma4_only) EXPECT_THROW(t.render(r.messages, r.extras), InputError) << c.at("name");
  }
  EXPECT_EQ(parse_request(R"({"messages":[{"role":"user","content":"x"}],"tools":[],
                              "tool_choice":"none"})", Endpoint::Chat).extras.tools.size(), 0u);
  // Arguments whose text nests deeper than a request may: kept as text, rendered as written.
  const std::string deep = std::string(100, '[') + std::string(100, ']');
  const ApiRequest d = parse_request(
      json({{"messages", {{{"role", "user"}, {"content", "x"}},
                          {{"role", "assistant"},
                           {"tool_calls", {{{"id", "a"}, {"type", "function"},
                                            {"function", {{"name", "f"}, {"arguments", deep}}}}}}}}}})
          .dump(),
      Endpoint::Chat);
  ASSERT_EQ(d.messages.at(1).tool_calls.size(), 1u);
  EXPECT_EQ(d.messages[1].tool_calls[0].arguments, deep);
  t.format = ChatFormat::Gemma4;
  EXPECT_NE(t.render(d.messages, d.extras).find("call:f{" + deep + "}"), std::string::npos);
  for (const char* bad :
       {R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"code"}]})",
        R"({"messages":[{"role":"user","content":"x"}],"tool_choice":{"type":"function"}})",
        R"({"messages":[{"role":"assistant","tool_calls":[{"function":{"arguments":"{}"}}]}]})",
        R"({"messages":[{"role":"user","content":"x"}],"chat_template_kwargs":{"enable_thinking":1}})"}) {
    EXPECT_THROW(parse_request(bad, Endpoint::Chat), ApiError) << bad;
  }
}

const std::string kReply =
    "<|channel>thought\nThe user wants Paris.<channel|>Checking.<|tool_call>call:get_weather{"
    "city:<|\"|>Paris, FR<|\"|>,days:3,opts:{metric:true,tags:[<|\"|>a<|\"|>,2.5]}}<tool_call|>";

void expect_reply(const ReplyDelta& r) {
  EXPECT_EQ(r.reasoning, "The user wants Paris.");
  EXPECT_EQ(r.content, "Checking.");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(json::parse(r.calls[0].arguments),
            json({{"city", "Paris, FR"}, {"days", 3},
                  {"opts", {{"metric", true}, {"tags", {"a", 2.5}}}}}));
}

TEST(Gemma4Chat, ReplyParserReadsThoughtsAndCallsWholeOrByteByByte) {
  ReplyParser whole(ChatFormat::Gemma4);
  ReplyDelta r = whole.feed(kReply);
  r.append(whole.finish());
  expect_reply(r);

  ReplyParser bytes(ChatFormat::Gemma4);
  ReplyDelta b;
  for (char ch : kReply) {
    ReplyDelta d = bytes.feed(std::string_view(&ch, 1));
    EXPECT_EQ(d.content.find('<'), std::string::npos) << "a marker leaked: " << d.content;
    b.append(std::move(d));
  }
  b.append(bytes.finish());
  expect_reply(b);

  // Our own notation back: what we render for a call, the parser reads.
  const json args = {{"q", "a<b"}, {"n", -1}, {"list", {true, nullptr}}};
  std::string text = format_value(args, false);
  EXPECT_EQ(parse_arguments(text.substr(1, text.size() - 2)), args);

  // Text that is no call stays content as written; an unfinished thought is reasoning.
  ReplyParser odd(ChatFormat::Gemma4);
  ReplyDelta o = odd.feed("a <b> <|tool_call>call:f{x:}<tool_call|> <|channel>thought\nstill");
  o.append(odd.finish());
  EXPECT_EQ(o.content, "a <b> <|tool_call>call:f{x:}<tool_call|> ");
  EXPECT_EQ(o.reasoning, "still");
  EXPECT_TRUE(o.calls.empty());

  // The channel's name line is optional (the published response schema's
  // `(?:thought\n)?`): a thought without it ends at <channel|>, not at a newline.
  for (size_t piece : {size_t(1), size_t(100)}) {
    const std::string text = "<|channel>Hmm<channel|>Answer\nMore";
    ReplyParser nameless(ChatFormat::Gemma4);
    ReplyDelta n;
    for (size_t at = 0; at < text.size(); at += piece) n.append(nameless.feed(text.substr(at, piece)));
    n.append(nameless.finish());
    EXPECT_EQ(n.reasoning, "Hmm");
    EXPECT_EQ(n.content, "Answer\nMore");
  }

  ReplyParser plain(ChatFormat::ChatML);
  EXPECT_EQ(plain.feed(kReply).content, kReply);  // other formats: all content
}

TEST(Gemma4Chat, ServerReturnsToolCallsAndReasoning) {
  test::ScriptServer s(ChatFormat::Gemma4, kReply);
  test::ScriptEngine& engine = s.engine;
  httplib::Client& c = s.client;
  const std::string body = json({{"messages", {{{"role", "user"}, {"content", "Weather?"}}}},
                                 {"tools", case_named("tools").at("tools")},
                                 {"chat_template_kwargs", {{"enable_thinking", true}}}})
                               .dump();
  auto r = c.Post("/v1/chat/completions", body, "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const std::string prompt = engine.last_prompt();
  EXPECT_NE(prompt.find("<|think|>\n"), std::string::npos) << prompt;
  EXPECT_NE(prompt.find("<|tool>declaration:get_weather{"), std::string::npos) << prompt;
  EXPECT_TRUE(prompt.ends_with("<|turn>model\n")) << prompt;  // thinking on: no empty thought
  json j = json::parse(r->body);
  const json& m = j["choices"][0]["message"];
  EXPECT_EQ(j["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_EQ(m["reasoning_content"], "The user wants Paris.");
  EXPECT_EQ(m["content"], "Checking.");
  ASSERT_EQ(m["tool_calls"].size(), 1u) << m.dump();
  EXPECT_EQ(m["tool_calls"][0]["type"], "function");
  EXPECT_EQ(m["tool_calls"][0]["function"]["name"], "get_weather");
  const json args = json::parse(m["tool_calls"][0]["function"]["arguments"].get<std::string>());
  EXPECT_EQ(args["city"], "Paris, FR");

  // Streamed: the deltas add up to the same message.
  json sb = json::parse(body);
  sb["stream"] = true;
  r = c.Post("/v1/chat/completions", sb.dump(), "application/json");
  ASSERT_TRUE(r);
  const test::StreamedReply st = test::read_stream(r->body);
  EXPECT_EQ(st.content, "Checking.");
  EXPECT_EQ(st.reasoning, "The user wants Paris.");
  ASSERT_EQ(st.calls.size(), 1u);
  EXPECT_EQ(st.calls[0]["index"], 0);
  EXPECT_EQ(json::parse(st.calls[0]["function"]["arguments"].get<std::string>()), args);
  EXPECT_EQ(st.finish, "tool_calls");
}

// A format without tools or thinking answers 400 naming the field.
TEST(Gemma4Chat, ServerOfAnotherFormatNamesToolsAndThinkingIn400) {
  test::ScriptServer s(ChatFormat::ChatML, "hi");
  httplib::Client& c = s.client;
  const json msgs = {{{"role", "user"}, {"content", "Weather?"}}};
  for (const auto& [body, param] :
       {std::pair{json({{"messages", msgs}, {"tools", case_named("tools").at("tools")}}), "tools"},
        std::pair{json({{"messages", msgs},
                        {"chat_template_kwargs", {{"enable_thinking", true}}}}),
                  "enable_thinking"}}) {
    auto r = c.Post("/v1/chat/completions", body.dump(), "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << r->body;
    EXPECT_EQ(json::parse(r->body)["error"]["param"], param) << r->body;
  }
}

}  // namespace
}  // namespace mtp::serve::gemma4_chat_test
