#include "train/assistant_init.h"

#include <numeric>
#include <string>

#include "core/error.h"
#include "core/setting.h"
#include "drafter/gemma4_assistant.h"

namespace mtp::train {

namespace {

int round_up(int x, int m) { return (x + m - 1) / m * m; }

}  // namespace

nlohmann::json scratch_assistant_config(const model::ModelConfig& t, const AssistantShape& s) {
  using nlohmann::json;
  if (t.arch != model::Arch::Gemma4) {
    fail<ConfigError>("a Gemma 4 assistant drafts for Gemma 4 targets; this target is {}",
                      model::arch_name(t.arch));
  }
  const int slide = drafter::assistant_kv_owner(t, true);
  const int full = drafter::assistant_kv_owner(t, false);
  if (full < 0) fail<ConfigError>("the target has no full-attention layer owning its K/V");
  const model::LayerKind fk = t.layer_kind(full);
  const model::LayerKind sk = slide >= 0 ? t.layer_kind(slide) : fk;
  auto positive = [](const char* setting, int v) {
    if (v < 0) fail_setting<InputError>(setting, "must be >= 0 (0 = scaled from E2B), got {}", v);
  };
  positive("assistant_hidden", s.hidden);
  positive("assistant_heads", s.heads);
  positive("assistant_ffn", s.ffn);
  if (s.layers < 1 || s.layers > 64) {
    fail_setting<InputError>("assistant_layers", "must be in 1..64, got {}", s.layers);
  }
  const int hidden = s.hidden > 0 ? s.hidden : std::max(32, round_up(t.d_model / 6, 16));
  const int kv_lcm = std::lcm(sk.n_kv_heads, fk.n_kv_heads);
  const int heads = s.heads > 0 ? s.heads : round_up(4, kv_lcm);
  if (heads % kv_lcm != 0) {
    fail_setting<InputError>("assistant_heads", "{} query heads are not a multiple of the {} and "
                             "{} kv heads of the target layers it reads", heads, sk.n_kv_heads,
                             fk.n_kv_heads);
  }
  json types = json::array();
  for (int l = 0; l < s.layers; ++l) {
    types.push_back(l + 1 < s.layers && slide >= 0 ? "sliding_attention" : "full_attention");
  }
  json full_rope = {{"rope_type", "proportional"},
                    {"partial_rotary_factor", t.rope_partial},
                    {"rope_theta", t.rope_theta}};
  if (t.rope_scaling.type == model::RopeScaling::Type::Linear) {
    full_rope["factor"] = t.rope_scaling.factor;
  } else if (t.rope_scaling.type != model::RopeScaling::Type::None) {
    fail<ConfigError>("the target's full layers use a RoPE scaling a Gemma 4 assistant has none of");
  }
  const json text = {
      {"model_type", "gemma4_text"},
      {"hidden_size", hidden},
      {"intermediate_size", s.ffn > 0 ? s.ffn : 8 * hidden},
      {"num_hidden_layers", s.layers},
      {"num_attention_heads", heads},
      {"num_key_value_heads", sk.n_kv_heads},
      {"head_dim", sk.head_dim},
      {"global_head_dim", fk.head_dim},
      {"attention_k_eq_v", fk.n_kv_heads != sk.n_kv_heads},
      {"num_global_key_value_heads", fk.n_kv_heads},
      {"num_kv_shared_layers", s.layers},
      {"hidden_size_per_layer_input", 0},
      {"vocab_size_per_layer_input", 0},
      {"use_double_wide_mlp", false},
      {"enable_moe_block", false},
      {"vocab_size", t.vocab},
      {"sliding_window", t.sliding_window},
      {"layer_types", types},
      {"rope_parameters",
       {{"sliding_attention",
         {{"rope_type", "default"},
          {"rope_theta", t.rope_local_theta > 0 ? t.rope_local_theta : t.rope_theta}}},
        {"full_attention", full_rope}}},
      {"hidden_activation", "gelu_pytorch_tanh"},
      {"rms_norm_eps", t.norm_eps},
      {"max_position_embeddings", t.max_position},
      {"tie_word_embeddings", true},
      {"attention_bias", false},
      {"attention_dropout", 0.0},
      {"use_bidirectional_attention", nullptr},
      {"initializer_range", 0.02}};
  json c = {{"architectures", {"Gemma4AssistantForCausalLM"}},
            {"model_type", drafter::kAssistantModelType},
            {"backbone_hidden_size", t.d_model},
            {"use_ordered_embeddings", false},
            {"tie_word_embeddings", true},
            {"text_config", text}};
  drafter::parse_assistant_config(c, t, "the assistant's scratch config");  // the loader's checks
  return c;
}

}  // namespace mtp::train
