"""Captures one training step of a small MLP under each of torch.optim's single-tensor optimizers (foreach=False),
for tests/python/foreach_optimizers.sh: python3 capture_optimizers.py SOURCE_DIR OUT_DIR NAME..."""
import os
import sys

import torch

sys.path.insert(0, os.path.join(sys.argv[1], "capture", "python"))
from reprise_capture import Capture  # noqa: E402

OPTIMIZERS = {
    "sgd_momentum": lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.9, foreach=False),
    "sgd_nesterov_wd": lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.9, nesterov=True, weight_decay=1e-4,
                                                 foreach=False),
    "adam": lambda p: torch.optim.Adam(p, lr=1e-3, foreach=False),
    "adam_wd": lambda p: torch.optim.Adam(p, lr=1e-3, weight_decay=1e-4, foreach=False),
    "adam_amsgrad": lambda p: torch.optim.Adam(p, lr=1e-3, amsgrad=True, foreach=False),
    "adamw": lambda p: torch.optim.AdamW(p, lr=1e-3, foreach=False),
    "rmsprop": lambda p: torch.optim.RMSprop(p, lr=1e-3, foreach=False),
    "adagrad": lambda p: torch.optim.Adagrad(p, lr=1e-2, foreach=False),
}


def main():
    out = sys.argv[2]
    torch.set_num_threads(1)
    for name in sys.argv[3:] or OPTIMIZERS:
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
        opt = OPTIMIZERS[name](model.parameters())
        x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
        with Capture(os.path.join(out, name), skip_steps=3, record_steps=1) as cap:
            for _ in range(4):
                cap.step()
                loss = torch.nn.functional.cross_entropy(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()


if __name__ == "__main__":
    main()
