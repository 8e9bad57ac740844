"""Random E2B-shaped Gemma 4 target and assistant for cost measurements only
(acceptance on random weights means nothing): docs/PERFORMANCE.md "Gemma 4's
assistant: cost per draft step".

usage: assistant_cost_model.py OUT_DIR [LAYERS]
  OUT_DIR/target     Gemma4ForCausalLM, E2B's widths (docs/FORMATS.md "Gemma 4"):
                     d 1536, 8 heads / 1 kv head, head_dim 256 / 512, MLP 6144
                     (12288 on shared layers), PLE 256, window 512, vocab
                     262,144, LAYERS layers (default 35, E2B's) in E2B's
                     pattern (4 sliding : 1 full, the last full), the last
                     4/7 of them (E2B: 20 of 35) reading the K/V of earlier ones
  OUT_DIR/assistant  gemma4_assistant: h 256, 2048 centroids, top-k 32
                     (published), 4 layers (3 sliding + 1 full), 4 heads,
                     MLP 2048 (assumed)
  OUT_DIR/tokenizer.gguf  a vocabulary of 262,144 pieces (byte fallback)
Weights bf16: a block of 4 M N(0, 0.02) values repeated (norms 1, layer
scalars 1). Needs numpy and gguf
(scripts/install-test-venv.sh). Never run by the tests.
"""
import json
import os
import sys

import numpy as np

V = 262144


def bf16(a):
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def write_safetensors(path, tensors, rng):
    block = bf16(rng.standard_normal(1 << 22, dtype=np.float32) * 0.02)
    # tensors: name -> (dtype, shape, fill); written a block of rows at a time.
    header, off = {}, 0
    for name, (dtype, shape, fill) in tensors.items():
        n = int(np.prod(shape)) * (8 if dtype == "I64" else 2)
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + n]}
        off += n
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little"))
        f.write(h)
        for name, (dtype, shape, fill) in tensors.items():
            if dtype == "I64":
                f.write(fill.tobytes())
                continue
            n = int(np.prod(shape))
            if fill == "ones":
                f.write(bf16(np.ones(n, np.float32)).tobytes())
                continue
            # A random block repeated at a random offset per tensor: the values
            # do not matter for costs, and drawing billions is slow.
            o = int(rng.integers(0, len(block)))
            for r in range(0, n, len(block)):
                k = min(len(block), n - r)
                f.write(np.roll(block, o)[:k].tobytes())


def rand(rng, shape, ones=False):
    return ("BF16", shape, "ones" if ones else "normal")


def layer(rng, p, d, heads, hd, kv, ffn, own_kv, ple):
    t = {p + n: rand(rng, (d,), True) for n in
         ("input_layernorm.weight", "post_attention_layernorm.weight",
          "pre_feedforward_layernorm.weight", "post_feedforward_layernorm.weight")}
    t[p + "self_attn.q_proj.weight"] = rand(rng, (heads * hd, d))
    t[p + "self_attn.q_norm.weight"] = rand(rng, (hd,), True)
    if own_kv:
        t[p + "self_attn.k_proj.weight"] = rand(rng, (kv * hd, d))
        t[p + "self_attn.v_proj.weight"] = rand(rng, (kv * hd, d))
        t[p + "self_attn.k_norm.weight"] = rand(rng, (hd,), True)
    t[p + "self_attn.o_proj.weight"] = rand(rng, (d, heads * hd))
    t[p + "mlp.gate_proj.weight"] = rand(rng, (ffn, d))
    t[p + "mlp.up_proj.weight"] = rand(rng, (ffn, d))
    t[p + "mlp.down_proj.weight"] = rand(rng, (d, ffn))
    t[p + "layer_scalar"] = rand(rng, (1,), True)
    if ple:
        t[p + "per_layer_input_gate.weight"] = rand(rng, (ple, d))
        t[p + "per_layer_projection.weight"] = rand(rng, (d, ple))
        t[p + "post_per_layer_input_norm.weight"] = rand(rng, (d,), True)
    return t


def rope():
    return {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                               "rope_theta": 1000000.0}}


def target(out, L, rng):
    d, ple = 1536, 256
    types = ["full_attention" if (i + 1) % 5 == 0 or i == L - 1 else "sliding_attention"
             for i in range(L)]
    shared = (L * 4) // 7
    cfg = {"architectures": ["Gemma4ForCausalLM"], "model_type": "gemma4_text",
           "hidden_size": d, "intermediate_size": 6144, "num_hidden_layers": L,
           "num_attention_heads": 8, "num_key_value_heads": 1, "head_dim": 256,
           "global_head_dim": 512, "attention_k_eq_v": False, "num_global_key_value_heads": None,
           "num_kv_shared_layers": shared, "use_double_wide_mlp": True,
           "hidden_size_per_layer_input": ple, "vocab_size_per_layer_input": V, "vocab_size": V,
           "sliding_window": 512, "layer_types": types, "rope_parameters": rope(),
           "hidden_activation": "gelu_pytorch_tanh", "rms_norm_eps": 1e-6,
           "final_logit_softcapping": 30.0, "max_position_embeddings": 4096,
           "tie_word_embeddings": True, "attention_bias": False, "enable_moe_block": False,
           "use_bidirectional_attention": None, "pad_token_id": 0, "bos_token_id": 1,
           "eos_token_id": 2, "torch_dtype": "bfloat16"}
    t = {"model.embed_tokens.weight": rand(rng, (V, d)),
         "model.embed_tokens_per_layer.weight": rand(rng, (V, L * ple)),
         "model.per_layer_model_projection.weight": rand(rng, (L * ple, d)),
         "model.per_layer_projection_norm.weight": rand(rng, (ple,), True),
         "model.norm.weight": rand(rng, (d,), True)}
    for i in range(L):
        full = types[i] == "full_attention"
        ffn = 12288 if i >= L - shared else 6144
        t.update(layer(rng, f"model.layers.{i}.", d, 8, 512 if full else 256, 1, ffn,
                       i < L - shared, ple))
    os.makedirs(out, exist_ok=True)
    write_safetensors(os.path.join(out, "model.safetensors"), t, rng)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)


def assistant(out, rng):
    h, types = 256, ["sliding_attention"] * 3 + ["full_attention"]
    text = {"model_type": "gemma4_text", "hidden_size": h, "intermediate_size": 2048,
            "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 1,
            "head_dim": 256, "global_head_dim": 512, "attention_k_eq_v": False,
            "num_global_key_value_heads": None, "num_kv_shared_layers": 4,
            "hidden_size_per_layer_input": 0, "vocab_size_per_layer_input": 0,
            "use_double_wide_mlp": False, "enable_moe_block": False, "vocab_size": V,
            "sliding_window": 512, "layer_types": types, "rope_parameters": rope(),
            "hidden_activation": "gelu_pytorch_tanh", "rms_norm_eps": 1e-6,
            "max_position_embeddings": 4096, "tie_word_embeddings": True}
    cfg = {"architectures": ["Gemma4AssistantForCausalLM"], "model_type": "gemma4_assistant",
           "backbone_hidden_size": 1536, "use_ordered_embeddings": True, "num_centroids": 2048,
           "centroid_intermediate_top_k": 32, "tie_word_embeddings": True,
           "dtype": "bfloat16", "text_config": text}
    t = {"model.embed_tokens.weight": rand(rng, (V, h)), "model.norm.weight": rand(rng, (h,), True),
         "pre_projection.weight": rand(rng, (h, 2 * 1536)),
         "post_projection.weight": rand(rng, (1536, h)),
         "masked_embedding.centroids.weight": rand(rng, (2048, h))}
    for i in range(4):
        t.update(layer(rng, f"model.layers.{i}.", h, 4, 512 if i == 3 else 256, 1, 2048, False, 0))
    t["masked_embedding.token_ordering"] = ("I64", (V,), rng.permutation(V).astype(np.int64))
    os.makedirs(out, exist_ok=True)
    write_safetensors(os.path.join(out, "model.safetensors"), t, rng)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)


def tokenizer(path):
    import gguf
    w = gguf.GGUFWriter(path, "llama")
    toks = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    toks += [f"\u2581t{i}" for i in range(V - len(toks))]
    w.add_tokenizer_model("llama")
    w.add_token_list(toks)
    w.add_token_scores([0.0] * 259 + [-float(i) for i in range(V - 259)])
    w.add_token_types([2, 3, 3] + [6] * 256 + [1] * (V - 259))
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    out = sys.argv[1]
    L = int(sys.argv[2]) if len(sys.argv) > 2 else 35
    rng = np.random.default_rng(0)
    target(os.path.join(out, "target"), L, rng)
    assistant(os.path.join(out, "assistant"), rng)
    tokenizer(os.path.join(out, "tokenizer.gguf"))
