#!/usr/bin/env bash
# Creates the test venv the default suite runs reference code in:
# .venv/test (or $MTPSPEC_TEST_VENV), from PyPI, pinned:
#   numpy, gguf          the GGUF fixtures written with llama.cpp's own writer
#   sentencepiece        (tests/python/gguf_fixture.py)
#   openai               the server's client test (tests/serve/py)
#   playwright           the page's browser test, driving Debian's chromium
#                        (no browser is downloaded)
# Debian's pip refuses system-wide installs, hence the venv. Idempotent: a
# venv holding exactly these pins is kept. A failed install removes the venv
# (the tests then skip, naming this script) and exits non-zero.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${MTPSPEC_TEST_VENV:-.venv/test}
pins=(numpy==2.4.6 gguf==0.19.0 sentencepiece==0.2.3 openai==3.63.0 playwright==1.65.3)
stamp=$venv/.mtpspec-pins
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "${pins[*]}" ]; then
  echo "[test-venv] $venv: ${pins[*]}"
  exit 0
fi
start=$(date +%s)
rm -rf "$venv"
python3 -m venv "$venv"
pip_install() {
  "$venv/bin/pip" install --quiet --disable-pip-version-check --no-input "${pins[@]}"
}
if ! pip_install && ! pip_install; then
  rm -rf "$venv"
  echo "[test-venv] pip install ${pins[*]} failed (PyPI unreachable?); tests needing it will skip" >&2
  exit 1
fi
echo "${pins[*]}" > "$stamp"
echo "[test-venv] $venv: ${pins[*]} ($(( $(date +%s) - start )) s)"
