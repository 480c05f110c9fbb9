"""A plain PyTorch training loop (no Lightning): initialisation, data order and dropout all draw from torch's
global RNG, which the replica bootstrap seeds. Logs a loss per step through the store and returns final metrics.
"""

from __future__ import annotations

import time

import torch
from torch import nn

from deviate_cb.store.run_directory import RunDirectory


def train(ctx):
    torch.set_num_threads(1)
    x = torch.randn(128, 8)
    y = (x[:, :1] - 0.5 * x[:, 1:2] > 0).float()
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.2)
    losses = []
    for _ in range(30):
        batch = torch.randperm(128)[:32]
        loss = nn.functional.binary_cross_entropy_with_logits(model(x[batch]), y[batch])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    n = len(losses)
    RunDirectory(ctx.run_dir).metrics().append(
        {
            "step": list(range(1, n + 1)),
            "epoch": [0] * n,
            "stage": ["train"] * n,
            "scope": ["step"] * n,
            "name": ["train_loss"] * n,
            "value": [float(v) for v in losses],
            "wall_time": [time.time()] * n,
        }
    )
    model.eval()
    with torch.no_grad():
        accuracy = ((model(x) > 0).float() == y).float().mean()
    return {"final_loss": losses[-1], "accuracy": accuracy, "weight_sum": model[0].weight.sum()}
