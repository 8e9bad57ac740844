#!/usr/bin/env bash
# Creates the test venv the default suite runs reference code in:
# .venv/test (or $MTPSPEC_TEST_VENV), from PyPI, pinned:
#   numpy, gguf          the GGUF fixtures written with llama.cpp's own writer
#   sentencepiece        (tests/python/gguf_fixture.py)
#   openai               the server's client test (tests/serve/py)
#   playwright           the page's browser test, driving Debian's chromium
#                        (no browser is downloaded)
# Idempotent; a failed install removes the venv and exits 1 (scripts/make-venv.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
exec scripts/make-venv.sh "${MTPSPEC_TEST_VENV:-.venv/test}" test-venv \
  numpy==2.4.6 gguf==0.19.0 sentencepiece==0.2.3 openai==3.63.0 playwright==1.65.3
