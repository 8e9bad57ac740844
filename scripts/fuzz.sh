#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/, docs/FUZZING.md) with clang,
# ASan and UBSan in build-fuzz/, then runs each for a bounded time.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]     (default 60 s, every target)
#   JOBS=2 scripts/fuzz.sh 300 safetensors
#   RUNS=1000000 scripts/fuzz.sh 3600          (each stops after 10^6 inputs,
#                                               or the time, whichever first)
#
# Each run: -max_total_time=SECONDS -rss_limit_mb=2048 -timeout=10, from the
# seed corpus tests/fuzz/corpus/<target>/ (read only) plus a working corpus in
# build-fuzz/tests/fuzz/corpus/<target>/. Crash/timeout/OOM inputs land in
# build-fuzz/fuzz-artifacts/<target>/; logs in build-fuzz/fuzz-logs/. Exit
# status 1 when any target found something.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
shift || true
all=(safetensors hf_config tokenizer_json sentencepiece llama2c_checkpoint llama2c_tokenizer
     drafter_metadata shards_manifest prompts gguf http_request json corpus chat_template
     safetensors_index)
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=("${all[@]}")
jobs=${JOBS:-2}

command -v clang++ >/dev/null || { echo "fuzz.sh: clang++ not found (apt-get install -y clang)" >&2; exit 2; }
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
flags="-fsanitize=address,undefined,fuzzer-no-link -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
if [ ! -f build-fuzz/CMakeCache.txt ]; then
  CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DMTPSPEC_FUZZ=ON -DMTPSPEC_BUILD_TESTS=ON -DMTPSPEC_WITH_TORCH=OFF \
    -DCMAKE_CXX_FLAGS="$flags" "${launcher[@]}" >/dev/null
fi
cmake --build build-fuzz -j"$jobs" --target "${targets[@]/#/fuzz_}"

mkdir -p build-fuzz/fuzz-logs
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0
printf '%-20s %10s %8s  %s\n' target execs cov result
for t in "${targets[@]}"; do
  work=build-fuzz/tests/fuzz/corpus/$t art=build-fuzz/fuzz-artifacts/$t
  mkdir -p "$work" "$art"
  log=build-fuzz/fuzz-logs/$t.log
  rc=0
  dict=()
  case "$t" in llama2c_*|sentencepiece) ;; *) dict=(-dict=tests/fuzz/json.dict) ;; esac
  runs=()
  [ -n "${RUNS:-}" ] && runs=(-runs="$RUNS")
  build-fuzz/bin/fuzz_"$t" -max_total_time="$secs" "${runs[@]}" -rss_limit_mb=2048 -timeout=10 \
    -print_final_stats=1 "${dict[@]}" -artifact_prefix="$art/" "$work" tests/fuzz/corpus/"$t" \
    >"$log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  result=ok
  if [ "$rc" -ne 0 ]; then
    result="FOUND (rc $rc): $(ls "$art" | head -3 | tr '\n' ' ') see $log"
    status=1
  fi
  printf '%-20s %10s %8s  %s\n' "$t" "${execs:-?}" "${cov:-?}" "$result"
done
exit $status
