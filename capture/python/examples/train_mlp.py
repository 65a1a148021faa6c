"""A small MLP training loop under reprise_capture: python3 train_mlp.py OUT_DIR, then reprise replay OUT_DIR.

  train_mlp.py OUT_DIR [--device cpu|cuda] [--batch B] [--hidden H] [--anti-pattern sync|casts]

--anti-pattern builds one in, for `reprise analyze --measure` to be checked against (bench/analyze_measure.py): sync
reads the loss on the host (loss.item()) between forward and backward; casts round-trips each hidden activation
through bf16.
"""
import argparse
import math
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from reprise_capture import Capture  # noqa: E402


def main():
    ap = argparse.ArgumentParser(usage=__doc__)
    ap.add_argument("out_dir")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--anti-pattern", choices=["sync", "casts"], default=None)
    a = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    dev = torch.device(a.device)
    layers = [torch.nn.Linear(512, a.hidden), torch.nn.ReLU(), torch.nn.Linear(a.hidden, a.hidden), torch.nn.ReLU()]
    head = torch.nn.Linear(a.hidden, 10)
    model = torch.nn.Sequential(*layers, head).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(a.batch, 512, device=dev), torch.randint(0, 10, (a.batch,), device=dev)

    def forward():
        h = x
        for m in layers:
            h = m(h)
            if a.anti_pattern == "casts" and isinstance(m, torch.nn.ReLU):
                h = h.to(torch.bfloat16).to(torch.float32)
        return head(h)

    # Steps 0-6 run uninstrumented (0 warms up, 1-6 are the original step time), 7-9 run under the autograd profiler
    # (the fastest gives the host times replay's --host-time re-spends), 10 is recorded.
    with Capture(a.out_dir, skip_steps=10, record_steps=1) as cap:
        for _ in range(11):
            cap.step()
            loss = torch.nn.functional.cross_entropy(forward(), y)
            if a.anti_pattern == "sync" and math.isnan(loss.item()):
                sys.exit("the loss is NaN")
            opt.zero_grad()
            loss.backward()
            opt.step()
    print("wrote %s (%.2f ms per uninstrumented step)" % (cap.trace_path, 1e3 * cap.median_step_seconds()))


if __name__ == "__main__":
    main()
