#!/usr/bin/env bash
# The README's demo command: installs dependencies, builds, and runs the demo.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
model=../shared/models/stories260K/stories260K.bin
if [ ! -f "$model" ]; then
  echo "demo: $model not found (the shared data folder sits beside the checkout)" >&2
  exit 1
fi
echo "== greedy generation on stories260K (llama2.c checkpoint) =="
build/bin/mtpspec generate -m "$model" -p "Once upon a time" -n 120 --threads 1
