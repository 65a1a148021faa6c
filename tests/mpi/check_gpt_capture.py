#!/usr/bin/env python3
"""Checks the traces of `reprise capture --workload gpt` launched with a parallel layout against that layout.

usage: check_gpt_capture.py DIR TP PP DP MICRO_BATCHES LAYERS [--zero] [--reference DIR1]

Per rank: the process-group node (Megatron's tp-dp-pp order, groups named dp, tp, pp in that order), the tensor
parallel all_reduces (two forward and two backward per block and micro-batch), the data parallel all_reduces (one
per parameter) or with --zero one reduce_scatter and one all_gather per parameter group, and the pipeline's sends
and receives in exactly the 1F1B order (lone ops and batches of a send and a recv, each batch followed by
"coalesced" and "wait"), with PyTorch 2.x's fields: the peer's group rank, a per-group p2p seq as (seq, True).
Sends and receives of neighbouring stages must pair up in order and size. With --reference (a one-rank capture of
the same sizes), the first step's loss on the last stage's ranks of data parallel replica 0 must match its loss.
"""
import gzip
import json
import sys

args = [a for a in sys.argv[1:] if not a.startswith("--")]
DIR, (T, P, D, M, L) = args[0], map(int, args[1:6])
ZERO = "--zero" in sys.argv
REF = sys.argv[sys.argv.index("--reference") + 1] if "--reference" in sys.argv else None
W = T * P * D


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def expect(cond, msg):
    if not cond:
        fail(msg)


def all_groups():
    groups = []
    if D > 1:
        groups += [("dp", [p * T * D + t + T * k for k in range(D)]) for p in range(P) for t in range(T)]
    if T > 1:
        groups += [("tp", list(range(f, f + T))) for f in range(0, W, T)]
    if P > 1:
        groups += [("pp", [f + T * D * k for k in range(P)]) for f in range(T * D)]
    return {str(i + 1): g for i, g in enumerate(groups)}


def schedule(s):
    """Megatron's 1F1B for stage s: [(kind, peer stage)] with kind send, recv or batch (a send and a recv)."""
    ops, first, last = [], s == 0, s == P - 1
    warm = min(P - s - 1, M)
    steady = M - warm
    for _ in range(warm):
        if not first: ops.append(("recv", s - 1))
        if not last: ops.append(("send", s + 1))
    if steady and not first: ops.append(("recv", s - 1))
    for i in range(steady):
        if not last: ops.append(("batch", s + 1))
        if i + 1 == steady:
            if not first: ops.append(("send", s - 1))
        elif not first:
            ops.append(("batch", s - 1))
    for _ in range(warm):
        if not last: ops.append(("recv", s + 1))
        if not first: ops.append(("send", s - 1))
    return ops


def read(rank):
    et = json.load(gzip.open(f"{DIR}/rank-{rank}.json.gz"))
    nodes = sorted(et["nodes"], key=lambda n: n["id"])
    pg = [n for n in nodes if n["name"] == "## process_group:init ##"]
    expect(len(pg) == 1, f"rank {rank}: {len(pg)} process-group nodes")
    comms = []
    for n in nodes:
        if n["name"] != "record_param_comms":
            continue
        a = {x["name"]: x["value"] for x in n["attrs"]}
        v = n["inputs"]["values"]
        comms.append({"name": a["collective_name"], "pg": a["pg_name"], "desc": a["pg_desc"], "size": a["pg_size"],
                      "seq": v[1], "rank": v[3], "elems": a["in_msg_nelems"]})
    return json.loads(pg[0]["inputs"]["values"][0]), comms


GROUPS = all_groups()
per_stage = L // P
sends = {}  # (from, to) global ranks -> sizes, in order
recvs = {}
for r in range(W):
    pgs, comms = read(r)
    tp_rank, dp_rank, stage = r % T, r // T % D, r // (T * D)
    first, last = stage == 0, stage == P - 1
    mine = {name: g for name, g in GROUPS.items() if r in g[1]}
    want = [("0", "default_pg", [], W)] + [(n, d, rk if len(rk) != W else [], len(rk)) for n, (d, rk) in mine.items()]
    got = [(g["pg_name"], g["pg_desc"], g["ranks"], g["group_size"]) for g in pgs]
    expect(got == want, f"rank {r}: process groups {got}, expected {want}")
    expect(all(g["group_count"] == len(GROUPS) + 1 for g in pgs), f"rank {r}: group_count {pgs}")
    by_desc = {d: n for n, (d, _) in mine.items()}

    def count(name, desc):
        return sum(1 for c in comms if c["name"] == name and c["desc"] == desc)

    # Collectives: each group's seq counts up by one from where the unrecorded steps left it, a plain int; the
    # rank is this rank's in the group.
    for desc in ("tp", "dp"):
        cs = [c for c in comms if c["desc"] == desc]
        seqs = [c["seq"] for c in cs]
        expect(all(isinstance(q, int) for q in seqs) and seqs == list(range(seqs[0], seqs[0] + len(seqs)) if seqs else []),
               f"rank {r}: {desc} seqs {seqs}")
        expect(all(c["pg"] == by_desc.get(desc) for c in cs), f"rank {r}: {desc} collectives in another group")
        grank = tp_rank if desc == "tp" else dp_rank
        expect(all(c["rank"] == grank for c in cs), f"rank {r}: {desc} collectives with a rank not {grank}")
    expect(count("allreduce", "tp") == (4 * per_stage * M if T > 1 else 0),
           f"rank {r}: {count('allreduce', 'tp')} tensor parallel all_reduces")
    params = 12 * per_stage + (2 if first else 0) + (3 if last else 0)
    param_groups = per_stage + first + last
    if ZERO:
        expect(count("allreduce", "dp") == 0, f"rank {r}: all_reduce under ZeRO")
        expect(count("_reduce_scatter_base", "dp") == param_groups, f"rank {r}: reduce_scatters")
        expect(count("_allgather_base", "dp") == param_groups, f"rank {r}: all_gathers")
    else:
        expect(count("allreduce", "dp") == (params if D > 1 else 0),
               f"rank {r}: {count('allreduce', 'dp')} data parallel all_reduces, expected {params}")
    expect(all(c["desc"] in ("tp", "dp", "pp") for c in comms), f"rank {r}: a collective outside tp, dp, pp")

    # The pipeline, op by op.
    p2p = [c for c in comms if c["desc"] == "pp"]
    got, seqs = [], []
    for c in p2p:
        got.append((c["name"], c["rank"]))
        seqs.append(c["seq"])
        expect(c["pg"] == by_desc.get("pp"), f"rank {r}: p2p outside its pp group")
    want, want_seqs = [], []
    for k, (kind, peer) in enumerate(schedule(stage)):
        if kind == "batch":
            want += [("send", peer), ("recv", peer), ("coalesced", stage), ("wait", stage)]
            want_seqs += [[k, True]] * 4
        else:
            want.append((kind, peer))
            want_seqs.append([k, True])
    expect(got == want, f"rank {r}: pipeline ops {got}, expected {want}")
    base = seqs[0][0] if seqs else 0
    expect(all(isinstance(q, list) and q[1] is True for q in seqs), f"rank {r}: pipeline seqs {seqs}")
    rel = [[q[0] - base, q[1]] for q in seqs]
    expect(rel == want_seqs, f"rank {r}: pipeline seqs {seqs}, expected {want_seqs} from {base}")
    to = lambda s: tp_rank + T * (dp_rank + D * s)
    for c in p2p:
        if c["name"] == "send":
            sends.setdefault((r, to(c["rank"])), []).append(c["elems"])
        elif c["name"] == "recv":
            recvs.setdefault((to(c["rank"]), r), []).append(c["elems"])
expect(sends == recvs, f"sends {sends} do not pair with receives {recvs}")

if REF:
    ref = json.load(open(f"{REF}/manifest.json"))["ranks"][0]["loss"]
    ranks = json.load(open(f"{DIR}/manifest.json"))["ranks"]
    checked = 0
    for e in ranks:
        r = e["rank"]
        if r // (T * D) == P - 1 and r // T % D == 0:
            expect(abs(e["loss"] - ref) < 1e-4, f"rank {r}: loss {e['loss']}, one rank's {ref}")
            checked += 1
        else:
            expect("loss" not in e or r // (T * D) == P - 1, f"rank {r}: a loss off the last stage")
    expect(checked == T, f"{checked} losses compared")
print(f"ok: {W} ranks (tp {T}, pp {P}, dp {D}, {M} micro-batches{', ZeRO' if ZERO else ''})")
