#!/usr/bin/env python3
"""Writes the fuzz seed corpus (tests/fuzz/corpus/<target>/): small, valid or
nearly valid inputs for each parser, generated here (never copied from
../shared). Deterministic: rerunning rewrites the same bytes.

    python3 tests/fuzz/make_corpus.py
"""
import json
import os
import random
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
rng = random.Random(12)


def out(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode("utf-8")
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def floats(n, scale=0.1):
    return struct.pack("<%df" % n, *[rng.gauss(0, 1) * scale for _ in range(n)])


# ---------------------------------------------------------------- safetensors
DT = {"F32": ("<f", 4), "BF16": (None, 2), "F16": ("<e", 2), "I32": ("<i", 4),
      "I64": ("<q", 8), "U8": ("<B", 1), "F64": ("<d", 8)}


def safetensors(tensors, metadata=None, pad=True):
    """tensors: list of (name, dtype, shape, raw bytes)."""
    header = {}
    if metadata:
        header["__metadata__"] = metadata
    off = 0
    blob = b""
    for name, dt, shape, raw in sorted(tensors):
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(raw)]}
        off += len(raw)
        blob += raw
    h = json.dumps(header, separators=(",", ":"))
    if pad:
        h += " " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h.encode() + blob


def numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


out("safetensors", "basic", safetensors([
    ("w", "F32", [2, 3], floats(6)), ("b", "BF16", [4], bytes(8)),
    ("i", "I32", [2], struct.pack("<2i", 1, -2)), ("u", "U8", [3], b"\x01\x02\x03"),
    ("s", "I64", [], struct.pack("<q", 5)), ("e", "F32", [0, 4], b"")],
    {"format": "pt"}))
out("safetensors", "f64", safetensors([("d", "F64", [1], struct.pack("<d", 1.0)),
                                        ("f", "F16", [2], bytes(4))]))
out("safetensors", "empty", safetensors([]))

# ---------------------------------------------------------------- config.json
base = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
        "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "vocab_size": 320, "max_position_embeddings": 512,
        "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "hidden_act": "silu",
        "tie_word_embeddings": False, "bos_token_id": 1, "eos_token_id": 2}
out("hf_config", "llama.json", json.dumps(base))
out("hf_config", "llama3.json", json.dumps(dict(base, rope_scaling={
    "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192}, eos_token_id=[2, 3])))
out("hf_config", "qwen2.json", json.dumps(dict(base, architectures=["Qwen2ForCausalLM"],
                                              model_type="qwen2", use_sliding_window=False,
                                              sliding_window=None, tie_word_embeddings=True)))
out("hf_config", "qwen3.json", json.dumps(dict(base, architectures=["Qwen3ForCausalLM"],
                                              model_type="qwen3", head_dim=32)))
out("hf_config", "gemma2.json", json.dumps(dict(base, architectures=["Gemma2ForCausalLM"],
                                               model_type="gemma2", head_dim=16,
                                               hidden_activation="gelu_pytorch_tanh",
                                               query_pre_attn_scalar=16, sliding_window=8,
                                               attn_logit_softcapping=50.0,
                                               final_logit_softcapping=30.0)))
gemma3_text = dict(base, model_type="gemma3_text", head_dim=16, num_hidden_layers=6,
                   sliding_window=8, rope_local_base_freq=10000.0,
                   layer_types=["sliding_attention"] * 5 + ["full_attention"],
                   rope_scaling={"rope_type": "linear", "factor": 8.0})
del gemma3_text["architectures"]
out("hf_config", "gemma3.json", json.dumps({"architectures": ["Gemma3ForConditionalGeneration"],
                                           "model_type": "gemma3", "text_config": gemma3_text}))
out("hf_config", "rope_parameters.json", json.dumps(dict(base, rope_parameters={
    "full_attention": {"rope_type": "default", "rope_theta": 1e6},
    "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}})))

# ---------------------------------------------------------------- tokenizer.json
def b2u():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


B2U = b2u()
bl_vocab = {B2U[b]: b for b in range(256)}
merges = [("Ġ", "w"), ("h", "e"), ("l", "l"), ("he", "ll"), ("hell", "o"), ("Ġw", "o")]
for a, b in merges:
    bl_vocab[a + b] = len(bl_vocab)
out("tokenizer_json", "bytelevel.json", json.dumps({
    "version": "1.0",
    "added_tokens": [{"id": len(bl_vocab), "content": "<|endoftext|>", "special": True,
                      "normalized": False, "lstrip": False, "rstrip": False, "single_word": False}],
    "normalizer": {"type": "NFC"},
    "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
         "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]},
    "post_processor": {"type": "TemplateProcessing",
                       "single": [{"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}},
                                  {"Sequence": {"id": "A", "type_id": 0}}],
                       "pair": [], "special_tokens": {"<|endoftext|>": {
                           "id": "<|endoftext|>", "ids": [len(bl_vocab)], "tokens": ["<|endoftext|>"]}}},
    "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                "use_regex": True},
    "model": {"type": "BPE", "dropout": None, "unk_token": None, "fuse_unk": False,
              "byte_fallback": False, "ignore_merges": False, "vocab": bl_vocab,
              "merges": [[a, b] for a, b in merges]}}))
sp_vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
for b in range(256):
    sp_vocab["<0x%02X>" % b] = len(sp_vocab)
for t in ["▁", "a", "b", "c", "▁a", "ab", "▁ab", "h", "e", "l", "o", "▁h"]:
    sp_vocab[t] = len(sp_vocab)
out("tokenizer_json", "spm_bpe.json", json.dumps({
    "added_tokens": [{"id": 0, "content": "<unk>", "special": True},
                     {"id": 1, "content": "<s>", "special": True},
                     {"id": 2, "content": "</s>", "special": True}],
    "normalizer": {"type": "Sequence", "normalizers": [
        {"type": "Prepend", "prepend": "▁"},
        {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
    "pre_tokenizer": None,
    "post_processor": {"type": "TemplateProcessing",
                       "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                  {"Sequence": {"id": "A", "type_id": 0}}],
                       "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
    "decoder": {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
        {"type": "ByteFallback"}, {"type": "Fuse"},
        {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
    "model": {"type": "BPE", "unk_token": "<unk>", "fuse_unk": True, "byte_fallback": True,
              "vocab": sp_vocab, "merges": ["▁ a", "a b", "▁ ab", "▁ h"]}}))
out("tokenizer_json", "metaspace.json", json.dumps({
    "pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first",
                      "split": True},
    "decoder": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first"},
    "model": {"type": "BPE", "vocab": sp_vocab, "merges": [["▁", "a"], ["a", "b"]],
              "byte_fallback": True}}))


# ---------------------------------------------------------------- SentencePiece .model
def varint(n):
    b = b""
    while True:
        x = n & 0x7F
        n >>= 7
        if n:
            b += bytes([x | 0x80])
        else:
            return b + bytes([x])


def field(num, wt, payload):
    key = varint((num << 3) | wt)
    if wt == 2:
        return key + varint(len(payload)) + payload
    return key + payload


def piece(text, score, typ):
    return field(1, 2, field(1, 2, text.encode()) + field(2, 5, struct.pack("<f", score)) +
                 field(3, 0, varint(typ)))


def spm(model_type, with_bytes=True):
    p = piece("<unk>", 0, 2) + piece("<s>", 0, 3) + piece("</s>", 0, 3)
    if with_bytes:
        for b in range(256):
            p += piece("<0x%02X>" % b, 0, 6)
    for i, t in enumerate(["▁", "a", "b", "▁a", "ab", "▁ab", "h", "e", "l", "o", "▁he"]):
        p += piece(t, -float(i), 1)
    trainer = field(3, 0, varint(model_type)) + field(35, 0, varint(1 if with_bytes else 0))
    norm = (field(1, 2, b"identity") + field(3, 0, varint(1)) + field(4, 0, varint(1)) +
            field(5, 0, varint(1)))
    return p + field(2, 2, trainer) + field(3, 2, norm)


out("sentencepiece", "bpe.model", spm(2))
out("sentencepiece", "bpe_nobytes.model", spm(2, with_bytes=False))
out("sentencepiece", "unigram.model", spm(1, with_bytes=False))


# ---------------------------------------------------------------- llama2.c
def llama2c(dim, hidden, layers, heads, kv, vocab, seq):
    hd = dim // heads
    shared = vocab > 0
    V = abs(vocab)
    n = (V * dim + layers * dim + layers * dim * dim + 2 * layers * kv * hd * dim +
         layers * dim * dim + layers * dim + 3 * layers * hidden * dim + dim + seq * hd +
         (0 if shared else V * dim))
    body = bytearray(floats(n))
    return struct.pack("<7i", dim, hidden, layers, heads, kv, vocab, seq) + bytes(body)


out("llama2c_checkpoint", "shared.bin", llama2c(8, 16, 1, 2, 1, 16, 8))
out("llama2c_checkpoint", "unshared.bin", llama2c(8, 12, 2, 2, 2, -12, 4))


def tokbin(pieces, max_len=16):
    b = struct.pack("<i", max_len)
    for i, p in enumerate(pieces):
        raw = p.encode()
        b += struct.pack("<fi", -float(i), len(raw)) + raw
    return b


base_pieces = ["<unk>", "\n<s>\n", "\n</s>\n"] + ["<0x%02X>" % b for b in range(256)]
out("llama2c_tokenizer", "bytes.bin",
    tokbin(base_pieces + [" ", "a", "b", " a", "ab", " ab", "he", "ll", "o", "hello"]))
out("llama2c_tokenizer", "tiny.bin", tokbin(["<unk>", "<s>", "</s>", " ", "a", "b", "ab"]))

# ---------------------------------------------------------------- drafter
# Target of fuzz_drafter_metadata.cc: d 8, 2 heads x 4, 1 kv head, ffn 16,
# vocab 16, Llama; fingerprint "fp".
def drafter(K, draft_vocab=0, extra_meta=None):
    d, q, kv, f = 8, 8, 4, 16
    tensors = []
    for k in range(K):
        p = "mtp.%d." % k
        shapes = [("enorm.weight", [d]), ("hnorm.weight", [d]), ("eh_proj.weight", [d, 2 * d]),
                  ("block.input_layernorm.weight", [d]),
                  ("block.self_attn.q_proj.weight", [q, d]),
                  ("block.self_attn.k_proj.weight", [kv, d]),
                  ("block.self_attn.v_proj.weight", [kv, d]),
                  ("block.self_attn.o_proj.weight", [d, q]),
                  ("block.post_attention_layernorm.weight", [d]),
                  ("block.mlp.gate_proj.weight", [f, d]), ("block.mlp.up_proj.weight", [f, d]),
                  ("block.mlp.down_proj.weight", [d, f])]
        for name, shape in shapes:
            tensors.append((p + name, "F32", shape, floats(numel(shape))))
    if draft_vocab:
        tensors.append(("draft_vocab", "I32", [draft_vocab],
                        struct.pack("<%di" % draft_vocab, *range(draft_vocab))))
    cfg = {"K": K, "window": 0, "hidden_dtype": "BF16", "draft_vocab": draft_vocab}
    meta = {"format": "mtpspec-drafter", "format_version": "1", "config": json.dumps(cfg),
            "target": json.dumps({"fingerprint": "fp", "architecture": "llama"}),
            "capture": "residual after the last decoder layer, before the final norm",
            "training": "{}", "created": "2026-01-01T00:00:00Z"}
    meta.update(extra_meta or {})
    return safetensors(tensors, meta)


out("drafter_metadata", "k1.safetensors", drafter(1))
out("drafter_metadata", "k2_vocab.safetensors", drafter(2, draft_vocab=6))

# ---------------------------------------------------------------- shards
out("shards_manifest", "manifest.json", json.dumps({
    "format": "mtpspec-shards", "version": 1, "target_fingerprint": "fp", "seq_len": 4,
    "hidden_dtype": "BF16", "d_model": 8, "shards": [{"file": "shard-00000.safetensors",
                                                      "sequences": 2, "tokens": 7}]}))
S, L, D = 2, 4, 8
out("shards_manifest", "shard.safetensors", safetensors([
    ("tokens", "I32", [S, L], struct.pack("<8i", 1, 5, 6, 0, 1, 7, 8, 9)),
    ("hidden", "BF16", [S, L, D], bytes(2 * S * L * D)),
    ("loss_mask", "U8", [S, L], bytes([0, 1, 1, 0, 0, 1, 1, 1])),
    ("length", "I32", [S], struct.pack("<2i", 3, 4))]))

# ---------------------------------------------------------------- prompts
out("prompts", "prompts.jsonl",
    '{"prompt": "Once upon a time", "lang": "en"}\n{"prompt": "\\u00e9t\\u00e9 \\ud83d\\ude00"}\n\n'
    '{"prompt": "x", "lang": "fr", "extra": [1, 2]}\n')
out("prompts", "one.jsonl", '{"prompt": ""}')

# ---------------------------------------------------------------- http_request
# Byte 0: endpoint (0 completions, 1 chat); then the JSON body.
out("http_request", "completion", b"\x00" + json.dumps({
    "model": "m", "prompt": "Once upon a time", "max_tokens": 16, "temperature": 0.7,
    "top_p": 0.9, "seed": 3, "stop": ["\n", "."], "stream": True,
    "stream_options": {"include_usage": True}}).encode())
out("http_request", "completion_ids", b"\x00" + json.dumps({"prompt": [1, 2, 3], "n": 1}).encode())
out("http_request", "chat", b"\x01" + json.dumps({
    "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"},
                 {"role": "assistant", "content": "<think>\nx\n</think>\n\nok"},
                 {"role": "user", "content": [{"type": "text", "text": "more"}]}],
    "max_completion_tokens": 8, "drafter": False, "spec_sampling": "rejection"}).encode())
out("http_request", "bad", b"\x01{\"messages\": [{\"role\": 1}]")

# ---------------------------------------------------------------- GGUF
# Layout of docs/FORMATS.md "GGUF": little-endian header, key/values, tensor
# infos (dims in ggml order), data aligned to general.alignment (default 32).
GGUF_T = {"u8": 0, "i8": 1, "u16": 2, "i16": 3, "u32": 4, "i32": 5, "f32": 6, "bool": 7,
          "str": 8, "arr": 9, "u64": 10, "i64": 11, "f64": 12}
GGUF_FMT = {"u8": "<B", "i8": "<b", "u16": "<H", "i16": "<h", "u32": "<I", "i32": "<i",
            "f32": "<f", "bool": "<B", "u64": "<Q", "i64": "<q", "f64": "<d"}


def gstr(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def gval(t, v):
    if t == "str":
        return gstr(v)
    if t == "arr":
        et, items = v
        return struct.pack("<IQ", GGUF_T[et], len(items)) + b"".join(gval(et, x) for x in items)
    return struct.pack(GGUF_FMT[t], v)


def gguf(kvs, tensors, version=3, align=32):
    """kvs: list of (key, type, value); tensors: list of (name, dims, ggml type, raw)."""
    out_b = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs))
    for k, t, v in kvs:
        out_b += gstr(k) + struct.pack("<I", GGUF_T[t]) + gval(t, v)
    off, blob = 0, b""
    for name, dims, typ, raw in tensors:
        out_b += gstr(name) + struct.pack("<I", len(dims)) + struct.pack("<%dq" % len(dims), *dims)
        out_b += struct.pack("<IQ", typ, off)
        pad = (-len(raw)) % align
        blob += raw + bytes(pad)
        off += len(raw) + pad
    out_b += bytes((-len(out_b)) % align)
    return out_b + blob


def tiny_llama_gguf(arch="llama", d=32, ffn=64, heads=2, kv=1, layers=1, vocab=260):
    hd = d // heads
    kvs = [("general.architecture", "str", arch), (arch + ".context_length", "u32", 64),
           (arch + ".embedding_length", "u32", d), (arch + ".block_count", "u32", layers),
           (arch + ".feed_forward_length", "u32", ffn), (arch + ".attention.head_count", "u32", heads),
           (arch + ".attention.head_count_kv", "u32", kv),
           (arch + ".attention.layer_norm_rms_epsilon", "f32", 1e-5),
           (arch + ".rope.freq_base", "f32", 10000.0),
           ("tokenizer.ggml.model", "str", "llama"),
           ("tokenizer.ggml.tokens", "arr", ("str", ["<unk>", "<s>", "</s>"] +
                                             ["<0x%02X>" % b for b in range(256)] + ["\u2581a"])),
           ("tokenizer.ggml.scores", "arr", ("f32", [0.0] * 259 + [-1.0])),
           ("tokenizer.ggml.token_type", "arr", ("i32", [2, 3, 3] + [6] * 256 + [1])),
           ("tokenizer.ggml.bos_token_id", "u32", 1), ("tokenizer.ggml.eos_token_id", "u32", 2)]
    t = [("token_embd.weight", [d, vocab], 0, floats(d * vocab)),
         ("output_norm.weight", [d], 0, floats(d))]
    for i in range(layers):
        b = "blk.%d." % i
        t += [(b + "attn_norm.weight", [d], 0, floats(d)), (b + "ffn_norm.weight", [d], 0, floats(d)),
              (b + "attn_q.weight", [d, heads * hd], 0, floats(d * heads * hd)),
              (b + "attn_k.weight", [d, kv * hd], 1, bytes(2 * d * kv * hd)),
              (b + "attn_v.weight", [d, kv * hd], 30, bytes(2 * d * kv * hd)),
              (b + "attn_output.weight", [heads * hd, d], 0, floats(d * heads * hd)),
              (b + "ffn_gate.weight", [d, ffn], 0, floats(d * ffn)),
              (b + "ffn_up.weight", [d, ffn], 0, floats(d * ffn)),
              (b + "ffn_down.weight", [ffn, d], 0, floats(d * ffn))]
    return gguf(kvs, t)


out("gguf", "llama.gguf", tiny_llama_gguf())
out("gguf", "all_types.gguf", gguf(
    [("general.alignment", "u32", 64), ("a", "u8", 1), ("b", "i8", -1), ("c", "u16", 2),
     ("d", "i16", -2), ("e", "i32", -3), ("f", "f32", 0.5), ("g", "bool", 1), ("h", "u64", 4),
     ("i", "i64", -4), ("j", "f64", 0.25), ("k", "arr", ("arr", [("i32", [1, 2]), ("i32", [])]))],
    [("q8", [32, 2], 8, bytes(68)), ("q4k", [256], 12, bytes(144)), ("f16", [3], 1, bytes(6))],
    version=2, align=64))
out("gguf", "gpt2_vocab.gguf", gguf(
    [("tokenizer.ggml.model", "str", "gpt2"), ("tokenizer.ggml.pre", "str", "gpt-2"),
     ("tokenizer.ggml.tokens", "arr", ("str", ["a", "b", "ab", "\u0120", "<|endoftext|>"])),
     ("tokenizer.ggml.token_type", "arr", ("i32", [1, 1, 1, 1, 3])),
     ("tokenizer.ggml.merges", "arr", ("str", ["a b"]))], []))

# ---------------------------------------------------------------- deep and mistyped
# Every JSON reader gets documents nested past core/json.h's limit (64) and
# fields of the wrong type: what the first corpus missed (issue 60).
def deep(n, open_="[", close="]", inner="1"):
    return open_ * n + inner + close * n


out("json", "object.json", json.dumps({"a": [1, {"b": "x"}], "step": 3, "id": "q"}))
out("json", "deep_array.json", deep(2000))
out("json", "deep_object.json", deep(2000, '{"a":', "}"))
out("json", "mistyped.json", json.dumps({"step": "x", "d_model": "64", "shards": 5, "id": [1]}))
out("json", "deep_unterminated.json", "[" * 5000)
out("corpus", "docs.jsonl", '{"text": "one"}\n\n{"text": "two"}\n')
out("corpus", "deep.jsonl", '{"text": "a"}\n{"text": ' + deep(1000) + "}\n")
out("corpus", "mistyped.jsonl", '{"text": 5}\n')
out("chat_template", "chatml.json", json.dumps({
    "chat_template": "{{ '<|im_start|>system\\nYou are kind.<|im_end|>\\n' }}<|im_start|><|im_end|>",
    "bos_token": "<s>", "eos_token": {"content": "</s>"}}))
out("chat_template", "named.json", json.dumps({"chat_template": [
    {"name": "default", "template": "<|start_header_id|><|eot_id|>"}]}))
out("chat_template", "deep.json", '{"chat_template": ' + deep(1000) + "}")
out("chat_template", "mistyped.json", json.dumps({"chat_template": 5, "bos_token": [1]}))
out("safetensors_index", "index.json", json.dumps(
    {"metadata": {"total_size": 8}, "weight_map": {"a": "model-00001-of-00001.safetensors"}}))
out("safetensors_index", "deep.json", '{"weight_map": ' + deep(1000, '{"a":', "}") + "}")
out("safetensors_index", "mistyped.json", json.dumps({"weight_map": {"a": 5}}))
for target, name, doc in [
        ("hf_config", "deep.json", dict(base, rope_scaling=json.loads(deep(500, '{"x":', "}")))),
        ("hf_config", "mistyped.json", dict(base, hidden_size="64", num_hidden_layers=[2])),
        ("shards_manifest", "mistyped.json", {"format": "mtpspec-shards", "version": 1,
                                              "target_fingerprint": 5, "seq_len": "4",
                                              "hidden_dtype": [], "d_model": "64", "shards": 5}),
        ("prompts", "mistyped.jsonl", {"prompt": "x", "id": {"a": 1}, "lang": 3})]:
    out(target, name, json.dumps(doc))
out("shards_manifest", "deep.json", '{"format": ' + deep(1000) + "}")
out("prompts", "deep.jsonl", '{"prompt": "x", "kind": ' + deep(1000) + "}\n")
out("tokenizer_json", "deep.json", '{"model": {"type": "BPE", "vocab": {}, "merges": []}, '
    '"normalizer": ' + deep(500, '{"type": "Sequence", "normalizers": [', "]}", "null") + "}")
out("tokenizer_json", "mistyped.json", json.dumps({
    "model": {"type": "BPE", "vocab": {"a": "0"}, "merges": [5]},
    "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(a+)+$"}, "behavior": 3}}))
out("http_request", "deep", b"\x01" + ('{"messages": [{"role": "user", "content": '
                                       + "[" * 3000).encode())
out("http_request", "mistyped", b"\x00" + json.dumps({"prompt": {"a": 1}, "max_tokens": "9"}).encode())
