#!/usr/bin/env bash
# Runs one GoogleTest suite for ctest (cmake/GtestSuites.cmake): usage: run_gtest_suite.sh BINARY SUITE
# Exits as the binary does, except 77 (ctest: skipped) when it passed and every test it ran skipped. gtest prints
# "[  PASSED  ] 0 tests." for a suite that fails too, so its exit status decides, not its output.
set -uo pipefail
log=$(mktemp)
trap 'rm -f "$log"' EXIT
"$1" --gtest_filter="$2.*" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
if [ "$status" = 0 ] && grep -q '^\[  PASSED  \] 0 tests' "$log" && grep -q '^\[  SKIPPED \]' "$log"; then
  exit 77
fi
exit "$status"
