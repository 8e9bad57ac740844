"""Helpers of bench/real-models.sh and of the `real` tests, run in the `real`
venv (llama-cpp-python, gguf, jinja2 and the PyPI model packages). Every
llama.cpp number here goes through llama-cpp-python's Python API: the
decoding loop and its prompt-lookup drafting are Python around llama.cpp's
C decode (labelled "llama.cpp (Python API)" in the reports).

  real_models.py prompts GGUF OUT.jsonl [COUNT]
      Bench prompts for the model: the user questions below through the
      model's own chat template when the GGUF has one (an instruction-tuned
      model), else the plain-text openers (a base model).
  real_models.py distill-corpus GGUF CORPUS OUT.jsonl COUNT
      Documents for `mtpspec precompute --self-distill` whose whole text is
      the prompt: for an instruction-tuned model, a request about a passage
      of CORPUS (paragraphs of 20..80 words) through the chat template, so
      the model's own answers are the training text; for a base model, the
      passages themselves.
  real_models.py decode GGUF PROMPTS N THREADS [lookup]
      Greedy generation of up to N tokens per prompt (stops at an
      end-of-generation token): per prompt the ids and decode tok/s (prompt
      processing excluded). With `lookup`: llama-cpp-python's prompt-lookup
      decoding (LlamaPromptLookupDecoding, max n-gram 2, 10 drafts).
  real_models.py ours-decode MTPSPEC GGUF PROMPTS N THREADS
      The same with `mtpspec generate --no-spec --json` (its decode tok/s).
  real_models.py spec-equals-plain MTPSPEC GGUF DRAFTER PROMPTS N
      The `real` test of a trained drafter: for each prompt, `mtpspec
      generate` with the drafter (greedy, and T 0.7 coupled, seed 1) gives
      exactly the ids of --no-spec. Exit 1 on a difference.
  real_models.py summary DIR MODEL / report OUT MODEL...
      The measurements of DIR as one JSON object / the Markdown table.
  real_models.py mq GGUF THREADS QMAX POS
      llama.cpp's verify cost m(q) = t(decode of q tokens, logits for each) /
      t(decode of 1 token) after POS tokens of context; median of reps.
  real_models.py compare GGUF MTPSPEC PROMPTS N
      The `real` test: for each prompt, llama.cpp's token ids of the prompt
      equal ours (`mtpspec tokenize`), and our greedy ids (`mtpspec generate
      --no-spec`) equal llama.cpp's up to its first near-tie (top-2 logit
      margin below NEAR_TIE). Exit 1 on a difference.
"""
import json
import statistics
import subprocess
import sys
import time

import numpy as np

# User questions written for this benchmark, and openers for a base model.
QUESTIONS = [
    "What is the capital of France?", "Write a haiku about autumn leaves.",
    "Explain what a hash table is in two sentences.", "Give me three tips for sleeping better.",
    "How do I reverse a list in Python?", "What causes the seasons on Earth?",
    "Summarize the plot of Romeo and Juliet.", "Why is the sky blue?",
    "Write a short email asking for a meeting next week.", "What is photosynthesis?",
    "List the planets of the solar system in order.", "How does a bicycle stay upright?",
    "Translate 'good morning' into Spanish and French.", "What is the difference between weather and climate?",
    "Suggest a name for a small coffee shop.", "Explain recursion to a child.",
]
OPENERS = [
    "The history of the printing press begins", "In the morning the village market",
    "The main advantage of renewable energy is", "Once upon a time, in a small town by the sea,",
    "The recipe calls for two cups of flour and", "Scientists have long wondered why",
    "The first chapter of the book describes", "To install the software, first",
    "The city council met on Tuesday to discuss", "A good teacher always",
    "The river flows through the valley and", "During the winter months, birds",
    "The old lighthouse keeper", "In mathematics, a prime number is",
    "The train was late again, so", "Her letter began with the words",
]
# A top-2 logit margin below this is a near-tie. Both engines run the
# file's quantized blocks against activations quantized to 8 bits, but each
# its own way (ggml's Q8_1/Q8_K activation blocks; our kernels/quant_act.cc),
# so a logit moves by up to a few tenths between them: at every divergence
# seen on SmolLM2 Q4_1 and Gemma 3 Q4_K_M our token was llama.cpp's second
# choice, 0.15-0.29 below its first. On the same weights dequantized to fp32
# our greedy ids equal transformers' (label `reference`,
# TransformersRefGguf), so the model itself is not in question there.
NEAR_TIE = 0.5


def llama(gguf, threads, logits_all=False, draft=None, n_ctx=2048):
    from llama_cpp import Llama
    return Llama(model_path=gguf, n_ctx=n_ctx, n_batch=512, n_threads=threads,
                 n_threads_batch=threads, logits_all=logits_all, draft_model=draft,
                 verbose=False)


def is_eog(llm, tok):
    import llama_cpp
    vocab = llama_cpp.llama_model_get_vocab(llm._model.model)
    return bool(llama_cpp.llama_vocab_is_eog(vocab, tok))


def prompts(gguf, out, count=16):
    from gguf import GGUFReader
    import jinja2
    r = GGUFReader(gguf)
    f = r.fields.get("tokenizer.chat_template")
    rows = []
    if f is not None:
        tmpl = jinja2.Environment().from_string(f.contents())
        for q in QUESTIONS[:count]:
            text = tmpl.render(messages=[{"role": "user", "content": q}],
                               add_generation_prompt=True, bos_token="", eos_token="")
            rows.append({"prompt": text, "chat": True})
    else:
        rows = [{"prompt": o, "chat": False} for o in OPENERS[:count]]
    with open(out, "w") as fo:
        for row in rows:
            fo.write(json.dumps(row) + "\n")


REQUESTS = ["Summarize this passage in a few sentences:", "Continue this story:",
            "Explain this passage in simple words:", "What is the main idea of this text?",
            "Rewrite this passage in modern English:", "Answer briefly: who is speaking here, and why?"]


def chat_template(gguf):
    from gguf import GGUFReader
    import jinja2
    f = GGUFReader(gguf).fields.get("tokenizer.chat_template")
    return jinja2.Environment().from_string(f.contents()) if f is not None else None


def distill_corpus(gguf, corpus, out, count):
    tmpl = chat_template(gguf)
    paras = []
    for block in open(corpus, encoding="utf-8").read().split("\n\n"):
        words = block.split()
        if 20 <= len(words) <= 80:
            paras.append(" ".join(words))
    rng = np.random.default_rng(7)
    with open(out, "w") as fo:
        for i in rng.permutation(len(paras))[:count]:
            text = paras[int(i)]
            if tmpl is not None:
                req = REQUESTS[int(i) % len(REQUESTS)]
                text = tmpl.render(messages=[{"role": "user", "content": f"{req}\n\n{text}"}],
                                   add_generation_prompt=True, bos_token="", eos_token="")
            fo.write(json.dumps({"text": text}) + "\n")


def read_prompts(path):
    return [json.loads(l)["prompt"] for l in open(path) if l.strip()]


def tokenize(llm, text):
    return llm.tokenize(text.encode(), add_bos=True, special=True)


def decode(gguf, prompts_path, n, threads, lookup=False):
    draft = None
    if lookup:
        from llama_cpp.llama_speculative import LlamaPromptLookupDecoding
        draft = LlamaPromptLookupDecoding(max_ngram_size=2, num_pred_tokens=10)
    llm = llama(gguf, threads, draft=draft)
    out = []
    for text in read_prompts(prompts_path):
        toks = tokenize(llm, text)
        llm.reset()
        ids, times = [], []
        for tok in llm.generate(toks, temp=0.0, top_k=1, top_p=1.0, min_p=0.0,
                                repeat_penalty=1.0, reset=True):
            times.append(time.perf_counter())
            if is_eog(llm, tok):
                break
            ids.append(int(tok))
            if len(ids) >= n:
                break
        rate = (len(times) - 1) / (times[-1] - times[0]) if len(times) > 1 else 0.0
        out.append({"prompt_tokens": len(toks), "ids": ids, "decode_tok_s": rate})
    return {"engine": "llama.cpp (Python API)" + (" prompt lookup" if lookup else ""),
            "threads": threads, "prompts": out}


def mq(gguf, threads, qmax, pos, reps=7):
    import llama_cpp
    llm = llama(gguf, threads, logits_all=True)
    vocab = llm.n_vocab()
    rng = np.random.default_rng(1)
    prefix = [int(x) for x in rng.integers(100, vocab - 1, pos)]
    llm.reset()
    llm.eval(prefix)
    times = {}
    for q in range(1, qmax + 1):
        batch = [int(x) for x in rng.integers(100, vocab - 1, q)]
        ts = []
        for _ in range(reps):
            llm._ctx.kv_cache_seq_rm(-1, pos, -1)
            llm._batch.set_batch(batch=batch, n_past=pos, logits_all=True)
            t0 = time.perf_counter()
            llm._ctx.decode(llm._batch)
            ts.append(time.perf_counter() - t0)
        times[q] = statistics.median(ts)
    return {"engine": "llama.cpp (Python API, llama_decode)", "threads": threads, "pos": pos,
            "decode_ms": times[1] * 1e3,
            "m": {str(q): times[q] / times[1] for q in times}}


def ours_ids(mtpspec, gguf, text, n):
    r = subprocess.run([mtpspec, "generate", "-m", gguf, "-p", text, "-n", str(n), "--no-spec",
                        "--json", "--threads", "2"], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"mtpspec generate failed: {r.stderr[-2000:]}")
    j = json.loads(r.stdout)
    return j["prompt_ids"], j["token_ids"]


def compare(gguf, mtpspec, prompts_path, n):
    llm = llama(gguf, 2, logits_all=True)
    failures, compared_total = 0, 0
    for k, text in enumerate(read_prompts(prompts_path)):
        toks = tokenize(llm, text)
        our_prompt, ours = ours_ids(mtpspec, gguf, text, n)
        if our_prompt != toks:
            print(f"prompt {k}: token ids differ\n  llama.cpp {toks}\n  mtpspec   {our_prompt}")
            failures += 1
            continue
        llm.reset()
        llm.eval(toks)
        compared, why = 0, "length"
        for i in range(n):
            row = np.asarray(llm.scores[llm.n_tokens - 1])
            top = np.argsort(-row)[:2]
            if row[top[0]] - row[top[1]] < NEAR_TIE:
                why = f"near-tie at step {i} (margin {row[top[0]] - row[top[1]]:.4f})"
                break
            theirs = int(top[0])
            if is_eog(llm, theirs):
                why = "end of generation"
                if i < len(ours):
                    print(f"prompt {k}: llama.cpp ends at step {i}, mtpspec goes on with {ours[i]}")
                    failures += 1
                break
            if i >= len(ours) or ours[i] != theirs:
                got = ours[i] if i < len(ours) else "end"
                gap = f", {row[theirs] - row[got]:.4f} below it in llama.cpp's logits" \
                    if i < len(ours) else ""
                print(f"prompt {k}: step {i}: llama.cpp {theirs} (margin "
                      f"{row[top[0]] - row[top[1]]:.4f}), mtpspec {got}{gap}")
                failures += 1
                why = "differs"
                break
            compared += 1
            llm.eval([theirs])
        compared_total += compared
        print(f"prompt {k}: {compared} greedy ids equal ({why})")
    print(f"{compared_total} ids compared; {failures} prompts differ")
    return failures == 0


def ours_decode(mtpspec, gguf, prompts_path, n, threads):
    out = []
    for text in read_prompts(prompts_path):
        r = subprocess.run([mtpspec, "generate", "-m", gguf, "-p", text, "-n", str(n), "--no-spec",
                            "--json", "--threads", str(threads)], capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(f"mtpspec generate failed: {r.stderr[-2000:]}")
        j = json.loads(r.stdout)
        out.append({"prompt_tokens": len(j["prompt_ids"]), "ids": j["token_ids"],
                    "decode_tok_s": j["timings"]["generation_tok_s"]})
    return {"engine": "mtpspec", "threads": threads, "prompts": out}


def generate_ids(mtpspec, gguf, text, n, extra):
    r = subprocess.run([mtpspec, "generate", "-m", gguf, "-p", text, "-n", str(n), "--json",
                        "--threads", "2"] + extra, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"mtpspec generate failed: {r.stderr[-2000:]}")
    return json.loads(r.stdout)["token_ids"]


def spec_equals_plain(mtpspec, gguf, drafter, prompts_path, n):
    differing = 0
    for k, text in enumerate(read_prompts(prompts_path)):
        for temp in (["--temp", "0"], ["--temp", "0.7", "--seed", "1"]):
            plain = generate_ids(mtpspec, gguf, text, n, temp + ["--no-spec"])
            spec = generate_ids(mtpspec, gguf, text, n, temp + ["--drafter", drafter])
            same = plain == spec
            differing += not same
            print(f"prompt {k} {' '.join(temp)}: {len(plain)} ids, speculative "
                  f"{'==' if same else '!='} plain")
    print(f"{differing} outputs differing")
    return differing == 0


def load_json(path):
    import os
    return json.load(open(path)) if os.path.exists(path) else None


def mean_rate(runs):
    """Token-weighted decode rate over the prompts of every run."""
    toks = sum(len(p["ids"]) for r in runs for p in r["prompts"])
    secs = sum(len(p["ids"]) / p["decode_tok_s"] for r in runs for p in r["prompts"]
               if p["decode_tok_s"] > 0)
    return toks / secs if secs else None


def summary(d, model):
    import glob
    out = {"model": model, "threads": {}}
    t_all = sorted({int(p.split("-t")[-1].split("-")[0].split(".")[0])
                    for p in glob.glob(f"{d}/plain-ours-t*.json")})
    for t in t_all:
        ours = [load_json(p) for p in sorted(glob.glob(f"{d}/plain-ours-t{t}-r*.json"))]
        theirs = [load_json(p) for p in sorted(glob.glob(f"{d}/plain-llama-t{t}-r*.json"))]
        row = {"plain_ours_tok_s": mean_rate(ours), "plain_llama_tok_s": mean_rate(theirs)}
        lookup = load_json(f"{d}/lookup-llama-t{t}.json")
        if lookup:
            row["lookup_llama_tok_s"] = mean_rate([lookup])
        mq_ours, mq_llama = load_json(f"{d}/mq-ours-t{t}.json"), load_json(f"{d}/mq-llama-t{t}.json")
        if mq_ours:
            row["m_ours"] = mq_ours["rows"][0]["verify_multiplier"]
        if mq_llama:
            row["m_llama"] = [mq_llama["m"][str(q)] for q in range(1, len(mq_llama["m"]) + 1)]
        row["spec"] = load_json(f"{d}/spec-t{t}.json")
        out["threads"][str(t)] = row
    out["train"] = load_json(f"{d}/train-time.json")
    return out


def fmt(x, spec="{:.1f}"):
    return "–" if x is None else spec.format(x)


def report(out_dir, models):
    """Ratios from runs that interleave what they compare: ours vs llama.cpp
    plain (stage 2), speculative vs plain (mtpspec bench)."""
    lines = ["| model | threads | plain tok/s: ours / llama.cpp (Py API) | ours ÷ llama.cpp | "
             "speculative tok/s (ours) | speculative ÷ plain (ours; end to end; T 0.7) | llama.cpp prompt "
             "lookup tok/s (Py API) | live acceptance per module | tokens per cycle | outputs "
             "differing | m(q) q=2,4,8: ours / llama.cpp |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for m in models:
        s = load_json(f"{out_dir}/{m}/summary.json")
        if not s:
            continue
        for t, row in s["threads"].items():
            spec = row.get("spec") or {}
            ours, theirs = row.get("plain_ours_tok_s"), row.get("plain_llama_tok_s")
            temps = {round(x["temperature"], 1): x for x in spec.get("by_temperature", [])}
            acc = spec.get("acceptance_live")
            m_o, m_l = row.get("m_ours"), row.get("m_llama")
            mq = "–" if not (m_o and m_l) else " ".join(
                f"{m_o[q - 1]:.2f}/{m_l[q - 1]:.2f}" for q in (2, 4, 8))
            lines.append("| {} | {} | {} / {} | {} | {} | {} ({}; {}) | {} | {} | {} | {} | {} |".format(
                m, t, fmt(ours), fmt(theirs), fmt(ours / theirs if ours and theirs else None, "{:.2f}"),
                fmt(spec.get("spec_tok_s")), fmt(spec.get("speedup"), "{:.2f}"),
                fmt(spec.get("end_to_end_speedup"), "{:.2f}"),
                fmt(temps.get(0.7, {}).get("speedup"), "{:.2f}"), fmt(row.get("lookup_llama_tok_s")),
                "–" if acc is None else " ".join(f"{a:.2f}" for a in acc),
                fmt(spec.get("tokens_per_cycle"), "{:.2f}"),
                "–" if not spec else sum(x.get("flips", 0) for x in temps.values()) + spec.get("flips", 0),
                mq))
    return "\n".join(lines)


def main(a):
    if a[:1] == ["prompts"] and len(a) in (3, 4):
        prompts(a[1], a[2], int(a[3]) if len(a) == 4 else 16)
    elif a[:1] == ["distill-corpus"] and len(a) == 5:
        distill_corpus(a[1], a[2], a[3], int(a[4]))
    elif a[:1] == ["decode"] and len(a) in (5, 6):
        print(json.dumps(decode(a[1], a[2], int(a[3]), int(a[4]), a[5:] == ["lookup"])))
    elif a[:1] == ["ours-decode"] and len(a) == 6:
        print(json.dumps(ours_decode(a[1], a[2], a[3], int(a[4]), int(a[5]))))
    elif a[:1] == ["spec-equals-plain"] and len(a) == 6:
        sys.exit(0 if spec_equals_plain(a[1], a[2], a[3], a[4], int(a[5])) else 1)
    elif a[:1] == ["summary"] and len(a) == 3:
        print(json.dumps(summary(a[1], a[2]), indent=1))
    elif a[:1] == ["report"] and len(a) >= 2:
        print(report(a[1], a[2:]))
    elif a[:1] == ["mq"] and len(a) == 5:
        print(json.dumps(mq(a[1], int(a[2]), int(a[3]), int(a[4]))))
    elif a[:1] == ["compare"] and len(a) == 5:
        sys.exit(0 if compare(a[1], a[2], a[3], int(a[4])) else 1)
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
