#!/usr/bin/env bash
# Compiles (syntax only) every source file with a CUDA path (#ifdef REPRISE_TORCH_CUDA) as a CUDA build of LibTorch
# would, against Debian's c10/ATen CUDA headers and the CUDA toolkit: the GPU code stays compiling on machines
# without a GPU or a CUDA LibTorch. Debian's headers lack one generated file (c10/cuda/impl/cuda_cmake_macros.h),
# made here in a temporary folder. Exit 0 = clean, 77 = no CUDA toolkit or headers (skipped), 1 = an error.
set -uo pipefail
cd "$(dirname "$0")/.."
CUDA=${CUDA_HOME:-/usr/local/cuda}
if [ ! -f "$CUDA/include/cuda_runtime.h" ] || [ ! -f /usr/include/c10/cuda/CUDAStream.h ]; then
  echo "no CUDA toolkit ($CUDA) or no c10/cuda headers: skipped"
  exit 77
fi
shim=$(mktemp -d)
trap 'rm -rf "$shim"' EXIT
mkdir -p "$shim/c10/cuda/impl"
printf '#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n' >"$shim/c10/cuda/impl/cuda_cmake_macros.h"
includes=()
for d in */include */src; do [ -d "$d" ] && includes+=(-I"$d"); done
mpi_inc=$(mpicxx --showme:incdirs 2>/dev/null | tr ' ' '\n' | sed 's/^/-isystem /' | tr '\n' ' ')
files=$(grep -rl --include=*.cc 'REPRISE_TORCH_CUDA' capture comms device replay workloads tools generators 2>/dev/null)
logs=$(mktemp -d)
trap 'rm -rf "$shim" "$logs"' EXIT
# One compiler per core (each file takes tens of seconds), every file's errors kept in its own log.
check() {
  local f=$1 log=$logs/$(echo "$1" | tr / _)
  ${CXX:-g++} -fsyntax-only -std=c++17 -DNDEBUG -DREPRISE_TORCH_CUDA=1 -DREPRISE_HAVE_NCCL=1 -Wall -Wextra -Wshadow \
    -Werror "${includes[@]}" -isystem "$shim" -isystem /usr/include/torch/csrc/api/include -isystem "$CUDA/include" \
    $mpi_inc "$f" >"$log" 2>&1 || echo "$f" >"$log.failed"
}
jobs_max=${JOBS:-$(nproc 2>/dev/null || echo 2)}
for f in $files; do
  while (($(jobs -rp | wc -l) >= jobs_max)); do wait -n; done
  check "$f" &
done
wait
status=0
for f in $files; do
  log=$logs/$(echo "$f" | tr / _)
  if [ -f "$log.failed" ]; then
    echo "$f: does not compile as CUDA code:"
    grep -E 'error' "$log" | head -5
    status=1
  fi
done
[ $status = 0 ] && echo "CUDA paths compile: $(echo "$files" | wc -w) files"
exit $status
