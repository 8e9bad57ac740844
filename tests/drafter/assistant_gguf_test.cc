// Gemma 4's assistant as llama.cpp's gemma4-assistant GGUF
// (Gemma4Assistant::load_gguf): a random gemma4_assistant folder converted
// the way llama.cpp's converter does it (gguf_util.h) drafts exactly as the
// folder does — every score of every step of the teacher-forced replay, bit
// for bit from F32 — a block-quantized file loads and drafts, and a file that
// does not fit the target, or is malformed, is refused naming the key or
// tensor and both values.
#include <gtest/gtest.h>

#include <random>

#include "assistant_util.h"
#include "core/error.h"
#include "core/ggml_type.h"
#include "drafter/assistant_gguf.h"
#include "drafter/assistant_runner.h"
#include "drafter/gemma4_assistant.h"
#include "gguf_util.h"
#include "model/forward.h"
#include "model/loader.h"
#include "model_util.h"
#include "test_util.h"

namespace mtp::drafter {
namespace {

using test::AssistantSpec;
using test::RandomSpec;

std::string to_gguf(const std::string& adir, const test::GgufConvert& opt = {}) {
  const std::string out = test::temp_dir("g4a-gguf") + "/assistant.gguf";
  test::convert_assistant_to_gguf(adir, out, opt);
  return out;
}

// The message of the error E that loading `path` throws, "" when it loads.
template <class E>
std::string refusal(const std::string& path, const model::ModelConfig& target) {
  try {
    Gemma4Assistant::load(path, target);
  } catch (const E& e) {
    return e.what();
  }
  return "";
}

TEST(Gemma4AssistantGguf, DraftsEqualTheHfFolder) {
  const RandomSpec t = test::assistant_target_spec();
  const model::Model m(model::load_model(test::random_hf_checkpoint("g4a-gguf-t", t), {}));
  for (bool ordered : {false, true}) {
    SCOPED_TRACE(ordered ? "centroid folder" : "full-head folder");
    AssistantSpec a;
    a.ordered = ordered;  // the GGUF drops the centroid head: compared to the full head
    a.centroids = 8;
    a.top_k = 3;
    const std::string adir = test::random_assistant("g4a-gguf-a", t, a);
    const std::string gguf = to_gguf(adir);
    EXPECT_TRUE(is_assistant_gguf(gguf));
    EXPECT_TRUE(is_assistant(gguf));
    EXPECT_FALSE(is_assistant_gguf(adir));
    const Gemma4Assistant hf = Gemma4Assistant::load(test::random_assistant("g4a-gguf-f", t, {}),
                                                     m.config());
    // Our own writer (write_assistant_gguf) beside the converter's twin.
    const std::string ours = test::temp_dir("g4a-gguf-w") + "/assistant.gguf";
    write_assistant_gguf(adir, ours);
    for (const std::string& file : {gguf, ours}) {
      SCOPED_TRACE(file);
      const Gemma4Assistant gg = Gemma4Assistant::load(file, m.config());
      EXPECT_FALSE(gg.config().ordered);
      EXPECT_EQ(gg.config().kv_layer(true), hf.config().kv_layer(true));
      EXPECT_EQ(gg.config().kv_layer(false), hf.config().kv_layer(false));
      EXPECT_EQ(gg.config().block.rope_partial, hf.config().block.rope_partial);
      EXPECT_EQ(gg.parameters(), hf.parameters());
      EXPECT_TRUE(gg.weights().head.is_view());  // an fp32 token_embd, read in place
      EXPECT_FALSE(Gemma4Assistant::load(file, m.config(), {}, nullptr, model::TiedHead::Packed)
                       .weights().head.is_view());  // --tied-head packed reaches the GGUF too
      std::mt19937 rng(7);
      const std::vector<int32_t> toks = test::random_tokens(rng, 14, t.vocab);
      const auto want = assistant_teacher_forced(m, hf, toks, 2, 3, nullptr, true);
      const auto got = assistant_teacher_forced(m, gg, toks, 2, 3, nullptr, true);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < want.size(); ++i) {
        for (size_t j = 0; j < want[i].size(); ++j) {
          EXPECT_EQ(got[i][j].token, want[i][j].token) << i << " " << j;
          EXPECT_EQ(got[i][j].logits, want[i][j].logits) << i << " " << j;
        }
      }
    }
  }
}

// A bf16 folder written by write_assistant_gguf keeps its matrices' bits.
TEST(Gemma4AssistantGguf, WrittenBf16DraftsEqualTheFolder) {
  const RandomSpec t = test::assistant_target_spec();
  const model::Model m(model::load_model(test::random_hf_checkpoint("g4a-gguf-t", t), {}));
  AssistantSpec a;
  a.dtype = DType::BF16;
  const std::string adir = test::random_assistant("g4a-gguf-b", t, a);
  const std::string out = test::temp_dir("g4a-gguf-wb") + "/assistant.gguf";
  write_assistant_gguf(adir, out);
  const Gemma4Assistant hf = Gemma4Assistant::load(adir, m.config());
  const Gemma4Assistant gg = Gemma4Assistant::load(out, m.config());
  std::mt19937 rng(8);
  const std::vector<int32_t> toks = test::random_tokens(rng, 10, t.vocab);
  const auto want = assistant_teacher_forced(m, hf, toks, 2, 2, nullptr, true);
  const auto got = assistant_teacher_forced(m, gg, toks, 2, 2, nullptr, true);
  for (size_t i = 0; i < want.size(); ++i) {
    for (size_t j = 0; j < want[i].size(); ++j) EXPECT_EQ(got[i][j].logits, want[i][j].logits);
  }
  AssistantSpec u;
  u.tie = false;
  EXPECT_THROW(write_assistant_gguf(test::random_assistant("g4a-gguf-u", t, u), out), ConfigError);
}

TEST(Gemma4AssistantGguf, QuantizedFileDrafts) {
  const RandomSpec t = test::assistant_target_spec();
  const model::Model m(model::load_model(test::random_hf_checkpoint("g4a-gguf-t", t), {}));
  test::GgufConvert q;
  q.matrix_type = uint32_t(GgmlType::Q8_0);
  q.type_of = [](const std::string& n) {  // ffn_down's rows (48) are no whole Q8_0 blocks
    return n.find("ffn_down") != std::string::npos ? 0 : -1;
  };
  const Gemma4Assistant g =
      Gemma4Assistant::load(to_gguf(test::random_assistant("g4a-gguf-q", t, {}), q), m.config());
  // A block-type token_embd: the packed copy (the fast kernels' layout).
  EXPECT_EQ(g.weights().head.hold(), kernels::WeightType::Q8_0);
  EXPECT_FALSE(g.weights().head.is_view());
  std::mt19937 rng(3);
  const auto d = assistant_teacher_forced(m, g, test::random_tokens(rng, 8, t.vocab), 2, 2, nullptr);
  ASSERT_EQ(d.size(), 7u);
  for (const auto& chain : d) {
    for (const AssistantDraft& x : chain) EXPECT_TRUE(x.token >= 0 && x.token < t.vocab);
  }
}

TEST(Gemma4AssistantGguf, RefusesWhatDoesNotFit) {
  const RandomSpec t = test::assistant_target_spec();
  const model::Model m(model::load_model(test::random_hf_checkpoint("g4a-gguf-t", t), {}));
  const std::string adir = test::random_assistant("g4a-gguf-bad", t, {});
  auto edited = [&](std::function<void(io::GgufMetadata&, std::vector<io::GgufWriteTensor>&)> e) {
    test::GgufConvert o;
    o.edit = std::move(e);
    return to_gguf(adir, o);
  };
  auto set_u32 = [](io::GgufMetadata& kv, const std::string& k, uint32_t v) {
    for (auto& [key, val] : kv) {
      if (key == k) val = io::GgufValue::u32(v);
    }
  };
  std::string msg = refusal<ConfigError>(
      edited([&](auto& kv, auto&) { set_u32(kv, "gemma4-assistant.embedding_length_out", 48); }),
      m.config());
  EXPECT_NE(msg.find("'gemma4-assistant.embedding_length_out' (the backbone hidden size) is 48"),
            std::string::npos) << msg;
  EXPECT_NE(msg.find("hidden size is 64"), std::string::npos) << msg;
  // Another target's vocabulary.
  const model::Model small(
      model::load_model(test::random_hf_checkpoint("g4a-gguf-t2", test::assistant_target_spec(320)), {}));
  msg = refusal<ConfigError>(to_gguf(adir), small.config());
  EXPECT_NE(msg.find("token_embd.weight has 384 rows"), std::string::npos) << msg;
  EXPECT_NE(msg.find("vocabulary is 320"), std::string::npos) << msg;
  // Layer kinds: a sliding head width the target's sliding layers lack.
  msg = refusal<ConfigError>(
      edited([&](auto& kv, auto&) { set_u32(kv, "gemma4-assistant.attention.key_length_swa", 8); }),
      m.config());
  EXPECT_NE(msg.find("'head_dim' is 8"), std::string::npos) << msg;
  EXPECT_NE(msg.find("head width 16"), std::string::npos) << msg;
  // A tensor nothing reads; a missing one.
  msg = refusal<FormatError>(edited([](auto&, auto& ts) {
                               ts.push_back({"output.weight", {32, 384}, 0, std::string(32 * 384 * 4, '\0')});
                             }),
                             m.config());
  EXPECT_NE(msg.find("tensor output.weight"), std::string::npos) << msg;
  msg = refusal<FormatError>(edited([](auto&, auto& ts) {
                               std::erase_if(ts, [](auto& x) { return x.name == "nextn.post_projection.weight"; });
                             }),
                             m.config());
  EXPECT_NE(msg.find("nextn.post_projection.weight not found"), std::string::npos) << msg;
}

}  // namespace
}  // namespace mtp::drafter
