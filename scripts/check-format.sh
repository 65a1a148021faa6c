#!/usr/bin/env bash
# Checks (or, with --fix, applies) clang-format on every C++ file git knows of. Exit 1 lists the files that differ.
set -euo pipefail
cd "$(dirname "$0")/.."
fix=0
[ "${1:-}" = "--fix" ] && fix=1
mapfile -t files < <(git ls-files --cached --others --exclude-standard '*.cc' '*.h' | while read -r f; do
  [ -f "$f" ] && echo "$f"; done)
if ((fix)); then
  clang-format -i "${files[@]}"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if ((${#bad[@]})); then
  printf 'clang-format: %d file(s) differ from .clang-format (./run format fixes them):\n' "${#bad[@]}" >&2
  printf '  %s\n' "${bad[@]}" >&2
  exit 1
fi
echo "clang-format: ${#files[@]} files clean" >&2
