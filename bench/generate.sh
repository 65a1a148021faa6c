#!/usr/bin/env bash
# Generation speed: `reprise generate` of the ~1 GB synthetic ET (bench/ingest.sh makes it) against reading it
# (`reprise inspect`, the reader plus a summary), interleaved A B A B on one core (bench/ab.py), and a data-parallel
# trace scaled to 1,024 ranks (files written, time). Usage: bench/generate.sh [PAIRS]
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=build/bin
OUT=bench/out
mkdir -p "$OUT"
[ -f "$OUT/synthetic_1gb.json" ] || $BIN/reprise synth --out "$OUT/synthetic_1gb.json" --iterations 10500 --layers 8 >/dev/null
python3 bench/ab.py --pairs "${1:-3}" --regex '^([0-9.]+)$' \
  --a ingest "/usr/bin/time -f %e $BIN/reprise inspect $OUT/synthetic_1gb.json -q 2>&1 >/dev/null | tail -1" \
  --b generate "/usr/bin/time -f %e $BIN/reprise generate $OUT/synthetic_1gb.json --out $OUT/bundle_1gb --force -q 2>&1 >/dev/null | tail -1"
$BIN/reprise synth --out "$OUT/dp.json.gz" --world-size 2 --layers 8 --iterations 2 >/dev/null
printf 'source: dp.json.gz\ntransforms:\n  - scale: {world_size: 1024}\n' >"$OUT/dp1024.yaml"
/usr/bin/time -f "1024 ranks: %e s, %M KB" $BIN/reprise generate "$OUT/dp1024.yaml" --out "$OUT/dp1024" --force -q
echo "1024 ranks: $(ls "$OUT/dp1024/traces" | wc -l) role file(s)"
