#!/usr/bin/env bash
# Replay fidelity: capture each built-in workload (uninstrumented steps give the original iteration time), replay
# the trace, and compare iteration time and peak memory. Also the capture overhead (recorded step / original).
# Writes bench/out/fidelity.md and bench/out/fidelity_<workload>.json.
# Usage: bench/fidelity.sh [--device cpu|cuda] [--large] [--bin DIR] [workload...]
# --large: sizes that keep an H100 busy (GPU-bound iterations), instead of the CPU-sized defaults.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=bench/out
BIN=build/bin
DEVICE=cpu
workloads=()
LARGE=0
while (($#)); do
  case "$1" in
    --device) DEVICE=$2; shift 2 ;;
    --large) LARGE=1; shift ;;
    --bin) BIN=$2; shift 2 ;;
    *) workloads+=("$1"); shift ;;
  esac
done
((${#workloads[@]})) || workloads=(mlp dlrm gpt)
mkdir -p "$OUT"
md=$OUT/fidelity_${DEVICE}$( [ $LARGE = 1 ] && echo _large || true).md
sizes() {
  [ $LARGE = 1 ] || return 0
  case $1 in
    mlp) echo --batch 2048 --hidden 4096 --layers 8 ;;
    dlrm) echo --batch 4096 --rows 200000 --dim 128 --hidden 1024 ;;
    gpt) echo --batch 16 --seq 512 --hidden 1024 --heads 16 --layers 4 --vocab 8192 ;;
  esac
}
{
  echo "# Replay fidelity on $DEVICE$([ $LARGE = 1 ] && echo ', large sizes') ($(date -u +%Y-%m-%d), $(nproc) cores)"
  echo
  echo "| workload | original iteration (median of 10) | replay iteration (median of 10) | replay/original | original peak | replay peak | replay/original memory | recorded step / original (capture overhead) | coverage |"
  echo "|---|---|---|---|---|---|---|---|---|"
} >"$md"
for w in "${workloads[@]}"; do
  dir=$OUT/capture_${w}_$DEVICE
  rm -rf "$dir"
  $BIN/reprise capture --workload "$w" --device "$DEVICE" --out "$dir" --warmup 3 --steps 10 -q $(sizes "$w") >/dev/null
  $BIN/reprise replay "$dir" --iterations 10 --warmup 2 -q --out "$OUT/fidelity_${w}_$DEVICE.json" >/dev/null
  python3 - "$w" "$dir/manifest.json" "$OUT/fidelity_${w}_$DEVICE.json" >>"$md" <<'PY'
import json, sys, statistics
m = json.load(open(sys.argv[2]))["ranks"][0]
r = json.load(open(sys.argv[3]))
orig = statistics.median(m["iteration_seconds"])
rep = r["median_iteration_seconds"]
rec = m["recorded_iteration_seconds"][0]
mib = 2 ** 20
print(f"| {sys.argv[1]} ({json.load(open(sys.argv[2]))['description'].split(': ', 1)[1]}) | {orig*1e3:.2f} ms | {rep*1e3:.2f} ms | {rep/orig:.3f} | {m['peak_memory_bytes']/mib:.1f} MiB | "
      f"{r['peak_memory_bytes']/mib:.1f} MiB | {r['peak_memory_bytes']/max(m['peak_memory_bytes'],1):.3f} | {rec/orig:.2f}x | "
      f"{100*r['coverage']:.1f}%" + ("" if not r["skipped"] else " (" + "; ".join(f"{s['count']} {s['op']}: {s['reason']}" for s in r["skipped"][:3]) + ")") + " |")
PY
done
cat "$md"
