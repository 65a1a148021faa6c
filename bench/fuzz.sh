#!/usr/bin/env bash
# The long fuzz run: every libFuzzer target of the fuzz build (ASan + UBSan with all of Reprise coverage-instrumented,
# build-fuzz/, `./run bench fuzz` makes it and runs this) for a share of the total time. CI runs each for 20 s in
# build-asan/, where only the targets' own files are instrumented; this is the hour that finds what 20 s does not.
# Seeds are read from tests/fuzz/corpus/NAME (never written); what the run learns goes to bench/out/fuzz/corpus/NAME
# (git-ignored, kept for the next run), a crash input to bench/out/fuzz/crashes/NAME-*, the fuzzer's own output to
# bench/out/fuzz/NAME.log. A crash input worth keeping is minimised and copied into tests/fuzz/corpus by hand.
# Writes bench/out/fuzz.md (a table) and bench/out/fuzz.json.
# Usage: bench/fuzz.sh [--total SECONDS (3600)] [--jobs N (1)] [--bin DIR (build-fuzz/bin)] [NAME[:SECONDS]...]
#   NAME is fuzz_replay or replay; a target given SECONDS gets them, the others share what is left of --total.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
TOTAL=3600 JOBS=1 BIN=build-fuzz/bin
targets=()
declare -A fixed=()
while (($#)); do
  case "$1" in
    --total) TOTAL=$2; shift 2 ;;
    --jobs) JOBS=$2; shift 2 ;;
    --bin) BIN=$2; shift 2 ;;
    -h|--help) sed -n 2,10p "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "bench/fuzz.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *)
      t=fuzz_${1#fuzz_}
      if [[ $t == *:* ]]; then
        [[ ${t#*:} =~ ^[0-9]+$ ]] || { echo "bench/fuzz.sh: $1: expected NAME:SECONDS" >&2; exit 2; }
        fixed[${t%%:*}]=${t#*:}
        t=${t%%:*}
      fi
      targets+=("$t"); shift ;;
  esac
done
[[ $TOTAL =~ ^[0-9]+$ && $JOBS =~ ^[1-9][0-9]*$ ]] || { echo "bench/fuzz.sh: --total and --jobs take counts" >&2; exit 2; }
[[ $BIN = /* ]] || BIN=$ROOT/$BIN
if ((${#targets[@]} == 0)); then
  for f in "$BIN"/fuzz_*; do
    [[ -x $f && $f != *_smoke ]] && targets+=("$(basename "$f")")
  done
fi
((${#targets[@]})) || { echo "bench/fuzz.sh: no libFuzzer targets in $BIN (./run bench fuzz builds them)" >&2; exit 2; }
for t in "${targets[@]}"; do
  [ -x "$BIN/$t" ] || { echo "bench/fuzz.sh: no $BIN/$t" >&2; exit 2; }
done
# The targets without SECONDS share what the others leave of the total.
left=$TOTAL shared=0
for t in "${targets[@]}"; do
  if [ -n "${fixed[$t]:-}" ]; then left=$((left - fixed[$t])); else shared=$((shared + 1)); fi
done
((left >= 0)) || { echo "bench/fuzz.sh: the targets' SECONDS exceed --total $TOTAL" >&2; exit 2; }
((shared == 0)) || ((left / shared > 0)) || { echo "bench/fuzz.sh: no time left for the other targets" >&2; exit 2; }

OUT=$ROOT/bench/out/fuzz
mkdir -p "$OUT/crashes"
seeds_before=$(git status --porcelain -- tests/fuzz/corpus 2>/dev/null || true)
rows=()
found=()
status=0
for t in "${targets[@]}"; do
  name=${t#fuzz_}
  per=${fixed[$t]:-$((shared ? left / shared : 0))}
  corpus=$OUT/corpus/$name  # first: libFuzzer writes new inputs only there
  mkdir -p "$corpus"
  seeds=()
  [ -d "tests/fuzz/corpus/$name" ] && seeds+=("$ROOT/tests/fuzz/corpus/$name")
  [ "$name" = cluster ] && seeds+=("$ROOT/clusters")
  echo "==> $t for $per s (new inputs in ${corpus#"$ROOT"/})" >&2
  log=$OUT/$name.log
  stamp=$OUT/.start-$name
  touch "$stamp"
  # One job fuzzes in this process, its statistics in the log; several are libFuzzer's workers, each writing
  # fuzz-N.log in the current folder, so they run in a folder of their own and their logs are appended after.
  parallel=()
  run_dir=$OUT
  if ((JOBS > 1)); then
    parallel=(-jobs="$JOBS" -workers="$JOBS")
    run_dir=$OUT/jobs-$name
    rm -rf "$run_dir" && mkdir -p "$run_dir"
  fi
  limits=(-rss_limit_mb=2048 -timeout=10)  # as tests/fuzz/CMakeLists.txt gives them
  [ "$name" = replay ] && limits=(-rss_limit_mb=4096 -timeout=30)
  rc=0
  (cd "$run_dir" && "$BIN/$t" -max_total_time="$per" "${limits[@]}" -print_final_stats=1 "${parallel[@]}" \
    -artifact_prefix="$OUT/crashes/$name-" "$corpus" "${seeds[@]}") >"$log" 2>&1 || rc=$?
  if ((JOBS > 1)); then
    cat "$run_dir"/fuzz-*.log >>"$log" 2>/dev/null || true
    rm -rf "$run_dir"
  fi
  runs=$(grep -h "stat::number_of_executed_units" "$log" | awk '{s += $2} END {print s + 0}')
  speed=$(grep -h "stat::average_exec_per_sec" "$log" | awk '{s += $2} END {print s + 0}')
  cov=$(grep -ho "cov: [0-9]*" "$log" | tail -1 | awk '{print $2 + 0}')
  files=$(find "$corpus" -type f | wc -l)
  new=$(find "$OUT/crashes" -name "$name-*" -type f -newer "$stamp" | sort)
  rm -f "$stamp"
  crashes=$(printf '%s' "$new" | grep -c . || true)
  [ -n "$new" ] && while read -r f; do found+=("$name: ${f#"$ROOT"/}"); done <<<"$new"
  ((rc == 0 && crashes == 0)) || status=1
  rows+=("$name $per $runs $speed ${cov:-0} $files $crashes $rc")
done
{
  echo "# Fuzzing ($(date -u +%Y-%m-%d), ${TOTAL} s in all, $JOBS job(s) per target, $(nproc) cores, niceness $(nice), ${BIN#"$ROOT"/})"
  echo
  echo "| target | seconds | inputs run | inputs/s | coverage (edges) | corpus files | crashes | exit |"
  echo "|---|---|---|---|---|---|---|---|"
  for r in "${rows[@]}"; do
    read -r n s runs speed cov files crashes rc <<<"$r"
    echo "| $n | $s | $runs | $speed | $cov | $files | $crashes | $rc |"
  done
  if ((${#found[@]})); then
    echo
    echo "Inputs that found something (target: file; reproduce with build-asan/bin/fuzz_TARGET FILE):"
    for f in "${found[@]}"; do echo "- $f"; done
  fi
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
if [ "$(git status --porcelain -- tests/fuzz/corpus 2>/dev/null || true)" != "$seeds_before" ]; then
  echo "bench/fuzz.sh: tests/fuzz/corpus changed during the run; the seeds are not the place for a grown corpus" >&2
  status=1
fi
exit $status
