"""A small MLP training loop under reprise_capture: python3 train_mlp.py OUT_DIR, then reprise replay OUT_DIR."""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from reprise_capture import Capture  # noqa: E402


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: train_mlp.py OUT_DIR")
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024),
                                torch.nn.ReLU(), torch.nn.Linear(1024, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(64, 512), torch.randint(0, 10, (64,))
    # Steps 0-6 run uninstrumented (0 warms up, 1-6 are the original step time), 7-9 run under the autograd profiler
    # (the fastest gives the host times replay's --host-time re-spends), 10 is recorded.
    with Capture(sys.argv[1], skip_steps=10, record_steps=1) as cap:
        for _ in range(11):
            cap.step()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    print("wrote %s (%.2f ms per uninstrumented step)" % (cap.trace_path, 1e3 * cap.median_step_seconds()))


if __name__ == "__main__":
    main()
