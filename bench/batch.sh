#!/usr/bin/env bash
# Continuous batching throughput (docs/PERFORMANCE.md "Serving and batching"):
# total and per-sequence tok/s of `mtpspec generate --prompts --parallel N`
# at N = 1, 2, 4, 8, without and with the drafter, and plain `generate` per
# prompt (the 1-sequence reference). Every run's outputs are checked equal to
# plain generate's (identity under load).
# REPS runs of each configuration, interleaved (no drafter, drafter, next N);
# the table gives the median of each, the range in brackets.
#   MODEL=... DRAFTER=... [WEIGHTS=bf16] [PROMPTS=bench/prompts.jsonl] [N=64] [THREADS=1] [REPS=3] bash bench/batch.sh
set -euo pipefail
BIN=${BIN:-build/bin/mtpspec}
MODEL=${MODEL:?set MODEL}
DRAFTER=${DRAFTER:?set DRAFTER}
PROMPTS=${PROMPTS:-bench/prompts.jsonl}
N=${N:-64}
THREADS=${THREADS:-1}
REPS=${REPS:-3}
OUT=${OUT:-bench/out/batch}
mkdir -p "$OUT"
common=(-m "$MODEL" -n "$N" --threads "$THREADS" --temp 0 --json)
[ -n "${WEIGHTS:-}" ] && common+=(--weights "$WEIGHTS")
# Plain generate, one prompt at a time.
: > "$OUT/plain.jsonl"
python3 -c 'import json,sys; [print(json.loads(l)["prompt"]) for l in open(sys.argv[1]) if l.strip()]' "$PROMPTS" |
while IFS= read -r p; do
  "$BIN" generate "${common[@]}" --no-spec -p "$p" >> "$OUT/plain.jsonl"
done
for rep in $(seq 1 "$REPS"); do
  for par in 1 2 4 8; do
    "$BIN" generate "${common[@]}" --no-spec --prompts "$PROMPTS" --parallel "$par" \
      > "$OUT/nospec-$par.$rep.jsonl" 2> "$OUT/nospec-$par.$rep.err"
    "$BIN" generate "${common[@]}" --drafter "$DRAFTER" --prompts "$PROMPTS" --parallel "$par" \
      > "$OUT/spec-$par.$rep.jsonl" 2> "$OUT/spec-$par.$rep.err"
  done
done
python3 - "$OUT" "$REPS" <<'PY'
import json, re, sys, statistics as st
out, reps = sys.argv[1], int(sys.argv[2])
plain = [json.loads(l) for l in open(f"{out}/plain.jsonl")]
ref = [p["token_ids"] for p in plain]
plain_tps = st.mean(p["timings"]["generation_tok_s"] for p in plain)
plain_total = sum(p["timings"]["generated_tokens"] for p in plain) / sum(
    p["timings"]["prompt_s"] + p["timings"]["generation_s"] for p in plain)
print(f"plain generate: per-sequence {plain_tps:.1f} tok/s, serial total {plain_total:.1f} tok/s")
print("| N | no drafter: total tok/s | per sequence | drafter: total tok/s | per sequence | drafter / no drafter | identical |")
print("|---|---|---|---|---|---|---|")
def fmt(v):
    return f"{st.median(v):.1f} [{min(v):.0f}–{max(v):.0f}]" if len(v) > 1 else f"{v[0]:.1f}"
for par in (1, 2, 4, 8):
    row = [str(par)]
    tot = {}
    same = True
    for kind in ("nospec", "spec"):
        totals, per = [], []
        for rep in range(1, reps + 1):
            for l in open(f"{out}/{kind}-{par}.{rep}.jsonl"):
                l = json.loads(l)
                same &= l["token_ids"] == ref[l["id"]]
            err = open(f"{out}/{kind}-{par}.{rep}.err").read()
            m = re.search(r"([0-9.]+) tok/s total, ([0-9.]+) tok/s per sequence", err)
            totals.append(float(m.group(1)))
            per.append(float(m.group(2)))
        tot[kind] = st.median(totals)
        row += [fmt(totals), fmt(per)]
    row += [f"{tot['spec'] / tot['nospec']:.2f}", "yes" if same else "NO"]
    print("| " + " | ".join(row) + " |")
PY
