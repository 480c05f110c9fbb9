"""A tiny torch training that records the CPU threads it ran with into ``<run_dir>/threads.json``.

``python thread_probe.py RUN_DIR``: a few steps of a linear model (so torch's thread pool is used), then
``torch.get_num_threads()`` and the thread variables of its environment.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch

VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TF_NUM_INTRAOP_THREADS", "DEVIATE_THREADS")


def main(run_dir: str) -> None:
    model = torch.nn.Linear(64, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(256, 64), torch.randn(256, 1)
    for step in range(5):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        print(f"step {step} loss {loss.item():.4f}")
    record = {"torch_threads": torch.get_num_threads(), "env": {name: os.environ.get(name) for name in VARIABLES}}
    (Path(run_dir) / "threads.json").write_text(json.dumps(record))


if __name__ == "__main__":
    main(sys.argv[1])
