#!/usr/bin/env bash
# perturb: {foreach} on torch.optim's own single-tensor optimizers, captured with Debian's python3-torch: SGD with
# momentum (and Nesterov with weight decay), Adam (plain, weight decay, amsgrad), AdamW, RMSprop and Adagrad. Each
# step must be rewritten (foreach ops issued, per-parameter ops dropped) and the bundle replay every op.
# tests/python/foreach_optimizers.sh BIN_DIR SOURCE_DIR WORK_DIR; exit 77 = skipped (no torch in Python).
set -uo pipefail
BIN=$1 SRC=$2 WORK=$3/foreach_optimizers
PY=${REPRISE_PYTHON:-/usr/bin/python3}
"$PY" -c "import torch" 2>/dev/null || { echo "no torch in $PY (install python3-torch): skipped"; exit 77; }
rm -rf "$WORK" && mkdir -p "$WORK"
names="sgd_momentum sgd_nesterov_wd adam adam_wd adam_amsgrad adamw rmsprop adagrad"
OMP_NUM_THREADS=1 "$PY" "$SRC/tests/python/capture_optimizers.py" "$SRC" "$WORK" $names >"$WORK/capture.log" 2>&1 ||
  { cat "$WORK/capture.log"; echo "FAIL: capture_optimizers.py"; exit 1; }
status=0
for o in $names; do
  cat >"$WORK/$o.yaml" <<YAML
name: $o-foreach
source: $WORK/$o
transforms:
  - perturb: {foreach: 'Optimizer\.step#'}
YAML
  out=$("$BIN/reprise" generate "$WORK/$o.yaml" --out "$WORK/$o-foreach" 2>&1) || { echo "FAIL: $o: generate: $out"; status=1; continue; }
  note=$(grep -o "foreach: 1 optimizer step(s) as [0-9]* foreach op(s), [0-9]* per-parameter op(s) dropped" <<<"$out")
  [ -n "$note" ] || { echo "FAIL: $o: the step is not rewritten: $out"; status=1; continue; }
  out=$("$BIN/reprise" replay "$WORK/$o-foreach" --strict --iterations 1 --warmup 0 -q 2>&1) ||
    { echo "FAIL: $o: replay: $out"; status=1; continue; }
  grep -q "coverage 100.0%" <<<"$out" || { echo "FAIL: $o: coverage: $out"; status=1; continue; }
  echo "ok: $o: ${note#foreach: }"
done
exit $status
