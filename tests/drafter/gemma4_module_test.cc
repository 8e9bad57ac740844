// The MTP modules of a Gemma 4 target (drafter::module_block_config): each is
// the target's sliding layer — its head width, kv heads and RoPE, its own K/V,
// no per-layer-embedding input, the single-width MLP, q/k norms, the V norm
// and the layer scalar — windowed by the drafter's window or, at 0, by the
// target's. A full layer's shape (its own head width, proportional RoPE) is
// never a module's. (libtorch against the engine on such modules:
// tests/train/parity_test.cc, cases gemma4*.)
#include <gtest/gtest.h>

#include "checkpoint_util.h"
#include "drafter/drafter.h"
#include "model/loader.h"
#include "test_util.h"

namespace mtp::drafter {
namespace {

model::ModelConfig gemma4_target() {
  const test::RandomSpec s = test::RandomSpec::for_arch(model::Arch::Gemma4);
  return model::load_model(test::random_hf_checkpoint("g4-module", s), {}).config;
}

TEST(Gemma4Modules, AreTheTargetsSlidingLayerWithItsOwnKV) {
  const model::ModelConfig t = gemma4_target();
  ASSERT_GT(t.ple_dim, 0);
  int sliding = -1, full = -1;
  for (int l = 0; l < t.n_layers; ++l) (t.is_sliding(l) ? sliding : full) = l;
  ASSERT_GE(sliding, 0);
  ASSERT_GE(full, 0);
  ASSERT_NE(t.layer_kind(full).head_dim, t.layer_kind(sliding).head_dim);

  for (int window : {0, 12}) {
    DrafterConfig dc;
    dc.window = window;
    const model::ModelConfig bc = module_block_config(t, dc);
    SCOPED_TRACE(window);
    ASSERT_EQ(bc.n_layers, 1);
    EXPECT_TRUE(bc.is_sliding(0));
    EXPECT_EQ(bc.sliding_window, window > 0 ? window : t.sliding_window);
    const model::LayerKind k = bc.layer_kind(0), ts = t.layer_kind(0);
    ASSERT_TRUE(t.is_sliding(0));
    EXPECT_EQ(k.head_dim, ts.head_dim);
    EXPECT_EQ(k.n_kv_heads, ts.n_kv_heads);
    EXPECT_EQ(k.ffn, t.ffn);  // single width, whatever the sharing layers use
    EXPECT_TRUE(k.owns_kv());
    EXPECT_FALSE(k.k_eq_v);
    EXPECT_EQ(bc.ple_dim, 0);
    EXPECT_TRUE(bc.qk_norm && bc.v_norm && bc.layer_scalar && bc.sandwich_norms);
  }

  // Its tensors: the layer's own K/V projections and norms, no per-layer
  // input, a layer scalar that starts at the identity.
  DrafterConfig dc;
  dc.K = 1;
  const auto tensors = random_drafter_tensors(t, dc, 3);
  for (const char* n : {"self_attn.k_proj.weight", "self_attn.v_proj.weight",
                        "self_attn.k_norm.weight", "layer_scalar"}) {
    EXPECT_TRUE(tensors.count(std::string("mtp.0.block.") + n)) << n;
  }
  for (const auto& [name, v] : tensors) {
    EXPECT_EQ(name.find("per_layer"), std::string::npos) << name;
  }
  EXPECT_EQ(tensors.at("mtp.0.block.layer_scalar"), std::vector<float>{1.0f});
  EXPECT_EQ(tensors.at("mtp.0.block.mlp.down_proj.weight").size(),
            size_t(t.d_model) * size_t(t.ffn));
}

}  // namespace
}  // namespace mtp::drafter
