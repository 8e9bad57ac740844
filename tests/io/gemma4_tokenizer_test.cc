// Gemma 4's tokenizer from a GGUF file (tokenizer.ggml.model "gemma4",
// io/tokenizer_gguf.h): llama.cpp's vocab-only GGUF for it and its reference
// vectors (made with Hugging Face's tokenizer of the published checkpoint),
// which bench/real-models.sh --install puts in the `real` venv's models/
// (skipped when absent): the 262,144-token vocabulary, every vector's ids,
// the chat markers as single tokens, the ends of a turn as end-of-generation
// tokens, decoding back to the text.
#include <gtest/gtest.h>

#include "io/tokenizer_fixture.h"
#include "tokenizer/tokenizer.h"
#include "venv_util.h"

namespace mtp::test {
namespace {

TEST(Gemma4Tokenizer, GgufVocabularyMatchesReferenceVectors) {
  MTP_REQUIRE_VOCAB_FILES(path, inp, out, "ggml-vocab-gemma-4.gguf");
  const auto tok = io::load_tokenizer(path);
  EXPECT_EQ(tok->kind(), "gguf-gemma4");
  EXPECT_EQ(tok->vocab_size(), 262144);
  EXPECT_EQ(tok->bos_id(), 2);
  EXPECT_TRUE(tok->adds_bos());
  const std::vector<int32_t> eos = tok->eos_ids();
  for (int32_t id : {1, 50, 106}) {  // <eos>, <|tool_response>, <turn|>
    EXPECT_NE(std::find(eos.begin(), eos.end(), id), eos.end()) << id;
  }
  const Vectors v = read_vectors(inp, out);
  ASSERT_GT(v.inputs.size(), 30u);
  for (size_t i = 0; i < v.inputs.size(); ++i) {
    EXPECT_EQ(tok->encode(v.inputs[i], /*add_special=*/false), v.ids[i]) << "vector #" << i;
    EXPECT_EQ(tok->decode(tok->encode(v.inputs[i], false)), v.inputs[i]) << "vector #" << i;
  }
  const std::string chat = "<|turn>user\nHi<turn|>\n<|turn>model\n<|tool_call>call:f{a:<|\"|>x<|\"|>}";
  const std::vector<int32_t> ids = tok->encode(chat, /*add_special=*/true);
  ASSERT_GE(ids.size(), 4u);
  EXPECT_EQ(ids[0], 2);    // <bos>
  EXPECT_EQ(ids[1], 105);  // <|turn>
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 106), 1);  // <turn|>
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 48), 1);   // <|tool_call>
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 52), 2);   // <|"|>
  EXPECT_EQ(tok->decode(std::vector<int32_t>(ids.begin() + 1, ids.end())), chat);
}

}  // namespace
}  // namespace mtp::test
