#!/usr/bin/env bash
# Faults of `reprise comms` (docs/reliability.md): tests/faults/comms.sh CASE BIN_DIR WORK_DIR
# cases: out_of_memory_exit3 too_big_refused usage_error_every_rank
# multi-rank cases: usage_error_every_rank
set -uo pipefail
CASE=$1 BIN=$2 WORK=$3/comms_$1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK" || exit 1
fail() { echo "FAIL: $*" >&2; exit 1; }

case $CASE in
  out_of_memory_exit3)
    # Within the memory check (1 GiB fits) but over the address-space limit: malloc fails, exit 3, one line.
    (ulimit -v 1500000 && "$BIN/reprise" comms --help >/dev/null 2>&1) ||
      { echo "skipped: reprise cannot start under ulimit -v (AddressSanitizer reserves more address space)"; exit 77; }
    out=$( (ulimit -v 1500000 && "$BIN/reprise" comms -b 1G -e 1G -n 1 -w 0 -c 0 --json r.json) 2>&1 >/dev/null)
    rc=$?
    ((rc == 3)) || fail "exit $rc, not 3: $out"
    grep -q "out of memory allocating 1073741824 bytes" <<<"$out" || fail "message: $out"
    [ ! -e r.json ] || fail "a results file was written"
    ;;
  too_big_refused)
    # 4 TiB cannot fit anywhere this test runs: refused before any allocation, naming the need and what is left.
    out=$("$BIN/reprise" comms -b 4096G 2>&1 >/dev/null)
    rc=$?
    ((rc == 2)) || fail "exit $rc, not 2: $out"
    [ "$(wc -l <<<"$out")" = 1 ] || fail "not one line: $out"
    grep -Eq "need 12.0 TiB of host memory per rank .* is available" <<<"$out" || fail "message: $out"
    ;;
  usage_error_every_rank)
    # Checked before MPI starts: a rank says one line and exits 2 (mpirun may end the other before it says it too),
    # no MPI_ABORT.
    out=$(mpiexec --oversubscribe -np 2 "$BIN/reprise" comms --op broadcast --root 2 2>&1)
    rc=$?
    ((rc == 2)) || fail "exit $rc, not 2: $out"
    grep -q "^reprise: comms: --root 2: not a rank of this launch of 2$" <<<"$out" || fail "message: $out"
    [ "$(grep -c "^reprise:" <<<"$out")" = "$(grep -c "^reprise: comms: --root 2: not a rank" <<<"$out")" ] ||
      fail "other messages: $out"
    grep -q MPI_ABORT <<<"$out" && fail "MPI abort: $out"
    ;;
  *) fail "unknown case $CASE" ;;
esac
echo "ok: $CASE"
