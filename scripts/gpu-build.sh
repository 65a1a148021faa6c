#!/usr/bin/env bash
# Builds Reprise on a GPU machine that has CUDA, CMake, Ninja and a torch 2.x wheel but no apt and no network
# (the lent device). The Debian packages it may lack are fetched beforehand on a machine with apt:
#   mkdir -p .gpu-deps && (cd .gpu-deps && apt-get download libboost1.74-dev libboost-program-options1.74-dev \
#       libboost-program-options1.74.0 libsimdjson-dev libsimdjson14 libyaml-cpp-dev libyaml-cpp0.7 \
#       nlohmann-json3-dev libgtest-dev libssl-dev libssl3 zlib1g-dev)
# and carried along (GPU_DEPS_FORCE=1 unpacks them all, to try the prefix on a machine that has them); this script unpacks into .gpu-deps/prefix only those whose headers the machine lacks, and
# configures build-gpu/ against them (a unity build: 16 cores parse LibTorch's headers fewer times).
#   scripts/gpu-build.sh [TARGET...]     (default: everything)
set -euo pipefail
cd "$(dirname "$0")/.."
PREFIX=$PWD/.gpu-deps/prefix
MA=x86_64-linux-gnu
unpack() {  # unpack FILE PACKAGE...: the packages, unless the machine has FILE (a header, or an absolute path)
  if [ -z "${GPU_DEPS_FORCE:-}" ] && { [ -e "/usr/include/$1" ] || [ -e "/usr/local/include/$1" ] || [ -e "$1" ]; }; then
    return
  fi
  shift
  for p in "$@"; do
    for d in .gpu-deps/"${p}"_*.deb; do [ -e "$d" ] && dpkg -x "$d" "$PREFIX" && echo "-- unpacked $(basename "$d")"; done
  done
}
if [ ! -d "$PREFIX" ]; then
  mkdir -p "$PREFIX"
  # Boost's headers alone (no program_options library) are not enough.
  unpack /usr/lib/$MA/libboost_program_options.so libboost1.74-dev libboost-program-options1.74-dev libboost-program-options1.74.0
  unpack simdjson.h libsimdjson-dev libsimdjson14
  unpack yaml-cpp/yaml.h libyaml-cpp-dev libyaml-cpp0.7
  unpack nlohmann/json.hpp nlohmann-json3-dev
  unpack gtest/gtest.h libgtest-dev
  unpack openssl/ssl.h libssl-dev libssl3
  unpack zlib.h zlib1g-dev
  # zlib1g-dev's libz.so points at Debian's absolute /lib path: point it at this machine's libz.so.1.
  if [ -L "$PREFIX/usr/lib/$MA/libz.so" ] && [ ! -e "$PREFIX/usr/lib/$MA/libz.so" ]; then
    ln -sfn "$(ls /usr/lib/$MA/libz.so.1 /lib/$MA/libz.so.1 2>/dev/null | head -1)" "$PREFIX/usr/lib/$MA/libz.so"
  fi
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
export LD_LIBRARY_PATH=$PREFIX/usr/lib/$MA:${LD_LIBRARY_PATH:-}
export CMAKE_POLICY_VERSION_MINIMUM=3.5
boost=()
[ -d "$PREFIX/usr/lib/$MA/cmake/Boost-1.74.0" ] &&
  boost=(-DBoost_DIR="$PREFIX/usr/lib/$MA/cmake/Boost-1.74.0" -DBoost_NO_SYSTEM_PATHS=ON)
# Debian keeps OpenSSL's configuration header in the multiarch folder, which a foreign compiler does not search.
flags=""
[ -d "$PREFIX/usr/include/$MA" ] && flags="-idirafter $PREFIX/usr/include/$MA"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=4 \
  -DCMAKE_PREFIX_PATH="$TORCH_PREFIX;$PREFIX/usr" -DOPENSSL_ROOT_DIR="$PREFIX/usr" -DCMAKE_CXX_FLAGS="$flags" \
  "${boost[@]}" -DREPRISE_BENCH=ON >build-gpu.configure.log 2>&1 || { cat build-gpu.configure.log; exit 1; }
grep -E "^-- (Reprise|LibTorch|MPI|CUDA|NCCL)" build-gpu.configure.log || true
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build build-gpu -j "$(nproc)" "${targets[@]}" -- -k 0  # every error in one pass, not the first
