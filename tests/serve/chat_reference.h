// A chat format's reference renderings for the serve tests: the cases of
// tests/serve/<name>_chat_expected.json with transformers' rendering of the
// published template (chat_expected.py writes "expected" and names the
// renderer and the template's sha256 under "reference"), our rendering of a
// case through the API's parsing as serve does it, and the same cases
// rendered now by python3's jinja2 from the template bench/real-models.sh
// --install put in the `real` venv.
#pragma once
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "serve/api.h"
#include "serve/chat_template.h"
#include "test_util.h"
#include "venv_util.h"

namespace mtp::test {

struct ChatReference {
  std::string cases_file;  // in tests/serve/
  serve::ChatFormat format;
  std::string bos;         // our template's BOS text

  const nlohmann::json& doc() const {
    static std::map<std::string, nlohmann::json> docs;
    auto it = docs.find(cases_file);
    if (it == docs.end()) {
      std::ifstream f(std::string(MTPSPEC_SOURCE_DIR) + "/tests/serve/" + cases_file);
      it = docs.emplace(cases_file, nlohmann::json::parse(f)).first;
    }
    return it->second;
  }

  const nlohmann::json& case_named(const std::string& name) const {
    for (const nlohmann::json& c : doc().at("cases")) {
      if (c.at("name") == name) return c;
    }
    ADD_FAILURE() << "no case '" << name << "'";
    return doc().at("cases").at(0);
  }

  // A case as the API reads its request, sent with the file's key order (a
  // client's); its thinking true/false is sent as enable_thinking, null not
  // at all.
  serve::ApiRequest request(const nlohmann::json& c) const {
    static std::map<std::string, nlohmann::ordered_json> ordered;
    auto it = ordered.find(cases_file);
    if (it == ordered.end()) {
      std::ifstream f(std::string(MTPSPEC_SOURCE_DIR) + "/tests/serve/" + cases_file);
      it = ordered.emplace(cases_file, nlohmann::ordered_json::parse(f)).first;
    }
    for (const nlohmann::ordered_json& o : it->second.at("cases")) {
      if (o.at("name") != c.at("name").get<std::string>()) continue;
      nlohmann::ordered_json b = {{"messages", o.at("messages")}};
      if (!o.at("tools").empty()) b["tools"] = o.at("tools");
      if (!o.at("thinking").is_null()) b["chat_template_kwargs"] = {{"enable_thinking", o["thinking"]}};
      return serve::parse_request(b.dump(), serve::Endpoint::Chat);
    }
    ADD_FAILURE() << "no case '" << c.at("name") << "' in " << cases_file;
    return {};
  }

  std::string ours(const nlohmann::json& c) const {
    const serve::ApiRequest r = request(c);
    serve::ChatTemplate t;
    t.format = format;
    t.bos = bos;
    return t.render(r.messages, r.extras);
  }

  void expect_renders(const nlohmann::json& rendered, size_t min_cases) const {
    size_t n = 0;
    for (const nlohmann::json& c : rendered.at("cases")) {
      EXPECT_EQ(ours(c), c.at("expected").get<std::string>()) << c.at("name");
      ++n;
    }
    EXPECT_GE(n, min_cases);
  }

  // The checked-in renderings: transformers' of `template_file`.
  void expect_transformers_renderings(const std::string& template_file, size_t min_cases) const {
    const nlohmann::json& ref = doc().at("reference");
    EXPECT_EQ(ref.at("template"), template_file);
    EXPECT_TRUE(ref.at("renderer").get<std::string>().starts_with("transformers ")) << ref;
    expect_renders(doc(), min_cases);
  }

  // The cases rendered now from the `real` venv's `template_file` (skipped
  // without python3's jinja2 or the file); the template is recognised as ours.
  void expect_renderings_now(const std::string& template_file, size_t min_cases) const {
    if (std::system("python3 -c 'import jinja2' >/dev/null 2>&1") != 0) {
      GTEST_SKIP() << "python3 with jinja2 not found (apt install python3-jinja2)";
    }
    const std::string path = real_model_path(template_file);
    if (path.empty()) {
      GTEST_SKIP() << "the published template " << template_file << " is not in "
                   << venv_dir("real") << "/models (bench/real-models.sh --install puts it there)";
    }
    std::ifstream f(path);
    const std::string tmpl((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    EXPECT_EQ(serve::recognise_template(tmpl, path).format, format);
    const std::string out = temp_dir("chat_reference") + "/rendered.json";
    const std::string src = std::string(MTPSPEC_SOURCE_DIR) + "/tests/serve/";
    std::string log;
    ASSERT_EQ(run_python("python3",
                         shell_quote(src + "chat_expected.py") + " " + shell_quote(path) + " " +
                             shell_quote(src + cases_file) + " --out " + shell_quote(out),
                         &log),
              0)
        << log;
    std::ifstream rendered(out);
    expect_renders(nlohmann::json::parse(rendered), min_cases);
  }
};

}  // namespace mtp::test
