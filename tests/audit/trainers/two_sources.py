"""Tiny Lightning trainings with two nondeterministic modules at the same training step, for the sources of
``deviate audit`` (``tests/audit/test_audit_sources.py``).

Noise comes from fresh operating-system entropy (``os.urandom``), which no seed reaches. The model has two
branches, ``net.left`` and ``net.right``, each ``Linear -> ReLU(inplace=True) -> noise``, and a head:

- ``two_branches``: both branches read the batch and the head reads both: ``net.left.noise`` and
  ``net.right.noise`` are independent sources (each one's inputs agree);
- ``in_a_row``: ``net.right`` reads ``net.left``'s output, so ``net.right.noise``'s inputs already differ: only
  ``net.left.noise`` is a source, the other is hidden in its cascade.
"""

from __future__ import annotations

import os
from typing import Any

import lightning as L
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset


class Noise(nn.Module):
    """Adds unseeded noise while training."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training:
            return x
        generator = torch.Generator().manual_seed(int.from_bytes(os.urandom(7), "little"))
        return x + 1e-3 * torch.randn(x.shape, generator=generator)


def _branch(width: int) -> nn.Sequential:
    branch = nn.Sequential()
    branch.add_module("linear", nn.Linear(width, width))
    branch.add_module("relu", nn.ReLU(inplace=True))
    branch.add_module("noise", Noise())
    return branch


class Branches(nn.Module):
    def __init__(self, in_a_row: bool) -> None:
        super().__init__()
        self.in_a_row = in_a_row
        self.left, self.right, self.head = _branch(8), _branch(8), nn.Linear(16, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        left = self.left(x)
        right = self.right(left if self.in_a_row else x)
        return self.head(torch.cat([left, right], dim=1))


class Model(L.LightningModule):
    def __init__(self, in_a_row: bool) -> None:
        super().__init__()
        self.net = Branches(in_a_row)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        return F.cross_entropy(self.net(x), y)

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def _fit(in_a_row: bool) -> dict[str, float]:
    gen = torch.Generator().manual_seed(7)
    x = torch.randn(32, 8, generator=gen)
    trainer = L.Trainer(max_epochs=1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, accelerator="cpu")  # fmt: skip
    trainer.fit(Model(in_a_row), DataLoader(TensorDataset(x, (x[:, 0] > 0).long()), batch_size=16))
    return {}


def two_branches() -> dict[str, float]:
    return _fit(in_a_row=False)


def in_a_row() -> dict[str, float]:
    return _fit(in_a_row=True)
