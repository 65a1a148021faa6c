#!/usr/bin/env python3
"""Analyze benchmark: `reprise analyze` on a ~1 GB Kineto trace, on one core.

The trace is the shared HTA training trace (hta/trace_diff_control_kineto.json.gz, 6 ProfilerSteps of an A100
run) repeated end to end until it reaches the size asked for: each copy shifted by the trace's span, its steps
renumbered and its correlation and External ids offset, so it reads as one long run. Each run is timed with
/usr/bin/time (wall, peak memory) under `taskset -c 0`; the median of --runs is reported. Writes
bench/out/analyze.md and bench/out/analyze.json.

  bench/analyze.py [--gb 1.0] [--runs 3] [--bin build/bin]
"""
import argparse
import gzip
import json
import os
import re
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCE = os.path.join(ROOT, "..", "shared", "traces", "hta", "trace_diff_control_kineto.json.gz")


def make_trace(path, gb):
    with gzip.open(SOURCE, "rt") as f:
        doc = json.load(f)
    events = doc.pop("traceEvents")
    timed = [e for e in events if e.get("ph") == "X" and isinstance(e.get("ts"), (int, float))]
    begin = min(e["ts"] for e in timed)
    span = max(e["ts"] + e.get("dur", 0) for e in timed) - begin + 1000
    ids = [e["args"].get(k, 0) for e in events for k in ("correlation", "External id")
           if isinstance(e.get("args"), dict) and isinstance(e["args"].get(k), int)]
    id_step = max(ids) + 1 if ids else 1
    step = re.compile(r"^ProfilerStep#(\d+)$")
    steps = sorted({int(m.group(1)) for e in events for m in [step.match(str(e.get("name", "")))] if m})
    target = int(gb * (1 << 30))
    written = 0
    copy = 0
    with open(path, "w") as out:
        head = json.dumps(doc)[:-1]
        out.write(head + (", " if len(doc) else "") + '"traceEvents": [\n')
        first = True
        while written < target:
            for e in events:
                if copy and e.get("ph") != "X":
                    continue  # metadata once
                e2 = dict(e)
                if isinstance(e2.get("ts"), (int, float)):
                    e2["ts"] = e2["ts"] + copy * span
                m = step.match(str(e2.get("name", "")))
                if m:
                    e2["name"] = "ProfilerStep#%d" % (int(m.group(1)) + copy * len(steps))
                if isinstance(e2.get("args"), dict):
                    a = dict(e2["args"])
                    for k in ("correlation", "External id"):
                        if isinstance(a.get(k), int) and a[k] > 0:
                            a[k] += copy * id_step
                    e2["args"] = a
                if e2.get("ph") in ("s", "f") and isinstance(e2.get("id"), int):
                    e2["id"] += copy * id_step
                text = ("" if first else ",\n") + json.dumps(e2)
                first = False
                out.write(text)
                written += len(text)
            copy += 1
        out.write("\n]}\n")
    return copy


def run(cmd):
    t0 = time.time()
    p = subprocess.run(["/usr/bin/time", "-f", "%M"] + cmd, capture_output=True, text=True)
    wall = time.time() - t0
    if p.returncode != 0:
        sys.exit("analyze failed: " + p.stderr[-2000:])
    peak_kb = int(p.stderr.strip().splitlines()[-1])
    phases = dict(re.findall(r"reprise: (read|analyze): .* in ([0-9.]+ m?s)", p.stderr))
    return wall, peak_kb / 1024, phases


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gb", type=float, default=1.0)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    args = ap.parse_args()
    if not os.path.exists(SOURCE):
        sys.exit("bench/analyze.py: %s not found (../shared/traces absent): nothing to measure" % SOURCE)
    out_dir = os.path.join(ROOT, "bench", "out")
    os.makedirs(out_dir, exist_ok=True)
    trace = os.path.join(out_dir, "kineto_%.1fgb.json" % args.gb)
    if not os.path.exists(trace):
        print("generating %s" % trace, file=sys.stderr)
        copies = make_trace(trace, args.gb)
        print("  %d copies of the HTA trace" % copies, file=sys.stderr)
    size = os.path.getsize(trace)
    cmd = ["taskset", "-c", "0", os.path.join(args.bin, "reprise"), "analyze", trace, "--top", "5",
           "--json", os.path.join(out_dir, "analyze_findings.json")]
    runs = [run(cmd) for _ in range(args.runs)]
    walls = [r[0] for r in runs]
    with open(os.path.join(out_dir, "analyze_findings.json")) as f:
        found = json.load(f)
    result = {"trace_bytes": size, "runs": args.runs, "wall_seconds": walls, "median_seconds": statistics.median(walls),
              "peak_mib": max(r[1] for r in runs), "phases_last_run": runs[-1][2],
              "findings": len(found["findings"]), "windows": len(found["windows"]),
              "steps": sum(r["steps"] for r in found["ranks"]), "events": sum(r["events"] for r in found["ranks"])}
    with open(os.path.join(out_dir, "analyze.json"), "w") as f:
        json.dump(result, f, indent=1)
    md = ("| trace | events | steps | windows | findings | wall (median of %d, 1 core) | spread | peak memory |\n"
          "|---|---|---|---|---|---|---|---|\n"
          "| %.2f GB Kineto | %d | %d | %d | %d | %.1f s | %.1f-%.1f s | %.0f MiB |\n") % (
        args.runs, size / 1e9, result["events"], result["steps"], result["windows"], result["findings"],
        result["median_seconds"], min(walls), max(walls), result["peak_mib"])
    md += "\nphases (last run): %s\n" % ", ".join("%s %s" % kv for kv in runs[-1][2].items())
    with open(os.path.join(out_dir, "analyze.md"), "w") as f:
        f.write(md)
    print(md)


if __name__ == "__main__":
    main()
