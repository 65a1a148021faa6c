#!/usr/bin/env bash
# Impossible sizes and the parser's edges, run as a user would: each is refused up front with exit 2 and one line
# naming the file and the place, and nothing is written. tests/faults/sizes.sh CASE BIN_DIR WORK_DIR
# cases: huge_dims negative_dims synth_hidden nan_header bad_utf8 cannot_fit
set -uo pipefail
CASE=$1 BIN=$2 WORK=$3/sizes_$1
rm -rf "$WORK" && mkdir -p "$WORK"
fail() { echo "FAIL: $*" >&2; exit 1; }
PY=python3
[ -x /usr/bin/python3 ] && PY=/usr/bin/python3

# expect_refusal "MESSAGE PART" COMMAND...: exit 2, one line on stderr holding the part, nothing on stdout's tail.
expect_refusal() {
  local part=$1
  shift
  "$@" >"$WORK/out" 2>"$WORK/err"
  local rc=$?
  [ "$rc" -eq 2 ] || fail "$* exited $rc, not 2: $(head -c 600 "$WORK/err")"
  [ "$(wc -l <"$WORK/err")" -eq 1 ] || fail "$* printed more than one line: $(head -c 600 "$WORK/err")"
  grep -qF -- "$part" "$WORK/err" || fail "$*: message lacks '$part': $(cat "$WORK/err")"
}

need_torch() { [ -x "$BIN/reprise-torch" ] || { echo "reprise-torch not built (no LibTorch): skipped"; exit 77; }; }

# A small synthetic trace, uncompressed, to edit.
"$BIN/reprise" synth --out "$WORK/t.json" --world-size 1 --layers 2 --hidden 16 --batch 4 >/dev/null || fail "synth"

# edit EXPRESSION: rewrites the input tensor of the first aten::relu (its tuple n, shape s, strides st) and writes
# the trace to $WORK/bad.json; prints that node's id.
edit() {
  "$PY" - "$WORK/t.json" "$WORK/bad.json" "$1" <<'PY' || exit 1
import json, sys
t = json.load(open(sys.argv[1]))
node = next(n for n in t["nodes"] if n["name"] == "aten::relu")
i = node["inputs"]
n, s, st = i["values"][0], i["shapes"][0], i["strides"][0]
exec(sys.argv[3])
i["shapes"][0], i["strides"][0] = s, st
json.dump(t, open(sys.argv[2], "w"))
print(node["id"])
PY
}

case $CASE in
  huge_dims)
    id=$(edit 's = [10**12, 10**12]; st = [10**12, 1]; n[3] = 10**12')
    for cmd in inspect convert; do
      extra=()
      [ $cmd = convert ] && extra=("$WORK/out.json")
      expect_refusal "bad.json: byte " "$BIN/reprise" $cmd "$WORK/bad.json" "${extra[@]}"
      grep -qF "node $id: inputs 0: tensor of sizes [1000000000000, 1000000000000]: its element count is past int64" \
        "$WORK/err" || fail "$cmd: $(cat "$WORK/err")"
    done
    [ ! -e "$WORK/out.json" ] || fail "convert wrote its output"
    need_torch
    expect_refusal "node $id: inputs 0: tensor of sizes [1000000000000, 1000000000000]" \
      "$BIN/reprise" replay "$WORK/bad.json" --device cpu -q
    ;;
  negative_dims)
    id=$(edit 's = [-5, 16]')
    expect_refusal "bad.json: byte " "$BIN/reprise" inspect "$WORK/bad.json"
    grep -qF "node $id: inputs 0: tensor of sizes [-5, 16]: size -5 is negative" "$WORK/err" || fail "$(cat "$WORK/err")"
    id=$(edit 'st = [-16, 1]')
    expect_refusal "node $id: inputs 0: tensor of sizes [4, 16]: stride -16 in strides [-16, 1] is negative" \
      "$BIN/reprise" inspect "$WORK/bad.json"
    need_torch
    id=$(edit 'n[2] = -3')
    expect_refusal "node $id: inputs 0: tensor of sizes [4, 16]: storage offset -3 is negative" \
      "$BIN/reprise" replay "$WORK/bad.json" --device meta -q
    ;;
  synth_hidden)
    expect_refusal "hidden 100000000000 is out of range 1 .. 1073741824" \
      "$BIN/reprise" synth --out "$WORK/s.json" --hidden 100000000000
    [ ! -e "$WORK/s.json" ] || fail "synth wrote a trace"
    expect_refusal "batch 0 is out of range" "$BIN/reprise" synth --out "$WORK/s.json" --batch 0
    expect_refusal "rank 2 is out of range 0 .. 1" "$BIN/reprise" synth --out "$WORK/s.json" --rank 2
    expect_refusal "layers x iterations" "$BIN/reprise" synth --out "$WORK/s.json" --layers 100000 --iterations 1000
    [ ! -e "$WORK/s.json" ] || fail "synth wrote a trace"
    ;;
  nan_header)
    for bad in NaN Infinity -Infinity; do
      sed "s/\"start_ts\": 0/\"start_ts\": $bad/" "$WORK/t.json" >"$WORK/bad.json"
      grep -q "\"start_ts\": $bad" "$WORK/bad.json" || fail "the edit did not take"
      at=$(grep -bo "\"start_ts\": $bad" "$WORK/bad.json" | head -1 | cut -d: -f1)
      at=$((at + 12))  # the value's own byte, past '"start_ts": '
      expect_refusal "bad.json: byte $at: \"start_ts\": '$bad' is not a JSON value (JSON has no NaN or infinite numbers)" \
        "$BIN/reprise" convert "$WORK/bad.json" "$WORK/out.json"
      [ ! -e "$WORK/out.json" ] || fail "convert wrote its output"
    done
    ;;
  bad_utf8)
    "$PY" - "$WORK/t.json" "$WORK/bad.json" >"$WORK/at" <<'PY' || fail "edit"
import sys
b = open(sys.argv[1], "rb").read()
at = b.index(b'"aten::relu"') + 6  # inside a node, far past its start
open(sys.argv[2], "wb").write(b[:at] + b"\xff" + b[at + 1:])
print(at)
PY
    expect_refusal "bad.json: byte $(cat "$WORK/at"): a byte that is not UTF-8" "$BIN/reprise" inspect "$WORK/bad.json"
    ;;
  cannot_fit)
    need_torch
    # 2^24 x 2^24 floats: a 1 PiB input, consistent in every field, that no machine holds
    id=$(edit 's = [2**24, 2**24]; st = [2**24, 1]; n[3] = 2**48')
    expect_refusal "bad.json: the replay needs at least " "$BIN/reprise" replay "$WORK/bad.json" --device cpu -q
    # relu's input, an alias of linear's output storage, would grow it to 1 PiB
    grep -qE "needs at least 1\.0 PiB on cpu \(.* of input tensors and 1\.0 PiB for its largest other tensor \(node $id, aten::relu\)\) but cpu has .* available" \
      "$WORK/err" || fail "figures: $(cat "$WORK/err")"
    # the meta device has no limit: the same trace replays there
    "$BIN/reprise" replay "$WORK/bad.json" --device meta --iterations 1 --warmup 0 -q >"$WORK/out" 2>"$WORK/err" ||
      fail "meta replay exited $?: $(head -c 600 "$WORK/err")"
    ;;
  *)
    fail "unknown case $CASE"
    ;;
esac
exit 0
