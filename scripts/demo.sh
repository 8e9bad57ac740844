#!/usr/bin/env bash
# The README's demo command: installs dependencies, builds, and runs the demo on
# the llama2.c stories260K model from ../shared (issue 6 replaces this with a
# self-contained pretrain → distill → train → bench demo).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
B=build/bin/mtpspec
M=../shared/models/stories260K/stories260K.bin
W=build/demo
if [ ! -f "$M" ]; then
  echo "demo: $M not found (the shared data folder sits beside the checkout)" >&2
  exit 1
fi
mkdir -p "$W"
echo "== 1. greedy generation (matches the llama2.c reference runner byte for byte)"
$B generate -m "$M" -p "Once upon a time" -n 120 --threads 1
echo "== 2. a random K=3 MTP drafter through the speculative loop: same output, live stats"
$B init-drafter -m "$M" -o "$W/random-drafter.safetensors" --k 3
$B generate -m "$M" -p "Once upon a time" -n 120 --threads 1 --drafter "$W/random-drafter.safetensors"
echo "== 3. drift: decode-only vs verify-only streams (0 flips), then an injected protocol fault"
$B drift -m "$M" --prompts bench/prompts.jsonl -n 64 --threads 1
$B drift -m "$M" --prompts bench/prompts.jsonl -n 64 --threads 1 --inject-fault stale-kv | tail -1
echo "== 4. self-distilled training shards (precompute)"
$B precompute -m "$M" --corpus ../shared/corpora/gutenberg-en-16MB.txt -o "$W/shards" \
  --self-distill --max-tokens 20000 --seq-len 128 --threads 2
