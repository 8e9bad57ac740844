#!/usr/bin/env bash
# Runs one of the Node tests of `mtpspec serve` against the real binary with
# stories260K and a random drafter: `openai` (the openai npm package as a
# client) or `page` (the page at / in headless Debian chromium, driven by
# playwright-core). Installs the npm packages into WORK_DIR (network needed
# once). Exit 77 (ctest: skipped) with a message when node/npm, the model,
# the npm registry or chromium is missing.
# Usage: run.sh openai|page MTPSPEC_BIN SHARED_DIR WORK_DIR
set -euo pipefail
what=$1 bin=$2 shared=$3 work=$4
here=$(cd "$(dirname "$0")" && pwd)
model=$shared/models/stories260K/stories260K.bin
skip() { echo "SKIPPED: $*"; exit 77; }
[ -f "$model" ] || skip "$model not found (shared data)"
command -v node >/dev/null && command -v npm >/dev/null || skip "node/npm not found"
if [ "$what" = page ]; then
  chrome=$(command -v chromium || command -v chromium-browser || true)
  [ -n "$chrome" ] || skip "chromium not found (apt install chromium)"
  export MTPSPEC_CHROMIUM=$chrome
fi
mkdir -p "$work"
cd "$work"
if [ ! -d node_modules/openai ] || [ ! -d node_modules/playwright-core ]; then
  [ -f package.json ] || echo '{"name":"mtpspec-serve-tests","private":true,"type":"module"}' > package.json
  npm install --no-audit --no-fund --loglevel=error openai@4 playwright-core@1 > npm.log 2>&1 ||
    { tail -5 npm.log; skip "npm install openai playwright-core failed (no network?)"; }
fi
cp "$here"/*.mjs .
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$bin" init-drafter -m "$model" -o drafter.safetensors --k 3 --seed 5 > /dev/null
"$bin" serve -m "$model" --drafter drafter.safetensors --port "$port" --api-key testkey \
  --threads 1 > server.log 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true' EXIT
for _ in $(seq 100); do
  curl -sf "http://127.0.0.1:$port/health" > /dev/null && break
  kill -0 $pid 2>/dev/null || { cat server.log; echo "the server exited"; exit 1; }
  sleep 0.1
done
node "./${what}_test.mjs" "$port" testkey
