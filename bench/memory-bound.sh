#!/usr/bin/env bash
# Memory-bound target: widened stories260K (issue 13, docs/WIDEN.md and the
# PERFORMANCE.md section of the same name). Run from the repository root after
# building mtpspec and mtpspec-train. Everything goes to $OUT (default
# bench/out/memory-bound, ignored by git); finished stages are reused.
#
# 1. the trained stories260K drafter: the recipe of docs/lab/
#    performance-history.md "Drafter training on stories260K" (2.3 M greedy
#    self-distilled tokens, 3,300 steps) with K = 4 instead of 2 so
#    bench can run K = 1..4, and prompts of 4..24 Gutenberg tokens instead of
#    8, so the drafter also learns the first positions after prompts of other
#    lengths (shorter runs: TOKENS=, STEPS=; ~15 min on 2 cores);
# 2. `mtpspec widen --shape 1b` of target and drafter (bf16 matrices, ~1.8 GB);
# 3. bench-decode on the widened folder (decode vs the bandwidth limit, m(q));
# 4. bench plain vs speculative for K = 1..4 at 1 and 2 threads on the widened
#    target — on held-out prompts (documents no training sequence came from)
#    and on the English story openings of bench/prompts.jsonl (stories260K
#    is an English model) — and the held-out prompts on the original for the
#    acceptance it must equal.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${MTPSPEC:-build/bin/mtpspec}
OUT=${OUT:-bench/out/memory-bound}
M=../shared/models/stories260K/stories260K.bin
CORPUS=../shared/corpora/gutenberg-en-16MB.txt
TOKENS=${TOKENS:-2300000}
STEPS=${STEPS:-3300}
N=${N:-64}                 # new tokens per generation
PROMPTS=${PROMPTS:-8}      # held-out prompts per bench run
THREADS=${THREADS:-"1 2"}
mkdir -p "$OUT"
log() { echo "== $*"; uptime; }

if [ ! -f "$OUT/drafter.safetensors" ]; then
  log "drafter: self-distilled shards ($TOKENS tokens), K = 4, $STEPS steps"
  [ -f "$OUT/sd/manifest.json" ] || $B precompute -m "$M" --corpus "$CORPUS" -o "$OUT/sd" \
      --seq-len 256 --max-tokens "$TOKENS" --self-distill --prompt-tokens 24 --prompt-tokens-min 4 \
      --temp 0 --threads 2
  $B train --shards "$OUT/sd" -m "$M" -o "$OUT/run" --k 4 --steps "$STEPS" --batch 8 --lr 2e-3 \
      --threads 1 --eval-every 300
  $B export --run "$OUT/run" --ema -o "$OUT/drafter.safetensors"
fi
W="$OUT/widened"
if [ ! -f "$W/drafter.safetensors" ]; then
  log "widen --shape 1b (bf16)"
  $B widen -m "$M" --drafter "$OUT/drafter.safetensors" --shape 1b --dtype bf16 -o "$W"
fi
P="$OUT/sd/heldout_prompts.jsonl"
S="$OUT/stories-en.jsonl"
grep '"lang": *"en"' bench/prompts.jsonl > "$S" ||
  { echo "bench/memory-bound.sh: bench/prompts.jsonl has no line with \"lang\": \"en\"" >&2; exit 2; }

for T in $THREADS; do
  log "bench-decode on the widened target, $T thread(s)"
  $B bench-decode -m "$W" --weights bf16 --threads "$T" --json | tee "$OUT/decode-t$T.json"
done
for T in $THREADS; do
  for K in 1 2 3 4; do
    for set in heldout:$P stories:$S; do
      log "bench widened, ${set%%:*} prompts, K = $K, $T thread(s)"
      $B bench -m "$W" --weights bf16 --prompts "${set#*:}" --max-prompts "$PROMPTS" -n "$N" \
          --repeat 1 --draft-k "$K" --threads "$T" --json > "$OUT/bench-${set%%:*}-t$T-k$K.json" \
          2> >(tee "$OUT/bench-${set%%:*}-t$T-k$K.txt" >&2)
    done
  done
done
for K in 1 2 3 4; do
  log "bench original (acceptance reference), K = $K"
  $B bench -m "$M" --drafter "$OUT/drafter.safetensors" --weights bf16 --prompts "$P" \
      --max-prompts "$PROMPTS" -n "$N" --repeat 1 --draft-k "$K" --threads 1 --json \
      > "$OUT/orig-k$K.json" 2> >(tee "$OUT/orig-k$K.txt" >&2)
done
log "done"
