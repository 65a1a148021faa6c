#!/usr/bin/env bash
# Ingest benchmark: Reprise's ET reader against Python's json.load, on the shared traces (uncompressed) and on a
# generated ~1 GB ET. One core each (taskset), peak memory from /usr/bin/time. Writes bench/out/ingest.md and .json.
# Usage: bench/ingest.sh [--small]   (--small skips the 1 GB file)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=bench/out
mkdir -p "$OUT"
BIN=build/bin
PY=${PYTHON:-python3}
one_core=()
command -v taskset >/dev/null && one_core=(taskset -c 0)

files=()
if [ -d ../shared/traces ]; then
  for f in param/resnet_et.json.gz param/1.0.3-chakra.0.0.4_resnet_1gpu_et.json.gz param/linear_et.json.gz; do
    [ -f "../shared/traces/$f" ] || continue
    dst="$OUT/$(basename "$f" .gz)"
    [ -f "$dst" ] || zcat "../shared/traces/$f" > "$dst"
    files+=("$dst")
  done
fi
if [ ! -f "$OUT/synthetic_50mb.json" ]; then
  $BIN/reprise synth --out "$OUT/synthetic_50mb.json" --iterations 500 --layers 8 >/dev/null
fi
files+=("$OUT/synthetic_50mb.json")
if [ "${1:-}" != "--small" ]; then
  if [ ! -f "$OUT/synthetic_1gb.json" ]; then
    echo "generating a ~1 GB ET ($OUT/synthetic_1gb.json)" >&2
    $BIN/reprise synth --out "$OUT/synthetic_1gb.json" --iterations 10500 --layers 8 >/dev/null
  fi
  files+=("$OUT/synthetic_1gb.json")
fi

measure() {  # prints "seconds peak_kb"
  local log; log=$(mktemp)
  /usr/bin/time -f "%e %M" -o "$log" "$@" >/dev/null 2>&1 || { echo "failed: $*" >&2; rm -f "$log"; return 1; }
  cat "$log"; rm -f "$log"
}

{
  echo "| file | size | reprise inspect (s) | peak RSS | reader only (s) | json.load (s) | json.load peak RSS | speed-up (inspect) | speed-up (reader) |"
  echo "|---|---|---|---|---|---|---|---|---|"
} > "$OUT/ingest.md"
echo "[" > "$OUT/ingest.json"
sep=""
for f in "${files[@]}"; do
  size=$(stat -c %s "$f")
  echo "measuring $f" >&2
  read -r r_s r_kb < <(measure "${one_core[@]}" $BIN/reprise inspect -q "$f")
  reader=$("${one_core[@]}" $BIN/bench_ingest --repeat 2 "$f")
  reader_s=$(echo "$reader" | sed -E 's/.*"seconds": ([0-9.]+).*/\1/')
  read -r p_s p_kb < <(measure "${one_core[@]}" $PY -c "import json,sys; json.load(open(sys.argv[1]))" "$f")
  python3 - "$f" "$size" "$r_s" "$r_kb" "$reader_s" "$p_s" "$p_kb" >>"$OUT/ingest.md" <<'PYEOF'
import sys
f, size, rs, rkb, reader, ps, pkb = sys.argv[1], int(sys.argv[2]), *map(float, sys.argv[3:])
mb = lambda kb: f"{kb/1024:.0f} MiB"
print(f"| {f.split('/')[-1]} | {size/1e6:.1f} MB | {rs:.2f} | {mb(rkb)} ({rkb*1024/size:.2f}x file) | {reader:.2f} | {ps:.2f} | {mb(pkb)} | {ps/max(rs,1e-3):.1f}x | {ps/max(reader,1e-3):.1f}x |")
PYEOF
  printf '%s{"file": "%s", "bytes": %s, "inspect_seconds": %s, "inspect_peak_kb": %s, "reader_seconds": %s, "json_load_seconds": %s, "json_load_peak_kb": %s}\n' \
    "$sep" "$f" "$size" "$r_s" "$r_kb" "$reader_s" "$p_s" "$p_kb" >> "$OUT/ingest.json"
  sep=","
done
echo "]" >> "$OUT/ingest.json"
cat "$OUT/ingest.md"
