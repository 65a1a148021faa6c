#!/usr/bin/env bash
# Builds Reprise on a GPU machine that has CUDA, CMake, Ninja and a torch 2.x wheel but no apt and no network
# (the lent device). The Debian packages it lacks are fetched beforehand on a machine with apt:
#   mkdir -p .gpu-deps && (cd .gpu-deps && apt-get download libboost1.74-dev libboost-program-options1.74-dev \
#       libboost-program-options1.74.0 libsimdjson-dev libsimdjson14)
# and carried along; this script unpacks them into .gpu-deps/prefix and configures build-gpu/ against them.
set -euo pipefail
cd "$(dirname "$0")/.."
PREFIX=$PWD/.gpu-deps/prefix
if [ ! -d "$PREFIX" ]; then
  for d in .gpu-deps/*.deb; do dpkg -x "$d" "$PREFIX"; done
fi
PY=${PYTHON:-python3}
TORCH_PREFIX=$($PY -c 'import torch; print(torch.utils.cmake_prefix_path)')
# NCCL: /usr/local/cuda when it has it, else the nvidia-nccl wheel (whose library has no unversioned name).
if [ ! -f /usr/local/cuda/include/nccl.h ] && [ -z "${NCCL_HOME:-}" ]; then
  wheel=$($PY -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__))' 2>/dev/null || true)
  if [ -n "$wheel" ]; then
    mkdir -p .gpu-deps/nccl/lib
    ln -sfn "$wheel/include" .gpu-deps/nccl/include
    ln -sf "$(ls "$wheel"/lib/libnccl.so* | head -1)" .gpu-deps/nccl/lib/libnccl.so
    export NCCL_HOME=$PWD/.gpu-deps/nccl
    export LD_LIBRARY_PATH=$wheel/lib:${LD_LIBRARY_PATH:-}
  fi
fi
export LD_LIBRARY_PATH=$PREFIX/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export CMAKE_POLICY_VERSION_MINIMUM=3.5
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$TORCH_PREFIX;$PREFIX/usr" \
  -DBoost_DIR="$PREFIX/usr/lib/x86_64-linux-gnu/cmake/Boost-1.74.0" \
  -DBoost_NO_SYSTEM_PATHS=ON -DREPRISE_BENCH=ON "$@" | grep -E "^-- (Reprise|LibTorch|MPI|CUDA|NCCL)|Error|error" || true
cmake --build build-gpu -j "$(nproc)"
