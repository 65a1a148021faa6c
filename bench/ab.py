#!/usr/bin/env python3
"""Compares two commands on a shared machine: runs them interleaved (A B A B ...), pinned to one core, and reports
the median of each and of the per-pair ratio B/A with their spread. Each run's figure is the first number the
regex captures in its output (stdout and stderr).

  bench/ab.py --pairs 5 --regex 'replay\\s+([0-9.]+) s' \\
      --a 'old' '/work/baseline/build/bin/bench_replay_overhead --ops 100000' \\
      --b 'new' 'build/bin/bench_replay_overhead --ops 100000'
"""
import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys


def run_once(cmd, regex, pin):
    argv = (["taskset", "-c", "0"] if pin else []) + ["bash", "-c", cmd]
    p = subprocess.run(argv, capture_output=True, text=True)
    out = p.stdout + p.stderr
    if p.returncode != 0:
        sys.exit(f"ab.py: '{cmd}' exited {p.returncode}:\n{out[-2000:]}")
    m = re.search(regex, out)
    if not m:
        sys.exit(f"ab.py: /{regex}/ found nothing in the output of '{cmd}':\n{out[-2000:]}")
    return float(m.group(1))


def spread(values):
    return f"{statistics.median(values):.4g} (min {min(values):.4g}, max {max(values):.4g})"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--a", nargs=2, metavar=("LABEL", "CMD"), required=True)
    ap.add_argument("--b", nargs=2, metavar=("LABEL", "CMD"), required=True)
    ap.add_argument("--regex", required=True, help="captures the figure (group 1) in each run's output")
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--json", help="write the runs and medians here")
    ap.add_argument("--no-pin", action="store_true", help="do not pin to core 0 (multi-threaded commands)")
    o = ap.parse_args()
    pin = not o.no_pin and shutil.which("taskset") is not None
    a, b = [], []
    for k in range(o.pairs):
        a.append(run_once(o.a[1], o.regex, pin))
        b.append(run_once(o.b[1], o.regex, pin))
        print(f"pair {k + 1}/{o.pairs}: {o.a[0]} {a[-1]:.4g}, {o.b[0]} {b[-1]:.4g}", file=sys.stderr)
    ratios = [y / x for x, y in zip(a, b) if x > 0]
    print(f"{o.a[0]}: {spread(a)}")
    print(f"{o.b[0]}: {spread(b)}")
    print(f"{o.b[0]}/{o.a[0]} per pair: {spread(ratios)} over {len(ratios)} pairs{' pinned to core 0' if pin else ''}")
    if o.json:
        with open(o.json, "w") as f:
            json.dump({"a": {"label": o.a[0], "cmd": o.a[1], "runs": a},
                       "b": {"label": o.b[0], "cmd": o.b[1], "runs": b},
                       "ratio_median": statistics.median(ratios)}, f, indent=1)


if __name__ == "__main__":
    main()
