#!/usr/bin/env bash
# The README's test command: installs dependencies (apt-get, and the test venv
# of pinned PyPI packages: scripts/install-test-venv.sh), builds, runs the
# test suite.
# Tests labelled `heavy` (whole-corpus round trips, long training), `fuzz`
# (bounded libFuzzer runs, built by scripts/fuzz.sh), `reference`
# (transformers; scripts/install-reference.sh) and `real` (PyPI model
# packages and llama.cpp; bench/real-models.sh --install) are skipped; run
# them with ctest --test-dir build -L heavy (or scripts/fuzz.sh, -L reference, -L real).
# After the suite, the CI sanitizer job: the core..speculative tests under
# ASan + UBSan in build-asan-ci/ (scripts/sanitize.sh ci, about 6 minutes on
# 2 quiet cores); any sanitizer report fails the run. SANITIZE=0 skips it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/install-test-venv.sh
scripts/build.sh
jobs=$(nproc 2>/dev/null || echo 2)
ctest --test-dir build --output-on-failure -j"$jobs" -LE "heavy|fuzz|reference|real" --timeout 1500
if [ "${SANITIZE:-1}" != 0 ]; then
  JOBS=$jobs scripts/sanitize.sh ci
fi
