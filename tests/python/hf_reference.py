"""transformers as the reference (label `reference`; the venv of
scripts/install-reference.sh): logits of a Hugging Face checkpoint or of a
GGUF file (transformers dequantizes it), and a GGUF rewritten with every
tensor dequantized to F32 (gguf's own dequantizer) so that mtpspec holds the
same fp32 weights.

  hf_reference.py versions
      {"torch": ..., "transformers": ..., "gguf": ...}
  hf_reference.py logits MODEL IDS [GGUF_FILE]
      MODEL: a checkpoint folder, or (with GGUF_FILE) the folder of that
      GGUF. IDS: comma-separated token ids. Prints {"logits": [[...], ...]}
      (one row per position, fp32, eager attention).
  hf_reference.py greedy MODEL IDS N [GGUF_FILE]
      N greedy steps: {"ids": [...], "margins": [top1 - top2 logit, ...]}.
      IDS may hold several prompts separated by ';' (the model loads once):
      then {"runs": [{"ids": ..., "margins": ...}, ...]}.
  hf_reference.py dequantize IN.gguf OUT.gguf
      The same metadata; every tensor as F32. Prints {"written": OUT}.
"""
import json
import sys


def versions():
    import gguf
    import torch
    import transformers
    from importlib.metadata import version
    return {"torch": torch.__version__, "transformers": transformers.__version__,
            "gguf": version("gguf")}


def load(model, gguf_file):
    import torch
    from transformers import AutoModelForCausalLM
    kw = {"gguf_file": gguf_file} if gguf_file else {}
    m = AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32,
                                             attn_implementation="eager", **kw)
    return m.eval()


def logits(model, ids, gguf_file=None):
    import torch
    m = load(model, gguf_file)
    with torch.no_grad():
        out = m(torch.tensor([ids])).logits[0]
    return {"logits": out.tolist()}


def greedy(model, prompts, n, gguf_file=None):
    import torch
    m = load(model, gguf_file)
    runs = []
    for ids in prompts:
        seq, margins = list(ids), []
        with torch.no_grad():
            for _ in range(n):
                row = m(torch.tensor([seq])).logits[0, -1]
                top = torch.topk(row, 2)
                margins.append(float(top.values[0] - top.values[1]))
                seq.append(int(top.indices[0]))
        runs.append({"ids": seq[len(ids):], "margins": margins})
    return runs[0] if len(runs) == 1 else {"runs": runs}


def dequantize(src, out):
    import gguf
    import numpy as np
    r = gguf.GGUFReader(src)
    arch = r.fields["general.architecture"].contents()
    w = gguf.GGUFWriter(out, arch)
    for name, f in r.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        if name == "general.file_type":
            w.add_file_type(gguf.LlamaFileType.ALL_F32)
            continue
        t = f.types[0]
        if t == gguf.GGUFValueType.ARRAY:
            w.add_array(name, f.contents())
        else:
            w.add_key_value(name, f.contents(), t)
    for t in r.tensors:
        x = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        shape = list(reversed([int(d) for d in t.shape]))  # ggml dims -> row-major
        w.add_tensor(t.name, np.ascontiguousarray(x.reshape(shape)))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main(a):
    ids = lambda s: [int(x) for x in s.split(",") if x]
    if a[:1] == ["versions"]:
        print(json.dumps(versions()))
    elif a[:1] == ["logits"] and len(a) in (3, 4):
        print(json.dumps(logits(a[1], ids(a[2]), a[3] if len(a) == 4 else None)))
    elif a[:1] == ["greedy"] and len(a) in (4, 5):
        prompts = [ids(p) for p in a[2].split(";")]
        print(json.dumps(greedy(a[1], prompts, int(a[3]), a[4] if len(a) == 5 else None)))
    elif a[:1] == ["dequantize"] and len(a) == 3:
        dequantize(a[1], a[2])
        print(json.dumps({"written": a[2]}))
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
