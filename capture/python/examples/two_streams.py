"""Compute on two CUDA streams under reprise_capture (the GPU streams check of scripts/gpu-check.sh):
python3 two_streams.py OUT_DIR, then reprise replay OUT_DIR. Each step runs two independent GEMM chains, one on the
current stream and one on a side stream, and joins them: the side stream waits for its input, the current stream
for the side stream's result, as a model that overlaps two branches does."""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from reprise_capture import Capture  # noqa: E402


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: two_streams.py OUT_DIR")
    if not torch.cuda.is_available():
        sys.exit("two_streams.py: needs a CUDA device")
    torch.manual_seed(0)
    dev = torch.device("cuda:0")
    side = torch.cuda.Stream(dev)
    a, b = torch.randn(2048, 2048, device=dev), torch.randn(2048, 2048, device=dev)
    with Capture(sys.argv[1], skip_steps=3, record_steps=1) as cap:
        for _ in range(4):
            cap.step()
            x = a @ b
            side.wait_stream(torch.cuda.current_stream(dev))
            with torch.cuda.stream(side):
                y = torch.relu(x @ b)
                y = y @ b
            z = torch.tanh(x @ a)
            torch.cuda.current_stream(dev).wait_stream(side)
            out = z + y
            out.sum().item()
    print("wrote %s (%.2f ms per uninstrumented step)" % (cap.trace_path, 1e3 * cap.median_step_seconds()))


if __name__ == "__main__":
    main()
