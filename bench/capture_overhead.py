#!/usr/bin/env python3
"""The capture-overhead loop of bench_capture_overhead, in Python, under PyTorch's own execution-trace observer
(ExecutionTraceObserver on torch 2.x, ExecutionGraphObserver on 1.13): what the Python helper's recorded steps cost.

Usage: capture_overhead.py [--size ELEMS] [--ops N] [--json FILE]
"""
import argparse
import json
import os
import statistics
import tempfile
import time

import torch


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=16)
    ap.add_argument("--ops", type=int, default=60000)
    ap.add_argument("--json")
    a = ap.parse_args()
    torch.set_num_threads(1)
    x, w, b = torch.rand(a.size), torch.rand(a.size), torch.rand(a.size)

    def loop(x):  # the same six ops as bench/capture_overhead.cc
        for _ in range(a.ops // 6):
            y = torch.add(x, w, alpha=1)
            y = torch.mul(y, 0.5)
            y.add_(b, alpha=1)
            y = torch.relu(y)
            y = torch.sub(y, w, alpha=1)
            x = torch.neg(y)

    def timed():
        t = time.perf_counter()
        loop(x)
        return time.perf_counter() - t

    timed()
    plain = statistics.median(timed() for _ in range(5))
    observer = getattr(torch.profiler, "ExecutionTraceObserver", None) or torch.profiler.ExecutionGraphObserver
    recorded = []
    with tempfile.TemporaryDirectory() as d:
        for k in range(3):
            obs = observer()
            obs.register_callback(os.path.join(d, f"et_{k}.json"))
            obs.start()
            recorded.append(timed())
            obs.stop()
            obs.unregister_callback()
    rec = statistics.median(recorded)
    print(f"{a.ops} ops of {a.size} elements, torch {torch.__version__}, 1 thread\n"
          f"  without capture  {plain:.4f} s ({1e6 * plain / a.ops:.2f} us/op)\n"
          f"  recorded         {rec:.4f} s ({1e6 * rec / a.ops:.2f} us/op) by {observer.__name__}, median of 3\n"
          f"  overhead         {rec / plain:.2f}x")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"ops": a.ops, "size": a.size, "torch": torch.__version__, "observer": observer.__name__,
                       "plain_seconds": plain, "recorded_seconds": rec, "overhead": rec / plain}, f)


if __name__ == "__main__":
    main()
