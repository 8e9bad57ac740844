"""GGUF fixtures written with the `gguf` PyPI package (llama.cpp's own writer),
its architecture names, tensor-name tables and key names, for the tests of
mtpspec's GGUF loader (tests/model/gguf_package_test.cc).

  gguf_fixture.py model HF_DIR OUT.gguf
      A random Hugging Face checkpoint (F32 safetensors, written by the C++
      test helpers) as llama.cpp's converter stores it: tensor names from
      gguf.get_tensor_name_map, Llama Q/K rows permuted for interleaved RoPE,
      Gemma norms stored as 1 + w, a tied lm_head dropped, dims reversed; a
      byte-fallback SentencePiece-style vocabulary of the config's size.
  gguf_fixture.py vocab KIND TOKENIZER_FILE OUT.gguf
      A vocabulary-only GGUF (llama.cpp ships such files) from a shared
      tokenizer, stored the way the converter stores that family:
      spm   - a SentencePiece .model (Llama 2): pieces, scores, types;
              "<unk>" typed CONTROL (tokenizer_config.json marks it special)
              and no unknown_token_id key;
      bpe:PRE - a byte-level tokenizer.json (Llama 3, Qwen): tokens in id
              order, added tokens CONTROL (special) or USER_DEFINED, "a b"
              merges, tokenizer.ggml.pre = PRE.
Prints nothing on success; exits 1 with a message otherwise.
"""
import json
import struct
import sys

import gguf
import numpy as np

ARCHS = {"llama": gguf.MODEL_ARCH.LLAMA, "qwen2": gguf.MODEL_ARCH.QWEN2,
         "qwen3": gguf.MODEL_ARCH.QWEN3, "gemma2": gguf.MODEL_ARCH.GEMMA2,
         "gemma3": gguf.MODEL_ARCH.GEMMA3}
HF_ARCH = {"LlamaForCausalLM": "llama", "Qwen2ForCausalLM": "qwen2",
           "Qwen3ForCausalLM": "qwen3", "Gemma2ForCausalLM": "gemma2",
           "Gemma3ForCausalLM": "gemma3"}


def read_safetensors(path):
    """name -> float32 array [row-major shape] (F32 files only)."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        if t["dtype"] != "F32":
            raise SystemExit(f"{path}: {name} is {t['dtype']}; the fixture reads F32 only")
        b, e = t["data_offsets"]
        out[name] = np.frombuffer(data[b:e], dtype=np.float32).reshape(t["shape"])
    return out


def permute(w, n_head):
    """llama.cpp's converter: Q/K rows reordered from HF's half-split RoPE
    layout to interleaved pairs, per head."""
    rows = w.shape[0]
    return (w.reshape(n_head, 2, rows // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def add_test_vocab(w, n):
    toks = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    scores = [0.0] * len(toks)
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL] + \
        [gguf.TokenType.BYTE] * 256
    letters = "abcdefghijklmnopqrstuvwxyz"
    k = 0
    while len(toks) < n:
        toks.append("\u2581" + letters[k] if k < 26 else
                    letters[k % 26] + letters[(k // 26) % 26] + str(k))
        scores.append(-float(k))
        types.append(gguf.TokenType.NORMAL)
        k += 1
    w.add_tokenizer_model("llama")
    w.add_token_list(toks)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)


def write_model(hf_dir, out):
    cfg = json.load(open(f"{hf_dir}/config.json"))
    name = HF_ARCH[cfg["architectures"][0]]
    arch = ARCHS[name]
    gemma = name.startswith("gemma")
    tensors = read_safetensors(f"{hf_dir}/model.safetensors")
    n_layers = cfg["num_hidden_layers"]
    n_head = cfg["num_attention_heads"]
    n_kv = cfg.get("num_key_value_heads", n_head)
    head_dim = cfg.get("head_dim", cfg["hidden_size"] // n_head)
    w = gguf.GGUFWriter(out, gguf.MODEL_ARCH_NAMES[arch])
    w.add_name("random test model")
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_block_count(n_layers)
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(n_head)
    w.add_head_count_kv(n_kv)
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    if name != "gemma2":
        w.add_rope_freq_base(cfg.get("rope_theta", 10000.0))
    if name != "qwen2":
        w.add_key_length(head_dim)
        w.add_value_length(head_dim)
    if name == "llama":
        w.add_vocab_size(cfg["vocab_size"])
        w.add_rope_dimension_count(head_dim)
    if name == "gemma2":
        w.add_attn_logit_softcapping(cfg["attn_logit_softcapping"])
        w.add_final_logit_softcapping(cfg["final_logit_softcapping"])
    if gemma:
        w.add_sliding_window(cfg["sliding_window"])
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    add_test_vocab(w, cfg["vocab_size"])
    names = gguf.get_tensor_name_map(arch, n_layers)
    tied = cfg.get("tie_word_embeddings", gemma)
    for hf_name, x in tensors.items():
        if hf_name == "lm_head.weight" and tied:
            continue
        gname = names.get_name(hf_name, try_suffixes=(".weight", ".bias"))
        if gname is None:
            raise SystemExit(f"{hf_dir}: gguf has no name for {hf_name}")
        x = np.array(x, dtype=np.float32)
        if name == "llama" and hf_name.endswith("q_proj.weight"):
            x = permute(x, n_head)
        if name == "llama" and hf_name.endswith("k_proj.weight"):
            x = permute(x, n_kv)
        if gemma and hf_name.endswith("norm.weight"):
            x = x + np.float32(1)
        w.add_tensor(gname, np.ascontiguousarray(x))
    finish(w)


def finish(w):
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_spm_vocab(path, out):
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=path)
    toks, scores, types = [], [], []
    for i in range(sp.vocab_size()):
        toks.append(sp.id_to_piece(i))
        scores.append(sp.get_score(i))
        t = gguf.TokenType.NORMAL
        if sp.is_unknown(i):
            t = gguf.TokenType.UNKNOWN
        elif sp.is_control(i):
            t = gguf.TokenType.CONTROL
        elif sp.is_unused(i):
            t = gguf.TokenType.UNUSED
        elif sp.is_byte(i):
            t = gguf.TokenType.BYTE
        types.append(t)
    types[sp.unk_id()] = gguf.TokenType.CONTROL  # marked special by tokenizer_config.json
    w = gguf.GGUFWriter(out, "llama")
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(toks)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(sp.bos_id())
    w.add_eos_token_id(sp.eos_id())
    finish(w)


def write_bpe_vocab(path, pre, out):
    j = json.load(open(path))
    vocab = j["model"]["vocab"]
    added = j.get("added_tokens", [])
    n = max([len(vocab)] + [v + 1 for v in vocab.values()] + [a["id"] + 1 for a in added])
    toks = [f"[PAD{i}]" for i in range(n)]
    types = [gguf.TokenType.USER_DEFINED] * n
    for t, i in vocab.items():
        toks[i] = t
        types[i] = gguf.TokenType.NORMAL
    for a in added:
        toks[a["id"]] = a["content"]
        types[a["id"]] = gguf.TokenType.CONTROL if a["special"] else gguf.TokenType.USER_DEFINED
    merges = [m if isinstance(m, str) else " ".join(m) for m in j["model"]["merges"]]
    w = gguf.GGUFWriter(out, "llama")
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(toks)
    w.add_token_types(types)
    w.add_token_merges(merges)
    finish(w)


def main(argv):
    if len(argv) >= 3 and argv[0] == "model":
        write_model(argv[1], argv[2])
    elif len(argv) == 4 and argv[0] == "vocab" and argv[1] == "spm":
        write_spm_vocab(argv[2], argv[3])
    elif len(argv) == 4 and argv[0] == "vocab" and argv[1].startswith("bpe:"):
        write_bpe_vocab(argv[2], argv[1][4:], argv[3])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
