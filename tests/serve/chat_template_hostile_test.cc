// Chat templates from hostile files (issue 60): a ChatML template with a long
// literal default system prompt crashed `serve` at start-up (std::regex
// recursed per character); recognised now by one linear scan, from
// tokenizer_config.json and from a GGUF's tokenizer.chat_template alike.
// A deeply nested tokenizer_config.json is a FormatError naming it.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/gguf.h"
#include "serve/chat_template.h"
#include "test_util.h"

namespace mtp::serve {
namespace {

using Clock = std::chrono::steady_clock;

// A Qwen-style ChatML template whose default system turn is `system`.
std::string chatml_with_default(const std::string& system) {
  return "{%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\\n' + "
         "messages[0]['content'] + '<|im_end|>\\n' }}{%- else %}{{- '<|im_start|>system\\n" +
         system + "<|im_end|>\\n' }}{%- endif %}{%- for message in messages %}{{- "
         "'<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}"
         "{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";
}

TEST(HostileChatTemplates, LongDefaultSystemPromptsFromEitherSource) {
  const std::string system(200000, 'x');  // 200 KB: std::regex overflowed the stack at ~50 KB
  const std::string dir = test::temp_dir("hostile-chat");
  std::ofstream(dir + "/tokenizer_config.json")
      << nlohmann::json{{"chat_template", chatml_with_default(system)}}.dump();
  auto t0 = Clock::now();
  const ChatTemplate a = load_chat_template(dir, "");
  EXPECT_EQ(a.format, ChatFormat::ChatML);
  EXPECT_EQ(a.default_system, system);
  io::GgufMetadata kv = {{"general.architecture", io::GgufValue::str("llama")},
                         {"tokenizer.chat_template",
                          io::GgufValue::str(chatml_with_default(system))}};
  io::write_gguf(dir + "/m.gguf", kv, {});
  const ChatTemplate b = load_gguf_chat_template(dir + "/m.gguf", "");
  EXPECT_EQ(b.format, ChatFormat::ChatML);
  EXPECT_EQ(b.default_system, system);
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(5));
  // Many unterminated candidates (each quote starts one) stay linear.
  std::string noisy = "<|im_start|><|im_end|>";
  for (int i = 0; i < 20000; ++i) noisy += "'<|im_start|>system\\nabc'";
  t0 = Clock::now();
  EXPECT_EQ(recognise_template(noisy, "t").default_system, "");
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(2));
}

TEST(HostileChatTemplates, DeepTokenizerConfigIsRefusedNamingIt) {
  const std::string dir = test::temp_dir("hostile-chat-deep");
  std::ofstream(dir + "/tokenizer_config.json")
      << "{\"chat_template\": " << std::string(300000, '[') << "\n";
  test::expect_error<FormatError>([&] { load_chat_template(dir, ""); },
                                  {"tokenizer_config.json", "deeper than", "chat_template"});
}

}  // namespace
}  // namespace mtp::serve
