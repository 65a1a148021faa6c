#!/usr/bin/env python3
"""Predicts again what earlier `bench/predict.py` runs measured, with this build (and, with --against, another one),
and prints each workload's error against the same measured replays: a model change judged on the same captures,
calibrations and measurements, paired, in minutes, without the machine's drift between two runs.

  bench/repredict.py WORK [WORK...] [--bin build/bin] [--against OTHER/bin] [--json OUT]

Each WORK is a `bench/predict.py --work` folder. Its workloads are the NAME.measured.json files there, measured as
the median of every replayed step they hold (the slowest rank's, for a launch of several ranks); each is predicted
from its capture folder or bundle (NAME, bundle-NAME, or the source its NAME.prediction.json names) on the folder's
machine.yaml, with calibration.json for one rank and calibration-busy.json for several, as bench/predict.py does.
The table gives each build's error and the geomean of their absolute errors; --json writes the rows.
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile


def workload_source(work, name):
    for candidate in (os.path.join(work, name), os.path.join(work, "bundle-" + name.replace("-ranks", ""))):
        if os.path.isdir(candidate):
            return candidate
    prediction = os.path.join(work, name + ".prediction.json")
    if os.path.exists(prediction):
        return json.load(open(prediction))["source"]
    return None


def predict(binary, source, cluster, calibration, out):
    r = subprocess.run([os.path.join(binary, "reprise"), "predict", source, "--cluster", cluster, "--calibration",
                        calibration, "--out", out, "-q"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        raise RuntimeError(r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"exit {r.returncode}")
    return json.load(open(out))["iteration_seconds"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("work", nargs="+", help="bench/predict.py work folders")
    ap.add_argument("--bin", default="build/bin", help="the build to judge (default build/bin)")
    ap.add_argument("--against", help="another build's bin folder, predicted beside it")
    ap.add_argument("--json", help="write the rows here")
    a = ap.parse_args()
    builds = [("this", a.bin)] + ([("against", a.against)] if a.against else [])
    for _, b in builds:
        if not os.access(os.path.join(b, "reprise"), os.X_OK):
            print(f"repredict.py: {b}/reprise: not found (build it, or give --bin)", file=sys.stderr)
            return 2
    rows, tmp = [], tempfile.mkdtemp(prefix="repredict-")
    for work in a.work:
        cluster = os.path.join(work, "machine.yaml")
        if not os.path.exists(cluster):
            print(f"repredict.py: {work}: no machine.yaml (not a bench/predict.py work folder?)", file=sys.stderr)
            return 2
        for f in sorted(os.listdir(work)):
            if not f.endswith(".measured.json"):
                continue
            name = f[: -len(".measured.json")]
            m = json.load(open(os.path.join(work, f)))
            steps = m.get("iteration_seconds_max_over_ranks") or m.get("iteration_seconds") or []
            source = workload_source(work, name)
            if not steps or not source:
                print(f"repredict.py: {work}/{f}: skipped ({'no steps' if not steps else 'no capture or bundle'})",
                      file=sys.stderr)
                continue
            ranks = m.get("world_size", 1)
            calibration = os.path.join(work, "calibration.json" if ranks == 1 else "calibration-busy.json")
            measured = statistics.median(steps)
            row = {"work": work, "name": name, "ranks": ranks, "measured": measured}
            for label, b in builds:
                try:
                    p = predict(b, source, cluster, calibration, os.path.join(tmp, "p.json"))
                    row[label] = {"predicted": p, "error": p / measured - 1}
                except RuntimeError as e:
                    row[label] = {"failed": str(e)}
            rows.append(row)
            cells = "  ".join(f"{label} {row[label]['error'] * 100:+7.1f}%" if "error" in row[label]
                              else f"{label} failed: {row[label]['failed']}" for label, _ in builds)
            print(f"{os.path.basename(work.rstrip('/')):>16} {name:22s} measured {measured * 1e3:9.2f} ms  {cells}",
                  flush=True)
    for label, _ in builds:
        errors = [abs(r[label]["error"]) for r in rows if "error" in r[label]]
        if errors:
            g = math.exp(sum(math.log(max(e, 1e-6)) for e in errors) / len(errors))
            print(f"{label}: geomean |error| {100 * g:.1f}% over {len(errors)} workload(s)")
    if a.json:
        with open(a.json, "w") as out:
            json.dump({"builds": dict(builds), "rows": rows}, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
