// precompute: the shards hold exactly what the engine computes (invariant 2),
// resume skips finished shards without changing a byte, self-distillation at
// temperature 0 reproduces greedy generation with the prompt masked out.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <span>

#include "core/error.h"
#include "core/mapped_file.h"
#include "drafter/shards.h"
#include "io/prompts.h"
#include "tokenizer/tokenizer.h"
#include "model/loader.h"
#include "speculative/scheduler/generate.h"
#include "measure/precompute.h"
#include "speculative/cycle/target_session.h"
#include "test_util.h"

namespace fs = std::filesystem;

namespace mtp::speculative {
namespace {

struct Stories {
  std::unique_ptr<model::Model> model;
  std::unique_ptr<io::Tokenizer> tok;
};

Stories load_stories(const std::string& dir) {
  Stories s;
  s.model = std::make_unique<model::Model>(model::load_model(dir + "/stories260K.bin", {}));
  s.tok = io::load_tokenizer(dir + "/tok512.bin");
  return s;
}

std::string write_corpus(const std::string& dir) {
  std::string p = dir + "/corpus.txt";
  std::ofstream f(p);
  for (int i = 0; i < 24; ++i) {
    f << "Once upon a time there was a cat number " << i << ". It liked to play in the sun.\n";
    if (i % 3 == 0) f << "The dog was happy and ran to the park with the ball " << i << " times.\n";
    f << "\n";
  }
  return p;
}

PrecomputeOptions options(const std::string& corpus, const std::string& out) {
  PrecomputeOptions o;
  o.corpus = {corpus};
  o.out_dir = out;
  o.seq_len = 32;
  o.shard_tokens = 32 * 5;  // 5 sequences per shard: several shards
  o.heldout = 0.2;
  o.batch = 3;
  o.progress = false;
  return o;
}

TEST(Precompute, ShardHiddenEqualsTheEnginesCaptureBitForBit) {
  MTP_REQUIRE_SHARED(dir, "models/stories260K");
  Stories s = load_stories(dir);
  std::string tmp = test::temp_dir("pre-capture");
  PrecomputeOptions o = options(write_corpus(tmp), tmp + "/shards");
  precompute(*s.model, *s.tok, "fp", o, nullptr);
  auto man = drafter::read_manifest(o.out_dir);
  ASSERT_GE(man["shards"].size(), 2u);
  long checked = 0;
  for (auto& sh : man["shards"]) {
    drafter::Shard shard = drafter::read_shard(o.out_dir + "/" + sh["file"].get<std::string>());
    for (int q = 0; q < shard.sequences; ++q) {
      const int L = shard.length[q];
      std::vector<int32_t> toks(shard.tokens + size_t(q) * shard.seq_len,
                                shard.tokens + size_t(q) * shard.seq_len + L);
      // The engine's path: verify-sized calls, as the speculative loop makes them.
      TargetSession ts(*s.model, 64, nullptr);
      for (int b = 0; b < L; b += 3) {
        std::vector<int32_t> part(toks.begin() + b, toks.begin() + std::min(L, b + 3));
        std::vector<float> lg(part.size() * s.model->config().vocab);
        ts.forward(part, lg.data());
      }
      const int d = shard.d_model;
      std::vector<float> row(d), eng(d);
      for (int t = 0; t < L; ++t) {
        shard.hidden_row(q, t, row.data());
        std::memcpy(eng.data(), ts.hidden(t), d * sizeof(float));
        round_to(DType::BF16, eng.data(), d);
        ASSERT_EQ(std::memcmp(row.data(), eng.data(), d * sizeof(float)), 0)
            << "sequence " << q << " position " << t;
        ++checked;
      }
      EXPECT_EQ(shard.loss_mask[size_t(q) * shard.seq_len], 0);  // BOS is never a target
      EXPECT_EQ(toks[0], 1);                                       // BOS first
    }
  }
  EXPECT_GT(checked, 100);
  EXPECT_GT(man["counts"]["heldout_sequences"].get<long>(), 0);
}

TEST(Precompute, ResumeSkipsCompleteShardsAndReproducesTheRest) {
  MTP_REQUIRE_SHARED(dir, "models/stories260K");
  Stories s = load_stories(dir);
  std::string tmp = test::temp_dir("pre-resume");
  PrecomputeOptions o = options(write_corpus(tmp), tmp + "/shards");
  PrecomputeReport first = precompute(*s.model, *s.tok, "fp", o, nullptr);
  ASSERT_GE(first.shards, 3);
  std::string last = o.out_dir + "/" + drafter::shard_file_name(first.shards - 1);
  std::string before = read_file(last);
  std::string manifest = read_file(o.out_dir + "/manifest.json");
  // "Killed" before the last shard and the manifest were written, with a
  // half-written temp file left behind.
  fs::remove(last);
  fs::remove(o.out_dir + "/manifest.json");
  std::ofstream(last + ".tmp") << "partial";
  PrecomputeReport again = precompute(*s.model, *s.tok, "fp", o, nullptr);
  EXPECT_EQ(again.shards, 1);
  EXPECT_EQ(again.shards_skipped, first.shards - 1);
  EXPECT_EQ(read_file(last), before);
  EXPECT_EQ(read_file(o.out_dir + "/manifest.json"), manifest);
  // Other arguments into the same folder are refused.
  PrecomputeOptions other = o;
  other.seq_len = 48;
  EXPECT_THROW(precompute(*s.model, *s.tok, "fp", other, nullptr), InputError);
}

TEST(Precompute, SelfDistillAtTemperatureZeroIsGreedyGeneration) {
  MTP_REQUIRE_SHARED(dir, "models/stories260K");
  Stories s = load_stories(dir);
  std::string tmp = test::temp_dir("pre-distill");
  PrecomputeOptions o = options(write_corpus(tmp), tmp + "/shards");
  o.self_distill = true;
  o.prompt_tokens = 4;
  o.gen_tokens = 20;
  o.temp = 0;
  precompute(*s.model, *s.tok, "fp", o, nullptr);
  drafter::Shard shard = drafter::read_shard(o.out_dir + "/" + drafter::shard_file_name(0));
  for (int q = 0; q < shard.sequences; ++q) {
    const int32_t* t = shard.tokens + size_t(q) * shard.seq_len;
    const uint8_t* m = shard.loss_mask + size_t(q) * shard.seq_len;
    std::vector<int32_t> prompt(t, t + 5);  // BOS + 4 prompt tokens
    GenerateOptions g;
    g.n_new = 20;
    GenerateResult r = generate(*s.model, s.tok.get(), prompt, g, nullptr);
    ASSERT_EQ(shard.length[q], int(prompt.size() + r.token_ids.size())) << "sequence " << q;
    for (size_t i = 0; i < r.token_ids.size(); ++i) {
      ASSERT_EQ(t[5 + i], r.token_ids[i]) << "sequence " << q << " token " << i;
      ASSERT_EQ(m[5 + i], 1);
    }
    for (int i = 0; i < 5; ++i) ASSERT_EQ(m[i], 0) << "prompt position " << i << " not masked";
  }
}

// --prompt-tokens-min: each sequence's prompt (its masked opening) takes
// between min and max corpus tokens, the length a function of the document
// alone (a rerun plans the same), and more than one length occurs.
TEST(Precompute, PromptLengthsVaryWithinTheAskedRange) {
  MTP_REQUIRE_SHARED(dir, "models/stories260K");
  Stories s = load_stories(dir);
  std::string tmp = test::temp_dir("pre-plen");
  const std::string corpus = tmp + "/corpus.txt";
  {
    std::ofstream f(corpus);  // long documents: every prompt can take 9 tokens
    for (int i = 0; i < 30; ++i) {
      f << "Doc " << i << " the little cat sat on the big mat and looked at the bird.\n\n";
    }
  }
  auto lengths = [&](const std::string& out) {
    PrecomputeOptions o = options(corpus, out);
    o.self_distill = true;
    o.prompt_tokens = 9;
    o.prompt_tokens_min = 2;
    o.gen_tokens = 4;
    o.temp = 0;
    o.heldout = 0;
    precompute(*s.model, *s.tok, "fp", o, nullptr);
    std::vector<int> out_len;
    const nlohmann::json manifest = drafter::read_manifest(out);
    for (const auto& e : manifest["shards"]) {
      drafter::Shard sh = drafter::read_shard(out + "/" + e["file"].get<std::string>());
      for (int q = 0; q < sh.sequences; ++q) {
        const uint8_t* m = sh.loss_mask + size_t(q) * sh.seq_len;
        int masked = 0;
        while (masked < sh.length[q] && !m[masked]) ++masked;
        out_len.push_back(masked - 1);  // minus BOS
      }
    }
    return out_len;
  };
  const std::vector<int> a = lengths(tmp + "/a"), b = lengths(tmp + "/b");
  ASSERT_EQ(a.size(), 30u);
  EXPECT_EQ(a, b);
  std::set<int> seen(a.begin(), a.end());
  EXPECT_GE(*seen.begin(), 2);
  EXPECT_LE(*seen.rbegin(), 9);
  EXPECT_GE(seen.size(), 4u) << "prompt lengths barely vary";
  PrecomputeOptions bad = options(corpus, tmp + "/c");
  bad.self_distill = true;
  bad.prompt_tokens = 4;
  bad.prompt_tokens_min = 5;
  EXPECT_THROW(precompute(*s.model, *s.tok, "fp", bad, nullptr), InputError);
  // Accepted before: a prompt that fills the sequence, a negative generation.
  PrecomputeOptions full = options(corpus, tmp + "/d");
  full.self_distill = true;
  full.prompt_tokens = full.seq_len;
  test::expect_error<InputError>([&] { precompute(*s.model, *s.tok, "fp", full, nullptr); },
                                 {"prompts of", "no room"});
  PrecomputeOptions neg = options(corpus, tmp + "/e");
  neg.self_distill = true;
  neg.gen_tokens = -1;
  test::expect_error<InputError>([&] { precompute(*s.model, *s.tok, "fp", neg, nullptr); },
                                 {"tokens to generate per prompt must be >= 0", "got -1"});
}

// heldout_prompts.jsonl: the prompts of exactly the held-out sequences, so live
// acceptance can be measured on documents no training sequence came from.
TEST(Precompute, HeldoutPromptsAreTheHeldoutSequencesPrompts) {
  MTP_REQUIRE_SHARED(dir, "models/stories260K");
  Stories s = load_stories(dir);
  std::string tmp = test::temp_dir("pre-heldout");
  const std::string corpus = tmp + "/corpus.txt";
  {
    std::ofstream f(corpus);  // every document opens differently
    for (int i = 0; i < 40; ++i) f << i << " cats sat on the mat " << i * 7 << " times.\n\n";
  }
  PrecomputeOptions o = options(corpus, tmp + "/shards");
  o.self_distill = true;
  o.prompt_tokens = 6;
  o.gen_tokens = 8;
  o.temp = 0;
  precompute(*s.model, *s.tok, "fp", o, nullptr);
  std::vector<io::PromptEntry> prompts = io::read_prompts(o.out_dir + "/heldout_prompts.jsonl");
  std::multiset<std::string> held_prompts, train_prompts, listed;
  for (const auto& p : prompts) listed.insert(p.prompt);
  const nlohmann::json manifest = drafter::read_manifest(o.out_dir);
  for (const auto& e : manifest["shards"]) {
    drafter::Shard sh = drafter::read_shard(o.out_dir + "/" + e["file"].get<std::string>());
    for (int q = 0; q < sh.sequences; ++q) {
      const int32_t* t = sh.tokens + size_t(q) * sh.seq_len;
      std::string text = s.tok->decode(std::span<const int32_t>(t, 7));  // BOS + prompt
      (e["split"] == "heldout" ? held_prompts : train_prompts).insert(text);
    }
  }
  ASSERT_FALSE(held_prompts.empty());
  EXPECT_EQ(listed, held_prompts);
  for (const auto& p : listed) EXPECT_EQ(train_prompts.count(p), 0u) << "'" << p << "' is also trained on";
}

TEST(Precompute, Fp16RefusesValuesItCannotHold) {
  drafter::ShardBuilder b(4, 2, DType::F16);
  std::vector<float> h = {1.f, 2.f, 70000.f, 0.f};
  EXPECT_THROW(b.add({1, 5}, h.data(), {0, 1}), InputError);
  drafter::ShardBuilder ok(4, 2, DType::F16);
  h[2] = 65504.f;
  EXPECT_NO_THROW(ok.add({1, 5}, h.data(), {0, 1}));
}

}  // namespace
}  // namespace mtp::speculative
