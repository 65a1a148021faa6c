#!/usr/bin/env bash
# Outputs are written, not replaced (docs/cli.md, "Outputs"): devices, FIFOs and `-` in place, links followed, a
# read-only file or folder refused before any work, a full disk an error with its reason, and no temporary left by
# SIGTERM or SIGINT. Device nodes are our own (mknod in WORK), never the system's: an old bug replaced them.
# cases: device_null device_full fifo stdout symlink dangling_symlink readonly_file readonly_folder disk_full sigterm sigint bundle_sigterm
set -uo pipefail
CASE=$1 BIN=$2 WORK=$3/outputs/$1
CLUSTER=$(cd "$(dirname "$0")/../../clusters" && pwd)/cpu-2core-example.yaml
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
R="$BIN/reprise"
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK" || exit 1
fail() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "skipped: $*"; exit 77; }
is_json() { python3 -c 'import gzip, json, sys; p = sys.argv[1]; json.load(gzip.open(p) if p.endswith(".gz") else open(p))' "$1"; }
no_temporaries() { # no_temporaries DIR...
  local left
  left=$(find "$@" -name '*.tmp-*' 2>/dev/null)
  [ -z "$left" ] || fail "temporaries left behind: $left"
}
device() { mknod "$1" c 1 "$2" 2>/dev/null || skip "cannot make a device node (mknod needs root)"; }
"$R" synth --out t.json --layers 4 >/dev/null || fail "synth exited $?"
have_comms() { [ -x "$BIN/reprise-comms" ]; }

case $CASE in
  device_null)
    device null 3
    "$R" convert t.json null >/dev/null || fail "convert to a null device exited $?"
    "$R" synth --out null >/dev/null || fail "synth to a null device exited $?"
    [ -c null ] || fail "the device node was replaced: $(ls -l null)"
    no_temporaries .
    ;;
  device_full)
    device full 7
    for cmd in "convert t.json full" "synth --out full" "convert t.json full.json.gz"; do
      [ "${cmd##* }" = full.json.gz ] && ln -s full full.json.gz
      out=$("$R" $cmd 2>&1) && fail "$cmd: expected a failure, got: $out"
      grep -q "No space left on device" <<<"$out" || fail "$cmd: message: $out"
      [ "$(wc -l <<<"$out")" = 1 ] || fail "$cmd: more than one line: $out"
    done
    if have_comms; then
      out=$("$R" comms --op all_reduce -e 1K -n 1 -w 0 --json full 2>&1) && fail "comms --json: expected a failure"
      grep -q "full: cannot write: No space left on device" <<<"$out" || fail "comms --json: message: $out"
    fi
    [ -c full ] || fail "the device node was replaced: $(ls -l full)"
    no_temporaries .
    ;;
  fifo)
    mkfifo pipe
    timeout 20 cat pipe >got.json &  # a reader that does not wait forever when convert never opens the FIFO
    reader=$!
    timeout 20 "$R" convert t.json pipe >/dev/null || fail "convert to a FIFO exited $?"
    wait $reader
    is_json got.json || fail "what came through the FIFO is not the trace"
    [ -p pipe ] || fail "the FIFO was replaced"
    no_temporaries .
    ;;
  stdout)
    "$R" convert t.json - >got.json || fail "convert to - exited $?"
    "$R" convert t.json file.json >/dev/null || fail "convert to a file exited $?"
    cmp -s got.json file.json || fail "convert - wrote other bytes than convert FILE"
    "$R" synth --out - --layers 2 >synth.json || fail "synth --out - exited $?"
    is_json synth.json || fail "synth --out - is not a trace"
    [ ! -e ./- ] || fail "a file named - was made"
    ;;
  symlink)
    mkdir real && echo old >real/out.json && ln -s real/out.json link && ln -s link link2
    "$R" convert t.json link2 >/dev/null || fail "convert to a link exited $?"
    [ -L link ] && [ -L link2 ] || fail "a link was replaced"
    is_json real/out.json || fail "the link's target did not get the trace"
    no_temporaries .
    ;;
  dangling_symlink)
    mkdir real && ln -s real/new.json.gz link.json.gz
    "$R" synth --out link.json.gz >/dev/null || fail "synth to a dangling link exited $?"
    [ -L link.json.gz ] || fail "the link was replaced"
    is_json real/new.json.gz || fail "the link's target was not created with the trace"
    no_temporaries .
    ;;
  readonly_file)
    echo keep >ro.json && chmod 444 ro.json
    for cmd in "convert t.json ro.json" "synth --out ro.json" \
      "predict t.json --cluster $CLUSTER --out ro.json -q"; do
      out=$("$R" $cmd 2>&1)
      rc=$?
      [ $rc = 2 ] || fail "$cmd: exit $rc, expected 2: $out"
      grep -q "ro.json: is read-only: not replaced" <<<"$out" || fail "$cmd: message: $out"
    done
    [ "$(cat ro.json)" = keep ] || fail "the read-only file changed"
    no_temporaries .
    ;;
  readonly_folder)
    mkdir ro && chmod 555 ro
    for cmd in "convert t.json ro/x.json" "synth --out ro/x.json" "inspect t.json --json-out ro/x.json"; do
      out=$("$R" $cmd 2>&1)
      rc=$?
      [ $rc = 2 ] || fail "$cmd: exit $rc, expected 2: $out"
      grep -q "ro/x.json: folder ro is not writable" <<<"$out" || fail "$cmd: message: $out"
    done
    out=$("$R" convert --to chakra t.json ro 2>&1)
    rc=$?
    [ $rc = 2 ] || fail "convert --to chakra: exit $rc, expected 2: $out"
    grep -q "ro/workload.0.et: folder ro is not writable" <<<"$out" || fail "convert --to chakra: message: $out"
    [ -z "$(ls -A ro)" ] || fail "something was written into the read-only folder: $(ls -A ro)"
    ;;
  disk_full)
    mkdir m
    mount -t tmpfs -o size=64k tmpfs m 2>/dev/null || skip "cannot mount a small tmpfs here (needs root)"
    trap 'umount m' EXIT
    "$R" synth --out m/old.json --layers 1 --iterations 1 >/dev/null || fail "a small synth did not fit"
    cp m/old.json before.json
    out=$("$R" synth --out m/old.json --layers 60 2>&1) && fail "synth on a full disk: expected a failure"
    grep -q "m/old.json: cannot write: No space left on device" <<<"$out" || fail "synth: message: $out"
    cmp -s m/old.json before.json || fail "the old output changed"
    head -c 70000 /dev/urandom >m/fill 2>/dev/null
    if have_comms; then
      out=$("$R" comms --op all_reduce -e 1K -n 1 -w 0 --json m/c.json 2>&1) && fail "comms --json: expected a failure"
      grep -q "m/c.json: cannot write: No space left on device" <<<"$out" || fail "comms: message: $out"
    fi
    no_temporaries m
    ;;
  sigterm|sigint)
    sig=${CASE#sig}
    sig=${sig^^}
    # About 4 s of converting, most of it writing: the temporary is there long enough to be caught.
    "$R" synth --out big.json.gz --layers 3000 --iterations 6 >/dev/null || fail "synth exited $?"
    echo old >out.json.gz
    set -m  # a job of its own: a background command of a script would otherwise start with SIGINT ignored
    "$R" convert big.json.gz out.json.gz >/dev/null 2>&1 &
    pid=$!
    set +m
    for _ in $(seq 400); do
      [ -n "$(find . -name 'out.json.gz.tmp-*')" ] && break
      sleep 0.05
    done
    [ -n "$(find . -name 'out.json.gz.tmp-*')" ] || fail "convert never began writing (or was too quick to catch)"
    sleep 0.1
    kill -s "$sig" $pid
    wait $pid
    rc=$?
    want=$((128 + $(kill -l "$sig")))
    [ $rc = $want ] || fail "convert ended with status $rc, not $want (death by SIG$sig)"
    [ "$(cat out.json.gz)" = old ] || fail "the old output changed"
    no_temporaries .
    ;;
  bundle_sigterm)
    [ -x "$BIN/reprise-torch" ] || skip "reprise-torch was not built (no LibTorch): generate is not available"
    "$R" synth --out big.json.gz --layers 3000 --iterations 2 >/dev/null || fail "synth exited $?"
    "$R" generate big.json.gz --out bundle -q >/dev/null 2>&1 &
    pid=$!
    for _ in $(seq 600); do
      [ -n "$(find . -maxdepth 1 -name 'bundle.tmp-*')" ] && break
      sleep 0.05
    done
    [ -n "$(find . -maxdepth 1 -name 'bundle.tmp-*')" ] || fail "generate never began writing the bundle"
    kill -s TERM $pid
    wait $pid
    rc=$?
    [ $rc = 143 ] || fail "generate ended with status $rc, not 143 (death by SIGTERM)"
    [ -z "$(find . -maxdepth 1 -name 'bundle*')" ] || fail "left behind: $(find . -maxdepth 1 -name 'bundle*')"
    ;;
  *) fail "unknown case $CASE" ;;
esac
echo "ok: $CASE"
