"""A small MLP training loop under reprise_capture: python3 train_mlp.py OUT_DIR, then reprise replay OUT_DIR.

  train_mlp.py OUT_DIR [--device cpu|cuda] [--dtype float32|bfloat16] [--batch B] [--hidden H]
               [--anti-pattern sync|casts|unfused|loop|unaligned|loader|pageable|launches] [--pairs N]

--anti-pattern builds one in, for `reprise analyze --measure` to be checked against (bench/analyze_measure.py): sync
reads the loss on the host (loss.item()) between forward and backward; casts round-trips each hidden activation
through bf16; unfused uses a tanh GELU written out as eight elementwise ops where the step without it calls
F.gelu(h, approximate="tanh") (each in place of the ReLUs); loop steps with torch.optim.Adam(foreach=False), one
parameter at a time, where the step without it uses Adam(foreach=True); unaligned trains a model of hidden size H - 1
(off a multiple of 8, with 16 classes so that only the hidden size is) where the step without it trains one of
hidden size H (a multiple of 8; --dtype bfloat16 puts the GEMMs on tensor cores, which want aligned sizes); loader
takes each step's batch from a torch DataLoader (no workers) whose samples are made one at a time in Python, where
the step without it trains on a batch made beforehand (what prefetching workers give a step); pageable (--device
cuda) copies each step's batch to the GPU from pageable host memory, blocking, where the step without it copies the
same batch from pinned memory with non_blocking=True (DataLoader(pin_memory=True)); launches (--device cuda, small
sizes: launch-bound) runs the step eagerly, an op and a launch at a time, where the step without it is the same step
captured once in a CUDA graph and replayed (torch.cuda.graph, whole-network capture). Before the captured
steps, N pairs of steps with and without it run in alternating order, timed
(OUT_DIR/anti_pattern_steps.json): the real saving, measured in one process.
"""
import argparse
import json
import math
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from reprise_capture import Capture  # noqa: E402


def main():
    ap = argparse.ArgumentParser(usage=__doc__)
    ap.add_argument("out_dir")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    ap.add_argument("--anti-pattern", choices=["sync", "casts", "unfused", "loop", "unaligned", "loader", "pageable",
                                                "launches"],
                    default=None)
    ap.add_argument("--pairs", type=int, default=20, help="steps with and without the anti-pattern, timed first")
    a = ap.parse_args()
    if a.anti_pattern == "unaligned" and a.hidden % 8:
        ap.error("--anti-pattern unaligned: --hidden must be a multiple of 8 (the step without it)")
    if a.anti_pattern == "pageable" and not a.device.startswith("cuda"):
        ap.error("--anti-pattern pageable: --device cuda (host memory is pinned for copies to a GPU)")
    if a.anti_pattern == "launches" and not a.device.startswith("cuda"):
        ap.error("--anti-pattern launches: --device cuda (the step without it is a CUDA graph)")
    torch.manual_seed(0)
    torch.set_num_threads(1)
    dev = torch.device(a.device)
    dtype = getattr(torch, a.dtype)
    classes = 16 if a.anti_pattern == "unaligned" else 10

    def make_model(hidden):
        layers = [torch.nn.Linear(512, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, hidden), torch.nn.ReLU()]
        head = torch.nn.Linear(hidden, classes)
        return layers, head, torch.nn.Sequential(*layers, head).to(dev, dtype)

    # The model of each side (with the anti-pattern: True): one model but for unaligned.
    models = {True: make_model(a.hidden - 1 if a.anti_pattern == "unaligned" else a.hidden)}
    models[False] = make_model(a.hidden) if a.anti_pattern == "unaligned" else models[True]
    if a.anti_pattern == "loop":  # two Adams over the same parameters: one tensor at a time, and foreach
        params = list(models[True][2].parameters())
        opts = {True: torch.optim.Adam(params, lr=1e-3, foreach=False),
                False: torch.optim.Adam(params, lr=1e-3, foreach=True)}
    else:
        opts = {side: torch.optim.SGD(models[side][2].parameters(), lr=0.01) for side in (True, False)}
    x = torch.randn(a.batch, 512, device=dev, dtype=dtype)
    y = torch.randint(0, classes, (a.batch,), device=dev)
    if a.anti_pattern == "loader":
        class Samples(torch.utils.data.Dataset):
            # Each sample made on the host in Python, as a decoding or augmenting loader makes it: the step waits.
            def __len__(self):
                return 1 << 30

            def __getitem__(self, i):
                return torch.randn(512, generator=torch.Generator().manual_seed(i)), i % classes

        loader = iter(torch.utils.data.DataLoader(Samples(), batch_size=a.batch, num_workers=0))

    if a.anti_pattern == "pageable":  # the batch on the host, in pageable memory and in pinned memory
        host = {True: (x.cpu(), y.cpu())}
        host[False] = (host[True][0].pin_memory(), host[True][1].pin_memory())

    def batch(with_anti_pattern):
        if a.anti_pattern == "pageable":
            xb, yb = host[with_anti_pattern]
            return xb.to(dev, non_blocking=not with_anti_pattern), yb.to(dev, non_blocking=not with_anti_pattern)
        if not (with_anti_pattern and a.anti_pattern == "loader"):
            return x, y
        xb, yb = next(loader)
        return xb.to(dev, dtype), yb.to(dev)

    def unfused_gelu(h):
        inner = (h + h.pow(3) * 0.044715) * math.sqrt(2.0 / math.pi)
        return h * 0.5 * (inner.tanh() + 1)

    def forward(with_anti_pattern, h):
        layers, head, _ = models[with_anti_pattern]
        for m in layers:
            if a.anti_pattern == "unfused" and isinstance(m, torch.nn.ReLU):
                h = unfused_gelu(h) if with_anti_pattern else torch.nn.functional.gelu(h, approximate="tanh")
                continue
            h = m(h)
            if with_anti_pattern and a.anti_pattern == "casts" and isinstance(m, torch.nn.ReLU):
                h = h.to(torch.bfloat16 if dtype == torch.float32 else torch.float32).to(dtype)
        return head(h)

    def step(with_anti_pattern=True):
        xb, yb = batch(with_anti_pattern)
        loss = torch.nn.functional.cross_entropy(forward(with_anti_pattern, xb), yb)
        if with_anti_pattern and a.anti_pattern == "sync" and math.isnan(loss.item()):
            sys.exit("the loss is NaN")
        opt = opts[with_anti_pattern]
        opt.zero_grad()
        loss.backward()
        opt.step()

    if a.anti_pattern == "launches":
        # The step without it: the same step captured in a CUDA graph (warmed up on a side stream, its gradients
        # None before the capture so that the graph's backward makes them), replayed on the same parameters.
        graphed_step = step

        def capture_graph():
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(3):
                    graphed_step(False)
            torch.cuda.current_stream().wait_stream(side)
            opts[False].zero_grad(set_to_none=True)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                loss = torch.nn.functional.cross_entropy(forward(False, x), y)
                loss.backward()
                opts[False].step()
            return graph

        graph = capture_graph()

        def step(with_anti_pattern=True):  # noqa: F811
            if with_anti_pattern:
                graphed_step(True)
            else:
                graph.replay()

    if a.anti_pattern:
        # The real saving, measured in this process: steps with and without the anti-pattern, alternating.
        times = {"with": [], "without": []}
        for k in range(2 + 2 * a.pairs):
            for side in (["with", "without"] if k % 2 == 0 else ["without", "with"]):
                if dev.type == "cuda":
                    torch.cuda.synchronize()
                t0 = time.perf_counter()
                step(side == "with")
                if dev.type == "cuda":
                    torch.cuda.synchronize()
                if k >= 2:  # two pairs warm up
                    times[side].append(time.perf_counter() - t0)
        os.makedirs(a.out_dir, exist_ok=True)
        with open(os.path.join(a.out_dir, "anti_pattern_steps.json"), "w") as f:
            json.dump({"anti_pattern": a.anti_pattern, "with_seconds": times["with"],
                       "without_seconds": times["without"]}, f)

    # Steps 0-6 run uninstrumented (0 warms up, 1-6 are the original step time), 7-9 run under the autograd profiler
    # (the fastest gives the host times replay's --host-time re-spends), 10 is recorded.
    with Capture(a.out_dir, skip_steps=10, record_steps=1) as cap:
        for _ in range(11):
            cap.step()
            step()
    print("wrote %s (%.2f ms per uninstrumented step)" % (cap.trace_path, 1e3 * cap.median_step_seconds()))


if __name__ == "__main__":
    main()
