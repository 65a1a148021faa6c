#!/usr/bin/env python3
"""Replay with and without the original's host time (--host-time) against the original iteration time.

Each pair captures a program afresh, then replays it with --host-time recorded and with none (in alternating order),
one thread everywhere (OMP_NUM_THREADS=1, --threads 1); the ratios replay/original of each pair, then their median:
  python  capture/python/examples/train_mlp.py under reprise_capture.py (the autograd profiler times the step
          before the recorded one): the original is the median of its uninstrumented steps.
  cpp     `reprise capture --workload mlp` (LibTorch, its own host timeline): the original is its manifest's.

  bench/host_time.py [--pairs N] [--case python|cpp] [--device cpu|cuda] [--bin build/bin] [--work DIR] [--json FILE]

With --device cuda both programs run on the GPU (issue 12's GPU check: recorded is the GPU's default, since its
launch-bound steps are mostly host time), a third replay of each pair adds --hold-ops (`held`: each op's call held to
its original's own host time), and the exit status says nothing: the 5% bar is the CPU's.

Each side of a pair is summarized twice: by its median (the original's uninstrumented steps, the replay's 10
measured iterations) and by its minimum, the step the machine disturbed least, which on a shared, loaded machine is
the steadier figure. Exit 1 when the python case's median over pairs of replay/original by minima with
--host-time recorded is outside [0.95, 1.05].
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from truth import ROOT, run  # noqa: E402

PYTHON = os.environ.get("REPRISE_PYTHON", "/usr/bin/python3")


def capture(case, bin_, out, device):
    if case == "python":
        run([PYTHON, os.path.join(ROOT, "capture", "python", "examples", "train_mlp.py"), out, "--device", device])
    else:
        run([f"{bin_}/reprise", "capture", "--workload", "mlp", "--out", out, "--threads", "1", "--warmup", "2",
             "--steps", "6", "--device", device, "-q"])
    m = json.load(open(os.path.join(out, "manifest.json")))
    return m["ranks"][0]["iteration_seconds"]


def replay(bin_, path, mode):
    out = os.path.join(path, f"replay-{mode}.json")
    hold = ["--hold-ops"] if mode == "held" else []
    run([f"{bin_}/reprise", "replay", path, "--host-time", "recorded" if mode == "held" else mode, *hold,
         "--threads", "1", "--iterations", "10", "--warmup", "2", "--out", out, "-q"])
    r = json.load(open(out))
    return r["iteration_seconds"], r["host_time"]


def spread(xs):
    return f"{statistics.median(xs):.3f} (spread {min(xs):.3f} .. {max(xs):.3f})"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--case", action="append", choices=["python", "cpp"], help="only these (default: both)")
    ap.add_argument("--device", default="cpu", help="cpu or cuda: where both programs run")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--work", default=None)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    os.environ["OMP_NUM_THREADS"] = "1"
    work = a.work or tempfile.mkdtemp(prefix="reprise-host-time-")
    results, failed = {}, False
    for case in a.case or ["python", "cpp"]:
        rows = []
        t0 = time.time()
        for k in range(a.pairs):
            path = os.path.join(work, f"{case}-{k}")
            original = capture(case, a.bin, path, a.device)
            row = {"original_seconds": original}
            modes = ["recorded", "none"] + (["held"] if a.device != "cpu" else [])
            for mode in modes[k % len(modes):] + modes[:k % len(modes)]:  # each first in turn
                seconds, host = replay(a.bin, path, mode)
                row[mode] = {"seconds": seconds, "host_time": host,
                             "ratio_median": statistics.median(seconds) / statistics.median(original),
                             "ratio_min": min(seconds) / min(original)}
            rows.append(row)
            host = row["recorded"]["host_time"]
            print(f"{case} pair {k}: original {statistics.median(original) * 1e3:.2f} ms median, {min(original) * 1e3:.2f}"
                  f" min; replay/original by medians, minima: recorded {row['recorded']['ratio_median']:.3f}, "
                  f"{row['recorded']['ratio_min']:.3f} (re-spent {host['seconds_per_iteration'] * 1e3:.2f} ms, "
                  f"{host['source']}); none {row['none']['ratio_median']:.3f}, {row['none']['ratio_min']:.3f}", flush=True)
        entry = {"pairs": rows}
        for by in ("median", "min"):
            rec = [r["recorded"]["ratio_" + by] for r in rows]
            none = [r["none"]["ratio_" + by] for r in rows]
            held = [r["held"]["ratio_" + by] for r in rows if "held" in r]
            print(f"{case}: replay/original by {by}s, median over {a.pairs} pairs: recorded {spread(rec)}, "
                  f"none {spread(none)}" + (f", held {spread(held)}" if held else ""))
            entry.update({f"recorded_by_{by}": statistics.median(rec), f"none_by_{by}": statistics.median(none)})
            if held:
                entry[f"held_by_{by}"] = statistics.median(held)
            if case == "python" and by == "min" and a.device == "cpu":
                failed |= not 0.95 <= statistics.median(rec) <= 1.05
        host = [r["recorded"]["host_time"]["seconds_per_iteration"] / min(r["original_seconds"]) for r in rows]
        print(f"{case}: host time re-spent / original (min) {spread(host)} [{time.time() - t0:.0f} s]")
        entry["host_share"] = statistics.median(host)
        results[case] = entry
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
