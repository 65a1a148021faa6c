#!/usr/bin/env bash
# Capture overhead: bench_capture_overhead at three op sizes, default and lean, pinned to one core, each recorded
# run a fresh Session (median of 5, with the first and worst runs), and the same loop in Python under PyTorch's own
# observer. Writes bench/out/capture_overhead_<device>.md and bench/out/capture_overhead_*.json.
# Usage: [PYTHON=python-with-torch] bench/capture.sh [--bin DIR] [--device cpu|cuda]   (PYTHON: /usr/bin/python3)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=bench/out
BIN=build/bin
DEVICE=cpu
while (($#)); do
  case "$1" in
    --bin) BIN=$2; shift 2 ;;
    --device) DEVICE=$2; shift 2 ;;
    *) echo "usage: bench/capture.sh [--bin DIR] [--device cpu|cuda]" >&2; exit 2 ;;
  esac
done
mkdir -p "$OUT"
one_core=()
command -v taskset >/dev/null && one_core=(taskset -c 0)
md=$OUT/capture_overhead_$DEVICE.md
{
  echo "# Capture overhead on $DEVICE ($(date -u +%Y-%m-%d), $(nproc) cores, $(uname -m))"
  echo
  echo "| op size | without capture | empty observer (floor) | recorded, default (first / worst) | recorded, lean (first / worst) | default with host timeline |"
  echo "|---|---|---|---|---|---|"
} >"$md"
for size in 16 4096 65536; do
  for mode in default lean timeline; do
    args=(--size "$size" --device "$DEVICE" --repeat 5 --json "$OUT/capture_overhead_${DEVICE}_${size}_$mode.json")
    [ $mode = lean ] && args+=(--lean 1)
    [ $mode = timeline ] && args+=(--timeline 1)
    echo "==> size $size, $mode" >&2
    "${one_core[@]}" "$BIN/bench_capture_overhead" "${args[@]}" >&2
  done
  python3 - "$OUT" "$DEVICE" "$size" >>"$md" <<'PY'
import json, sys
out, dev, size = sys.argv[1:]
r = {m: json.load(open(f"{out}/capture_overhead_{dev}_{size}_{m}.json")) for m in ("default", "lean", "timeline")}
d = r["default"]
us = lambda s: 1e6 * s / d["ops"]
x = lambda j: f"{j['overhead']:.2f}x ({j['first_recorded_seconds'] / j['plain_seconds']:.2f} / {j['worst_recorded_seconds'] / j['plain_seconds']:.2f})"
print(f"| {size} elements | {us(d['plain_seconds']):.2f} us/op | {d['empty_observer_seconds'] / d['plain_seconds']:.2f}x | {x(d)} | {x(r['lean'])} | {r['timeline']['overhead']:.2f}x |")
PY
done
# The Python helper records with PyTorch's own observer: the same loop in Python, for comparison.
PY=${PYTHON:-/usr/bin/python3}
if [ "$DEVICE" = cpu ] && "$PY" -c "import torch" 2>/dev/null; then
  {
    echo
    echo "PyTorch's own observer (what the Python helper's recorded steps pay), the same loop in Python:"
    echo
    echo '```'
    for size in 16 4096; do
      "${one_core[@]}" "$PY" bench/capture_overhead.py --size "$size" --json "$OUT/capture_overhead_python_$size.json"
    done
    echo '```'
  } >>"$md"
fi
cat "$md"
