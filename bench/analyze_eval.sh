#!/usr/bin/env bash
# The detectors against ground truth: a corpus of the shared GPU traces with ProfilerSteps (HTA's
# trace_diff_control and nccl_data, PARAM's 8-rank DLRM) with anti-patterns injected at known steps, then the
# rules, the plain-threshold baseline and the window classifier scored on its held-out steps. Writes
# bench/out/analyze_eval.{txt,json}. --train first retrains the classifier Reprise ships
# (analyze/models/window_model.json) on the corpus's training steps: the recipe of the shipped model.
# Usage: bench/analyze_eval.sh [--copies N] [--seed S] [--train]   (defaults 96 and 1)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-build/bin}
SHARED=../shared/traces
OUT=bench/out
copies=96 seed=1 train=0
while [ $# -gt 0 ]; do
  case $1 in
    --train) train=1; shift ;;
    --copies) copies=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    *) echo "usage: bench/analyze_eval.sh [--copies N] [--seed S] [--train]" >&2; exit 2 ;;
  esac
done
for f in hta/trace_diff_control_kineto.json.gz hta/nccl_data_kineto.json.gz param/dlrm_kineto.tar.gz; do
  [ -f "$SHARED/$f" ] || { echo "bench/analyze_eval.sh: $SHARED/$f not found (../shared/traces absent)" >&2; exit 77; }
done
mkdir -p "$OUT"
rm -rf "$OUT/corpus"
"$BIN/reprise" analyze --make-corpus "$OUT/corpus" --copies "$copies" --seed "$seed" \
  "$SHARED/hta/trace_diff_control_kineto.json.gz" "$SHARED/hta/nccl_data_kineto.json.gz" \
  "$SHARED/param/dlrm_kineto.tar.gz" | tee "$OUT/analyze_eval.txt"
model=()
if ((train)); then
  "$BIN/reprise" analyze --train "$OUT/corpus" --out analyze/models/window_model.json -q
  echo "trained analyze/models/window_model.json (rebuild to ship it)" | tee -a "$OUT/analyze_eval.txt"
  model=(--model analyze/models/window_model.json)
fi
"$BIN/reprise" analyze --evaluate "$OUT/corpus" "${model[@]}" --json "$OUT/analyze_eval.json" |
  tee -a "$OUT/analyze_eval.txt"
