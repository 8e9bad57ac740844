// The family table (model/family.h) drives both parsers: every row's random
// checkpoint loads from its Hugging Face folder and from the GGUF llama.cpp's
// converter would write for it, and the two compute the same bits. A row
// without its own GGUF architecture (Mistral) loads as the family llama.cpp
// writes it as.
#include <gtest/gtest.h>

#include <random>

#include "checkpoint_util.h"
#include "core/error.h"
#include "gguf_util.h"
#include "model/family.h"
#include "model/forward.h"
#include "model/loader.h"
#include "model_util.h"
#include "test_util.h"

namespace mtp::model {
namespace {

// Logits of `tokens` through a fresh cache in chunks of 1, 4 and 7 rows.
std::vector<float> table_logits(const LoadedModel& lm, const std::vector<int32_t>& tokens) {
  Model m(lm);
  KVCache kv = m.make_cache(1, 64);
  return test::run_chunks(m, kv, 0, tokens, {1, 4, 7}, nullptr).logits;
}

TEST(FamilyTable, EveryRowLoadsFromHfAndFromGguf) {
  for (const Family& f : families()) {
    SCOPED_TRACE(f.name);
    test::RandomSpec s = test::RandomSpec::for_arch(f.arch);
    // A row llama.cpp writes as another family loses what that family lacks
    // (Mistral's window): keep the window beyond the tokens to compare bits.
    if (!f.gguf_arch) s.sliding_window = 48;
    // llama.cpp reorders Qwen3.5's value heads when they outnumber the key
    // heads (out_proj's columns too: another summation order); with as many
    // of each the GGUF computes the checkpoint's bits
    // (qwen35_load_test.cc checks the reordered file against the reference).
    if (f.linear_attention) s.lin_v_heads = s.lin_k_heads;
    const std::string dir = test::random_hf_checkpoint("family-row", s);
    const LoadedModel hf = load_model(dir, {});
    EXPECT_EQ(hf.config.arch, f.arch);
    EXPECT_STREQ(arch_name(hf.config.arch), f.name);
    for (const HfName& n : f.hf) {
      if (n.name) EXPECT_EQ(family_by_hf_name(n.name), &f) << n.name;
    }

    const std::string gguf = test::temp_dir("family-row") + "/" + f.name + ".gguf";
    test::convert_hf_to_gguf(dir, gguf, {});
    const LoadedModel gg = load_model(gguf, {});
    const Family* as = family_by_gguf_arch(f.gguf_written_as);
    ASSERT_NE(as, nullptr) << f.gguf_written_as;
    EXPECT_EQ(gg.config.arch, as->arch);
    if (f.gguf_arch) EXPECT_EQ(as, &f);

    std::mt19937 rng(5);
    const auto tokens = test::random_tokens(rng, 24, hf.config.vocab);
    EXPECT_EQ(test::first_bit_difference(table_logits(hf, tokens), table_logits(gg, tokens)), -1);
  }
}

// Each row's chat markers select its chat format, and only the full set does.
TEST(FamilyTable, ChatMarkersSelectTheirFormat) {
  for (const Family& f : families()) {
    for (const ChatMarkers& m : f.chat) {
      std::string jinja = "{% for message in messages %}";
      for (const char* need : m.needs) {
        if (need) jinja += std::string(need) + "{{ message['content'] }}";
      }
      EXPECT_EQ(chat_format_of(jinja), m.format) << f.name;
      EXPECT_EQ(chat_format_of(jinja.substr(0, jinja.find(m.needs[0]))), "") << f.name;
      if (m.absent) EXPECT_NE(chat_format_of(jinja + m.absent), m.format) << f.name;
    }
  }
}

}  // namespace
}  // namespace mtp::model
