#!/usr/bin/env bash
# One config of configs/ end to end, for ctest: tests/configs/run_config.sh CONFIG BIN_DIR SHARED_DIR WORK_DIR
# Captures its source when the config says how (a "# capture: ..." line), generates the bundle, verifies it, and
# replays it on CPU (under mpirun when its world is over 1) with at least 99% coverage on every rank.
# Exit 0 = pass, 77 = skipped (shared traces absent), anything else = fail.
set -uo pipefail
CONFIG=$1 BIN=$2 SHARED=$3 WORK=$4/$(basename "$1" .yaml)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
export REPRISE_SHARED_TRACES=$SHARED REPRISE_CAPTURES=$4/captures
export PATH="$BIN:$PATH"
fail() { echo "FAIL: $(basename "$CONFIG"): $*" >&2; exit 1; }
rm -rf "$WORK" && mkdir -p "$WORK" "$REPRISE_CAPTURES"
if grep -q 'REPRISE_SHARED_TRACES' "$CONFIG" && [ ! -d "$SHARED" ]; then
  echo "shared traces not found ($SHARED): skipped"; exit 77
fi
capture=$(sed -n 's/^# capture: //p' "$CONFIG")
if [ -n "$capture" ]; then
  # Configs of one source share its capture; a lock keeps parallel tests from capturing it twice.
  exec 9>"$REPRISE_CAPTURES/.lock" && flock 9
  target=$(eval echo "$(sed -n 's/.*--out \([^ ]*\).*/\1/p' <<<"$capture")")
  [ -f "$target/manifest.json" ] || eval "$capture" >"$WORK/capture.log" 2>&1 || { cat "$WORK/capture.log"; fail "capture"; }
  flock -u 9
fi
reprise generate "$CONFIG" --out "$WORK/bundle" -q >"$WORK/generate.log" 2>&1 || { cat "$WORK/generate.log"; fail "generate"; }
reprise verify "$WORK/bundle" -q >"$WORK/verify.log" 2>&1 || { cat "$WORK/verify.log"; fail "verify"; }
world=$(sed -n 's/^world_size: //p' "$WORK/bundle/benchmark.yaml")
launch=()
((world > 1)) && launch=(mpiexec --oversubscribe -np "$world")
"${launch[@]}" reprise replay "$WORK/bundle" --out "$WORK/r.json" --timeout 300 -q >"$WORK/replay.log" 2>&1 ||
  { cat "$WORK/replay.log"; fail "replay exited $?"; }
python3 - "$WORK/r.json" "$world" <<'PY' || fail "coverage"
import json, sys
r = json.load(open(sys.argv[1]))
ranks = r.get("ranks", [r])
assert len(ranks) == int(sys.argv[2]), f"{len(ranks)} rank results for a world of {sys.argv[2]}"
for e in ranks:
    assert e["coverage"] >= 0.99, f"rank {e.get('rank')}: coverage {e['coverage']}"
    c = e["collectives"] if "collectives" in e else {"selected": e["collectives_selected"], "replayed": e["collectives_replayed"]}
    assert c["replayed"] == c["selected"], f"rank {e.get('rank')}: {c['replayed']} of {c['selected']} collectives"
print(f"ok: {len(ranks)} rank(s), coverage {min(e['coverage'] for e in ranks):.4f}")
PY
