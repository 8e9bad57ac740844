#!/usr/bin/env bash
# The README's test command: installs dependencies, builds, runs the test suite.
# Tests labelled `heavy` (whole-corpus round trips, long training) and `fuzz`
# (bounded libFuzzer runs, built by scripts/fuzz.sh) are skipped; run them with
# ctest --test-dir build -L heavy (or scripts/fuzz.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
jobs=$(nproc 2>/dev/null || echo 2)
ctest --test-dir build --output-on-failure -j"$jobs" -LE "heavy|fuzz" --timeout 1500
