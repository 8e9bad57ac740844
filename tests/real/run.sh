#!/usr/bin/env bash
# The `real` tests (ctest -L real): the PyPI real models that
# bench/real-models.sh --install puts in the `real` venv, against the
# current llama.cpp (llama-cpp-python) and against our own plain decode.
#   greedy MODEL   prompts tokenize as llama.cpp tokenizes them, and our greedy
#                  ids equal llama.cpp's up to its first near-tie
#                  (bench/real_models.py compare);
#   spec MODEL     with the drafter bench/real-models.sh trained for MODEL
#                  (<venv>/models/MODEL.drafter.safetensors), speculative
#                  output == plain output, greedy and T 0.7 coupled.
# Exit 77 (ctest: skipped) with a message when the venv, model or drafter is
# missing. Usage: run.sh greedy|spec smollm2|gemma3 MTPSPEC_BIN WORK_DIR VENV_DIR
set -euo pipefail
what=$1 model=$2 bin=$3 work=$4 venv=${MTPSPEC_REAL_VENV:-$5}
here=$(cd "$(dirname "$0")" && pwd)
helper=$here/../../bench/real_models.py
skip() { echo "SKIPPED: $*"; exit 77; }
py=$venv/bin/python
[ -x "$py" ] || skip "the real venv $venv is not installed (run bench/real-models.sh --install)"
case $model in
  smollm2) gguf=$venv/models/SmolLM2-135M-Instruct.Q4_1.gguf ;;
  gemma3) gguf=$venv/models/gemma-3-270m-q4_k_m.gguf ;;
esac
[ -f "$gguf" ] || skip "$gguf not found (run bench/real-models.sh --install)"
mkdir -p "$work"
"$py" "$helper" prompts "$gguf" "$work/$model-prompts.jsonl" 6
if [ "$what" = greedy ]; then
  "$py" "$helper" compare "$gguf" "$bin" "$work/$model-prompts.jsonl" 48
else
  drafter=$venv/models/$model.drafter.safetensors
  [ -f "$drafter" ] || skip "$drafter not found (bench/real-models.sh trains it)"
  "$py" "$helper" spec-equals-plain "$bin" "$gguf" "$drafter" "$work/$model-prompts.jsonl" 64
fi
