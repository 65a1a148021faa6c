#!/usr/bin/env bash
# The detectors against ground truth on CPU captures: the built-in workloads captured here (mlp, gpt, and dlrm on 4
# ranks under mpirun at batch 2048, whose steps outlast the scheduler's time slices so that the oversubscribed ranks
# compute alike, several recorded steps each, one thread a rank), each also as its fused variant, with the
# host-side patterns injected at known steps (data_loader, dtype_churn, single_tensor_optimizer, unfused_elementwise,
# zero_grad; straggler among the dlrm's ranks), then the rules and the plain-threshold baseline scored on the
# held-out steps (the classifier judges GPU steps only). Writes bench/out/analyze_eval_cpu.{txt,json}.
# Usage: bench/analyze_eval_cpu.sh [--copies N] [--seed S]   (defaults 48 and 1)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-build/bin}
OUT=bench/out
copies=48 seed=1
while [ $# -gt 0 ]; do
  case $1 in
    --copies) copies=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    *) echo "usage: bench/analyze_eval_cpu.sh [--copies N] [--seed S]" >&2; exit 2 ;;
  esac
done
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
bases=$OUT/cpu-bases
rm -rf "$bases" "$OUT/corpus-cpu"
mkdir -p "$bases"
echo "capturing the CPU bases in $bases" >&2
"$BIN/reprise" capture --workload mlp --out "$bases/mlp" --warmup 1 --steps 2 --record 6 --threads 1 -q >/dev/null
"$BIN/reprise" capture --workload gpt --out "$bases/gpt" --layers 1 --warmup 1 --steps 2 --record 4 --threads 1 -q \
  >/dev/null
mpiexec --oversubscribe -np 4 "$BIN/reprise" capture --workload dlrm --batch 2048 --out "$bases/dlrm-4" --warmup 1 --steps 2 \
  --record 4 --threads 1 -q >/dev/null
"$BIN/reprise" analyze --make-corpus "$OUT/corpus-cpu" --copies "$copies" --seed "$seed" \
  "$bases/mlp" "$bases/gpt" "$bases/dlrm-4" | tee "$OUT/analyze_eval_cpu.txt"
"$BIN/reprise" analyze --evaluate "$OUT/corpus-cpu" --json "$OUT/analyze_eval_cpu.json" |
  tee -a "$OUT/analyze_eval_cpu.txt"
