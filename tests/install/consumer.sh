#!/usr/bin/env bash
# Installs the build into a scratch prefix, then configures, builds and runs a program that finds it with
# find_package(Reprise) and links Reprise::trace.  usage: consumer.sh BUILD_DIR SOURCE_DIR WORK_DIR [CXX]
# CXX, the build's compiler, builds the program too (a sanitizer build's libraries need that compiler's runtimes).
set -euo pipefail
build=$1 src=$2 work=$3 cxx=${4:-}
rm -rf "$work" && mkdir -p "$work"
cmake --install "$build" --prefix "$work/prefix" >"$work/install.log"
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
cmake -S "$src/tests/install" -B "$work/build" "${gen[@]}" -DCMAKE_PREFIX_PATH="$work/prefix" \
  ${cxx:+-DCMAKE_CXX_COMPILER="$cxx"} >"$work/configure.log" 2>&1 ||
  { cat "$work/configure.log"; exit 1; }
cmake --build "$work/build" >"$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
"$work/build/consumer"
