// parse_json / json_get: the one JSON reader (core/json.h). Deep documents are
// refused while parsing, naming the field; type errors name the file, field
// and value; nothing a document holds is dumped whole into a message.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "core/error.h"
#include "core/json.h"
#include "test_util.h"

namespace mtp {
namespace {

using nlohmann::json;

std::string nested(const std::string& open, const std::string& close, size_t depth,
                   const std::string& inner = "1") {
  std::string s;
  s.reserve(depth * (open.size() + close.size()) + inner.size());
  for (size_t i = 0; i < depth; ++i) s += open;
  s += inner;
  for (size_t i = 0; i < depth; ++i) s += close;
  return s;
}

TEST(ParseJson, ReadsOrdinaryDocuments) {
  const json j = parse_json(R"({"a": [1, {"b": "x"}], "c": null})", "doc");
  EXPECT_EQ(j["a"][1]["b"], "x");
  EXPECT_TRUE(j["c"].is_null());
  // Exactly the limit is fine: kMaxJsonDepth nested containers.
  EXPECT_NO_THROW(parse_json(nested("[", "]", kMaxJsonDepth), "doc"));
}

TEST(ParseJson, DeepNestingIsRefusedQuicklyNamingTheField) {
  // The issue's request: messages[0].content as 400,000 nested arrays (800 KB).
  const std::string body = R"({"messages": [{"role": "user", "content": )" +
                           nested("[", "]", 400000) + "}]}";
  const auto t0 = std::chrono::steady_clock::now();
  test::expect_error<FormatError>([&] { parse_json(body, "the request body"); },
                                  {"the request body", "deeper than 64", "messages[].content[]"});
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  // Another member of the class: objects in objects (a config.json field).
  test::expect_error<FormatError>(
      [&] { parse_json(R"({"rope_scaling": )" + nested(R"({"x": )", "}", 100000) + "}",
                       "'config.json'"); },
      {"'config.json'", "rope_scaling.x.x"});
  // One past the limit.
  EXPECT_THROW(parse_json(nested("[", "]", kMaxJsonDepth + 1), "doc"), FormatError);
}

TEST(ParseJson, SyntaxErrorsAreClipped) {
  const std::string huge = "{\"a\": \"" + std::string(4 << 20, 'x') + "\\q\"}";
  try {
    parse_json(huge, "'big.json'");
    FAIL() << "no error";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("'big.json'"), std::string::npos) << e.what();
    EXPECT_LT(std::string(e.what()).size(), 600u);
  }
}

TEST(ParseJson, KeyCheckSeesTopLevelKeys) {
  int seen = 0;
  parse_json(R"({"a": {"b": 1}, "c": 2})", "doc", [&](int depth, const std::string&) {
    seen += depth == 1;
  });
  EXPECT_EQ(seen, 2);
}

TEST(ParseJson, OrderedKeepsTheDocumentsKeyOrderUnderTheSameLimits) {
  const auto o = parse_json_ordered(R"({"z": 1, "a": {"y": 2, "b": 3}})", "w");
  EXPECT_EQ(o.dump(), R"({"z":1,"a":{"y":2,"b":3}})");
  EXPECT_EQ(parse_json(R"({"z": 1, "a": 2})", "w").dump(), R"({"a":2,"z":1})");
  const std::string deep = std::string(100, '[') + std::string(100, ']');
  EXPECT_THROW(parse_json_ordered(deep, "w"), FormatError);
  EXPECT_THROW(parse_json_ordered("{", "w"), FormatError);
}

TEST(JsonGet, TypeErrorsNameFileFieldAndValue) {
  const json j = parse_json(R"({"d_model": "64", "shards": 5, "step": "x", "big": -3,
                                "name": "n", "text": ")" + std::string(5000, 'y') + "\"}",
                            "'m.json'");
  test::expect_error<FormatError>([&] { json_get<int>(j, "d_model", "'m.json'"); },
                                  {"'m.json'", "d_model", "a string", "\"64\""});
  test::expect_error<FormatError>(
      [&] { json_get<json::array_t>(j, "shards", "'m.json'"); },
      {"'m.json'", "shards", "an array", "5"});
  test::expect_error<FormatError>([&] { json_get<uint32_t>(j, "big", "'m.json'"); },
                                  {"big", "-3"});
  test::expect_error<FormatError>([&] { json_get<int>(j, "missing", "'m.json'"); },
                                  {"missing", "is missing"});
  try {
    json_get<int>(j, "text", "'m.json'");
    FAIL() << "no error";
  } catch (const FormatError& e) {
    EXPECT_LT(std::string(e.what()).size(), 300u) << "the value is clipped";
  }
  EXPECT_EQ(json_get<std::string>(j, "name", "w"), "n");
  EXPECT_EQ(json_value<int>(j, "absent", 7, "w"), 7);
  EXPECT_FALSE(json_find<std::string>(j, "absent", "w").has_value());
}

}  // namespace
}  // namespace mtp
