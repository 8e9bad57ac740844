#!/usr/bin/env bash
# Runs one of the Python client tests of `mtpspec serve` against the real
# binary with stories260K and a random drafter: `openai` (the openai PyPI
# package as a client) or `page` (the page at / in headless Debian chromium,
# driven by the playwright PyPI package). Both come from the test venv
# (scripts/install-test-venv.sh, which the test command runs). Exit 77
# (ctest: skipped) with a message when the venv, the model or chromium is
# missing.
# Usage: run.sh openai|page MTPSPEC_BIN SHARED_DIR WORK_DIR VENV_DIR
set -euo pipefail
what=$1 bin=$2 shared=$3 work=$4 venv=${MTPSPEC_TEST_VENV:-$5}
here=$(cd "$(dirname "$0")" && pwd)
model=$shared/models/stories260K/stories260K.bin
skip() { echo "SKIPPED: $*"; exit 77; }
[ -f "$model" ] || skip "$model not found (shared data)"
py=$venv/bin/python
[ -x "$py" ] || skip "the test venv $venv is not installed (run scripts/install-test-venv.sh)"
args=()
if [ "$what" = page ]; then
  chrome=$(command -v chromium || command -v chromium-browser || true)
  [ -n "$chrome" ] || skip "chromium not found (apt install chromium)"
  args=("$chrome")
fi
mkdir -p "$work/$what"
cd "$work/$what"
port=$("$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
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
"$py" "$here/${what}_test.py" "$port" testkey "${args[@]}"
