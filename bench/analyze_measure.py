#!/usr/bin/env python3
"""`reprise analyze --measure` against the real saving, on the mlp with an anti-pattern built in.

  bench/analyze_measure.py [--case cpp|python] [--anti-pattern casts|sync|unfused|loop|unaligned|loader|pageable|launches]
                           [--dtype float32|bfloat16] [--device cpu|cuda] [--pairs N]
                           [--ranks R] [--batch B] [--hidden H] [--layers L] [--bin build/bin] [--work DIR]
                           [--host-time none|recorded|SCALE] [--json FILE]

  cpp     `reprise capture --workload mlp --anti-pattern AP` (LibTorch; its host timeline has no GPU kernels, so
          the GPU-side detectors such as host_sync do not fire on it)
  python  capture/python/examples/train_mlp.py --anti-pattern AP under reprise_capture.py (with Kineto on torch 2.x:
          the GPU's kernels too, so host_sync fires on CUDA); on the CPU with glibc's trimming off for every process
          (MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_; set them to override)

--ranks R (cpp only) captures the mlp data parallel on R ranks under mpirun and measures under a launch of as many
(every rank replays its own rank, with the gradients' all_reduce): the real saving per step is the slowest rank's
step with the anti-pattern less the slowest rank's without.

casts is dtype churn (detector dtype_churn): each hidden activation round-tripped through bf16; sync is loss.item()
between forward and backward (host_sync, which only a GPU makes cost anything); unfused is a tanh GELU written out
as eight elementwise ops against the fused one (unfused_elementwise; its fix replays each chain as its longest op);
loop is an optimizer one parameter at a time against its foreach form (single_tensor_optimizer, which needs 32 or more
ops a step): in the cpp case SGD (--layers 16 or more), in the python case torch.optim.Adam(foreach=False) against
Adam(foreach=True), 10 ops per parameter (the fix rewrites its out-of-place sqrt and div, and leaves .item() one per
parameter); unaligned is a hidden size off a multiple of 8 (H - 1) against H (unaligned_gemm, whose fix pads every
such size of the trace with `scale: dims`; --dtype bfloat16 puts the python case's GEMMs on a GPU's tensor cores);
loader is each step's batch made sample by sample in a DataLoader scope (python: a DataLoader without workers whose
samples are made in Python; cpp: a randn and a tanh a sample, then a stack) against a batch made beforehand
(data_loader, whose fix the replay makes: the original re-spends its DataLoader calls' time, replay --data-loader
recorded, the fixed side does not); pageable (python, --device cuda) is each step's batch copied to the GPU from
pageable host memory, blocking, against pinned memory and non_blocking=True (pageable_copy, whose fix the replay makes:
replay --pin-memory on the fixed side); launches (python, --device cuda, small sizes) is the step run eagerly against
the same step captured in a CUDA graph (launch_bound, whose fix the replay makes: replay --cuda-graph on the fixed
side).

Each pair is one capture. The real saving is measured in its process: its timed steps alternate with and without
the anti-pattern (the manifest's without_anti_pattern_seconds; train_mlp.py's anti_pattern_steps.json), and the
median of the per-step differences is free of what separate processes differ by on these machines (10-20%, on the
CPU up to 2x). The measured saving is `reprise analyze CAPTURE --measure --pairs 5` (the detector's fix built by
the generators, replayed against the capture). One thread everywhere (OMP_NUM_THREADS=1, --threads 1). The C++
captures warm up 6 steps and time 15: with fewer, glibc's moving mmap threshold (freed 2 MB activations given back
to the system and page-faulted in again) still settles during the timed steps. The figures: the median over pairs
of each, their spread, and measured / real. Exit 1 when that ratio is outside [0.8, 1.2] (issue 14's bar), or when
the detector found nothing to measure.
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from truth import ROOT, launcher, run  # noqa: E402

PYTHON = os.environ.get("REPRISE_PYTHON", "/usr/bin/python3")
DETECTOR = {"casts": "dtype_churn", "sync": "host_sync", "unfused": "unfused_elementwise",
            "loop": "single_tensor_optimizer", "unaligned": "unaligned_gemm", "loader": "data_loader",
            "pageable": "pageable_copy", "launches": "launch_bound"}


def real_in_process(case, out):
    """Both captures time the step with and without the anti-pattern interleaved in one process: the median of the
    per-step differences."""
    if case == "cpp":
        ranks = json.load(open(os.path.join(out, "manifest.json")))["ranks"]
        # Steps run in lockstep (the gradients' all_reduce): a step of the job is its slowest rank's.
        w = [max(r["iteration_seconds"][k] for r in ranks) for k in range(len(ranks[0]["iteration_seconds"]))]
        c = [max(r["without_anti_pattern_seconds"][k] for r in ranks)
             for k in range(len(ranks[0]["without_anti_pattern_seconds"]))]
    else:
        r = json.load(open(os.path.join(out, "anti_pattern_steps.json")))
        w, c = r["with_seconds"], r["without_seconds"]
    return statistics.median(x - y for x, y in zip(w, c)) * 1e6, statistics.median(w) * 1e6


def capture(a, out):
    if a.case == "python":
        cmd = [PYTHON, os.path.join(ROOT, "capture", "python", "examples", "train_mlp.py"), out, "--device", a.device,
               "--batch", str(a.batch), "--hidden", str(a.hidden), "--dtype", a.dtype]
    else:
        cmd = launcher(a.ranks) + [
            f"{a.bin}/reprise", "capture", "--workload", "mlp", "--out", out, "--threads", "1", "--device",
            a.device, "--batch", str(a.batch), "--hidden", str(a.hidden), "--layers", str(a.layers), "--warmup", "6",
            "--steps", "15", "-q"]
    run(cmd + ["--anti-pattern", a.anti_pattern])


def measure(a, path):
    out = os.path.join(path, "measured.json")
    # The Python helper's op times come from steps run without an observer: their host gaps are the framework's,
    # re-spent on both sides (a sync's cost on a GPU is mostly the host-bound work after it no longer overlapping).
    host = ["--host-time", a.host_time or ("recorded" if a.case == "python" else "default")]
    run(launcher(a.ranks) + [
        f"{a.bin}/reprise", "analyze", path, "--measure", "--pairs", "5", "--iterations", "5", "--threads", "1",
        "--device", a.device, "--only", DETECTOR[a.anti_pattern], "--json", out, "-q"] + host)
    for m in json.load(open(out)).get("measured", []):
        if m["detector"] == DETECTOR[a.anti_pattern] and m["pairs"] > 0:
            return m
    return None


def spread(xs):
    return f"{statistics.median(xs):.0f} us (spread {min(xs):.0f} .. {max(xs):.0f})"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--case", choices=["cpp", "python"], default="cpp")
    ap.add_argument("--anti-pattern", choices=list(DETECTOR), default="casts")
    ap.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32",
                    help="python: the model's dtype (bfloat16: GEMMs on a GPU's tensor cores)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--pairs", type=int, default=7)
    ap.add_argument("--ranks", type=int, default=1, help="cpp: capture and measure on this many ranks (mpirun)")
    ap.add_argument("--batch", type=int, default=8192)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--layers", type=int, default=0, help="cpp: the mlp's layers (0: its default, 4)")
    ap.add_argument("--host-time", default=None,
                    help="analyze --measure's --host-time on both sides (default: recorded for the python case, the "
                         "device's default for cpp: none on a CPU)")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--work", default=None)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    if a.ranks > 1 and a.case != "cpp":
        ap.error("--ranks: the cpp case only (the Python helper's example runs one process)")
    if a.anti_pattern in ("pageable", "launches") and (a.case != "python" or not a.device.startswith("cuda")):
        ap.error(f"--anti-pattern {a.anti_pattern}: the python case on a GPU (--case python --device cuda)")
    if a.dtype != "float32" and a.case != "python":
        ap.error("--dtype: the python case only (the C++ mlp trains in float32)")
    os.environ["OMP_NUM_THREADS"] = "1"
    if a.case == "python" and a.device == "cpu":
        # The Python process otherwise hands freed activations back to the system and faults them in again every
        # step (3-5x its step on this CPU), which replay does not reproduce (docs/performance.md): trimming off, for
        # every process alike.
        os.environ.setdefault("MALLOC_MMAP_THRESHOLD_", "1073741824")
        os.environ.setdefault("MALLOC_TRIM_THRESHOLD_", "4294967296")
    work = a.work or tempfile.mkdtemp(prefix="reprise-measure-")
    rows, t0 = [], time.time()
    for k in range(a.pairs):
        path = os.path.join(work, f"capture-{k}")
        capture(a, path)
        real, with_us = real_in_process(a.case, path)
        m = measure(a, path)
        if m is None:
            print(f"pair {k}: {DETECTOR[a.anti_pattern]} found nothing to measure in {path}")
            return 1
        row = {"with_us": with_us, "without_us": with_us - real, "real_us": real, "measured_us": m["saving_us"],
               "estimated_us": m["estimated_us"], "replayed_original_us": m["original_us"],
               "replayed_fixed_us": m["fixed_us"], "host_time": m.get("host_time"),
               "resolved": m.get("resolved"), "interval_us": m.get("saving_interval_us")}
        rows.append(row)
        print(f"pair {k}: original {row['with_us']:.0f} us with {a.anti_pattern}, {row['without_us']:.0f} without: "
              f"real saving {row['real_us']:.0f} us; measured {row['measured_us']:.0f} us (replay "
              f"{row['replayed_original_us']:.0f} -> {row['replayed_fixed_us']:.0f}; "
              f"{'resolved' if row['resolved'] else 'within the noise'}), estimated {row['estimated_us']:.0f} us",
              flush=True)
    real = [r["real_us"] for r in rows]
    measured = [r["measured_us"] for r in rows]
    estimated = [r["estimated_us"] for r in rows]
    ratio = statistics.median(measured) / statistics.median(real) if statistics.median(real) != 0 else float("nan")
    print(f"{a.case} mlp batch {a.batch} hidden {a.hidden}, {a.anti_pattern} on {a.device} x {a.ranks} rank(s), "
          f"{a.pairs} pairs "
          f"[{time.time() - t0:.0f} s]:\n  real saving     {spread(real)}\n  measured saving {spread(measured)}\n"
          f"  estimated       {spread(estimated)}\n  measured / real {ratio:.3f} (bar: within 20%)\n"
          f"  resolved        {sum(bool(r['resolved']) for r in rows)} of {len(rows)} captures' savings (the rest "
          "within their replays' noise: the median's interval over analyze's pairs holds 0)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"case": a.case, "anti_pattern": a.anti_pattern, "device": a.device, "ranks": a.ranks,
                       "batch": a.batch,
                       "hidden": a.hidden, "pairs": rows, "measured_over_real": ratio}, f, indent=1)
    return 0 if 0.8 <= ratio <= 1.2 else 1


if __name__ == "__main__":
    sys.exit(main())
