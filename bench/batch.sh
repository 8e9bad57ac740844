#!/usr/bin/env bash
# Continuous batching throughput (docs/PERFORMANCE.md "Continuous batching"):
# total and per-sequence tok/s of `mtpspec generate --prompts --parallel N`
# at N = 1, 2, 4, 8, without and with the drafter, and plain `generate` per
# prompt (the 1-sequence reference). Every run's outputs are checked equal to
# plain generate's (identity under load).
#   MODEL=... DRAFTER=... [PROMPTS=bench/prompts.jsonl] [N=64] [THREADS=1] bash bench/batch.sh
set -euo pipefail
BIN=${BIN:-build/bin/mtpspec}
MODEL=${MODEL:?set MODEL}
DRAFTER=${DRAFTER:?set DRAFTER}
PROMPTS=${PROMPTS:-bench/prompts.jsonl}
N=${N:-64}
THREADS=${THREADS:-1}
OUT=${OUT:-bench/out/batch}
mkdir -p "$OUT"
common=(-m "$MODEL" -n "$N" --threads "$THREADS" --temp 0 --json)
# Plain generate, one prompt at a time.
: > "$OUT/plain.jsonl"
python3 -c 'import json,sys; [print(json.loads(l)["prompt"]) for l in open(sys.argv[1]) if l.strip()]' "$PROMPTS" |
while IFS= read -r p; do
  "$BIN" generate "${common[@]}" --no-spec -p "$p" >> "$OUT/plain.jsonl"
done
for par in 1 2 4 8; do
  "$BIN" generate "${common[@]}" --no-spec --prompts "$PROMPTS" --parallel "$par" \
    > "$OUT/nospec-$par.jsonl" 2> "$OUT/nospec-$par.err"
  "$BIN" generate "${common[@]}" --drafter "$DRAFTER" --prompts "$PROMPTS" --parallel "$par" \
    > "$OUT/spec-$par.jsonl" 2> "$OUT/spec-$par.err"
done
python3 - "$OUT" <<'PY'
import json, re, sys, statistics as st
out = sys.argv[1]
plain = [json.loads(l) for l in open(f"{out}/plain.jsonl")]
ref = [p["token_ids"] for p in plain]
plain_tps = st.mean(p["timings"]["generation_tok_s"] for p in plain)
plain_total = sum(p["timings"]["generated_tokens"] for p in plain) / sum(
    p["timings"]["prompt_s"] + p["timings"]["generation_s"] for p in plain)
print(f"plain generate: per-sequence {plain_tps:.1f} tok/s, serial total {plain_total:.1f} tok/s")
print("| N | no drafter: total tok/s | per sequence | drafter: total tok/s | per sequence | drafter / no drafter | identical |")
print("|---|---|---|---|---|---|---|")
for par in (1, 2, 4, 8):
    row = [str(par)]
    tot = {}
    same = True
    for kind in ("nospec", "spec"):
        lines = [json.loads(l) for l in open(f"{out}/{kind}-{par}.jsonl")]
        for l in lines:
            same &= l["token_ids"] == ref[l["id"]]
        err = open(f"{out}/{kind}-{par}.err").read()
        m = re.search(r"([0-9.]+) tok/s total, ([0-9.]+) tok/s per sequence", err)
        tot[kind] = float(m.group(1))
        row += [m.group(1), m.group(2)]
    row += [f"{tot['spec'] / tot['nospec']:.2f}", "yes" if same else "NO"]
    print("| " + " | ".join(row) + " |")
PY
