// Our chat formatters against an independent Jinja rendering (python3 +
// jinja2, as transformers renders chat templates: sandboxed, trim_blocks,
// lstrip_blocks, raise_exception) of real templates: the tokenizer_config.json
// files in ../shared/tokenizers, and templates published with well-known
// models, written here as strings. Skips when python3 has no jinja2.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_util.h"
#include "core/error.h"
#include "io/gguf.h"
#include "tokenizer/tokenizer.h"
#include "serve/chat_template.h"
#include "test_util.h"

namespace mtp::serve {
namespace {

using nlohmann::json;

const char* kRender = R"PY(
import json, sys
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.exceptions import TemplateError
a = json.load(open(sys.argv[1]))
def raise_exception(m): raise TemplateError(m)
env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
env.filters["tojson"] = lambda x, **k: json.dumps(x)
env.globals["raise_exception"] = raise_exception
t = env.from_string(a["template"])
try:
    out = t.render(messages=a["messages"], bos_token=a["bos"], eos_token=a["eos"],
                   add_generation_prompt=True)
except TemplateError as e:
    print("TEMPLATE_ERROR", e); sys.exit(3)
sys.stdout.write(json.dumps(out))
)PY";

bool have_jinja() {
  static const bool ok = std::system("python3 -c 'import jinja2' >/dev/null 2>&1") == 0;
  return ok;
}

// The Jinja rendering, or nullopt when the template raised.
std::optional<std::string> jinja(const std::string& tmpl, const std::vector<ChatMessage>& msgs,
                                 const std::string& bos, const std::string& eos) {
  const std::string dir = test::temp_dir("chat_template");
  json in = {{"template", tmpl}, {"bos", bos}, {"eos", eos}, {"messages", json::array()}};
  for (const auto& m : msgs) in["messages"].push_back({{"role", m.role}, {"content", m.content}});
  std::ofstream(dir + "/in.json") << in.dump();
  std::ofstream(dir + "/render.py") << kRender;
  test::CliResult r = test::run_cli_binary("python3", test::shell_quote(dir + "/render.py") + " " +
                                                          test::shell_quote(dir + "/in.json"));
  if (r.status == 3) return std::nullopt;
  EXPECT_EQ(r.status, 0) << r.err;
  return json::parse(r.out).get<std::string>();
}

std::vector<std::vector<ChatMessage>> conversations() {
  return {
      {{"user", "Hello"}},
      {{"system", "You are terse."}, {"user", "Hi there"}, {"assistant", "Hello! How can I help?"},
       {"user", "  Tell me a story.\n"}},
      {{"user", "One"}, {"assistant", " Two "}, {"user", "Three"}},
      {{"system", "Be kind."}, {"user", "Why?"}},
      {{"user", "Think"}, {"assistant", "<think>\nhmm\n</think>\n\nDone."}, {"user", "Again"}},
      // Broken alternation: Gemma's, Llama 2's and Mistral's templates raise.
      {{"user", "a"}, {"user", "b"}},
  };
}

// Checks every conversation: equal text, or both refuse it.
void check_template(const std::string& name, const std::string& tmpl, const std::string& bos,
                    const std::string& eos, ChatFormat expect) {
  ChatTemplate t = recognise_template(tmpl, name);
  EXPECT_EQ(t.format, expect) << name;
  t.bos = bos;
  t.eos = eos;
  int compared = 0;
  for (const auto& msgs : conversations()) {
    std::optional<std::string> ref = jinja(tmpl, msgs, bos, eos);
    if (!ref) {
      EXPECT_THROW(t.render(msgs), InputError) << name << ": Jinja refused, we rendered";
      continue;
    }
    std::string ours;
    try {
      ours = t.render(msgs);
    } catch (const InputError& e) {
      // Only Mistral's system role: the template refuses it, we merge it.
      ADD_FAILURE() << name << ": we refused what Jinja rendered: " << e.what();
      continue;
    }
    EXPECT_EQ(ours, *ref) << name << ", conversation " << compared;
    ++compared;
  }
  EXPECT_GE(compared, 3) << name;
}

std::string shared_template(const std::string& file, std::string& bos, std::string& eos) {
  std::ifstream f(file);
  json cfg = json::parse(f);
  auto tok = [&](const char* k) {
    const json& v = cfg[k];
    return v.is_string() ? v.get<std::string>() : v.is_object() ? v["content"].get<std::string>()
                                                                : std::string();
  };
  bos = cfg.contains("bos_token") ? tok("bos_token") : "";
  eos = cfg.contains("eos_token") ? tok("eos_token") : "";
  return cfg["chat_template"].get<std::string>();
}

TEST(ChatTemplate, SharedTemplatesMatchJinja) {
  if (!have_jinja()) GTEST_SKIP() << "python3 with jinja2 not found (apt install python3-jinja2)";
  const std::pair<const char*, ChatFormat> files[] = {{"llama3", ChatFormat::Llama3},
                                                      {"qwen3", ChatFormat::ChatML},
                                                      {"gemma3", ChatFormat::Gemma}};
  int n = 0;
  for (const auto& [name, fmt] : files) {
    std::string path = test::shared_path(std::string("tokenizers/") + name + ".tokenizer_config.json");
    if (path.empty()) continue;
    std::string bos, eos;
    std::string tmpl = shared_template(path, bos, eos);
    check_template(name, tmpl, bos, eos, fmt);
    ++n;
  }
  if (n == 0) GTEST_SKIP() << "no tokenizer_config.json with a chat_template in ../shared/tokenizers";
}

// Templates as published with the models (tools branches left out).
const char* kQwen25 =
    "{%- if messages[0]['role'] == 'system' %}\n"
    "    {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}\n"
    "{%- else %}\n"
    "    {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
    "assistant.<|im_end|>\\n' }}\n"
    "{%- endif %}\n"
    "{%- for message in messages %}\n"
    "    {%- if (message.role == \"user\") or (message.role == \"system\" and not loop.first) or "
    "(message.role == \"assistant\" and not message.tool_calls) %}\n"
    "        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}\n"
    "    {%- endif %}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n"
    "    {{- '<|im_start|>assistant\\n' }}\n"
    "{%- endif %}\n";
const char* kChatML =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] "
    "+ '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' "
    "}}{% endif %}";
const char* kLlama2 =
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set "
    "system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set "
    "system_message = false %}{% endif %}{% for message in loop_messages %}{% if (message['role'] "
    "== 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate "
    "user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and system_message != "
    "false %}{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + "
    "message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if "
    "message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif "
    "message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% "
    "endfor %}";
const char* kMistral =
    "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 "
    "% 2 == 0) %}{{ raise_exception('Conversation roles must alternate "
    "user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' "
    "+ message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ "
    "message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant roles "
    "are supported!') }}{% endif %}{% endfor %}";

TEST(ChatTemplate, PublishedTemplatesMatchJinja) {
  if (!have_jinja()) GTEST_SKIP() << "python3 with jinja2 not found (apt install python3-jinja2)";
  check_template("qwen2.5", kQwen25, "", "<|im_end|>", ChatFormat::ChatML);
  check_template("chatml", kChatML, "", "<|im_end|>", ChatFormat::ChatML);
  check_template("llama2-chat", kLlama2, "<s>", "</s>", ChatFormat::Llama2);
}

TEST(ChatTemplate, MistralMatchesJinjaWithoutSystem) {
  if (!have_jinja()) GTEST_SKIP() << "python3 with jinja2 not found (apt install python3-jinja2)";
  ChatTemplate t = recognise_template(kMistral, "mistral");
  ASSERT_EQ(t.format, ChatFormat::Mistral);
  t.bos = "<s>";
  t.eos = "</s>";
  for (const auto& msgs : conversations()) {
    if (msgs[0].role == "system") {  // the template refuses; we merge it into the first turn
      EXPECT_FALSE(jinja(kMistral, msgs, "<s>", "</s>"));
      EXPECT_EQ(t.render(msgs).rfind("<s>[INST] " + msgs[0].content + "\n\n", 0), 0u);
      continue;
    }
    auto ref = jinja(kMistral, msgs, "<s>", "</s>");
    if (!ref) {
      EXPECT_THROW(t.render(msgs), InputError);
    } else {
      EXPECT_EQ(t.render(msgs), *ref);
    }
  }
}

TEST(ChatTemplate, DefaultSystemPromptOnlyWhenTheTemplateHasOne) {
  EXPECT_EQ(recognise_template(kQwen25, "q").default_system,
            "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.");
  EXPECT_EQ(recognise_template(kChatML, "c").default_system, "");
}

TEST(ChatTemplate, UnknownTemplateIsAStartupErrorUnlessOverridden) {
  const std::string dir = test::temp_dir("chat_template_unknown");
  std::ofstream(dir + "/tokenizer_config.json")
      << json{{"chat_template", "{% for m in messages %}### {{ m.content }}{% endfor %}"},
              {"bos_token", "<s>"}}.dump();
  test::expect_error<ConfigError>([&] { load_chat_template(dir, ""); },
                     {"tokenizer_config.json", "chat_template", "--chat-format"});
  ChatTemplate t = load_chat_template(dir, "llama2");
  EXPECT_EQ(t.format, ChatFormat::Llama2);
  EXPECT_EQ(t.bos, "<s>");
  EXPECT_THROW(load_chat_template(dir, "jinja"), InputError);
  // No tokenizer_config.json at all: plain.
  EXPECT_EQ(load_chat_template(test::temp_dir("chat_template_none"), "").format, ChatFormat::Plain);
}

// A GGUF model's own template (tokenizer.chat_template) and special tokens.
TEST(ChatTemplate, GgufTemplateIsReadFromTheFile) {
  const std::string dir = test::temp_dir("chat_template_gguf");
  auto write = [&](const std::string& name, const std::string& jinja) {
    io::GgufMetadata kv = {
        {"tokenizer.ggml.tokens", io::GgufValue::strings({"<unk>", "<|endoftext|>", "<|im_end|>", "a"})},
        {"tokenizer.ggml.bos_token_id", io::GgufValue::u32(1)},
        {"tokenizer.ggml.eos_token_id", io::GgufValue::u32(2)}};
    if (!jinja.empty()) kv.push_back({"tokenizer.chat_template", io::GgufValue::str(jinja)});
    io::write_gguf(dir + "/" + name, kv, {});
    return dir + "/" + name;
  };
  const ChatTemplate t = load_gguf_chat_template(write("chatml.gguf", kChatML), "");
  EXPECT_EQ(t.format, ChatFormat::ChatML);
  EXPECT_EQ(t.bos, "<|endoftext|>");
  EXPECT_EQ(t.eos, "<|im_end|>");
  EXPECT_EQ(load_gguf_chat_template(write("none.gguf", ""), "").format, ChatFormat::Plain);
  const std::string odd = write("odd.gguf", "{% for m in messages %}### {{ m.content }}{% endfor %}");
  test::expect_error<ConfigError>([&] { load_gguf_chat_template(odd, ""); },
                                  {"odd.gguf", "tokenizer.chat_template", "--chat-format"});
  EXPECT_EQ(load_gguf_chat_template(odd, "llama2").format, ChatFormat::Llama2);
}

TEST(ChatTemplate, OneBosWhenTheTemplateAndTheTokenizerBothAddIt) {
  MTP_REQUIRE_SHARED(path, "tokenizers/llama3.tokenizer.json");
  // A model folder: the shared tokenizer.json and a config that asks for BOS.
  const std::string dir = test::temp_dir("chat_template_bos");
  std::filesystem::remove(dir + "/tokenizer.json");
  std::filesystem::create_symlink(path, dir + "/tokenizer.json");
  std::ofstream(dir + "/tokenizer_config.json")
      << json{{"add_bos_token", true}, {"bos_token", "<|begin_of_text|>"}}.dump();
  std::unique_ptr<io::Tokenizer> tok = io::load_tokenizer(dir + "/tokenizer.json");
  ASSERT_TRUE(tok->adds_bos());
  ChatTemplate t;
  t.format = ChatFormat::Llama3;
  t.bos = "<|begin_of_text|>";
  std::vector<int32_t> ids = encode_chat(*tok, t.render({{"user", "Hi"}}));
  ASSERT_GE(ids.size(), 2u);
  EXPECT_EQ(ids[0], tok->bos_id());
  EXPECT_NE(ids[1], tok->bos_id());
  // Without the BOS text (plain), the tokenizer's BOS is added once.
  t.format = ChatFormat::Plain;
  ids = encode_chat(*tok, t.render({{"user", "Hi"}}));
  EXPECT_EQ(ids[0], tok->bos_id());
  EXPECT_NE(ids[1], tok->bos_id());
}

}  // namespace
}  // namespace mtp::serve
