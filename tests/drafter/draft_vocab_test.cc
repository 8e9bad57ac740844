// The draft vocabulary (drafter/draft_vocab.h, DrafterConfig::draft_vocab) and
// BF16-held modules:
// - the sub-head's logits are bit-identical to the full head's at the same
//   tokens (so drafting among them is exactly the restricted argmax), for fp32
//   and bf16 heads, a tied head read in place (--tied-head mapped), and with a
//   logit soft-cap;
// - the chooser keeps the most frequent training labels (ties: lower id) and
//   counts only loss-masked positions of the training split;
// - the file round-trips the ids; bad ids are refused with the offending value;
// - a module stored in BF16 is held in BF16 (its exact values) even when the
//   target is held in fp32.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "checkpoint_util.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "drafter/draft_vocab.h"
#include "drafter/drafter.h"
#include "drafter/mtp_runner.h"
#include "drafter/shards.h"
#include "kernels/ops.h"
#include "model/fingerprint.h"
#include "model/loader.h"
#include "test_util.h"

namespace mtp::drafter {
namespace {

namespace fs = std::filesystem;

std::unique_ptr<model::Model> load(const std::string& dir, kernels::WeightType wt,
                                   model::TiedHead head = model::TiedHead::Packed) {
  model::LoadOptions o;
  o.weights = wt;
  o.tied_head = head;
  return std::make_unique<model::Model>(model::load_model(dir, o));
}

TEST(DraftVocab, SubHeadLogitsAreBitIdenticalToTheFullHead) {
  for (model::Arch arch : {model::Arch::Llama, model::Arch::Gemma2}) {  // Gemma2: soft-cap
    test::RandomSpec spec = test::RandomSpec::for_arch(arch);
    spec.vocab = 333;  // not a multiple of any tile
    const std::string dir = test::random_hf_checkpoint("subhead", spec);
    spec.tie = true;
    const std::string tied = test::random_hf_checkpoint("subhead-tied", spec);
    for (auto [wt, head] : {std::pair{kernels::WeightType::F32, model::TiedHead::Packed},
                            std::pair{kernels::WeightType::BF16, model::TiedHead::Packed},
                            std::pair{kernels::WeightType::F32, model::TiedHead::Mapped}}) {
      const bool mapped = head == model::TiedHead::Mapped;
      SCOPED_TRACE(testing::Message() << model::arch_name(arch) << " " << int(wt)
                                      << (mapped ? " tied, in place" : ""));
      auto m = load(mapped ? tied : dir, wt, head);
      ASSERT_EQ(m->weights().lm_head.is_view(), mapped);
      const size_t d = size_t(m->config().d_model), V = size_t(m->config().vocab);
      const std::vector<int32_t> ids = {0, 1, 7, 64, 65, 200, 331, 332};
      const kernels::PackedMatrix sub = sub_head(m->weights().lm_head, ids);
      ASSERT_EQ(sub.rows(), ids.size());
      ASSERT_EQ(sub.hold(), m->weights().lm_head.hold());
      std::mt19937 rng(5);
      std::normal_distribution<float> nd(0.f, 3.f);
      const size_t q = 5;
      std::vector<float> h(q * d);
      for (auto& x : h) x = nd(rng);
      std::vector<float> full(q * V), part(q * ids.size());
      m->logits_from_hidden(h.data(), q, full.data(), nullptr);
      m->logits_from_hidden(h.data(), q, part.data(), nullptr, &sub);
      for (size_t r = 0; r < q; ++r) {
        for (size_t i = 0; i < ids.size(); ++i) {
          const float a = full[r * V + size_t(ids[i])], b = part[r * ids.size() + i];
          ASSERT_EQ(std::memcmp(&a, &b, sizeof a), 0) << "row " << r << " token " << ids[i];
        }
      }
    }
  }
}

TEST(DraftVocab, TopTokensKeepsTheMostFrequentWithTiesToTheLowerId) {
  //                        id: 0  1  2  3  4  5  6
  const std::vector<long> counts = {5, 0, 9, 5, 1, 9, 0};
  DraftVocab dv = top_tokens(counts, 3);
  EXPECT_EQ(dv.ids, (std::vector<int32_t>{0, 2, 5}));  // 9, 9, then 5 (id 0 before id 3)
  EXPECT_EQ(dv.labels, 29);
  EXPECT_EQ(dv.covered, 23);
  EXPECT_EQ(dv.distinct, 5);
  // More asked than occur: only tokens that occur.
  dv = top_tokens(counts, 100);
  EXPECT_EQ(dv.ids, (std::vector<int32_t>{0, 2, 3, 4, 5}));
  EXPECT_DOUBLE_EQ(dv.coverage(), 1.0);
  EXPECT_THROW(top_tokens(counts, 0), InputError);
}

// A shards folder with one train and one held-out shard of known tokens.
std::string write_shards(int vocab) {
  const std::string dir = test::temp_dir("dv-shards");
  const int T = 8, d = 4;
  std::vector<float> hid(size_t(T) * d, 0.5f);
  ShardBuilder train(T, d, DType::BF16), held(T, d, DType::BF16);
  // Masked labels: 3 ×3, 5 ×2, 1 ×1; token 2 appears only unmasked (a prompt).
  train.add({2, 2, 2, 3, 3, 5}, hid.data(), {0, 0, 0, 1, 1, 1});
  train.add({2, 3, 5, 1}, hid.data(), {0, 1, 1, 1});
  held.add({4, 4, 4, 4}, hid.data(), {1, 1, 1, 1});  // held out: not counted
  train.write(dir + "/" + shard_file_name(0));
  held.write(dir + "/" + shard_file_name(1));
  nlohmann::json man = {{"format", kShardsFormat}, {"version", kShardsVersion},
                        {"target_fingerprint", "x"}, {"seq_len", T}, {"hidden_dtype", "BF16"},
                        {"d_model", d}, {"vocab", vocab},
                        {"shards", {{{"file", shard_file_name(0)}, {"split", "train"}},
                                    {{"file", shard_file_name(1)}, {"split", "heldout"}}}}};
  write_file_atomic(dir + "/manifest.json", man.dump());
  return dir;
}

TEST(DraftVocab, ChooserCountsMaskedTrainingLabelsOnly) {
  const std::string dir = write_shards(8);
  DraftVocab dv = choose_draft_vocab(dir, 8, 2);
  EXPECT_EQ(dv.ids, (std::vector<int32_t>{3, 5}));
  EXPECT_EQ(dv.labels, 6);
  EXPECT_EQ(dv.covered, 5);
  EXPECT_EQ(choose_draft_vocab(dir, 8, 10).ids, (std::vector<int32_t>{1, 3, 5}));
  EXPECT_THROW(choose_draft_vocab(dir, 4, 2), FormatError);  // token 5 outside a 4-token vocab
}

struct VocabTarget {
  std::unique_ptr<model::Model> model;
  std::string fp;
};

VocabTarget vocab_target(kernels::WeightType wt = kernels::WeightType::F32) {
  test::RandomSpec spec = test::RandomSpec::for_arch(model::Arch::Llama);
  spec.vocab = 50;
  static const std::string dir = test::random_hf_checkpoint("dv-target", spec);
  model::LoadOptions o;
  o.weights = wt;
  model::LoadedModel lm = model::load_model(dir, o);
  VocabTarget t;
  t.fp = model::target_fingerprint(lm, /*use_cache=*/false);
  t.model = std::make_unique<model::Model>(std::move(lm));
  return t;
}

std::string write(const VocabTarget& t, DrafterConfig dc, DType stored) {
  const std::string path = test::temp_dir("dv-drafter") + "/d.safetensors";
  write_drafter(path, t.model->config(), t.fp, dc,
                random_drafter_tensors(t.model->config(), dc, 3), {}, stored);
  return path;
}

TEST(DraftVocab, FileRoundTripsTheIdsAndTheRunnerDraftsAmongThem) {
  VocabTarget t = vocab_target();
  DrafterConfig dc;
  dc.K = 2;
  dc.draft_vocab = {2, 3, 10, 11, 40, 49};
  const std::string path = write(t, dc, DType::F32);
  Drafter dr = Drafter::load(path, t.model->config(), t.fp, kernels::WeightType::F32);
  EXPECT_EQ(dr.config().draft_vocab, dc.draft_vocab);

  // Runner logits: the restricted argmax of the full-vocabulary drafter's logits.
  DrafterConfig full_dc = dc;
  full_dc.draft_vocab.clear();
  const std::string full_path = write(t, full_dc, DType::F32);  // same seed: same weights
  Drafter full = Drafter::load(full_path, t.model->config(), t.fp, kernels::WeightType::F32);
  MtpRunner sub_r(*t.model, dr, 1, 16), full_r(*t.model, full, 1, 16);
  ASSERT_EQ(sub_r.logits_width(), dc.draft_vocab.size());
  ASSERT_EQ(full_r.logits_width(), 50u);
  const size_t d = size_t(t.model->config().d_model), q = 6;
  std::vector<model::Row> rows;
  for (int i = 0; i < int(q); ++i) rows.push_back({0, i, int32_t(5 + i)});
  std::vector<float> h(q * d);
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  for (auto& x : h) x = nd(rng);
  std::vector<float> ls(q * 6), lf(q * 50);
  sub_r.forward(0, rows, h.data(), nullptr, ls.data(), nullptr, nullptr);
  full_r.forward(0, rows, h.data(), nullptr, lf.data(), nullptr, nullptr);
  for (size_t r = 0; r < q; ++r) {
    float best = -INFINITY;
    int32_t want = -1;
    for (int32_t id : dc.draft_vocab) {
      if (lf[r * 50 + size_t(id)] > best) best = lf[r * 50 + size_t(id)], want = id;
    }
    EXPECT_EQ(sub_r.token_of(kernels::argmax(ls.data() + r * 6, 6)), want) << "row " << r;
  }
}

TEST(DraftVocab, BadIdsAreRefusedWithTheOffendingValue) {
  VocabTarget t = vocab_target();
  DrafterConfig dc;
  dc.K = 1;
  dc.draft_vocab = {3, 2};
  try {
    write(t, dc, DType::F32);
    FAIL() << "unsorted ids accepted";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("2 after 3"), std::string::npos) << e.what();
  }
  dc.draft_vocab = {1, 50};
  try {
    write(t, dc, DType::F32);
    FAIL() << "id 50 of a 50-token vocabulary accepted";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("id 50"), std::string::npos) << e.what();
  }
}

TEST(DraftVocab, Bf16StoredModulesAreHeldInBf16) {
  VocabTarget t = vocab_target(kernels::WeightType::F32);
  DrafterConfig dc;
  dc.K = 2;
  Drafter a = Drafter::load(write(t, dc, DType::BF16), t.model->config(), t.fp,
                            kernels::WeightType::F32);
  Drafter b = Drafter::load(write(t, dc, DType::F32), t.model->config(), t.fp,
                            kernels::WeightType::F32);
  for (int k = 0; k < 2; ++k) {
    EXPECT_EQ(a.modules()[size_t(k)].eh_proj.hold(), kernels::WeightType::BF16);
    EXPECT_EQ(a.modules()[size_t(k)].block.w_down.hold(), kernels::WeightType::BF16);
    EXPECT_EQ(b.modules()[size_t(k)].eh_proj.hold(), kernels::WeightType::F32);
  }
  // Same values either way: the BF16-held row equals the file's values.
  const auto& m = a.modules()[0].eh_proj;
  std::vector<float> row(m.cols());
  m.row_f32(0, row.data());
  auto ts = io::TensorSet::open_file(a.path());
  const io::TensorView& v = ts.get("mtp.0.eh_proj.weight");
  std::vector<float> want(m.cols());
  to_f32(v.data, DType::BF16, m.cols(), want.data());
  EXPECT_EQ(row, want);
}

}  // namespace
}  // namespace mtp::drafter
