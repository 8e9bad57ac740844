#!/usr/bin/env bash
# The README's demo command on a fresh Debian 12 machine: installs dependencies
# (incl. libtorch and the `fortunes` corpus), builds the two executables, and
# runs `mtpspec demo`: pretrain a tiny target on the fortunes text, self-distill,
# train a K=2 MTP drafter, parity, then plain vs speculative bench and drift.
# Extra arguments go to `mtpspec demo` (e.g. --model DIR, --workdir DIR).
# Rerunning reuses every finished stage.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
scripts/install-deps.sh
BUILD_TARGETS="mtpspec mtpspec-train" scripts/build.sh -DMTPSPEC_WITH_TORCH=ON
echo "[demo] set-up took $(( $(date +%s) - start )) s"
build/bin/mtpspec demo --workdir build/demo "$@"
echo "[demo] total $(( $(date +%s) - start )) s"
