# A random Gemma 3 1B-shaped HF checkpoint (published gemma-3-1b-pt config: d 1152, 26 layers,
# ffn 6912, 4 heads / 1 kv, head_dim 256, window 512, 5 local : 1 global, vocab 262144, tied),
# bf16, for training-cost measurements only (docs/TRAINING.md "A real-size target"):
# values do not matter for costs. usage: gemma3_1b_cost_model.py OUT_DIR (needs numpy).
import json, os, sys
import numpy as np
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from assistant_cost_model import write_safetensors, rand
out = sys.argv[1]
rng = np.random.default_rng(3)
d, L, ffn, H, KV, hd, V = 1152, 26, 6912, 4, 1, 256, 262144
t = {"model.embed_tokens.weight": rand(rng, (V, d)), "model.norm.weight": rand(rng, (d,), True)}
for i in range(L):
    p = f"model.layers.{i}."
    for n in ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm"):
        t[p + n + ".weight"] = rand(rng, (d,), True)
    t[p + "self_attn.q_proj.weight"] = rand(rng, (H * hd, d))
    t[p + "self_attn.k_proj.weight"] = rand(rng, (KV * hd, d))
    t[p + "self_attn.v_proj.weight"] = rand(rng, (KV * hd, d))
    t[p + "self_attn.o_proj.weight"] = rand(rng, (d, H * hd))
    t[p + "self_attn.q_norm.weight"] = rand(rng, (hd,), True)
    t[p + "self_attn.k_norm.weight"] = rand(rng, (hd,), True)
    t[p + "mlp.gate_proj.weight"] = rand(rng, (ffn, d))
    t[p + "mlp.up_proj.weight"] = rand(rng, (ffn, d))
    t[p + "mlp.down_proj.weight"] = rand(rng, (d, ffn))
cfg = {"architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "hidden_size": d,
       "intermediate_size": ffn, "num_hidden_layers": L, "num_attention_heads": H,
       "num_key_value_heads": KV, "head_dim": hd, "vocab_size": V, "max_position_embeddings": 32768,
       "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0,
       "sliding_window": 512, "sliding_window_pattern": 6, "query_pre_attn_scalar": 256,
       "hidden_activation": "gelu_pytorch_tanh", "final_logit_softcapping": None,
       "attn_logit_softcapping": None, "tie_word_embeddings": True, "bos_token_id": 2,
       "eos_token_id": [1, 106], "pad_token_id": 0, "torch_dtype": "bfloat16", "rope_scaling": None}
os.makedirs(out, exist_ok=True)
json.dump(cfg, open(os.path.join(out, "config.json"), "w"), indent=2)
write_safetensors(os.path.join(out, "model.safetensors"), t, rng)
