#!/usr/bin/env bash
# Reproduces the numbers in docs/PERFORMANCE.md (run from the repository root
# after scripts/build.sh). Results go to bench/out/ as JSON and text.
# Timings on a shared 2-core machine are noisy: ratios measured in one run are
# what we report.
set -euo pipefail
cd "$(dirname "$0")/.."
B=build/bin/mtpspec
S=../shared/models/stories260K/stories260K.bin
out=bench/out
mkdir -p "$out"

echo "== kernels: matmul q = 1..8 vs q = 1, fp32/bf16, 1 and 2 threads"
$B bench-kernels --json > "$out/kernels.json"
echo "== ~1 B random Llama-shaped target, bf16: decode vs bandwidth limit, m(q)"
$B bench-decode --random 1b --weights bf16 --threads 1 --threads 2 --json | tee "$out/decode-1b.txt"
echo "== stories260K decode, 1 thread"
$B bench-decode -m "$S" --weights fp32 --threads 1 --pos 128 --json | tee "$out/decode-stories.txt"
$B generate -m "$S" -p "" -n 200 --threads 1 --json > "$out/generate-stories.json"
echo "== drift on stories260K: invariant kernels, OpenBLAS verify, injected protocol fault"
for vk in invariant blas; do
  $B drift -m "$S" --prompts bench/prompts.jsonl -n 128 --verify-kernels $vk --json > "$out/drift-$vk.json"
done
$B drift -m "$S" --prompts bench/prompts.jsonl -n 128 --inject-fault stale-kv --json > "$out/drift-fault.json"
echo "== speculative cycle cost, K = 1..4, random K=4 drafter (acceptance ~0: pure overhead), 1 thread"
# The table goes to stderr (kept in .txt), the JSON to stdout.
uptime | tee "$out/cycle-uptime.txt"
$B init-drafter -m "$S" -o "$out/random-drafter.safetensors" --k 4
$B bench -m "$S" --drafter "$out/random-drafter.safetensors" --prompts bench/prompts.jsonl --cycle-cost \
   -n 128 --repeat 3 --threads 1 --json > "$out/cycle-stories.json" 2> >(tee "$out/cycle-stories.txt" >&2)
# ~1 B random target (~3.5 tok/s here): 8 cycles per run, 6 interleaved repeats = 48 cycles per K.
$B bench --random 1b --weights bf16 --cycle-cost -n 9 --repeat 6 --max-prompts 1 --threads 1 --json \
   > "$out/cycle-1b.json" 2> >(tee "$out/cycle-1b.txt" >&2)
echo "== bench on the ~1 B random target (random K=4 drafter: speedup, m(q), break-even)"
$B bench --random 1b --weights bf16 -n 17 --repeat 2 --max-prompts 1 --threads 1 --json \
   > "$out/bench-1b.json" 2> >(tee "$out/bench-1b.txt" >&2)
uptime | tee -a "$out/cycle-uptime.txt"
if [ -f "$out/drafter.safetensors" ]; then
  echo "== bench with the trained drafter"
  $B bench -m "$S" --drafter "$out/drafter.safetensors" --prompts bench/prompts.jsonl -n 128 --repeat 3 \
     --threads 1 --report "$out/bench.md" --plot "$out/bench.svg" --json > "$out/bench.json"
fi
echo "results in $out/"
