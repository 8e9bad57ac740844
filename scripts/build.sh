#!/usr/bin/env bash
# Configures and builds mtpspec into build/ (Release). Usage: scripts/build.sh [extra cmake args]
# BUILD_TARGETS="mtpspec" builds only those targets (the demo needs no tests).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "$@"
if [ -n "${BUILD_TARGETS:-}" ]; then
  # shellcheck disable=SC2086
  cmake --build build -j"$jobs" --target $BUILD_TARGETS
else
  cmake --build build -j"$jobs"
fi
