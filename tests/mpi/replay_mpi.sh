#!/usr/bin/env bash
# Multi-rank end-to-end cases for ctest: tests/mpi/replay_mpi.sh CASE BIN_DIR SHARED_DIR WORK_DIR
# Exit 0 = pass, 77 = skipped (shared traces absent), anything else = fail.
set -uo pipefail
CASE=$1 BIN=$2 SHARED=$3 WORK=$4/$1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
MPI=(mpiexec --oversubscribe)
rm -rf "$WORK" && mkdir -p "$WORK"
fail() { echo "FAIL: $*" >&2; exit 1; }
need_shared() { [ -f "$SHARED/$1" ] || { echo "shared trace $1 not found (../shared/traces absent): skipped"; exit 77; }; }
check_json() {  # check_json FILE PYTHON-EXPRESSION-ON-r
  python3 - "$1" "$2" <<'PY' || exit 1
import json, os, sys
r = json.load(open(sys.argv[1]))
ok = eval(sys.argv[2])
if not ok:
    print("check failed:", sys.argv[2]); print(json.dumps({k: r[k] for k in r if k != "ranks"}, indent=1)[:3000])
    for e in r.get("ranks", []): print(json.dumps(e)[:600])
    sys.exit(1)
PY
}
synth() {  # synth DIR LAYERS_RANK0 LAYERS_RANK1
  mkdir -p "$1"
  "$BIN/reprise" synth --out "$1/rank-0.json.gz" --world-size 2 --rank 0 --layers "$2" --hidden 32 --batch 8 >/dev/null || fail synth
  "$BIN/reprise" synth --out "$1/rank-1.json.gz" --world-size 2 --rank 1 --layers "$3" --hidden 32 --batch 8 >/dev/null || fail synth
}

case $CASE in
  synth_np2)
    synth "$WORK/t" 3 3
    "${MPI[@]}" -np 2 "$BIN/reprise" replay "$WORK/t" --iterations 3 --out "$WORK/r.json" --timeline "$WORK/t.json" \
      --timeout 120 -q || fail "replay exited $?"
    check_json "$WORK/r.json" 'r["world_size"] == 2 and len(r["ranks"]) == 2 and all(e["collectives_replayed"] == e["collectives_selected"] == 3 and e["coverage"] == 1 and len(e["iteration_seconds"]) == 3 for e in r["ranks"]) and r["collective_timing"][0]["name"] == "all_reduce" and r["collective_timing"][0]["busbw_gbps"] > 0'
    python3 -c "import json,sys; d=json.load(open('$WORK/t.json')); assert {e['pid'] for e in d['traceEvents']} == {0, 1}" || fail "timeline lacks a rank"
    ;;
  rank_count_mismatch)
    synth "$WORK/t" 2 2
    out=$("${MPI[@]}" -np 3 "$BIN/reprise" replay "$WORK/t" --timeout 60 -q 2>&1) && fail "expected a failure"
    grep -q "2 rank traces, but the launch has 3 ranks" <<<"$out" || fail "message: $out"
    ;;
  bundle_launch_mismatch)
    synth "$WORK/t" 2 2
    "$BIN/reprise" generate "$WORK/t" --out "$WORK/b" -q >/dev/null || fail "generate exited $?"
    out=$("${MPI[@]}" -np 3 "$BIN/reprise" replay "$WORK/b" --timeout 60 -q 2>&1) && fail "expected a failure"
    grep -q "a bundle of 2 rank(s), but the launch has 3: launch 2 (mpirun -np 2)" <<<"$out" || fail "message: $out"
    "${MPI[@]}" -np 2 "$BIN/reprise" replay "$WORK/b" --iterations 2 --out "$WORK/r.json" --timeout 120 -q ||
      fail "replay exited $?"
    check_json "$WORK/r.json" 'r["world_size"] == 2 and all(e["coverage"] == 1 and e["collectives_replayed"] == e["collectives_selected"] > 0 for e in r["ranks"])'
    ;;
  traces_disagree)
    synth "$WORK/t" 2 3
    out=$("${MPI[@]}" -np 2 "$BIN/reprise" replay "$WORK/t" --timeout 60 -q 2>&1) && fail "expected a failure"
    grep -q "the traces do not belong to one run" <<<"$out" || fail "message: $out"
    ;;
  failing_rank)
    synth "$WORK/t" 2 2
    printf '{"schema": "1.1.1-chakra.0.0.4", "nodes": [{"id": 1,' | gzip >"$WORK/t/rank-1.json.gz"
    out=$("${MPI[@]}" -np 2 "$BIN/reprise" replay "$WORK/t" --timeout 60 -q 2>&1) && fail "expected a failure"
    grep -q "rank-1.json.gz: " <<<"$out" || fail "message: $out"
    ;;
  dlrm_np8)
    need_shared param/dlrm_pytorch_et.tar.gz
    "${MPI[@]}" -np 8 "$BIN/reprise" replay "$SHARED/param/dlrm_pytorch_et.tar.gz" --iterations 2 --warmup 0 \
      --out "$WORK/r.json" --timeout 300 -q || fail "replay exited $?"
    check_json "$WORK/r.json" 'r["world_size"] == 8 and all(e["collectives_selected"] == 13 and e["collectives_replayed"] == 13 and e["coverage"] == 1 for e in r["ranks"])'
    ;;
  chakra_np2)
    need_shared chakra/1.0.2-chakra.0.0.4.tgz
    "${MPI[@]}" -np 2 "$BIN/reprise" replay "$SHARED/chakra/1.0.2-chakra.0.0.4.tgz" --iterations 2 --out "$WORK/r.json" \
      --timeout 120 -q || fail "replay exited $?"
    check_json "$WORK/r.json" 'all(e["collectives_replayed"] == 20 for e in r["ranks"]) and any(t["name"] == "all_gather" and t["bytes"] == 8 and t["group_size"] == 2 for t in r["collective_timing"])'
    ;;
  calibrate_predict_np2)
    # Both ranks run the sweep at once, then sweep every collective (and send/recv, a pair's curve) at 2 ranks; rank 0
    # writes the calibration, whose curves then time the collectives of a 2-rank prediction.
    "${MPI[@]}" -np 2 "$BIN/reprise" calibrate --quick --passes 1 --family memory --comms-max-bytes 64K \
      --out "$WORK/cal.json" --cluster-out "$WORK/machine.yaml" -q >/dev/null || fail "calibrate exited $?"
    check_json "$WORK/cal.json" 'r["concurrent_ranks"] == 2 and sorted((c["family"], c["ranks"], c["working_set_bytes"]) for c in r["contention"]) == [("embedding", 2, 16 << 20), ("memory", 2, 8 << 20)] and all(c["factor"] >= 1 for c in r["contention"]) and [j["ranks"] for j in r["jitter"]] == [2, 2] and all(0 <= j["excess"] < 10 and j["seconds"] > 0 for j in r["jitter"]) and {c["op"] for c in r["collectives"]} >= {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "all_to_allv", "send"} and all(c["group"] == 2 and c["bandwidth"] > 0 and c["points"] > 10 for c in r["collectives"])'
    synth "$WORK/t" 2 2
    "$BIN/reprise" predict "$WORK/t" --cluster "$WORK/machine.yaml" --calibration "$WORK/cal.json" \
      --out "$WORK/p.json" -q >/dev/null || fail "predict exited $?"
    check_json "$WORK/p.json" 'r["world_size"] == 2 and r["families"]["collective"] > 0 and all(e["comm_busy_seconds"] > 0 for e in r["ranks"])'
    ;;
  calibrate_contention_np4)
    # Memory contention at 2 and 4 ranks at once (K = 2, 4, ... and the node's ranks), of a copy and of an embedding
    # lookup (--quick: 8 MiB a rank), each at least 1; with 4 ranks on 2 cores or fewer the 4 take turns, so the
    # lookup's is well above 1 (a copy of 4 MiB can finish its timed block inside one time slice).
    "${MPI[@]}" -np 4 "$BIN/reprise" calibrate --family view --quick --passes 1 --comms-max-bytes 0 \
      --out "$WORK/cal4.json" -q >/dev/null || fail "calibrate exited $?"
    check_json "$WORK/cal4.json" 'sorted((c["family"], c["ranks"]) for c in r["contention"]) == [("embedding", 2), ("embedding", 4), ("memory", 2), ("memory", 4)] and all(c["factor"] >= 1 for c in r["contention"]) and (os.cpu_count() > 2 or max(c["factor"] for c in r["contention"] if c["ranks"] == 4) > 1.3)'
    ;;
  capture_dlrm_np4)
    # An uneven sharding plan (rank 2 holds no table, rank 3 three) of tables with their own sizes and pooling: the
    # embeddings go by all_to_allv with the plan's splits, and the capture replays with every collective.
    "${MPI[@]}" -np 4 "$BIN/reprise" capture --workload dlrm --out "$WORK/cap" --batch 32 --shards 0,1,3,3,3 \
      --table-rows 2000,500,3000,100,2000 --table-lookups 4,20,8,2,8 --warmup 1 --steps 2 -q >/dev/null ||
      fail "capture exited $?"
    check_json "$WORK/cap/manifest.json" 'r["world_size"] == 4 and [e["rank"] for e in r["ranks"]] == [0, 1, 2, 3] and all(len(e["iteration_seconds"]) == 2 for e in r["ranks"]) and r["shards"] == [0, 1, 3, 3, 3]'
    out=$("$BIN/reprise" inspect "$WORK/cap" 2>&1) || fail "inspect: $out"
    [ "$(grep -c '^== rank' <<<"$out")" = 4 ] || fail "inspect does not show 4 ranks: $out"
    grep -q "all_to_allv" <<<"$out" || fail "no all_to_allv in: $out"
    "${MPI[@]}" -np 4 "$BIN/reprise" replay "$WORK/cap" --iterations 2 --out "$WORK/r.json" --timeout 200 -q ||
      fail "replay exited $?"
    check_json "$WORK/r.json" 'r["world_size"] == 4 and all(e["collectives_selected"] > 0 and e["collectives_replayed"] == e["collectives_selected"] and e["coverage"] == 1 and "original_iteration_seconds" in e for e in r["ranks"]) and {t["name"] for t in r["collective_timing"]} == {"all_reduce", "all_to_allv"}'
    ;;
  analyze_measure_np2)
    # reprise analyze --measure on both ranks of a data-parallel capture: each rank replays its own rank of the
    # original and of the fixed variant, with the gradients' all_reduce; one fix per class for the whole job.
    "${MPI[@]}" -np 2 "$BIN/reprise" capture --workload mlp --anti-pattern casts --batch 16 --hidden 64 --layers 3 \
      --out "$WORK/cap" --warmup 1 --steps 2 -q >/dev/null || fail "capture exited $?"
    "${MPI[@]}" -np 2 "$BIN/reprise" analyze "$WORK/cap" --measure --pairs 2 --iterations 2 --only dtype_churn \
      --json "$WORK/a.json" >"$WORK/a.txt" 2>&1 || fail "analyze --measure exited $?: $(cat "$WORK/a.txt")"
    check_json "$WORK/a.json" '[(m["detector"], m["rank"], m["pairs"]) for m in r["measured"]] == [("dtype_churn", -1, 2)] and r["measured"][0]["original_us"] > 0 and r["measured"][0]["fixed_us"] > 0 and "collectives skipped" not in r["measured"][0].get("note", "")'
    grep -q "^dtype_churn  *all " "$WORK/a.txt" || fail "no job-wide row in: $(cat "$WORK/a.txt")"
    [ "$(grep -c "measured savings per step" "$WORK/a.txt")" = 1 ] || fail "not one table: $(cat "$WORK/a.txt")"
    # The gradients' all_reduce runs blocking on the host (exposed_comm): its fix waits for it where the optimizer
    # first reads the gradients, and the variant replays on both ranks.
    "${MPI[@]}" -np 2 "$BIN/reprise" analyze "$WORK/cap" --measure --pairs 1 --iterations 1 --only exposed_comm \
      --json "$WORK/e.json" >"$WORK/e.txt" 2>&1 || fail "analyze --measure exposed_comm exited $?: $(cat "$WORK/e.txt")"
    check_json "$WORK/e.json" '[(m["detector"], m["rank"], m["pairs"]) for m in r["measured"]] == [("exposed_comm", -1, 1)] and r["measured"][0]["fixed_us"] > 0'
    out=$("${MPI[@]}" -np 3 "$BIN/reprise" analyze "$WORK/cap" --measure -q 2>&1) && fail "3 ranks: expected a failure"
    grep -q "under a launch of 3 ranks replays a trace of as many, and $WORK/cap has 2" <<<"$out" || fail "message: $out"
    out=$("$BIN/reprise" analyze "$WORK/cap" --measure -q 2>&1) && fail "one process: expected a failure"
    grep -q "launch as many (mpirun -np 2 reprise analyze" <<<"$out" || fail "message: $out"
    ;;
  gpt_3d_capture_np8)
    # tp 2 x pp 2 x dp 2 at tiny sizes: every rank's groups, collectives and 1F1B sends and receives
    # (tests/mpi/check_gpt_capture.py), and the first step's loss against one rank's capture of the same model.
    gpt=(--workload gpt --layers 2 --hidden 32 --heads 2 --seq 8 --batch 4 --vocab 64 --warmup 0 --steps 1 -q)
    "$BIN/reprise" capture "${gpt[@]}" --out "$WORK/one" >/dev/null || fail "one-rank capture exited $?"
    "${MPI[@]}" -np 8 "$BIN/reprise" capture "${gpt[@]}" --tp 2 --pp 2 --dp 2 --out "$WORK/cap" >/dev/null ||
      fail "capture exited $?"
    python3 "$(dirname "$0")/check_gpt_capture.py" "$WORK/cap" 2 2 2 4 2 --reference "$WORK/one" || fail "traces"
    ;;
  gpt_zero_capture_np2)
    # ZeRO over 2 data parallel ranks: reduce_scatter and all_gather per parameter group; after two updates each
    # rank's loss is plain data parallel's; and the traces replay.
    gpt=(--workload gpt --layers 2 --hidden 32 --heads 2 --seq 8 --batch 4 --vocab 64 --warmup 2 --steps 1 -q)
    "${MPI[@]}" -np 2 "$BIN/reprise" capture "${gpt[@]}" --zero --out "$WORK/cap" >/dev/null || fail "capture exited $?"
    "${MPI[@]}" -np 2 "$BIN/reprise" capture "${gpt[@]}" --out "$WORK/dp" >/dev/null || fail "dp capture exited $?"
    python3 "$(dirname "$0")/check_gpt_capture.py" "$WORK/cap" 1 1 2 1 2 --zero || fail "traces"
    python3 -c "import json, sys; l = lambda d: [e['loss'] for e in json.load(open(d + '/manifest.json'))['ranks']]
z, d = l('$WORK/cap'), l('$WORK/dp'); sys.exit(0 if len(z) == 2 and all(abs(a - b) < 1e-5 for a, b in zip(z, d)) else 1)" ||
      fail "ZeRO's losses differ from data parallel's"
    "${MPI[@]}" -np 2 "$BIN/reprise" replay "$WORK/cap" --iterations 1 --warmup 0 --out "$WORK/r.json" --timeout 120 \
      -q >/dev/null || fail "replay exited $?"
    check_json "$WORK/r.json" 'all(e["coverage"] == 1 and e["collectives_replayed"] == e["collectives_selected"] == 8 for e in r["ranks"])'
    ;;
  gpt_layout_errors)
    # Refused before MPI starts: exit 2, one line from rank 0, no output folder.
    gpt=(--workload gpt --layers 2 --hidden 32 --heads 2 --seq 8 --batch 4 --vocab 64 -q)
    while IFS='|' read -r np opts message; do
      out=$("${MPI[@]}" -np "$np" "$BIN/reprise" capture "${gpt[@]}" $opts --out "$WORK/c" 2>&1)
      status=$?
      [ "$status" = 2 ] || fail "$opts: exit $status: $out"
      [ "$(grep -c '^reprise' <<<"$out")" = 1 ] || fail "$opts: not one line: $out"
      grep -qF "reprise: capture: gpt: $message" <<<"$out" || fail "$opts: message: $out"
      [ ! -e "$WORK/c" ] || fail "$opts: wrote $WORK/c"
    done <<'EOF'
2|--tp 2 --pp 2|tensor x pipeline parallel = 2 x 2 = 4 ranks do not divide the launch's 2
2|--tp 2 --pp 2 --dp 1|tensor x pipeline x data parallel = 2 x 2 x 1 = 4 ranks, but the launch has 2 rank(s)
4|--tp 2 --dp 3|tensor x pipeline x data parallel = 2 x 1 x 3 = 6 ranks, but the launch has 4 rank(s)
2|--tp 2 --heads 1|1 attention heads do not split over tensor parallel 2
2|--pp 2 --layers 3|3 layers do not split over 2 pipeline stages
2|--pp 2 --micro-batches 3|3 micro-batches do not divide the batch of 4
2|--tp 2 --zero|ZeRO shards the optimizer over data parallel ranks, and there is 1
EOF
    ;;
  comms_np2|comms_np4)
    np=${CASE#comms_np}
    for op in all_reduce all_gather reduce_scatter all_to_all broadcast send; do
      out=$("${MPI[@]}" -np "$np" "$BIN/reprise" comms --op $op -e 1M -f 16 -n 3 -w 1 --json "$WORK/$op.json" 2>&1) ||
        fail "comms $op exited: $out"
      grep -q "out of bounds values: 0 OK" <<<"$out" || fail "comms $op: $out"
    done
    check_json "$WORK/all_reduce.json" 'r["world_size"] == '"$np"' and r["rows"][-1]["busbw_gbps"] > 0 and abs(r["busbw_factor"] - 2 * ('"$np"' - 1) / '"$np"') < 1e-9'
    ;;
  *) fail "unknown case $CASE" ;;
esac
echo "ok: $CASE"
