#!/usr/bin/env bash
# The test suite of the core..speculative layers under sanitizers, in build folders
# of their own (not part of scripts/test.sh: the lead decides the CI budget).
#
#   scripts/sanitize.sh          ASan + UBSan: build-asan, tests of core,
#                                kernels, io, model, drafter, speculative
#   scripts/sanitize.sh tsan     TSan: build-tsan, the thread pool tests
#   scripts/sanitize.sh all      both
#   JOBS=2 scripts/sanitize.sh
#
# libtorch is not instrumented, so the training part is left out
# (-DMTPSPEC_WITH_TORCH=OFF). Heavy tests (ctest label `heavy`) and the demo
# end-to-end tests are skipped, as in the default run. Exit status: non-zero
# when a build fails, a test fails or a sanitizer reports.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-asan}
jobs=${JOBS:-2}
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)

configure() {  # dir flags
  if [ ! -f "$1/CMakeCache.txt" ]; then
    cmake -S . -B "$1" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMTPSPEC_WITH_TORCH=OFF \
      -DCMAKE_CXX_FLAGS="$2" -DCMAKE_EXE_LINKER_FLAGS="$2" "${launcher[@]}" >/dev/null
  fi
}

run_asan() {
  local layers=(core kernels io model drafter speculative)
  configure build-asan "-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
  local start=$SECONDS
  cmake --build build-asan -j"$jobs" --target "${layers[@]/#/test_}"
  echo "sanitize.sh: asan build $((SECONDS - start)) s"
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:detect_container_overflow=0}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
  local status=0
  for l in "${layers[@]}"; do
    start=$SECONDS
    local rc=0
    build-asan/bin/test_"$l" --gtest_filter='-*Heavy*:*E2E*' --gtest_brief=1 || rc=$?
    echo "sanitize.sh: test_$l (asan+ubsan) rc=$rc, $((SECONDS - start)) s"
    [ "$rc" -eq 0 ] || status=1
  done
  return $status
}

run_tsan() {
  configure build-tsan "-fsanitize=thread -fno-omit-frame-pointer"
  local start=$SECONDS
  cmake --build build-tsan -j"$jobs" --target test_core
  echo "sanitize.sh: tsan build $((SECONDS - start)) s"
  export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}
  start=$SECONDS
  local rc=0
  build-tsan/bin/test_core --gtest_filter='ThreadPool*' --gtest_repeat=20 --gtest_brief=1 || rc=$?
  echo "sanitize.sh: test_core ThreadPool* x20 (tsan) rc=$rc, $((SECONDS - start)) s"
  return $rc
}

case "$mode" in
  asan) run_asan ;;
  tsan) run_tsan ;;
  all) s=0; run_asan || s=1; run_tsan || s=1; exit $s ;;
  *) echo "usage: $0 [asan|tsan|all]" >&2; exit 2 ;;
esac
