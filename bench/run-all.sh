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
echo "== speculative cycle cost with a random K=4 drafter (acceptance ~0: pure overhead)"
$B init-drafter -m "$S" -o "$out/random-drafter.safetensors" --k 4
for k in 1 2 3 4; do
  $B generate -m "$S" -p "Once upon a time" -n 200 --threads 1 --drafter "$out/random-drafter.safetensors" \
     --draft-k $k --json > "$out/cycle-k$k.json"
done
if [ -f "$out/drafter.safetensors" ]; then
  echo "== bench with the trained drafter"
  $B bench -m "$S" --drafter "$out/drafter.safetensors" --prompts bench/prompts.jsonl -n 128 --repeat 3 \
     --threads 1 --report "$out/bench.md" --plot "$out/bench.svg" --json > "$out/bench.json"
fi
echo "results in $out/"
