"""A small torch classifier, trained well and trained poorly, for a study replicated until decided.

``deviate-replicate --trainer decided_study.py:good`` and ``...:poor --until-decided --against ...`` train a real
two-layer network on a fixed synthetic set (the launcher seeds torch per replica: initialisation and batch
order vary) and return its validation accuracy and loss. ``poor`` trains under a weight decay so strong that the
network ends near the majority class whatever its seed, so the sequential test decides within two looks.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F


def _train(lr: float, decay: float = 0.0, epochs: int = 6) -> dict[str, float]:
    data = torch.Generator().manual_seed(7)  # the same data in every replica: only the seeds differ
    x = torch.randn(256, 6, generator=data)
    y = ((x[:, 0] + 0.5 * x[:, 1]) > 0).long()
    model = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Linear(12, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, weight_decay=decay)
    for _ in range(epochs):
        for batch in torch.randperm(192).split(32):
            optimizer.zero_grad()
            F.cross_entropy(model(x[batch]), y[batch]).backward()
            optimizer.step()
    with torch.no_grad():
        logits = model(x[192:])
        return {
            "val_acc": float((logits.argmax(-1) == y[192:]).float().mean()),
            "val_loss": float(F.cross_entropy(logits, y[192:])),
            "train_loss": float(F.cross_entropy(model(x[:192]), y[:192])),
        }


def good() -> dict[str, float]:
    return _train(0.3)


def poor() -> dict[str, float]:
    return _train(0.3, decay=3.0)
