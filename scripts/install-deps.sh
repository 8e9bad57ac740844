#!/usr/bin/env bash
# Installs the Debian 12 packages mtpspec builds against (idempotent).
# Runs apt-get as root, or through sudo when not root.
set -euo pipefail
pkgs=(build-essential cmake pkg-config git
      libhwy-dev libfmt-dev libsentencepiece-dev nlohmann-json3-dev libcli11-dev
      libssl-dev libicu-dev libopenblas0-pthread libgtest-dev libgmock-dev libbenchmark-dev
      libtorch-dev libgloo-dev   # libtorch: training (train/export/parity/pretrain), always built in CI
      libcpp-httplib-dev         # `mtpspec serve`'s HTTP server
      libpcre2-dev               # tokenizer.json regexes (JIT, bounded work)
      fortunes                   # the demo's default corpus (plain text, ~2.6 MB)
      python3-jinja2             # tests: the reference rendering of chat templates
      python3-venv               # the test venv (scripts/install-test-venv.sh: PyPI packages)
      chromium                   # tests: the page of `mtpspec serve` in a headless browser
      wrk curl)                  # the server's load benchmark (docs/PERFORMANCE.md); test scripts
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "[deps] all ${#pkgs[@]} packages present"
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "[deps] installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
