#!/usr/bin/env bash
# Our K-module MTP drafter against a drafter of Gemma 4's assistant
# architecture trained here, on equal terms (issue 56, item 5;
# docs/perf/gemma4.md "K-module drafter vs an assistant trained here"):
#
#  1. one jobs file: the corpus cut into prompts that the target continues
#     greedily (`train --online --jobs-only --self-distill --temp 0`);
#  2. for K = 1..4: the K-module drafter (`train --online-jobs`, then
#     `export`) and an assistant from scratch (`train-assistant
#     --online-jobs`), both with the same jobs, seed, --batch and --steps:
#     the same self-distilled sequences in the same order (the assistant's
#     trainer visits them in the K-module trainer's order), so the same
#     token budget;
#  3. each drafter at its own K: `bench --cycle-cost` (live acceptance per
#     position, tokens per cycle, draft cost per cycle and per draft step
#     relative to a decode measured interleaved, speed-up, outputs differing
#     from plain);
#  4. for each architecture's best K (tokens per cycle over the cycle's cost
#     in decodes): chain vs trees with `generate --json` (shapes 2,1,.. of
#     depth K and --tree-budget 2K), outputs compared with plain.
#
# Acceptance and tokens per cycle are deterministic (greedy); tok/s and the
# costs move with the host's load: time on a quiet host.
#
#   MODEL=DIR CORPUS=FILE PROMPTS=FILE [WORK=bench/out/assistant-vs-kmodule]
#     [THREADS=2] [N=48] [KS="1 2 3 4"] [BIN=build/bin/mtpspec]
#     bash bench/assistant-vs-kmodule.sh [--full] [--json]
#
# MODEL: a tiny pretrained Gemma 4 with its tokenizer (`mtpspec demo --arch
# gemma4 --workdir W` leaves it in W/model, its corpus in W/corpus.txt and
# prompts in W/prompts.jsonl). Small budget (default, a few minutes per
# drafter on 2 cores): 256 prompts, 40 steps of 4 sequences; --full: 2048
# prompts, 400 steps of 16 (PROMPT_COUNT, STEPS, BATCH override either). Finished drafters in WORK are reused (rerun
# the measurements on a quiet host without retraining). --json: the rows as
# one JSON object on stdout instead of the tables.
set -euo pipefail
FULL=0
JSON=0
for a in "$@"; do
  case "$a" in
    --full) FULL=1 ;;
    --json) JSON=1 ;;
    *) echo "unknown argument '$a' (--full, --json)" >&2; exit 2 ;;
  esac
done
BIN=${BIN:-build/bin/mtpspec}
MODEL=${MODEL:?set MODEL (a tiny pretrained Gemma 4 directory)}
CORPUS=${CORPUS:?set CORPUS (its training text)}
PROMPTS=${PROMPTS:?set PROMPTS (JSON Lines, "prompt" field)}
THREADS=${THREADS:-2}
N=${N:-48}
KS=${KS:-1 2 3 4}
if [ "$FULL" = 1 ]; then
  PROMPT_COUNT=${PROMPT_COUNT:-2048} STEPS=${STEPS:-400} BATCH=${BATCH:-16}
  WORK=${WORK:-bench/out/assistant-vs-kmodule-full}
else
  PROMPT_COUNT=${PROMPT_COUNT:-256} STEPS=${STEPS:-40} BATCH=${BATCH:-4}
  WORK=${WORK:-bench/out/assistant-vs-kmodule}
fi
SEQ=128 LR=2e-3 SEED=0
mkdir -p "$WORK"
log() { echo "[assistant-vs-kmodule] $*" >&2; }
timed() {  # timed NAME cmd...: runs it, its stderr to WORK/NAME.err, seconds to WORK/NAME.s
  local name=$1; shift
  local t0; t0=$(date +%s.%N)
  "$@" 2> "$WORK/$name.err" || { tail -20 "$WORK/$name.err" >&2; exit 1; }
  echo "$(date +%s.%N) - $t0" | bc > "$WORK/$name.s"
}

# 1. The self-distilled jobs, shared by every drafter.
JOBS=$WORK/data/online/jobs.safetensors
if [ ! -f "$JOBS" ]; then
  log "jobs: $PROMPT_COUNT prompts of $CORPUS"
  "$BIN" train --online --jobs-only -m "$MODEL" --corpus "$CORPUS" -o "$WORK/data" \
    --self-distill --temp 0 --prompt-tokens 16 --prompt-tokens-min 2 --seq-len $SEQ \
    --max-tokens $((PROMPT_COUNT * SEQ)) --threads "$THREADS" --no-progress > /dev/null
fi
common=(-m "$MODEL" --steps $STEPS --batch $BATCH --lr $LR --seed $SEED --threads "$THREADS")

# 2. The drafters.
for K in $KS; do
  if [ ! -f "$WORK/kmodule-$K.safetensors" ]; then
    log "K-module K=$K: $STEPS steps x $BATCH sequences"
    rm -rf "$WORK/kmodule-$K.run"
    timed "train-kmodule-$K" "$BIN" train --online-jobs "$JOBS" "${common[@]}" --k $K \
      -o "$WORK/kmodule-$K.run" --no-parity --no-progress > "$WORK/train-kmodule-$K.out"
    "$BIN" export --run "$WORK/kmodule-$K.run" -o "$WORK/kmodule-$K.safetensors" \
      --threads "$THREADS" > "$WORK/export-kmodule-$K.out" 2>&1
  fi
  if [ ! -f "$WORK/assistant-$K/model.safetensors" ]; then
    log "assistant K=$K: $STEPS steps x $BATCH sequences"
    timed "train-assistant-$K" "$BIN" train-assistant --online-jobs "$JOBS" "${common[@]}" \
      --k $K -o "$WORK/assistant-$K" > "$WORK/train-assistant-$K.out"
  fi
done

# 3. Each drafter at its K: bench --cycle-cost (its row K).
for arch in kmodule assistant; do
  for K in $KS; do
    d=$WORK/$arch-$K.safetensors
    [ "$arch" = assistant ] && d=$WORK/assistant-$K
    log "bench $arch K=$K"
    "$BIN" bench -m "$MODEL" --drafter "$d" --prompts "$PROMPTS" -n "$N" --cycle-cost \
      --draft-k $K --threads "$THREADS" --repeat 1 --json > "$WORK/bench-$arch-$K.json" \
      2> "$WORK/bench-$arch-$K.err"
  done
done

# 4. Chains vs trees at each architecture's best K, with generate.
best_k() {  # tokens per cycle / cycle cost in decodes, the best K
  python3 - "$WORK" "$1" "$KS" <<'PY'
import json, sys
w, arch, ks = sys.argv[1], sys.argv[2], [int(k) for k in sys.argv[3].split()]
def score(k):
    r = [x for x in json.load(open(f"{w}/bench-{arch}-{k}.json"))["cycle_cost"] if x["k"] == k][0]
    return r["tokens_per_cycle"] / r["cycle_rel_decode"]
print(max(ks, key=score))
PY
}
gen=(generate -m "$MODEL" --prompts "$PROMPTS" -n "$N" --temp 0 --threads "$THREADS" --parallel 1
     --json)
"$BIN" "${gen[@]}" --no-spec > "$WORK/gen-plain.jsonl"
gen+=(--no-gate)  # every cycle drafts (the gate would skip drafting where it predicts a loss)
for arch in kmodule assistant; do
  K=$(best_k $arch)
  d=$WORK/$arch-$K.safetensors
  [ "$arch" = assistant ] && d=$WORK/assistant-$K
  chain_tree=2$(printf ',1%.0s' $(seq 2 $K))
  [ "$K" = 1 ] && chain_tree=2
  log "generate $arch K=$K: chain, tree $chain_tree, tree budget $((2 * K))"
  "$BIN" "${gen[@]}" --drafter "$d" --draft-k $K > "$WORK/gen-$arch-chain.jsonl"
  "$BIN" "${gen[@]}" --drafter "$d" --tree "$chain_tree" > "$WORK/gen-$arch-tree.jsonl"
  "$BIN" "${gen[@]}" --drafter "$d" --draft-k $K --tree-budget $((2 * K)) \
    > "$WORK/gen-$arch-budget.jsonl"
  echo "$K $chain_tree" > "$WORK/gen-$arch.shape"
done

python3 - "$WORK" "$JSON" "$STEPS" "$BATCH" "$KS" <<'PY'
import json, os, sys
w, as_json, steps, batch = sys.argv[1], sys.argv[2] == "1", int(sys.argv[3]), int(sys.argv[4])
ks = [int(k) for k in sys.argv[5].split()]
def secs(name):
    p = f"{w}/{name}.s"
    return float(open(p).read()) if os.path.exists(p) else None
rows = []
for arch in ("kmodule", "assistant"):
    for k in ks:
        b = json.load(open(f"{w}/bench-{arch}-{k}.json"))
        r = [x for x in b["cycle_cost"] if x["k"] == k][0]
        dec = b["decode_step_s"]
        rows.append({
            "drafter": arch, "k": k, "train_s": secs(f"train-{arch}-{k}"),
            "acceptance_live": r["acceptance_live"], "tokens_per_cycle": r["tokens_per_cycle"],
            "cycle_rel_decode": r["cycle_rel_decode"], "draft_rel_decode": r["draft_rel"],
            "draft_ms_per_step": 1e3 * r["draft_rel"] * dec / k, "decode_ms": 1e3 * dec,
            "speedup_cost_model": r["tokens_per_cycle"] / r["cycle_rel_decode"],
            "spec_tok_s": r["spec_tok_s"], "baseline_tok_s": b["baseline_tok_s"],
            "speedup_tok_s": r["spec_tok_s"] / b["baseline_tok_s"], "flips": b["flips"]})
def gen(name):
    seqs = [json.loads(l) for l in open(f"{w}/gen-{name}.jsonl")]
    return {s["id"]: s for s in seqs}
plain = gen("plain")
plain_tok = sum(s["stats"]["generated_tokens"] for s in plain.values())
plain_tps = plain_tok / sum(s["stats"]["generation_s"] for s in plain.values())
trees = []
for arch in ("kmodule", "assistant"):
    k, tree = open(f"{w}/gen-{arch}.shape").read().split()
    for kind, shape in (("chain", f"chain K = {k}"), ("tree", f"tree {tree}"),
                        ("budget", f"tree budget {2 * int(k)} (K = {k})")):
        g = gen(f"{arch}-{kind}")
        sp = [s["stats"]["speculation"] for s in g.values()]
        cycles = sum(x["cycles"] for x in sp)
        toks = sum(s["stats"]["generated_tokens"] for s in g.values())
        trees.append({
            "drafter": arch, "shape": shape,
            "tokens_per_cycle": sum(x["tokens_per_cycle"] * x["cycles"] for x in sp) / max(cycles, 1),
            "draft_ms_per_cycle": 1e3 * sum(x["time_draft_s"] for x in sp) / max(cycles, 1),
            "tok_s": toks / sum(s["stats"]["generation_s"] for s in g.values()),
            "speedup_tok_s": toks / sum(s["stats"]["generation_s"] for s in g.values()) / plain_tps,
            "differing": sum(g[i]["token_ids"] != plain[i]["token_ids"] for i in plain)})
out = {"steps": steps, "batch": batch, "plain_generate_tok_s": plain_tps, "rows": rows,
       "trees": trees}
if as_json:
    print(json.dumps(out, indent=1))
    sys.exit(0)
print(f"equal terms: {steps} steps x {batch} self-distilled sequences per drafter; "
      f"plain generate {plain_tps:.0f} tok/s")
print("| drafter | K | train s | live acceptance per position | tokens / cycle | cycle (decodes) "
      "| draft ms / step | speed-up (cost) | speed-up (tok/s) | differing |")
print("|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    acc = " ".join(f"{a:.2f}" for a in r["acceptance_live"])
    ts = f"{r['train_s']:.0f}" if r["train_s"] is not None else "reused"
    print(f"| {r['drafter']} | {r['k']} | {ts} | {acc} | {r['tokens_per_cycle']:.2f} | "
          f"{r['cycle_rel_decode']:.2f} | {r['draft_ms_per_step']:.2f} | "
          f"{r['speedup_cost_model']:.2f} | {r['speedup_tok_s']:.2f} | {r['flips']} |")
print()
print("| drafter | shape | tokens / cycle | draft ms / cycle | tok/s | speed-up | differing |")
print("|---|---|---|---|---|---|---|")
for t in trees:
    print(f"| {t['drafter']} | {t['shape']} | {t['tokens_per_cycle']:.2f} | "
          f"{t['draft_ms_per_cycle']:.2f} | {t['tok_s']:.0f} | {t['speedup_tok_s']:.2f} | "
          f"{t['differing']} |")
PY
