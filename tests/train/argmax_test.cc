// The earlier system's 16-bit argmax truncation (docs/INVARIANTS.md invariant
// 5): argmax indices above 65,535 must survive training, export and the engine.
// A random target with a 262,144-token vocabulary; the corpus makes token
// kPlanted (> 65,535, with bits set above bit 16) the target at every other
// row, and its lm_head row is planted with a large norm so a few steps give it
// a large margin. After training, the parity gate passes (100 % argmax
// agreement on decided positions), and the exported drafter's ENGINE argmax is
// exactly kPlanted on those rows — not a 16-bit alias. Also exercises the
// chunked cross-entropy (a [rows, 262,144] head).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "checkpoint_util.h"
#include "test_util.h"
#include "train/export.h"
#include "train_fixture.h"

namespace mtp::train {
namespace {

constexpr int kArgmaxVocab = 262144;
constexpr int32_t kPlanted = 236764;  // the index the earlier system's converter wrapped to 40156
constexpr int kArgmaxLen = 24;

TEST(Argmax, PlantedIndexAbove65535SurvivesTrainingParityAndExport) {
  test::RandomSpec spec;
  spec.d_model = 32;
  spec.n_layers = 1;
  spec.n_heads = 2;
  spec.n_kv_heads = 1;
  spec.head_dim = 16;
  spec.ffn = 64;
  spec.vocab = kArgmaxVocab;
  spec.seed = 4;
  spec.edit = [](const std::string& name, std::vector<int64_t>& shape, std::vector<float>& v) {
    if (name == "lm_head.weight") {  // row kPlanted: 4x the norm of the others
      float* row = v.data() + size_t(kPlanted) * size_t(shape[1]);
      for (int64_t i = 0; i < shape[1]; ++i) row[i] *= 4.f;
    }
  };
  const std::string model = test::random_hf_checkpoint("argmax_model", spec);
  test::Target t = test::load_target(model);
  ASSERT_EQ(t.model->config().vocab, kArgmaxVocab);

  // Even positions: random small ids; odd positions: kPlanted. Row t of module
  // 0 predicts tok[t+2], which is kPlanted for odd t.
  std::mt19937 rng(8);
  auto make = [&] {
    std::vector<int32_t> s;
    for (int i = 0; i < kArgmaxLen; ++i) s.push_back(i % 2 ? kPlanted : int32_t(3 + rng() % 1000));
    return s;
  };
  std::vector<std::vector<int32_t>> train, held;
  for (int i = 0; i < 16; ++i) train.push_back(make());
  for (int i = 0; i < 4; ++i) held.push_back(make());
  const std::string shards = test::temp_dir("argmax_shards");
  test::write_shards(shards, t, train, held, kArgmaxLen);

  const std::string run = test::temp_dir("argmax_run");
  TrainOptions o = test::quick_options(shards, model, run);
  o.K = 1;
  o.steps = 12;
  o.batch = 4;
  o.lr = 1e-2;
  o.warmup = 2;
  o.ema = 0;
  TrainReport r = run_training(o);  // runs the parity gate (throws if it fails)
  EXPECT_TRUE(r.parity_ran);
  EXPECT_TRUE(r.parity_passed);

  ExportOptions eo;
  eo.run_dir = run;
  eo.out = run + "/drafter.safetensors";
  eo.threads = 1;
  eo.verbose = false;
  ExportReport er = export_drafter(eo);
  ASSERT_TRUE(er.parity_ran);
  EXPECT_TRUE(er.parity.passed) << er.parity.text();
  ASSERT_EQ(er.parity.modules.size(), 1u);
  EXPECT_GT(er.parity.modules[0].decided, 0);
  EXPECT_EQ(er.parity.modules[0].agreed, er.parity.modules[0].decided);

  drafter::Drafter d =
      drafter::Drafter::load(eo.out, t.model->config(), t.fingerprint, kernels::WeightType::F32);
  long rows = 0, planted = 0;
  for (const auto& seq : held) {
    auto pred = test::engine_predictions(t, d, seq)[0];
    for (size_t i = 1; i + 2 < seq.size(); i += 2) {  // odd rows: target kPlanted
      ++rows;
      planted += pred[i] == kPlanted;
      EXPECT_NE(pred[i], kPlanted & 0xffff) << "16-bit alias of the planted index";
    }
  }
  EXPECT_EQ(planted, rows) << "engine argmax != planted index " << kPlanted;

  // Stored as Q8_0 blocks: the gate runs on the dequantized values (and
  // passes), the file holds Q8_0 and still predicts the planted index; the
  // parity subcommand's path agrees on the written file.
  eo.out = run + "/drafter-q8_0.safetensors";
  eo.stored = drafter::DrafterStorage::parse("q8_0");
  ExportReport eq = export_drafter(eo);
  ASSERT_TRUE(eq.parity_ran);
  EXPECT_TRUE(eq.parity.passed) << eq.parity.text();
  drafter::Drafter dq =
      drafter::Drafter::load(eo.out, t.model->config(), t.fingerprint, kernels::WeightType::F32);
  EXPECT_EQ(dq.modules()[0].eh_proj.hold(), kernels::WeightType::Q8_0);
  long qplanted = 0;
  for (const auto& seq : held) {
    auto pred = test::engine_predictions(t, dq, seq)[0];
    for (size_t i = 1; i + 2 < seq.size(); i += 2) qplanted += pred[i] == kPlanted;
  }
  EXPECT_EQ(qplanted, rows) << "Q8_0 drafter argmax != planted index";
  RunParityOptions po;
  po.run_dir = run;
  po.drafter = eo.out;
  po.threads = 1;
  ParityReport pq = parity_for_run(po);
  EXPECT_TRUE(pq.passed) << pq.text();
}

}  // namespace
}  // namespace mtp::train
