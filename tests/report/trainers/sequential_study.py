"""A tiny Lightning classifier trained at two learning rates, for a study replicated until decided: ``fast``
learns in its 200 steps, ``slow`` barely moves, so a sequential test on ``val_loss`` decides at its first look.
Every step's ``train_loss`` is recorded: with 3 replicas per group the curves are too many marks for SVG, so the
HTML pages draw them as PNG. The ``slow`` runs also log ``val_error``: a metric of interest only one experiment
has."""

from __future__ import annotations

from typing import Any

import lightning as L
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

from deviate_cb.lightning import DeviateCallback


class Tiny(L.LightningModule):
    def __init__(self, lr: float, error: bool) -> None:
        super().__init__()
        self.lr, self.error = lr, error
        self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        self.log("train_loss", loss, on_step=True, on_epoch=False)
        return loss

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        logits = self(x)
        self.log("val_loss", F.cross_entropy(logits, y))
        self.log("val_acc", (logits.argmax(-1) == y).float().mean())
        if self.error:
            self.log("val_error", (logits.argmax(-1) != y).float().mean())

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=self.lr)


def _train(lr: float, error: bool = False) -> None:
    gen = torch.Generator().manual_seed(1234)
    x = torch.randn(1856, 8, generator=gen)
    y = (x[:, 0] > 0).long() + (x[:, 1] > 0.5).long()
    train = DataLoader(TensorDataset(x[:1600], y[:1600]), batch_size=8, shuffle=True)
    val = DataLoader(TensorDataset(x[1600:], y[1600:]), batch_size=64)
    trainer = L.Trainer(max_epochs=1, callbacks=[DeviateCallback()], logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, accelerator="cpu",
                        num_sanity_val_steps=0)  # fmt: skip
    trainer.fit(Tiny(lr, error), train, val)


def fast() -> None:
    _train(0.3)


def slow() -> None:
    _train(0.001, error=True)
