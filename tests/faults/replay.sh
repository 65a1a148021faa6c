#!/usr/bin/env bash
# Faults of a replay (docs/reliability.md): ranks that disagree, a rank stopped, killed or terminated mid-replay,
# inputs that cannot be replayed, outputs that cannot be written, options out of bounds, memory that runs out (and a
# capture's time limit and memory).
# Each ends every rank with one line and the documented exit status, leaves no results file and no process behind.
# Run as tests/faults/replay.sh CASE BIN_DIR WORK_DIR.
# cases: mismatched_sizes mismatched_counts mismatched_pipeline sigstop_default_limit kill9_rank sigterm_rank kineto_only single_trace_np2 bad_output_path option_bounds out_of_memory capture_limits
# needs: reprise-torch
# multi-rank cases: mismatched_sizes mismatched_counts mismatched_pipeline sigstop_default_limit kill9_rank sigterm_rank kineto_only single_trace_np2 bad_output_path out_of_memory
set -uo pipefail
CASE=$1 BIN=$2 WORK=$3/replay_$1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
MPI=(mpiexec --oversubscribe)
rm -rf "$WORK" && mkdir -p "$WORK"
fail() { echo "FAIL: $*" >&2; exit 1; }
synth() {  # synth DIR RANK WORLD [synth options]: a small trace (2 layers, hidden 32, batch 8 unless given)
  local dir=$1 rank=$2 world=$3 d
  shift 3
  local opts=("$@")
  for d in "--layers 2" "--hidden 32" "--batch 8"; do
    [[ " ${opts[*]} " == *" ${d% *} "* ]] || opts+=($d)
  done
  mkdir -p "$dir"
  "$BIN/reprise" synth --out "$dir/rank-$rank.json.gz" --world-size "$world" --rank "$rank" "${opts[@]}" >/dev/null ||
    fail "synth ${opts[*]}"
}
# The one line reprise printed (mpirun's own banner aside); fails unless there is exactly one.
reprise_line() {
  local lines
  lines=$(grep '^reprise: ' <<<"$1" | grep -v '^reprise: time limit: ' | sort -u)
  [ "$(grep -c . <<<"$lines")" = 1 ] || fail "expected one line from reprise, got: $1"
  echo "$lines"
}
no_leftovers() {  # no process of this case's replay is left, a moment after mpirun returned
  sleep 2
  local left
  left=$(pgrep -f "reprise-torch replay $WORK" || true)
  if [ -n "$left" ]; then
    kill -9 $left 2>/dev/null
    fail "processes left behind: $left"
  fi
}
rank_pid() {  # rank_pid R: the process of rank R of this case's replay
  local p
  for p in $(pgrep -f "reprise-torch replay $WORK"); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1" && echo "$p" && return
  done
}
wait_for() {  # wait_for FILE TEXT SECONDS: until the file holds the text
  local n=0
  until grep -q "$2" "$1" 2>/dev/null; do
    sleep 0.05
    n=$((n + 1))
    [ $n -lt $(($3 * 20)) ] || return 1
  done
}
# A 2-rank replay in the background: rank 1 is sent a signal once rank 0 reports a phase done, then every rank must
# end, without results, within LIMIT seconds (else the case cleans up and fails instead of hanging).
signal_mid_replay() {  # signal_mid_replay SIGNAL PHASE LIMIT [replay options]; the traces are in $WORK/t
  local sig=$1 phase=$2 limit=$3
  shift 3
  local start=$SECONDS
  "${MPI[@]}" -np 2 "$BIN/reprise" replay "$WORK/t" --out "$WORK/r.json" "$@" >"$WORK/log" 2>&1 &
  local mpirun=$!
  wait_for "$WORK/log" "reprise: $phase: " 30 || {
    kill $mpirun
    fail "the replay never reported $phase: $(cat "$WORK/log")"
  }
  local pid
  pid=$(rank_pid 1)
  [ -n "$pid" ] || fail "rank 1 had already ended at $phase: $(cat "$WORK/log")"
  kill "-$sig" "$pid"
  while kill -0 $mpirun 2>/dev/null && [ $((SECONDS - start)) -le "$limit" ]; do sleep 0.5; done
  if kill -0 $mpirun 2>/dev/null; then
    kill -9 $mpirun "$pid" $(pgrep -f "reprise-torch replay $WORK") 2>/dev/null
    fail "still running after $limit s: $(cat "$WORK/log")"
  fi
  wait $mpirun
  local rc=$? took=$((SECONDS - start))
  echo "SIG$sig after $phase: mpirun exited $rc after $took s"
  [ $rc != 0 ] || fail "mpirun exited 0 (the signal came too late?): $(cat "$WORK/log")"
  [ ! -e "$WORK/r.json" ] || fail "a results file was written"
  ls "$WORK" | grep -q 'tmp' && fail "a temporary file was left: $(ls "$WORK")"
  no_leftovers
}

case $CASE in
  mismatched_sizes)
    # Collectives of the same count but different sizes crashed MPI (free(): invalid pointer).
    synth "$WORK/t" 0 2 --hidden 256
    synth "$WORK/t" 1 2 --hidden 128
    out=$("${MPI[@]}" -np 2 "$BIN/reprise" replay "$WORK/t" -q 2>&1)
    rc=$?
    [ $rc = 2 ] || fail "exit $rc, not 2: $out"
    line=$(reprise_line "$out")
    grep -q "process group 0 \[0,1\], collective 0 on it: rank 0 issues all_reduce of float, sum, 65536 elements in, 65536 out (node [0-9]* of .*rank-0.json.gz), but rank 1 issues all_reduce of float, sum, 16384 elements in, 16384 out (node [0-9]* of .*rank-1.json.gz)" <<<"$line" ||
      fail "message: $line"
    grep -qi "signal\|free()\|MPI_ABORT" <<<"$out" && fail "crashed: $out"
    ;;
  mismatched_pipeline)
    # A 2-stage pipeline whose first stage lost one send: the last stage's receive would wait forever.
    "${MPI[@]}" -np 2 "$BIN/reprise" capture --workload gpt --pp 2 --layers 2 --hidden 32 --heads 2 --seq 8 --batch 4 \
      --vocab 64 --warmup 0 --steps 1 --out "$WORK/p" -q >/dev/null 2>&1 || fail "capture exited $?"
    /usr/bin/python3 - "$WORK/p/rank-0.json.gz" <<'PY' || fail "could not drop a send"
import gzip, json, sys
et = json.load(gzip.open(sys.argv[1], "rt"))
nodes = et["nodes"]
send = next(i for i, n in enumerate(nodes) if n["name"] == "record_param_comms" and "send" in n["inputs"]["values"])
del nodes[send]
json.dump(et, gzip.open(sys.argv[1], "wt"))
PY
    out=$("${MPI[@]}" -np 2 "$BIN/reprise" replay "$WORK/p" -q 2>&1)
    rc=$?
    [ $rc = 2 ] || fail "exit $rc, not 2 (124: a hang the time limit ended): $out"
    line=$(reprise_line "$out")
    grep -q "point-to-point from rank 0 to rank 1 on group \[0,1\], operation [0-9]*: rank 1 receives [0-9]* float elements (node [0-9]* of .*rank-1.json.gz), but rank 0 sends nothing to match it (.*): the pipeline would hang" <<<"$line" ||
      fail "message: $line"
    ;;
  mismatched_counts)
    # One rank issues a collective more at the end: the first missing one is named.
    synth "$WORK/t" 0 2 --layers 2
    synth "$WORK/t" 1 2 --layers 3
    out=$("${MPI[@]}" -np 2 "$BIN/reprise" replay "$WORK/t" -q 2>&1)
    rc=$?
    [ $rc = 2 ] || fail "exit $rc, not 2: $out"
    line=$(reprise_line "$out")
    grep -q "collective 2 on it: rank 0 issues none (its 2 collective(s) on the group end there, in .*rank-0.json.gz), but rank 1 issues all_reduce .*: the traces do not belong to one run" <<<"$line" ||
      fail "message: $line"
    ;;
  sigstop_default_limit)
    # No --timeout: rank 0 waits for the stopped rank 1 until the derived limit (the floor for a trace without
    # recorded times: 60 s + 5 ms per node), then ends itself, and mpirun the rest. Rank 1 is stopped once both
    # ranks are past the exchange of their collectives, during a first pass long enough (large matmuls) that
    # rank 0 then waits in its first collective.
    synth "$WORK/t" 0 2 --hidden 1024 --batch 1024
    synth "$WORK/t" 1 2 --hidden 1024 --batch 1024
    signal_mid_replay STOP inputs 85 --iterations 3
    grep -q "reprise: time limit: 60 s (derived: the floor; the trace records no iteration time)" "$WORK/log" ||
      fail "the derived limit was not announced: $(cat "$WORK/log")"
    grep -q "reprise: replay: time limit of 60 s (derived: the floor; .*) reached; ending this rank" "$WORK/log" ||
      fail "no line says the limit was reached: $(cat "$WORK/log")"
    ;;
  kill9_rank | sigterm_rank)
    # A rank killed mid-replay (at a phase picked at random) ends the job at once, well within the limit.
    phases=(collectives inputs validate)
    phase=${phases[$((RANDOM % 3))]}
    sig=KILL
    [ "$CASE" = sigterm_rank ] && sig=TERM
    synth "$WORK/t" 0 2
    synth "$WORK/t" 1 2
    signal_mid_replay $sig "$phase" 30 --iterations 200000
    ;;
  kineto_only)
    cp "$(dirname "$0")/../fuzz/corpus/kineto/seed0.json" "$WORK/k.json"
    out=$("$BIN/reprise" replay "$WORK/k.json" -q --out "$WORK/r.json" 2>&1)
    rc=$?
    [ $rc = 2 ] || fail "exit $rc, not 2: $out"
    line=$(reprise_line "$out")
    grep -q "k.json: a Kineto trace alone cannot be replayed: .*not their arguments, shapes or dtypes; give the execution trace (ET)" <<<"$line" ||
      fail "message: $line"
    [ ! -e "$WORK/r.json" ] || fail "results written"
    # Under a launch: every rank refuses, rank 0 says it once.
    out=$("${MPI[@]}" -np 2 "$BIN/reprise" replay "$WORK/k.json" -q 2>&1)
    rc=$?
    [ $rc = 2 ] || fail "np 2: exit $rc, not 2: $out"
    reprise_line "$out" | grep -q "a Kineto trace alone cannot be replayed" || fail "np 2 message: $out"
    ;;
  single_trace_np2)
    # A one-rank run's trace is replicated: each rank replays a copy, labelled with its own rank.
    synth "$WORK/one" 0 1
    "${MPI[@]}" -np 2 "$BIN/reprise" replay "$WORK/one/rank-0.json.gz" --out "$WORK/r1.json" --timeline "$WORK/t1.json" \
      -q >/dev/null || fail "replicated replay exited $?"
    /usr/bin/python3 - "$WORK/r1.json" "$WORK/t1.json" <<'PY' || fail "replicated results"
import json, sys
r, t = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert r["replicated"] and r["world_size"] == 2, r
assert [(e["rank"], e.get("trace_rank")) for e in r["ranks"]] == [(0, None), (1, 0)], r["ranks"]
assert all(e["collectives_replayed"] == e["collectives_selected"] > 0 for e in r["ranks"]), r["ranks"]
assert {e["pid"] for e in t["traceEvents"]} == {0, 1}
PY
    # One rank's trace of a 2-rank run serves both ranks of a 2-rank launch, each labelled truly.
    synth "$WORK/two" 0 2
    "${MPI[@]}" -np 2 "$BIN/reprise" replay "$WORK/two/rank-0.json.gz" --out "$WORK/r2.json" -q >/dev/null ||
      fail "2-rank trace exited $?"
    /usr/bin/python3 -c "
import json, sys
r = json.load(open('$WORK/r2.json'))
assert 'replicated' not in r and [(e['rank'], e.get('trace_rank')) for e in r['ranks']] == [(0, None), (1, 0)], r['ranks']
" || fail "2-rank trace results"
    # One rank's trace of a 4-rank run under a 2-rank launch is refused.
    synth "$WORK/four" 3 4
    out=$("${MPI[@]}" -np 2 "$BIN/reprise" replay "$WORK/four/rank-3.json.gz" -q 2>&1)
    rc=$?
    [ $rc = 2 ] || fail "4-rank trace: exit $rc, not 2: $out"
    reprise_line "$out" | grep -q "one rank's trace of a 4-rank run, but the launch has 2 ranks: launch 4" ||
      fail "message: $out"
    ;;
  bad_output_path)
    # Refused before any work: 10 million iterations would run for hours, so an exit within the loose limits below
    # (LibTorch's start under the sanitizers on a loaded 2-core machine takes seconds) proves none ran.
    synth "$WORK/t" 0 1
    for opt in --out --timeline; do
      start=$SECONDS
      out=$("$BIN/reprise" replay "$WORK/t" --iterations 10000000 $opt "$WORK/missing/x.json" -q 2>&1)
      rc=$?
      [ $rc = 2 ] || fail "$opt: exit $rc, not 2: $out"
      [ $((SECONDS - start)) -le 120 ] || fail "$opt: refused only after $((SECONDS - start)) s"
      reprise_line "$out" | grep -q "missing/x.json" || fail "$opt message: $out"
    done
    # Under a launch rank 0 refuses, and the other ranks end with it instead of waiting.
    synth "$WORK/t2" 0 2
    synth "$WORK/t2" 1 2
    start=$SECONDS
    out=$("${MPI[@]}" -np 2 "$BIN/reprise" replay "$WORK/t2" --iterations 10000000 --out "$WORK/missing/x.json" -q 2>&1)
    rc=$?
    [ $rc = 2 ] || fail "np 2: exit $rc, not 2: $out"
    [ $((SECONDS - start)) -le 180 ] || fail "np 2: refused only after $((SECONDS - start)) s"
    reprise_line "$out" | grep -q "missing/x.json" || fail "np 2 message: $out"
    no_leftovers
    ;;
  option_bounds)
    synth "$WORK/t" 0 2
    check() {  # check TEXT ARGS...: exit 2, one line containing TEXT, and quickly
      local text=$1
      shift
      local out rc
      out=$(timeout 60 "$BIN/reprise" replay "$WORK/t" -q "$@" 2>&1)
      rc=$?
      [ $rc = 2 ] || fail "$*: exit $rc, not 2: $out"
      reprise_line "$out" | grep -qF -- "$text" || fail "$*: message: $out"
    }
    check "--threads must be between 0" --threads 100000
    check "--threads must be between 0" --threads -1
    check "--rank must not be negative" --rank -1
    check "no trace for rank 5" --rank 5
    check "--max-ops must not be negative" --max-ops -1
    check "--iteration must not be negative" --iteration -2
    check "--warmup must not be negative" --warmup -1
    check "--iterations must be at least 1" --iterations 0
    check "--seed must not be negative" --seed -1
    check "--timeout must be between 0" --timeout -1
    check "--timeout must be between 0" --timeout nan
    check "--per-op-passes must be between 1 and 1000" --per-op-passes 0
    check "device 'cpu:3': the CPU has no index but 0" --device cpu:3
    check "device 'banana': not a device" --device banana
    check "for option '--iterations' is invalid" --iterations 99999999999
    ;;
  out_of_memory)
    # LibTorch's failed allocation is exit 3 with one line: a trace whose inputs need about 1.6 GB, under an
    # address-space limit LibTorch itself fits in.
    (ulimit -v 1500000 && "$BIN/reprise" replay --help >/dev/null 2>&1) ||
      { echo "reprise-torch cannot start under a 1.5 GB address-space limit (a sanitizer build?): skipped"; exit 77; }
    synth "$WORK/t" 0 1 --hidden 20000 --batch 20000 --layers 1
    out=$(ulimit -v 1500000 && "$BIN/reprise" replay "$WORK/t" -q --out "$WORK/r.json" 2>&1)
    rc=$?
    [ $rc = 3 ] || fail "exit $rc, not 3: $out"
    reprise_line "$out" | grep -q "out of memory: .*can't allocate memory" || fail "message: $out"
    [ ! -e "$WORK/r.json" ] || fail "results written"
    # Under a launch (the trace replicated on 2 ranks): the failing rank ends every rank with status 3.
    out=$(ulimit -v 1500000 && "${MPI[@]}" -np 2 "$BIN/reprise" replay "$WORK/t" -q --out "$WORK/r.json" 2>&1)
    rc=$?
    [ $rc = 3 ] || fail "np 2: exit $rc, not 3: $out"
    # Both ranks may fail at once and their lines interleave on the shared stderr: the message, not its start.
    grep -q "rank [01]: out of memory: .*can't allocate memory" <<<"$out" || fail "np 2 message: $out"
    [ ! -e "$WORK/r.json" ] || fail "np 2: results written"
    ;;
  capture_limits)
    # reprise capture: --timeout ends it (exit 124, one line, no manifest), bad values are refused, and running out
    # of memory is exit 3.
    out=$("$BIN/reprise" capture --workload mlp --out "$WORK/c" --steps 10000000 --timeout 2 -q 2>&1)
    rc=$?
    [ $rc = 124 ] || fail "timeout: exit $rc, not 124: $out"
    reprise_line "$out" | grep -q "capture: time limit of 2 s reached" || fail "timeout message: $out"
    [ ! -e "$WORK/c/manifest.json" ] || fail "a manifest was written"
    for bad in "--timeout -1" "--timeout inf" "--threads 100000"; do
      out=$("$BIN/reprise" capture --workload mlp --out "$WORK/c" $bad 2>&1)
      rc=$?
      [ $rc = 2 ] || fail "$bad: exit $rc, not 2: $out"
      reprise_line "$out" | grep -q "capture: ${bad%% *} must be between 0" || fail "$bad: message: $out"
    done
    (ulimit -v 1500000 && "$BIN/reprise" capture --help >/dev/null 2>&1) ||
      { echo "reprise-torch cannot start under a 1.5 GB address-space limit (a sanitizer build?): out of memory not tried"; exit 0; }
    out=$(ulimit -v 1500000 && "$BIN/reprise" capture --workload mlp --out "$WORK/m" --hidden 20000 --batch 20000 -q 2>&1)
    rc=$?
    [ $rc = 3 ] || fail "out of memory: exit $rc, not 3: $out"
    reprise_line "$out" | grep -q "out of memory: .*can't allocate memory" || fail "out of memory message: $out"
    ;;
  *) fail "unknown case $CASE" ;;
esac
echo "ok: $CASE"
