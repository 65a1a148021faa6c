#!/usr/bin/env bash
# The Python helper on Debian's python3-torch: capture a small training loop, read it back, replay it with full
# coverage. tests/python/python_capture.sh BIN_DIR SOURCE_DIR WORK_DIR; exit 77 = skipped (no torch in Python).
set -uo pipefail
BIN=$1 SRC=$2 WORK=$3/python_capture
PY=${REPRISE_PYTHON:-/usr/bin/python3}
"$PY" -c "import torch" 2>/dev/null || { echo "no torch in $PY (install python3-torch): skipped"; exit 77; }
rm -rf "$WORK"
"$PY" "$SRC/capture/python/examples/train_mlp.py" "$WORK" || { echo "FAIL: train_mlp.py"; exit 1; }
[ -f "$WORK/manifest.json" ] || { echo "FAIL: no manifest"; exit 1; }
[ -f "$WORK/rank-0.kineto.json" ] || { echo "FAIL: no rank-0.kineto.json (the host times)"; exit 1; }
out=$("$BIN/reprise" inspect "$WORK" 2>&1) || { echo "FAIL: inspect: $out"; exit 1; }
grep -q "ProfilerStep#10" <<<"$out" || { echo "FAIL: no ProfilerStep#10 in: $out"; exit 1; }
grep -Eq "([0-9]+) of \1 CPU ops linked by rf_id" <<<"$out" || { echo "FAIL: the host times are not all linked: $out"; exit 1; }
grep -q "default_pg" <<<"$out" || { echo "FAIL: no process group in: $out"; exit 1; }
out=$("$BIN/reprise" replay "$WORK" --strict --iterations 2 -q 2>&1) || { echo "FAIL: replay: $out"; exit 1; }
grep -q "coverage 100.0%" <<<"$out" || { echo "FAIL: coverage: $out"; exit 1; }
grep -q "replay/original" <<<"$out" || { echo "FAIL: no original time: $out"; exit 1; }
grep -q "host time    recorded (default: recorded on cpu for a Python capture" <<<"$out" ||
  { echo "FAIL: a Python capture's host time is not re-spent by default: $out"; exit 1; }
# The profiled step's ops link to the recorded step's, every replayed op has its original time.
out=$("$BIN/reprise" replay "$WORK" --host-time recorded --iterations 1 --warmup 0 -q --out "$WORK/r.json" 2>&1) ||
  { echo "FAIL: replay --host-time recorded: $out"; exit 1; }
grep -Eq "host time +recorded \(--host-time\): .* per iteration re-spent \(python profiler, ([0-9]+) of \1 ops timed(, less .* of the observers' cost)?\)" \
  <<<"$out" || { echo "FAIL: host time: $out"; exit 1; }
# torch.optim.Adam(foreach=False) as the foreach implementation issues it: its out-of-place sqrt and div as foreach
# ops that return lists, its .item()s one per parameter; the bundle replays whole.
"$PY" "$SRC/capture/python/examples/train_mlp.py" "$WORK/adam" --anti-pattern loop --pairs 1 --batch 16 --hidden 64 \
  >/dev/null || { echo "FAIL: train_mlp.py --anti-pattern loop"; exit 1; }
cat >"$WORK/adam.yaml" <<EOF
name: adam-foreach
source: $WORK/adam
transforms:
  - perturb: {foreach: 'Optimizer\.step#Adam'}
EOF
out=$("$BIN/reprise" generate "$WORK/adam.yaml" --out "$WORK/adam-foreach" 2>&1) || { echo "FAIL: generate: $out"; exit 1; }
grep -q "1 optimizer step(s) as 9 foreach op(s), 45 per-parameter op(s) dropped, 6 kept one per parameter" <<<"$out" ||
  { echo "FAIL: the Adam step is not rewritten: $out"; exit 1; }
out=$("$BIN/reprise" inspect "$WORK/adam-foreach" --top 100 2>&1) || { echo "FAIL: inspect the bundle: $out"; exit 1; }
grep -q "aten::_foreach_sqrt" <<<"$out" || { echo "FAIL: no _foreach_sqrt in: $out"; exit 1; }
out=$("$BIN/reprise" replay "$WORK/adam-foreach" --strict --iterations 1 --warmup 0 -q 2>&1) ||
  { echo "FAIL: replay the foreach bundle: $out"; exit 1; }
grep -q "coverage 100.0%" <<<"$out" || { echo "FAIL: foreach bundle coverage: $out"; exit 1; }
# A DataLoader in the step: its call is left out of the replay, and re-spent when asked (--data-loader); analyze
# finds it and --measure replays its fix (the original with the loader's time, against the same without).
"$PY" "$SRC/capture/python/examples/train_mlp.py" "$WORK/loader" --anti-pattern loader --pairs 1 --batch 256 \
  --hidden 64 >/dev/null || { echo "FAIL: train_mlp.py --anti-pattern loader"; exit 1; }
out=$("$BIN/reprise" replay "$WORK/loader" --iterations 1 --warmup 0 -q 2>&1) || { echo "FAIL: replay loader: $out"; exit 1; }
grep -q "data loader  left out: the trace's DataLoader calls took .* per iteration" <<<"$out" ||
  { echo "FAIL: the DataLoader's time is not reported: $out"; exit 1; }
out=$("$BIN/reprise" replay "$WORK/loader" --data-loader recorded --iterations 1 --warmup 0 -q 2>&1) ||
  { echo "FAIL: replay --data-loader recorded: $out"; exit 1; }
grep -q "data loader  .* per iteration re-spent (--data-loader)" <<<"$out" || { echo "FAIL: --data-loader: $out"; exit 1; }
out=$("$BIN/reprise" replay "$WORK/loader" --data-loader sometimes -q 2>&1) && { echo "FAIL: a bad --data-loader ran"; exit 1; }
grep -q "replay: --data-loader must be none, recorded or a scale" <<<"$out" || { echo "FAIL: --data-loader error: $out"; exit 1; }
"$BIN/reprise" analyze "$WORK/loader" --measure --only data_loader --pairs 1 --iterations 1 --warmup 0 \
  --json "$WORK/loader.json" -q || { echo "FAIL: analyze --measure data_loader"; exit 1; }
"$PY" - "$WORK/loader.json" <<'PY' || exit 1
import json, re, sys
d = json.load(open(sys.argv[1]))
if "measured" not in d:  # nothing found to measure: say what analyze saw (a fresh clone's run under load once did)
    sys.exit("FAIL: no data_loader finding; findings %s; steps %s" % (
        [(f["detector"], f["evidence"]) for f in d["findings"]],
        [(w["name"], round(w["end_us"] - w["begin_us"])) for w in d["windows"] if w["kind"] == "step"]))
m = [x for x in d["measured"] if x["detector"] == "data_loader"]
# What was measured, not its size: one pair of one iteration moves with the machine's load (the benchmark,
# bench/analyze_measure.py --anti-pattern loader, measures the saving).
if len(m) != 1 or m[0]["pairs"] != 1 or m[0]["transform"] != "replay: {data_loader: none}" \
        or not re.search(r"re-spends its DataLoader calls' [0-9.]+ (s|ms|us) a step", m[0]["note"]):
    sys.exit("FAIL: data_loader measured: %s" % m)
PY
echo "ok"
