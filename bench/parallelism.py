#!/usr/bin/env python3
"""The parallelism bar of docs/performance.md: the built-in gpt with tensor, pipeline and data parallelism, captured
on CPU under mpirun and replayed under mpirun, round after round.

Each round captures the workload (its timed uninstrumented steps are the original) and replays the capture with
every collective and point-to-point operation; per rank it reports the coverage of compute, collectives and p2p and
replay/original (median replayed iteration over median original iteration). Capture and replay alternate (A B A B
...), so both see the same machine; the summary gives each rank's median over the rounds with its spread.

  bench/parallelism.py [--tp 2 --pp 2 --dp 2] [--rounds 5] [--bin build/bin] [--json FILE] [-- capture options]

Exit 1 when a rank's coverage of anything is below 100%, or its median replay/original is outside [0.9, 1.1].
"""
import argparse
import json
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from truth import ROOT, launcher, run  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tp", type=int, default=2)
    ap.add_argument("--pp", type=int, default=2)
    ap.add_argument("--dp", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--work", default=None)
    ap.add_argument("--json", default=os.path.join(ROOT, "bench", "out", "parallelism.json"))
    ap.add_argument("extra", nargs="*", help="more capture options (after --)")
    a = ap.parse_args()
    world = a.tp * a.pp * a.dp
    work = a.work or tempfile.mkdtemp(prefix="reprise-parallelism-")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    reprise = os.path.join(a.bin, "reprise")
    layout = ["--tp", str(a.tp), "--pp", str(a.pp), "--dp", str(a.dp)]
    ratios = {r: [] for r in range(world)}
    coverage_ok = True
    rounds = []
    for k in range(a.rounds):
        cap = os.path.join(work, f"capture-{k}")
        run(launcher(world) + [reprise, "capture", "--workload", "gpt", *layout, "--threads", "1", "--out", cap,
                               "-q", *a.extra], env=env)
        res = os.path.join(work, f"replay-{k}.json")
        run(launcher(world) + [reprise, "replay", cap, "--threads", "1", "--out", res, "-q"], env=env)
        r = json.load(open(res))
        row = []
        for e in r["ranks"]:
            cov = (e["coverage"], e["collectives_replayed"], e["collectives_selected"], e["p2p_replayed"],
                   e["p2p_selected"])
            if e["coverage"] < 1 or e["collectives_replayed"] != e["collectives_selected"] or \
                    e["p2p_replayed"] != e["p2p_selected"]:
                coverage_ok = False
            orig = statistics.median(e["original_iteration_seconds"])
            ratio = statistics.median(e["iteration_seconds"]) / orig
            ratios[e["rank"]].append(ratio)
            row.append({"rank": e["rank"], "ratio": ratio, "coverage": cov, "original_ms": 1e3 * orig})
        rounds.append(row)
        print(f"round {k + 1}/{a.rounds}: " + " ".join(f"{x['ratio']:.3f}" for x in row), file=sys.stderr)
    summary = []
    print(f"gpt {' '.join(layout)} on {world} ranks, {a.rounds} capture/replay rounds, 1 thread per rank")
    print("| rank | median replay/original | min | max | coverage (ops, collectives, p2p) |")
    print("|---|---|---|---|---|")
    ok = coverage_ok
    for r in range(world):
        med = statistics.median(ratios[r])
        ok = ok and 0.9 <= med <= 1.1
        last = rounds[-1][r]["coverage"]
        print(f"| {r} | {med:.3f} | {min(ratios[r]):.3f} | {max(ratios[r]):.3f} | "
              f"{100 * last[0]:.2f}%, {last[1]}/{last[2]}, {last[3]}/{last[4]} |")
        summary.append({"rank": r, "median": med, "min": min(ratios[r]), "max": max(ratios[r])})
    os.makedirs(os.path.dirname(a.json), exist_ok=True)
    json.dump({"layout": {"tp": a.tp, "pp": a.pp, "dp": a.dp}, "rounds": rounds, "summary": summary,
               "coverage_ok": coverage_ok}, open(a.json, "w"), indent=1)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
