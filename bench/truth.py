#!/usr/bin/env python3
"""Transforms against ground truth: a transformed trace must stand in for a real capture of the variant.

For each case, capture the built-in workload as it is and as the variant (a real capture), generate the variant
from the first with a config, then compare the two:
  structure  op counts by name and collective sizes (per rank), less the differences docs/configs.md documents;
  time       replayed iteration time of the generated bundle against the real capture's, interleaved
             (A B A B ...), median of the per-pair ratios with their spread.

  bench/truth.py [--quick] [--pairs N] [--case NAME] [--bin build/bin] [--work DIR] [--json FILE]

--quick checks structure only, at small sizes (a ctest). Exit 1 when a structural check fails, or (without
--quick) when a median time ratio is outside [0.9, 1.1].
"""
import argparse
import gzip
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(cmd, **kw):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)
    if r.returncode != 0:
        raise SystemExit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout[-3000:]}")
    return r.stdout


def launcher(np_):
    """mpiexec for np_ ranks (nothing for one); REPRISE_MPIEXEC_ARGS adds its words (a transport, a binding: `--mca pml
    ob1 --mca btl self,vader`, `--bind-to none`), for machines where Open MPI's defaults are the question."""
    extra = os.environ.get("REPRISE_MPIEXEC_ARGS", "").split()
    return ["mpiexec", "--allow-run-as-root", "--oversubscribe"] + extra + ["-np", str(np_)] if np_ > 1 else []


class Case:
    """A workload captured as `base` and as `variant`, and the config that turns base into variant."""

    def __init__(self, name, workload, base, variant, transform, world=(1, 1), allowed=None, note="", per_rank=False):
        self.name, self.workload, self.base, self.variant = name, workload, base, variant
        self.transform, self.world, self.note, self.per_rank = transform, world, note, per_rank
        self.allowed = allowed or (lambda op: False)  # ops whose counts may differ (documented)


def cases(quick):
    gpt = ["--seq", "32", "--hidden", "64", "--heads", "2", "--vocab", "256"] if quick else []
    dlrm = ["--batch", "32", "--rows", "2000", "--tables", "8"] if quick else ["--batch", "128", "--rows", "50000",
                                                                                 "--tables", "8"]
    # Tables of their own sizes and pooling, so a table in the wrong place shows.
    plan_dlrm = ["--batch", "32" if quick else "128", "--table-rows", "1000,2000,3000,4000,5000,6000,7000,8000",
                 "--table-lookups", "2,4,6,8,10,12,14,16"]
    def plan(name, base_shards, real_shards, tables=None, world_size=None):
        """dlrm captured with `base_shards` on 2 ranks -> `tables: PLAN` (global table ids; default: the real
        plan's ranks), against a capture with `real_shards`, rank by rank."""
        scale = f"tables: {tables or [int(x) for x in real_shards.split(',')]}"
        scale += f", world_size: {world_size}" if world_size else ""
        return Case(name, "dlrm", plan_dlrm + ["--shards", base_shards], plan_dlrm + ["--shards", real_shards],
                    f"- scale: {{{scale}}}", world=(2, world_size or 2), per_rank=True)

    return [
        # bmm on CPU loops over the batch and records a select/as_strided/resolve_conj per item inside it: those
        # nested ops keep their recorded count (replay issues bmm, not them); every replayed op matches.
        Case("gpt_batch_x2", "gpt", gpt + ["--batch", "4"], gpt + ["--batch", "8"],
             "- scale: {dims: {batch: {from: 4, to: 8}}}",
             allowed=lambda op: op in ("aten::as_strided", "aten::resolve_conj", "aten::select"),
             note="ops nested in CPU bmm's per-item loop keep their recorded count (docs/configs.md, dims)"),
        Case("gpt_twice_the_layers", "gpt", gpt + ["--layers", "2"], gpt + ["--layers", "4"],
             "- splice: {repeat: {scope: \"## block\\\\.(0|1) ##\", times: 2}}"),
        # tables: reshard spreads each source rank's tables over the ranks that replay it, as a real 4-rank job
        # shards them: every op count and collective size of every rank matches.
        Case("dlrm_2_to_4_ranks", "dlrm", dlrm, dlrm, "- scale: {world_size: 4, tables: reshard}", world=(2, 4)),
        # A sharding plan from one capture that put every table on rank 0: each rank's lookups, their backward and
        # updates, and both all_to_allv layouts match a real capture of the plan, rank by rank.
        plan("dlrm_plan_from_all_on_0", "0,0,0,0,0,0,0,0", "1,0,0,1,1,1,0,1"),
        plan("dlrm_plan_2_to_4_ranks", "0,0,0,0,0,0,0,0", "3,0,0,3,3,0,2,2", world_size=4),
        # From a capture whose ranks each hold part of the tables (rank 0 tables 0 and 7, rank 1 tables 1..6): tables
        # move between the ranks, their ops transplanted from the rank that held them.
        plan("dlrm_plan_moves_tables", "0,1,1,1,1,1,1,0", "1,0,0,1,1,1,1,0", [1, 0, 0, 0, 1, 1, 1, 1]),
        plan("dlrm_plan_moves_tables_4_ranks", "0,0,0,0,1,1,1,1", "0,1,2,3,0,1,2,3", [0, 1, 2, 3, 0, 1, 2, 3], 4),
    ]


def capture(bin_, case, args, world, out):
    if os.path.exists(os.path.join(out, "manifest.json")):
        return
    run(launcher(world) + [f"{bin_}/reprise", "capture", "--workload", case.workload, "--out", out, "--warmup", "1",
                           "--steps", "3", "--threads", "1", "-q"] + args)


def exchanges(trace):
    """Each all_to_all(v) of an ET file, in order: its name, splits and element counts, as recorded."""
    out = []
    with gzip.open(trace, "rt") as f:
        for n in json.load(f)["nodes"]:
            a = {x["name"]: x["value"] for x in n.get("attrs", [])}
            if n["name"] == "record_param_comms" and "alltoall" in a.get("collective_name", "").replace("_", ""):
                out.append((a["collective_name"], a.get("in_split_size"), a.get("out_split_size"),
                            a.get("in_msg_nelems"), a.get("out_msg_nelems")))
    return out


def capture_dir(work, workload, args, world):
    key = hashlib.sha1(repr((workload, args, world)).encode()).hexdigest()[:12]
    return os.path.join(work, "captures", f"{workload}-{world}-{key}")


def summary(bin_, path, per_rank=False):
    """Per role of a bundle (each rank's role with per_rank), per rank of a capture: op counts and collectives
    (with per_rank, every all_to_all(v)'s splits too)."""
    d = json.loads(run([f"{bin_}/reprise", "inspect", path, "--json", "--top", "100000", "-q"]))
    ranks = d["roles"]["ranks"] if "roles" in d else d["ranks"]
    out = []
    for r in ranks:
        ops = Counter({o["name"]: o["count"] for o in r["top_ops_by_count"]})
        coll = sorted((c["name"], c["dtype"], c["bytes"], c["count"]) for c in r["collectives_by_type"])
        out.append((ops, coll))
    if not per_rank:
        return out
    if "bundle" in d:
        roles = d["bundle"]["roles"]
        of = {k: i for i, role in enumerate(roles) for k in role["ranks"]}
        return [(*out[of[k]], exchanges(os.path.join(path, roles[of[k]]["file"]))) for k in sorted(of)]
    return [(*out[k], exchanges(os.path.join(path, f"rank-{k}.json.gz"))) for k in range(len(out))]


def compare_ranks(case, gen, real):
    """Rank by rank: generated rank k against captured rank k (the ranks of a sharding plan differ)."""
    problems, documented = [], set()
    if len(gen) != len(real):
        return [f"{len(gen)} generated ranks, {len(real)} captured"], []
    for k, ((gen_ops, g, gx), (real_ops, r, rx)) in enumerate(zip(gen, real)):
        for op in sorted(set(gen_ops) | set(real_ops)):
            if gen_ops[op] != real_ops[op]:
                (documented.add if case.allowed(op) else problems.append)(
                    op if case.allowed(op) else f"rank {k}: {op}: {gen_ops[op]} generated, {real_ops[op]} captured")
        if g != r:
            problems.append(f"rank {k}: collectives differ:\n    generated {g}\n    captured  {r}")
        if gx != rx:
            problems.append(f"rank {k}: all_to_all(v) splits differ:\n    generated {gx}\n    captured  {rx}")
    return problems, sorted(documented)


def compare(case, gen, real):
    if case.per_rank:
        return compare_ranks(case, gen, real)
    problems, documented = [], set()
    # Every generated role against captured rank 0: the ranks of these workloads run the same ops.
    real_ops = real[0][0]
    for k, (gen_ops, _) in enumerate(gen):
        for op in sorted(set(gen_ops) | set(real_ops)):
            if gen_ops[op] != real_ops[op]:
                (documented.add if case.allowed(op) else problems.append)(
                    op if case.allowed(op) else f"{op}: {gen_ops[op]} generated (role {k}), {real_ops[op]} captured")
    # Every generated role (a bundle's inspect shows roles) against every captured rank: data- and model-parallel
    # ranks of these workloads issue the same collectives.
    for k, (_, g) in enumerate(gen):
        for j, (_, r) in enumerate(real):
            if g != r:
                problems.append(f"collectives differ (generated role {k}, captured rank {j}):\n    generated {g}\n"
                                f"    captured  {r}")
    return problems, sorted(documented)


def replay_seconds(bin_, path, world):
    out = tempfile.mktemp(suffix=".json")
    run(launcher(world) + [f"{bin_}/reprise", "replay", path, "--iterations", "5", "--warmup", "2", "--threads", "1",
                           "--out", out, "-q"])
    r = json.load(open(out))
    os.unlink(out)
    ranks = r.get("ranks", [r])
    return max(e["median_iteration_seconds"] for e in ranks)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--case", action="append", help="only these cases (default: all)")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--work", default=None)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    work = a.work or tempfile.mkdtemp(prefix="reprise-truth-")
    results, failed = [], False
    for case in cases(a.quick):
        if a.case and case.name not in a.case:
            continue
        d = os.path.join(work, case.name)
        os.makedirs(d, exist_ok=True)
        t0 = time.time()
        # Captures are shared between cases that capture the same thing (the plans' all-on-0 source).
        base = capture_dir(work, case.workload, case.base, case.world[0])
        real = capture_dir(work, case.workload, case.variant, case.world[1])
        capture(a.bin, case, case.base, case.world[0], base)
        capture(a.bin, case, case.variant, case.world[1], real)
        cfg = os.path.join(d, "variant.yaml")
        with open(cfg, "w") as f:
            f.write(f"name: {case.name}\nsource: {base}\ntransforms:\n  {case.transform}\n")
        run([f"{a.bin}/reprise", "generate", cfg, "--out", os.path.join(d, "generated"), "--force", "-q"])
        problems, documented = compare(case, summary(a.bin, os.path.join(d, "generated"), case.per_rank),
                                       summary(a.bin, real, case.per_rank))
        entry = {"case": case.name, "structure_ok": not problems, "problems": problems,
                 "documented_differences": documented, "note": case.note}
        print(f"{case.name}: structure {'same' if not problems else 'DIFFERS'}"
              + (f" (documented differences: {', '.join(documented)})" if documented else ""))
        for p in problems:
            print("  " + p)
        failed |= bool(problems)
        if not a.quick:
            ratios = []
            for _ in range(a.pairs):  # interleaved: generated, real, generated, real, ...
                g = replay_seconds(a.bin, os.path.join(d, "generated"), case.world[1])
                r = replay_seconds(a.bin, real, case.world[1])
                ratios.append(g / r)
            med = statistics.median(ratios)
            entry.update(ratios=ratios, median_ratio=med, spread=[min(ratios), max(ratios)])
            print(f"  time: generated/real median {med:.3f} over {a.pairs} pairs (spread {min(ratios):.3f} .. "
                  f"{max(ratios):.3f})")
            failed |= not (0.9 <= med <= 1.1)
        entry["seconds"] = time.time() - t0
        results.append(entry)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
