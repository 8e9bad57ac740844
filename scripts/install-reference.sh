#!/usr/bin/env bash
# Creates the venv of the `reference` test label: transformers as the
# reference implementation (tests/model/transformers_reference_test.cc,
# tests/python/hf_reference.py): .venv/reference (or
# $MTPSPEC_REFERENCE_VENV), from PyPI, pinned (scripts/make-venv.sh).
# PyPI's torch wheel carries CUDA libraries (~5.5 GB installed); it runs here
# on the CPU. accelerate: transformers needs it to load a GGUF. Not part of
# the default suite or CI. Also unpacks the source distribution of
# llama-cpp-python (the current llama.cpp) into <venv>/src, for its
# HF -> GGUF converter (convert_hf_to_gguf.py, run from the venv by the
# tests; never built, vendored or committed).
# Then: ctest --test-dir build -L reference
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${MTPSPEC_REFERENCE_VENV:-.venv/reference}
scripts/make-venv.sh "$venv" reference-venv \
  torch==2.15.0 transformers==5.25.0 tokenizers==0.23.3 safetensors==0.8.0 gguf==0.19.0 \
  numpy==2.4.6 sentencepiece==0.2.3 jinja2==3.1.6 accelerate==1.16.0 psutil==7.2.2
src=$venv/src/llama_cpp_python-0.3.36
if [ ! -f "$src/vendor/llama.cpp/convert_hf_to_gguf.py" ]; then
  "$venv/bin/pip" download --quiet --disable-pip-version-check --no-input --no-deps \
    --no-binary :all: llama-cpp-python==0.3.36 -d "$venv/src"
  tar -xzf "$venv/src/llama_cpp_python-0.3.36.tar.gz" -C "$venv/src"
fi
echo "[reference-venv] converter: $src/vendor/llama.cpp/convert_hf_to_gguf.py"
