"""Checks a Qwen3.5 GGUF's tensor names and the native MTP block's shapes
against the `gguf` package's own tables (llama.cpp's gguf-py), for
tests/train/native_head_gguf_test.cc.

  gguf_nextn_names.py FILE.gguf

Every tensor name must be one of gguf.MODEL_TENSORS[MODEL_ARCH.QWEN35]'s
TENSOR_NAMES formatted for a block below block_count (with ".weight",
".bias" or no suffix), or one of the NEXTN_* names for the MTP block
(bid = block_count - nextn_predict_layers; llama.cpp's current gguf-py lists
them under QWEN35, the PyPI release may not yet). The MTP block must hold
what llama.cpp's qwen35 loader requires (eh_proj, enorm, hnorm and a
full-attention layer) with the shapes its create_tensor calls give, from the
file's own metadata. Prints nothing on success; exits 1 with a message
otherwise.
"""
import sys

import gguf


def main(path):
    r = gguf.GGUFReader(path)

    def key(k):
        f = r.get_field(k)
        if f is None:
            raise SystemExit(f"{path}: no key {k}")
        return f.contents()

    arch = key("general.architecture")
    if arch != "qwen35":
        raise SystemExit(f"{path}: architecture {arch!r}, not qwen35")
    blocks = int(key("qwen35.block_count"))
    nextn = int(key("qwen35.nextn_predict_layers"))
    if nextn != 1:
        raise SystemExit(f"{path}: qwen35.nextn_predict_layers = {nextn}, expected 1")
    mtp = blocks - nextn
    d = int(key("qwen35.embedding_length"))
    ff = int(key("qwen35.feed_forward_length"))
    heads = int(key("qwen35.attention.head_count"))
    kv = int(key("qwen35.attention.head_count_kv"))
    hd = int(key("qwen35.attention.key_length"))

    arch_tensors = gguf.MODEL_TENSORS[gguf.MODEL_ARCH.QWEN35]
    nextn_tensors = [t for t in gguf.MODEL_TENSOR if t.name.startswith("NEXTN_")]
    allowed = set()
    for t in arch_tensors + nextn_tensors:
        name = gguf.TENSOR_NAMES[t]
        bids = range(blocks) if "{bid}" in name else [None]
        if t in nextn_tensors:
            bids = [mtp]
        for bid in bids:
            base = name.format(bid=bid) if bid is not None else name
            allowed.update({base, base + ".weight", base + ".bias"})
    shapes = {}
    for t in r.tensors:
        if t.name not in allowed:
            raise SystemExit(f"{path}: tensor {t.name} is not a qwen35 name of the gguf package")
        shapes[t.name] = [int(x) for x in t.shape]  # ggml order: ne0 first

    b = f"blk.{mtp}."
    want = {  # llama.cpp's qwen35 load_block_mtp, ne order
        "nextn.eh_proj.weight": [2 * d, d],
        "nextn.enorm.weight": [d],
        "nextn.hnorm.weight": [d],
        "nextn.shared_head_norm.weight": [d],
        "attn_norm.weight": [d],
        "post_attention_norm.weight": [d],
        "attn_q.weight": [d, hd * heads * 2],
        "attn_k.weight": [d, hd * kv],
        "attn_v.weight": [d, hd * kv],
        "attn_output.weight": [hd * heads, d],
        "attn_q_norm.weight": [hd],
        "attn_k_norm.weight": [hd],
        "ffn_gate.weight": [d, ff],
        "ffn_up.weight": [d, ff],
        "ffn_down.weight": [ff, d],
    }
    for name, shape in want.items():
        got = shapes.get(b + name)
        if got is None:
            raise SystemExit(f"{path}: the MTP block lacks {b + name}")
        if got != shape:
            raise SystemExit(f"{path}: {b + name} has shape {got}, llama.cpp creates {shape}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    main(sys.argv[1])
