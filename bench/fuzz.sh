#!/usr/bin/env bash
# The long fuzz run: every libFuzzer target of the sanitizer build (ASan + UBSan, build-asan/, `./run test` makes it)
# for a share of the total time, starting from the checked-in seeds plus the corpus earlier runs grew. CI runs each
# for 20 s; this is the hour that finds what 20 s does not. A crash leaves its input in bench/out/fuzz/crashes/.
# Writes bench/out/fuzz.md (a table) and bench/out/fuzz.json.
# Usage: bench/fuzz.sh [--total SECONDS (3600)] [--jobs N (1)] [--bin DIR (build-asan/bin)] [target...]
set -euo pipefail
cd "$(dirname "$0")/.."
TOTAL=3600 JOBS=1 BIN=build-asan/bin
targets=()
while (($#)); do
  case "$1" in
    --total) TOTAL=$2; shift 2 ;;
    --jobs) JOBS=$2; shift 2 ;;
    --bin) BIN=$2; shift 2 ;;
    -h|--help) sed -n 2,6p "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "bench/fuzz.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
if ((${#targets[@]} == 0)); then
  for f in "$BIN"/fuzz_*; do
    [[ -x $f && $f != *_smoke ]] && targets+=("$(basename "$f")")
  done
fi
((${#targets[@]})) || { echo "bench/fuzz.sh: no libFuzzer targets in $BIN (build with ./run test first)" >&2; exit 2; }
OUT=bench/out/fuzz
mkdir -p "$OUT/crashes"
per=$((TOTAL / ${#targets[@]}))
rows=()
status=0
for t in "${targets[@]}"; do
  name=${t#fuzz_}
  corpus=$OUT/corpus/$name
  mkdir -p "$corpus"
  seeds=()
  [ -d "tests/fuzz/corpus/$name" ] && seeds+=("tests/fuzz/corpus/$name")
  [ "$name" = cluster ] && seeds+=(clusters)
  echo "==> $t for $per s (corpus $corpus)" >&2
  log=$OUT/$name.log
  rc=0
  "$BIN/$t" -max_total_time="$per" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 -jobs="$JOBS" \
    -workers="$JOBS" -artifact_prefix="$OUT/crashes/$name-" "$corpus" "${seeds[@]}" >"$log" 2>&1 || rc=$?
  ((JOBS > 1)) && cat fuzz-*.log >>"$log" 2>/dev/null && rm -f fuzz-*.log
  runs=$(grep -h "stat::number_of_executed_units" "$log" | awk '{s += $2} END {print s + 0}')
  speed=$(grep -h "stat::average_exec_per_sec" "$log" | awk '{s += $2} END {print s + 0}')
  cov=$(grep -ho "cov: [0-9]*" "$log" | tail -1 | awk '{print $2 + 0}')
  files=$(find "$corpus" -type f | wc -l)
  crashes=$(find "$OUT/crashes" -name "$name-*" -type f | wc -l)
  ((rc == 0 && crashes == 0)) || status=1
  rows+=("$name $per $runs $speed ${cov:-0} $files $crashes $rc")
done
{
  echo "# Fuzzing ($(date -u +%Y-%m-%d), ${TOTAL} s in all, $JOBS job(s), $(nproc) cores, $BIN)"
  echo
  echo "| target | seconds | inputs run | inputs/s | coverage (edges) | corpus files | crashes | exit |"
  echo "|---|---|---|---|---|---|---|---|"
  for r in "${rows[@]}"; do
    read -r n s runs speed cov files crashes rc <<<"$r"
    echo "| $n | $s | $runs | $speed | $cov | $files | $crashes | $rc |"
  done
} >"$OUT.md"
{
  echo "{\"total_seconds\": $TOTAL, \"jobs\": $JOBS, \"targets\": ["
  sep=""
  for r in "${rows[@]}"; do
    read -r n s runs speed cov files crashes rc <<<"$r"
    echo "$sep{\"target\": \"$n\", \"seconds\": $s, \"runs\": $runs, \"execs_per_second\": $speed, \"coverage\": $cov, \"corpus\": $files, \"crashes\": $crashes, \"exit\": $rc}"
    sep=","
  done
  echo "]}"
} >"$OUT.json"
cat "$OUT.md"
exit $status
