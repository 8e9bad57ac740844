#!/usr/bin/env bash
# Load on loopback for `mtpspec serve` (docs/PERFORMANCE.md, "Serving and batching"):
# wrk, bounded in time, posts the same non-streamed greedy completion from C
# connections (1, 2, 4, 8) to a server with and without the drafter; prints
# requests/s, tokens/s, p50/p99 latency and errors, and `mtpspec generate`'s
# tok/s for the same request as the 1-stream reference. A benchmark, not a test.
#   DRAFTER=file.safetensors (default: a random K = 3 drafter; acceptance ≈ 0)
#   MODEL=, WEIGHTS=fp32, N=64 new tokens, SECS=10 per run, CONNS="1 2 4 8",
#   THREADS=1, REPS=10 generate runs for the reference
set -euo pipefail
cd "$(dirname "$0")/.."
B=${MTPSPEC:-build/bin/mtpspec}
M=${MODEL:-../shared/models/stories260K/stories260K.bin}
OUT=${OUT:-bench/out/serve-load}
N=${N:-64} SECS=${SECS:-10} CONNS=${CONNS:-"1 2 4 8"} THREADS=${THREADS:-1} REPS=${REPS:-10}
WEIGHTS=${WEIGHTS:-fp32}
PROMPT=${PROMPT:-"Once upon a time"}
command -v wrk > /dev/null || { echo "wrk not found (apt install wrk)"; exit 2; }
mkdir -p "$OUT"
DRAFTER=${DRAFTER:-$OUT/random-drafter.safetensors}
[ -f "$DRAFTER" ] || "$B" init-drafter -m "$M" -o "$DRAFTER" --k 3 --seed 5 > /dev/null
body=$(python3 -c "import json,sys; print(json.dumps({'prompt': sys.argv[1], 'max_tokens': int(sys.argv[2]), 'temperature': 0}))" "$PROMPT" "$N")
cat > "$OUT/post.lua" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = [[$body]]
tokens = 0
function response(status, headers, body)
  local n = body:match('"completion_tokens":(%d+)')
  if n then tokens = tokens + tonumber(n) end
end
LUA
echo "== generate (reference: median of $REPS runs), load: $(cut -d' ' -f1-3 /proc/loadavg)"
for d in none "$DRAFTER"; do
  flag=$([ "$d" = none ] && echo --no-spec || echo "--drafter $d")
  for _ in $(seq "$REPS"); do
    "$B" generate -m "$M" $flag -p "$PROMPT" -n "$N" --threads "$THREADS" --weights "$WEIGHTS" --json
  done | python3 -c "
import json, statistics, sys
runs = [json.loads(l)['timings'] for l in sys.stdin]
tok = statistics.median(r['generation_tok_s'] for r in runs)
total = statistics.median(r['prompt_s'] + r['generation_s'] for r in runs)
print('generate drafter=$([ "$d" = none ] && echo no || echo yes): %d tokens, %.0f tok/s, '
      'prompt + generation %.2f ms' % (runs[0]['generated_tokens'], tok, total * 1e3))"
done
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
for d in none "$DRAFTER"; do
  flag=$([ "$d" = none ] && echo --no-spec || echo "--drafter $d")
  "$B" serve -m "$M" $flag --port "$port" --threads "$THREADS" --weights "$WEIGHTS" --parallel 8 2> "$OUT/server.log" &
  pid=$!
  for _ in $(seq 600); do curl -sf "http://127.0.0.1:$port/health" > /dev/null && break; sleep 0.1; done
  for c in $CONNS; do
    t=$(( c < 2 ? 1 : 2 ))
    wrk -t"$t" -c"$c" -d"${SECS}s" --timeout 10s --latency -s "$OUT/post.lua" \
      "http://127.0.0.1:$port/v1/completions" > "$OUT/wrk-$([ "$d" = none ] && echo plain || echo spec)-c$c.txt"
    python3 - "$OUT/wrk-$([ "$d" = none ] && echo plain || echo spec)-c$c.txt" "$c" "$d" "$N" <<'PY'
import re, sys
t = open(sys.argv[1]).read()
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", t).group(1))
lat = dict(re.findall(r"^\s+(50|99)%\s+(\S+)", t, re.M))
err = re.search(r"Socket errors:.*|Non-2xx.*", t)
print(f"serve drafter={'no' if sys.argv[3] == 'none' else 'yes'} streams={sys.argv[2]}: "
      f"{rps:.1f} req/s, {rps * int(sys.argv[4]):.0f} tok/s (x{sys.argv[4]} tokens), "
      f"p50 {lat.get('50')}, p99 {lat.get('99')}, errors: {err.group(0) if err else 'none'}")
PY
  done
  curl -s "http://127.0.0.1:$port/metrics" | grep -E "^mtpspec_(tokens_generated_total|acceptance|verify_rows)" || true
  kill -TERM $pid; wait $pid
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
