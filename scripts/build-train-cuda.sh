#!/usr/bin/env bash
# Builds only bin/mtpspec-train against a CUDA libtorch: the one of a Python
# torch installation (PyPI's `torch` wheel is a CUDA build with NCCL).
# docs/TRAINING.md "CUDA" says when and how to use it.
#
# Usage: scripts/build-train-cuda.sh [PYTHON] [BUILD_DIR] [extra cmake args]
#   PYTHON     the interpreter whose torch to build against (default python3)
#   BUILD_DIR  default build-cuda
# Environment: TORCH_CUDA_ARCH_LIST (default "8.0;9.0"): mtpspec-train has no
# CUDA kernels of its own, but torch's CMake wants the list and, without it,
# probes the GPUs of the build machine (which fails on a machine without one).
#
# Needs the Debian -dev packages of the link chain below train (Highway, fmt,
# nlohmann-json, CLI11, OpenSSL: scripts/install-deps.sh), g++ 12 and CMake;
# the CUDA toolkit (nvcc) and NCCL headers that torch's CMake looks for. The
# result runs `mtpspec-train train --device cuda`; `mtpspec` (the tokenizer
# side: `train --online` writes the jobs) is built as usual, anywhere.
set -euo pipefail
cd "$(dirname "$0")/.."
py=${1:-python3}
build=${2:-build-cuda}
shift $(( $# < 2 ? $# : 2 ))
prefix=$("$py" -c 'import torch; print(torch.utils.cmake_prefix_path)')
site=$("$py" -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))')
"$py" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda,
      "nccl", torch.distributed.is_nccl_available())'
# libtorch_cuda.so finds the wheels' CUDA and NCCL libraries through its
# $ORIGIN rpath at run time; the linker is told the same folders, else it may
# resolve libnccl.so.2 to an older system copy and miss symbols.
rpath_link=
for d in "$site"/nvidia/*/lib "$site"/torch/lib; do
  if [ -d "$d" ]; then rpath_link=${rpath_link:+$rpath_link:}$d; fi
done
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DMTPSPEC_TRAIN_ONLY=ON \
  -DCMAKE_PREFIX_PATH="$prefix" -DTORCH_CUDA_ARCH_LIST="${TORCH_CUDA_ARCH_LIST:-8.0;9.0}" \
  ${rpath_link:+-DCMAKE_EXE_LINKER_FLAGS=-Wl,-rpath-link,$rpath_link} "$@"
cmake --build "$build" -j"$(nproc 2>/dev/null || echo 2)" --target mtpspec-train
echo "built $build/bin/mtpspec-train"
