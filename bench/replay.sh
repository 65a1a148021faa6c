#!/usr/bin/env bash
# Replay benchmarks: host overhead against a direct ATen loop (100k small ops), and coverage and iteration time of
# the shared real traces replayed on the CPU. Writes bench/out/replay.md and bench/out/replay_*.json.
# Usage: bench/replay.sh [--quick]   (--quick: overhead only)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=bench/out
mkdir -p "$OUT"
BIN=build/bin
one_core=()
command -v taskset >/dev/null && one_core=(taskset -c 0)
md=$OUT/replay.md
{
  echo "# Replay benchmarks ($(date -u +%Y-%m-%d), $(nproc) cores, $(uname -m))"
  echo
  echo "## Host overhead: 100k ops of 16 elements, one thread, pinned to one core"
  echo
  echo '```'
} >"$md"
for k in 1 2 3; do
  "${one_core[@]}" $BIN/bench_replay_overhead --ops 100000 --iterations 15 --json "$OUT/replay_overhead_$k.json" | tee -a "$md"
done
echo '```' >>"$md"
[ "${1:-}" = "--quick" ] && { echo "wrote $md"; exit 0; }

if [ -d ../shared/traces ]; then
  {
    echo
    echo "## Shared traces on the CPU (--device cpu, --threads 1 as replay's default, 1 measured iteration)"
    echo
    echo "| trace | steps | compute replayed / selected | coverage (with collectives) | iteration (s) | peak memory |"
    echo "|---|---|---|---|---|---|"
  } >>"$md"
  for f in param/resnet_et.json.gz param/1.0.3-chakra.0.0.4_resnet_1gpu_et.json.gz param/linear_et.json.gz \
    chakra/1.0.2-chakra.0.0.4.tgz param/dlrm_pytorch_et.tar.gz; do
    [ -f "../shared/traces/$f" ] || continue
    j=$OUT/replay_$(basename "$f" | sed 's/\..*//').json
    $BIN/reprise replay "../shared/traces/$f" --device cpu --threads 1 --warmup 0 --iterations 1 -q \
      --out "$j" >/dev/null
    python3 - "$f" "$j" >>"$md" <<'PY'
import json, sys
r = json.load(open(sys.argv[2]))
c = r["compute"]
print(f"| {sys.argv[1]} | {', '.join(r['steps'])} | {c['replayed']} / {c['selected']} "
      f"({100 * c['replayed'] / max(c['selected'], 1):.1f}%) | {100 * r['coverage']:.1f}% | "
      f"{r['median_iteration_seconds']:.3f} | {r['peak_memory_bytes'] / 2**20:.0f} MiB |")
PY
  done
fi
echo "wrote $md"
