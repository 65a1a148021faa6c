#!/usr/bin/env bash
# srun end to end under a Slurm of the test's own: tests/slurm/srun_replay.sh BIN_DIR SOURCE_DIR WORK_DIR
# Starts munged (its own key and socket), slurmctld and slurmd for one node on localhost, every file in a temporary
# folder (never /etc, never a system Slurm), waits for the node, runs the cases, and stops every daemon and every
# process of its jobs on exit, failure or timeout. Exit 0 = pass, 77 = skipped (no Slurm or munge, not root, the
# daemons cannot start here: one line says why), anything else = fail.
set -uo pipefail
BIN=$1 SRC=$2 WORK=$3
BUDGET=${REPRISE_SLURM_BUDGET:-150}  # seconds for everything; ctest's TIMEOUT is above it
skip() {
  echo "slurm test skipped: $*"
  exit 77
}
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

for b in munged mungekey slurmctld slurmd srun salloc sinfo scancel python3; do
  command -v "$b" >/dev/null || skip "$b not found (Debian: apt-get install slurm-wlm munge)"
done
[ "$(id -u)" = 0 ] || skip "not root (slurmd starts tasks as their users only when run as root)"

{ rm -rf "$WORK" && mkdir -p "$WORK"; } || fail "cannot create $WORK"
# munge's socket path must fit a sockaddr_un (108 bytes): a short temporary folder, not the build tree.
T=$(mktemp -d /tmp/reprise-slurm.XXXXXX) || fail "mktemp"
chmod 700 "$T"
CONF=$T/slurm.conf
MARK="REPRISE_SLURM_TEST=$T"  # in the daemons' environments, to find them by whatever became of their pids
PIDS=()
WATCHDOG=
started() { # started PID: a daemon of this test
  PIDS+=("$1")
  echo "$1" >>"$T/daemons"
}

# Every process this test started: its daemons (their mark), and the sruns, the job steps' slurmstepd and the tasks
# (SLURM_CONF naming this test's file in their environment; slurmstepd has slurmd's, seen with Slurm 22.05).
our_processes() {
  grep -lzxF -e "$MARK" -e "SLURM_CONF=$CONF" /proc/[0-9]*/environ 2>/dev/null | sed 's|^/proc/\([0-9]*\)/.*|\1|'
}
cleanup() {
  trap - EXIT INT TERM
  [ -n "$WATCHDOG" ] && kill "$WATCHDOG" 2>/dev/null
  if [ -f "$CONF" ] && [ ${#PIDS[@]} -gt 0 ]; then
    SLURM_CONF=$CONF timeout 5 scancel --quiet --full --user=root >/dev/null 2>&1
    for _ in $(seq 20); do # the steps end (their slurmstepd and tasks) while the daemons still run
      our_processes | grep -qvxF -f "$T/daemons" || break
      sleep 0.25
    done
  fi
  local p
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for _ in $(seq 20); do
    local alive=
    for p in "${PIDS[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ -z "$alive" ] && break
    sleep 0.25
  done
  for p in $(our_processes) "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
  wait 2>/dev/null
  [ -n "$(our_processes)" ] && echo "warning: processes of this test outlived it: $(our_processes | tr '\n' ' ')" >&2
  if [ "${REPRISE_KEEP_TEST_FILES:-0}" = 1 ]; then echo "kept $T (logs, slurm.conf)"; else rm -rf "$T"; fi
}
trap 'cleanup' EXIT
trap 'echo "FAIL: stopped by a signal" >&2; exit 1' INT TERM
# The whole test runs under a deadline of its own: ctest's timeout would kill this shell without its trap, and a
# step's slurmstepd is no child of it.
(
  sleep "$BUDGET" &
  trap 'kill $! 2>/dev/null; exit 0' TERM
  wait $!
  echo "FAIL: not done in $BUDGET s" >&2
  kill -TERM $$
  # bash runs the trap once its foreground command returns: end that command too (not the daemons: the cleanup
  # needs them to end the job steps)
  for p in $(ps -o pid= --ppid $$); do
    [ "$p" != "$BASHPID" ] && ! grep -qxF "$p" "$T/daemons" 2>/dev/null && kill -TERM "$p" 2>/dev/null
  done
) &
WATCHDOG=$!

# --- munge with a key of its own
mkdir -m 700 "$T/munge" "$T/state" "$T/spool" "$T/tmp"
mungekey --create --keyfile="$T/munge/key" >/dev/null 2>&1 || skip "mungekey cannot create a key"
env "$MARK" munged --foreground --force --key-file="$T/munge/key" --socket="$T/munge/socket" \
  --pid-file="$T/munge/pid" --log-file="$T/munge/log" --seed-file="$T/munge/seed" >"$T/munge/out" 2>&1 &
started $!
for _ in $(seq 40); do [ -S "$T/munge/socket" ] && break; sleep 0.1; done
[ -S "$T/munge/socket" ] || skip "munged does not start here: $(grep -i error "$T/munge/out" | tail -1)"

# --- one node on localhost: this machine's memory, at least 4 CPUs (slurmd takes the configured count), so a
# 3-rank launch fits
ports=$(python3 -c 'import socket
s=[socket.socket() for _ in range(2)]
[x.bind(("127.0.0.1", 0)) for x in s]
print(" ".join(str(x.getsockname()[1]) for x in s))') || fail "no free ports"
read -r CTLD_PORT SLURMD_PORT <<<"$ports"
CPUS=$(nproc)
((CPUS < 4)) && CPUS=4
MEM=$(awk '/^MemTotal:/ {print int($2 / 1024)}' /proc/meminfo)
cat >"$CONF" <<EOF
ClusterName=reprise-test
SlurmctldHost=localhost(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$T/munge/socket
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool
TmpFS=$T/tmp
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd.pid
SlurmctldLogFile=$T/slurmctld.log
SlurmdLogFile=$T/slurmd.log
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
NodeName=reprise0 NodeAddr=127.0.0.1 NodeHostname=localhost CPUs=$CPUS RealMemory=$MEM State=UNKNOWN
PartitionName=test Nodes=reprise0 Default=YES MaxTime=10 State=UP
EOF
env "$MARK" SLURM_CONF="$CONF" slurmctld -D -c -f "$CONF" >"$T/slurmctld.out" 2>&1 &
started $!
env "$MARK" SLURM_CONF="$CONF" slurmd -D -N reprise0 -f "$CONF" >"$T/slurmd.out" 2>&1 &
started $!
sl() { SLURM_CONF=$CONF "$@"; }  # a Slurm command against this test's cluster (and so a process it can find)
state=
for _ in $(seq 60); do
  state=$(sl timeout 5 sinfo -h -N -o %t 2>/dev/null)
  [ "$state" = idle ] && break
  for p in "${PIDS[@]}"; do
    kill -0 "$p" 2>/dev/null ||
      skip "a Slurm daemon does not start here: $(grep -ih "error\|fatal" "$T/slurmctld.out" "$T/slurmd.out" | tail -1)"
  done
  sleep 0.25
done
[ "$state" = idle ] || skip "the node is not idle after 15 s (state '$state'): $(grep -ih "error" "$T/slurmd.out" | tail -1)"

check_json() { # check_json FILE PYTHON-EXPRESSION-ON-r
  python3 - "$1" "$2" <<'PY' || fail "$1: check failed"
import json, sys
r = json.load(open(sys.argv[1]))
if not eval(sys.argv[2]):
    print("check failed:", sys.argv[2]); print(json.dumps({k: r[k] for k in r if k != "ranks"}, indent=1)[:3000])
    sys.exit(1)
PY
}
export OMP_NUM_THREADS=1
echo "ok: munged, slurmctld and slurmd up (node reprise0 idle) after ${SECONDS} s"
SRUN=(sl timeout 60 srun --mpi=pmix --time=2)

# 1. a 2-rank trace replayed by two srun tasks; MPI bootstraps through Slurm's PMIx
mkdir -p "$WORK/t"
for r in 0 1; do
  "$BIN/reprise" synth --out "$WORK/t/rank-$r.json.gz" --world-size 2 --rank $r --layers 2 --hidden 32 --batch 8 \
    >/dev/null || fail "synth exited $?"
done
"${SRUN[@]}" -n 2 "$BIN/reprise" replay "$WORK/t" --iterations 2 --out "$WORK/r.json" --timeout 50 -q ||
  fail "srun -n 2 reprise replay exited $?"
check_json "$WORK/r.json" 'r["world_size"] == 2 and r["launcher"] == "srun" and r["comm_backend"] == "mpi" and sorted(e["rank"] for e in r["ranks"]) == [0, 1] and all(e["collectives_replayed"] == e["collectives_selected"] > 0 and e["coverage"] == 1 for e in r["ranks"])'
echo "ok: srun -n 2 --mpi=pmix reprise replay (2 ranks, collectives over MPI)"

# 2. reprise comms: a short all_reduce sweep with its data checked
out=$("${SRUN[@]}" -n 2 "$BIN/reprise" comms --op all_reduce -b 1K -e 64K -f 8 -n 3 -w 1 2>&1) ||
  fail "srun -n 2 reprise comms exited $?: $out"
grep -q "out of bounds values: 0 OK" <<<"$out" || fail "reprise comms: $out"
echo "ok: srun -n 2 --mpi=pmix reprise comms"

# 3. a launch of the wrong size: one line naming srun, before MPI starts
out=$("${SRUN[@]}" -n 3 "$BIN/reprise" replay "$WORK/t" --timeout 50 -q 2>&1) && fail "srun -n 3 on 2 traces succeeded"
grep -q "2 rank traces, but the launch has 3 ranks: launch 2 (srun -n 2)" <<<"$out" || fail "message: $out"
echo "ok: srun -n 3 on 2 rank traces: $(grep -m1 "rank traces" <<<"$out")"

# 4. an salloc shell is one process (Slurm sets SLURM_PROCID/SLURM_NTASKS there too): rank 0's compute alone, and
# the skipped collectives say to launch with srun
sl timeout 60 salloc -n 2 --time=2 "$BIN/reprise" replay "$WORK/t" --iterations 1 --out "$WORK/alone.json" -q \
  >/dev/null 2>&1 || fail "salloc -n 2 reprise replay exited $?"
check_json "$WORK/alone.json" 'r["world_size"] == 1 and r["launcher"] == "single" and r["collectives"]["replayed"] == 0 and any("srun -n N reprise replay" in s["reason"] for s in r["skipped"])'
echo "ok: salloc -n 2 reprise replay is a single process"

# 5. the CPU cluster description's srun template, placeholders filled as docs/clusters.md says
cluster=$SRC/clusters/cpu-2core-example.yaml
template=$(sed -n 's/^  srun: //p' "$cluster")
[ -n "$template" ] || fail "$cluster has no srun launch template"
per_node=$(sed -n 's/^  devices_per_node: *\([0-9]*\).*/\1/p' "$cluster")
ranks=2
((per_node > ranks)) && per_node=$ranks
nodes=$(((ranks + per_node - 1) / per_node))
"$BIN/reprise" generate "$WORK/t" --out "$WORK/b" -q >/dev/null || fail "generate exited $?"
cmd=${template//\{ranks\}/$ranks}
cmd=${cmd//\{ranks_per_node\}/$per_node}
cmd=${cmd//\{nodes\}/$nodes}
cmd=${cmd//\{bundle\}/$WORK/b}
cmd=${cmd//\{reprise\}/$BIN/reprise}
read -ra argv <<<"$cmd"
sl timeout 60 "${argv[@]}" --iterations 1 --out "$WORK/template.json" --timeout 50 -q || fail "$cmd exited $?"
check_json "$WORK/template.json" 'r["world_size"] == 2 and r["launcher"] == "srun" and all(e["collectives_replayed"] == e["collectives_selected"] > 0 for e in r["ranks"])'
echo "ok: $cmd"
