"""An independent reference of Gemma 4's assistant drafting for a Gemma 4
target, in float64 numpy, written from the published model (transformers'
Gemma4TextModel, Gemma4AssistantForCausalLM and the generation loop that
drives it, read not copied) and sharing no code with mtpspec. Files are read
by their Hugging Face names: config.json and model.safetensors of each.

usage: assistant_reference.py TARGET_DIR ASSISTANT_DIR TOKENS N0 STEPS OUT.json [PERTURB]
  TOKENS: comma-separated ids. For every committed length N in N0..len(TOKENS)
  the assistant's greedy chain of STEPS drafts, as transformers' loop drafts
  right after the prefill: the target has processed tokens[0 .. N-2]; step 1
  embeds tokens[N-1] with the target's table and reads the target's last
  hidden state after its final norm at position N-2; every step sits at
  position N-1 and attends to the target's K/V of the positions before it
  (a sliding layer: the last sliding_window + 1 of them, as the assistant's
  bidirectional sliding mask flipped over the cache keeps them). Writes
  {"chains": [[{"token", "ids" (null: whole vocabulary), "logits"}, ...], ...]}.
  PERTURB (for the tests that must see it): wrong_kind (each layer reads the
  other kind's K/V), first_owner (the first owner of its kind, not the
  last), window (sliding layers see window keys, not window + 1),
  pre_norm (the target's hidden before its final norm), full_head (the
  centroid head ignored).
"""
import json
import struct
import sys

import numpy as np


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    base = 8 + n
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        b, e = t["data_offsets"]
        buf = raw[base + b:base + e]
        dt = t["dtype"]
        if dt == "F32":
            a = np.frombuffer(buf, dtype="<f4").astype(np.float64)
        elif dt == "BF16":
            a = (np.frombuffer(buf, dtype="<u2").astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        elif dt == "I64":
            a = np.frombuffer(buf, dtype="<i8")
        elif dt == "I32":
            a = np.frombuffer(buf, dtype="<i4").astype(np.int64)
        else:
            raise SystemExit("unsupported dtype " + dt)
        out[name] = a.reshape(t["shape"])
        out[name + ".dtype"] = dt
    return out


def rms(x, w, eps):
    y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return y if w is None else y * w


def gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def scale_in(v, dt):
    # transformers multiplies a table by its scale cast to the table's dtype.
    if dt == "BF16":
        f = np.array([v], dtype=np.float32).view(np.uint32)
        f = ((f + 0x7FFF + ((f >> 16) & 1)) >> 16) << 16
        return float(f.view(np.float32)[0])
    return float(np.float32(v))


class Text:
    """A gemma4_text config by transformers' rules (Gemma4TextConfig)."""

    def __init__(self, c):
        self.c = c
        self.d = c["hidden_size"]
        self.L = c["num_hidden_layers"]
        self.H = c["num_attention_heads"]
        self.eps = c.get("rms_norm_eps", 1e-6)
        self.window = c["sliding_window"]
        types = list(c["layer_types"])
        types[-1] = "full_attention"
        self.full = [t == "full_attention" for t in types]
        kv = c.get("num_key_value_heads", 4)
        keqv = c.get("attention_k_eq_v", False)
        gkv = c.get("num_global_key_value_heads") if keqv else None
        self.hd = [c.get("global_head_dim", 512) if f else c.get("head_dim", 256) for f in self.full]
        self.kv = [(gkv if gkv is not None else kv) if f else kv for f in self.full]
        self.keqv = [keqv and f for f in self.full]
        rp = c["rope_parameters"]
        self.rope = {True: rp["full_attention"], False: rp["sliding_attention"]}

    def inv_freq(self, full, hd):
        p = self.rope[full]
        theta = p["rope_theta"]
        inv = theta ** (-np.arange(0, hd, 2, dtype=np.float64) / hd)
        if p.get("rope_type", "default") == "proportional":
            rot = int(p.get("partial_rotary_factor", 1.0) * hd // 2)
            inv[rot:] = 0.0
            inv = inv / p.get("factor", 1.0)
        return inv


def rope(x, pos, inv):
    half = len(inv)
    a = pos * inv
    c, s = np.cos(a), np.sin(a)
    x0, x1 = x[..., :half].copy(), x[..., half:].copy()
    return np.concatenate([x0 * c - x1 * s, x1 * c + x0 * s], axis=-1)


def target_forward(tdir, toks):
    cfg = json.load(open(tdir + "/config.json"))
    c = cfg.get("text_config", cfg)
    T = Text(c)
    W = read_safetensors(tdir + "/model.safetensors")
    pre = "model.language_model." if "model.language_model.embed_tokens.weight" in W else "model."
    emb = W[pre + "embed_tokens.weight"]
    x = emb[toks] * scale_in(np.sqrt(T.d), W[pre + "embed_tokens.weight.dtype"])
    n = len(toks)
    ple = c.get("hidden_size_per_layer_input", 256) or 0
    if ple:
        P = T.L * ple
        pt = W[pre + "embed_tokens_per_layer.weight"][toks] * scale_in(
            np.sqrt(ple), W[pre + "embed_tokens_per_layer.weight.dtype"])
        pr = (x @ W[pre + "per_layer_model_projection.weight"].T) * float(np.float32(T.d ** -0.5))
        pr = rms(pr.reshape(n, T.L, ple), W[pre + "per_layer_projection_norm.weight"], T.eps)
        pli = (pr + pt.reshape(n, T.L, ple)) * float(np.float32(2.0 ** -0.5))
    shared = c.get("num_kv_shared_layers", 0)
    first = T.L - shared
    K, V = {}, {}
    for l in range(T.L):
        p = pre + "layers.%d." % l
        hd, kvh, H = T.hd[l], T.kv[l], T.H
        inv = T.inv_freq(T.full[l], hd)
        h = rms(x, W[p + "input_layernorm.weight"], T.eps)
        q = (h @ W[p + "self_attn.q_proj.weight"].T).reshape(n, H, hd)
        q = rms(q, W[p + "self_attn.q_norm.weight"], T.eps)
        q = np.stack([rope(q[t], t, inv) for t in range(n)])
        if l < first:
            k = (h @ W[p + "self_attn.k_proj.weight"].T).reshape(n, kvh, hd)
            v = k.copy() if T.keqv[l] else (h @ W[p + "self_attn.v_proj.weight"].T).reshape(n, kvh, hd)
            k = rms(k, W[p + "self_attn.k_norm.weight"], T.eps)
            k = np.stack([rope(k[t], t, inv) for t in range(n)])
            v = rms(v, None, T.eps)
            K[l], V[l] = k, v
            owner = l
        else:
            owner = max(o for o in range(first) if T.full[o] == T.full[l])
        att = np.zeros((n, H, hd))
        for t in range(n):
            keys = [s for s in range(t + 1) if T.full[l] or t - s < T.window]
            for hh in range(H):
                g = hh // (H // kvh)
                sc = np.array([q[t, hh] @ K[owner][s, g] for s in keys])
                pr_ = np.exp(sc - sc.max())
                pr_ /= pr_.sum()
                att[t, hh] = sum(pr_[j] * V[owner][s, g] for j, s in enumerate(keys))
        o = att.reshape(n, H * hd) @ W[p + "self_attn.o_proj.weight"].T
        x = x + rms(o, W[p + "post_attention_layernorm.weight"], T.eps)
        h = rms(x, W[p + "pre_feedforward_layernorm.weight"], T.eps)
        f = (gelu_tanh(h @ W[p + "mlp.gate_proj.weight"].T) * (h @ W[p + "mlp.up_proj.weight"].T)) @ W[p + "mlp.down_proj.weight"].T
        x = x + rms(f, W[p + "post_feedforward_layernorm.weight"], T.eps)
        if ple:
            e = gelu_tanh(x @ W[p + "per_layer_input_gate.weight"].T) * pli[:, l]
            x = x + rms(e @ W[p + "per_layer_projection.weight"].T, W[p + "post_per_layer_input_norm.weight"], T.eps)
        x = x * W[p + "layer_scalar"][0]
    # The K/V the assistant reads: the last non-shared layer of each kind,
    # and (perturbed) the first one.
    last = {f: max(l for l in range(first) if T.full[l] == f) for f in (True, False)}
    first_of = {f: min(l for l in range(first) if T.full[l] == f) for f in (True, False)}
    final = rms(x, W[pre + "norm.weight"], T.eps)
    return {"emb": emb, "emb_dt": W[pre + "embed_tokens.weight.dtype"], "d": T.d,
            "K": K, "V": V, "last": last, "first": first_of, "hidden": x, "final": final}


def assistant_chains(tgt, adir, toks, n0, steps, perturb):
    cfg = json.load(open(adir + "/config.json"))
    A = Text(cfg["text_config"])
    W = read_safetensors(adir + "/model.safetensors")
    ordered = cfg.get("use_ordered_embeddings", False)
    head = W["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings", True) else W["lm_head.weight"]
    escale = scale_in(np.sqrt(tgt["d"]), tgt["emb_dt"])
    chains = []
    for N in range(n0, len(toks) + 1):
        pos = N - 1
        state = (tgt["hidden"] if perturb == "pre_norm" else tgt["final"])[N - 2]
        tok = toks[N - 1]
        chain = []
        for _ in range(steps):
            x = np.concatenate([tgt["emb"][tok] * escale, state]) @ W["pre_projection.weight"].T
            for l in range(A.L):
                p = "model.layers.%d." % l
                kind = A.full[l] != (perturb == "wrong_kind")
                owner = (tgt["first"] if perturb == "first_owner" else tgt["last"])[kind]
                Kk, Vv = tgt["K"][owner], tgt["V"][owner]
                hd, H = A.hd[l], A.H
                kvh = Kk.shape[1]
                h = rms(x, W[p + "input_layernorm.weight"], A.eps)
                q = rms((h @ W[p + "self_attn.q_proj.weight"].T).reshape(H, hd), W[p + "self_attn.q_norm.weight"], A.eps)
                q = rope(q, pos, A.inv_freq(A.full[l], hd))
                keys = list(range(pos))
                if not A.full[l]:
                    keys = keys[-(A.window if perturb == "window" else A.window + 1):]
                att = np.zeros((H, hd))
                for hh in range(H):
                    g = hh // (H // kvh)
                    sc = np.array([q[hh] @ Kk[s, g] for s in keys])
                    pr = np.exp(sc - sc.max())
                    pr /= pr.sum()
                    att[hh] = sum(pr[j] * Vv[s, g] for j, s in enumerate(keys))
                x = x + rms(att.reshape(-1) @ W[p + "self_attn.o_proj.weight"].T, W[p + "post_attention_layernorm.weight"], A.eps)
                h = rms(x, W[p + "pre_feedforward_layernorm.weight"], A.eps)
                f = (gelu_tanh(h @ W[p + "mlp.gate_proj.weight"].T) * (h @ W[p + "mlp.up_proj.weight"].T)) @ W[p + "mlp.down_proj.weight"].T
                x = (x + rms(f, W[p + "post_feedforward_layernorm.weight"], A.eps)) * W[p + "layer_scalar"][0]
            xh = rms(x, W["model.norm.weight"], A.eps)
            state = xh @ W["post_projection.weight"].T
            if ordered and perturb != "full_head":
                C, k = cfg["num_centroids"], cfg["centroid_intermediate_top_k"]
                cl = xh @ W["masked_embedding.centroids.weight"].T
                sel = sorted(range(C), key=lambda i: (-cl[i], i))[:k]
                ordering = W["masked_embedding.token_ordering"].reshape(C, -1)
                ids = np.sort(ordering[sel].reshape(-1))
                logits = head[ids] @ xh
            else:
                ids = None
                logits = head @ xh
            best = int(np.argmax(logits))
            tok = int(ids[best]) if ids is not None else best
            chain.append({"token": tok, "ids": None if ids is None else [int(i) for i in ids],
                          "logits": [float(v) for v in logits]})
        chains.append(chain)
    return chains


def main():
    tdir, adir, toks, n0, steps, out = sys.argv[1:7]
    perturb = sys.argv[7] if len(sys.argv) > 7 else ""
    toks = [int(t) for t in toks.split(",")]
    tgt = target_forward(tdir, toks[:-1])
    chains = assistant_chains(tgt, adir, toks, int(n0), int(steps), perturb)
    with open(out, "w") as f:
        json.dump({"chains": chains}, f)


main()
