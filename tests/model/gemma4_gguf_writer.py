"""Writes a Hugging Face Gemma 4 checkpoint as a GGUF file with the `gguf`
package's own tables: tensor names from gguf.get_tensor_name_map(GEMMA4),
metadata through GGUFWriter's gemma4 keys, as llama.cpp's converter
(convert_hf_to_gguf.py Gemma4Model) lays them out: full layers' head width as
key_length, the sliding layers' as key_length_swa, per-layer feed-forward
lengths when the MLP is double-wide, the sliding pattern as booleans, the
proportional RoPE of the full layers as rope_freqs (1 per rotated pair, 1e30
for the rest), norms as stored (no shift). An independent check of mtpspec's
own GGUF names and keys (tests/model/gemma4_load_test.cc).

usage: gemma4_gguf_writer.py HF_DIR OUT.gguf {f32,bf16,q8_0}
"""
import json
import os
import sys

import struct

import gguf
import numpy as np


def read_safetensors(path, out):
    """Every tensor of one file as float32 (the format: u64 header length,
    JSON header, data; BF16 widened by a 16-bit shift)."""
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, t = e["data_offsets"]
        buf = data[b:t]
        if e["dtype"] == "F32":
            x = np.frombuffer(buf, dtype=np.float32)
        elif e["dtype"] == "F16":
            x = np.frombuffer(buf, dtype=np.float16).astype(np.float32)
        elif e["dtype"] == "BF16":
            x = (np.frombuffer(buf, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)
        else:
            raise SystemExit(f"{name}: dtype {e['dtype']}")
        out[name] = x.reshape(e["shape"])


def tensors(hf_dir):
    out = {}
    index = os.path.join(hf_dir, "model.safetensors.index.json")
    files = sorted(set(json.load(open(index))["weight_map"].values())) if os.path.exists(index) \
        else ["model.safetensors"]
    for f in files:
        read_safetensors(os.path.join(hf_dir, f), out)
    return out


def main(hf_dir, out, mtype):
    top = json.load(open(os.path.join(hf_dir, "config.json")))
    cfg = top.get("text_config", top)
    n = cfg["num_hidden_layers"]
    types = list(cfg["layer_types"])
    types[-1] = "full_attention"
    swa = [t == "sliding_attention" for t in types]
    w = gguf.GGUFWriter(out, "gemma4")
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_block_count(n)
    w.add_head_count(cfg["num_attention_heads"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    shared = cfg.get("num_kv_shared_layers", 0)
    w.add_shared_kv_layers(shared)
    w.add_embedding_length_per_layer_input(cfg.get("hidden_size_per_layer_input") or 0)
    w.add_sliding_window_pattern(swa)
    w.add_sliding_window(cfg["sliding_window"])
    full_hd, swa_hd = cfg["global_head_dim"], cfg["head_dim"]
    w.add_key_length(full_hd)
    w.add_value_length(full_hd)
    w.add_key_length_swa(swa_hd)
    w.add_value_length_swa(swa_hd)
    w.add_rope_dimension_count(full_hd)
    w.add_rope_dimension_count_swa(swa_hd)
    rope = cfg["rope_parameters"]
    w.add_rope_freq_base(rope["full_attention"]["rope_theta"])
    w.add_rope_freq_base_swa(rope["sliding_attention"]["rope_theta"])
    if cfg.get("final_logit_softcapping"):
        w.add_final_logit_softcapping(cfg["final_logit_softcapping"])
    ffn = cfg["intermediate_size"]
    if cfg.get("use_double_wide_mlp"):
        w.add_feed_forward_length([ffn if i < n - shared else 2 * ffn for i in range(n)])
    else:
        w.add_feed_forward_length(ffn)
    kv, gkv = cfg["num_key_value_heads"], cfg.get("num_global_key_value_heads")
    w.add_head_count_kv([kv if s else gkv for s in swa] if gkv is not None else kv)
    # A byte-level vocabulary big enough for the ids (the model is what is tested).
    vocab = cfg["vocab_size"]
    w.add_tokenizer_model("llama")
    w.add_token_list([f"<t{i}>".encode() for i in range(vocab)])
    w.add_token_scores([0.0] * vocab)
    w.add_token_types([1] * vocab)
    w.add_bos_token_id(2)
    w.add_eos_token_id(1)

    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.GEMMA4, n)
    rot = int(full_hd * rope["full_attention"].get("partial_rotary_factor", 1.0) / 2)
    freqs = np.array([1.0] * rot + [1e30] * (full_hd // 2 - rot), dtype=np.float32)
    w.add_tensor(names.get_name("rope_freqs", try_suffixes=(".weight",)) + ".weight", freqs)
    for hf, value in sorted(tensors(hf_dir).items()):
        if hf.startswith(("model.vision_tower.", "model.audio_tower.", "model.embed_vision.",
                          "model.embed_audio.", "lm_head.")):
            continue
        hf = hf.replace("model.language_model.", "model.")
        key = hf + ".weight" if hf.endswith("layer_scalar") else hf
        name = names.get_name(key, try_suffixes=(".weight", ".bias"))
        if name is None:
            raise SystemExit(f"gguf has no gemma4 name for {hf}")
        x = value
        if x.ndim <= 1 or hf.endswith("norm.weight"):
            w.add_tensor(name, x.astype(np.float32))
        elif mtype == "q8_0" and x.shape[-1] % 32 == 0:
            q = gguf.quants.quantize(x, gguf.GGMLQuantizationType.Q8_0)
            w.add_tensor(name, q, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        elif mtype == "bf16":
            q = gguf.quants.quantize(x, gguf.GGMLQuantizationType.BF16)
            w.add_tensor(name, q, raw_dtype=gguf.GGMLQuantizationType.BF16)
        else:
            w.add_tensor(name, x.astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main(*sys.argv[1:4])
