#!/usr/bin/env bash
# A compiler launcher (CMAKE_CXX_COMPILER_LAUNCHER) that checks a source instead of compiling it: the compiler runs
# with -fsyntax-only (errors and the front end's warnings, the dependency file for ninja), and the object it would
# have written is left empty, so ninja checks each source again only when it or a header it reads changes.
# A precompiled header (`-x c++-header`) is compiled for real: the sources after it read it as ./run build's do.
# ./run test uses it for gcc (build-gcc/): usage: syntax-only.sh COMPILER ARGS...
set -uo pipefail
for a in "$@"; do
  [ "$a" != c++-header ] || exec "$@"
done
out=""
args=()
while (($#)); do
  if [ "$1" = -o ] && (($# >= 2)); then
    out=$2
    shift 2
    continue
  fi
  args+=("$1")
  shift
done
"${args[@]}" -fsyntax-only || exit
[ -z "$out" ] || : >"$out"
