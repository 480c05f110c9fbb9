"""Tiny real Lightning modules for the callback tests (CPU, a few hundred samples, a second per fit)."""

from __future__ import annotations

from typing import Any, Optional

import lightning as L
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset


def data(n: int = 96, seed: int = 0) -> TensorDataset:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 8, generator=gen)
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).long()
    return TensorDataset(x, y)


def loader(n: int = 96, batch_size: int = 16, shuffle: bool = True) -> DataLoader:
    return DataLoader(data(n), batch_size=batch_size, shuffle=shuffle)


class TinyModule(L.LightningModule):
    """Logs train_loss (step+epoch), val_loss/val_acc (epoch), test_acc, and optional extras.

    Args:
        nan_at_step: Log ``weird`` = NaN at this global step and +Inf at the next (on_step).
        fail_at_epoch: Raise ``RuntimeError`` in the first training step of this epoch.
        epoch_end_metric: Also log ``train_epoch_hook`` from the module's own ``on_train_epoch_end``
            and ``val_epoch_hook`` from ``on_validation_epoch_end``.
        val_step_metric: Also log ``val_batch_loss`` with ``on_step=True`` in validation.
    """

    def __init__(
        self,
        nan_at_step: Optional[int] = None,
        fail_at_epoch: Optional[int] = None,
        epoch_end_metric: bool = False,
        val_step_metric: bool = False,
    ) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 2))
        self.nan_at_step = nan_at_step
        self.fail_at_epoch = fail_at_epoch
        self.epoch_end_metric = epoch_end_metric
        self.val_step_metric = val_step_metric

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        if self.fail_at_epoch is not None and self.current_epoch == self.fail_at_epoch:
            raise RuntimeError("failing on purpose")
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        self.log("train_loss", loss, on_step=True, on_epoch=True)
        if self.nan_at_step is not None and self.global_step in (self.nan_at_step, self.nan_at_step + 1):
            bad = float("nan") if self.global_step == self.nan_at_step else float("inf")
            self.log("weird", torch.tensor(bad), on_step=True, on_epoch=False)
        return loss

    def on_train_epoch_end(self) -> None:
        if self.epoch_end_metric:
            self.log("train_epoch_hook", float(self.current_epoch) + 0.5)

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        logits = self(x)
        loss = F.cross_entropy(logits, y)
        self.log("val_loss", loss)
        self.log("val_acc", (logits.argmax(1) == y).float().mean())
        if self.val_step_metric:
            self.log("val_batch_loss", loss, on_step=True, on_epoch=False)

    def on_validation_epoch_end(self) -> None:
        if self.epoch_end_metric:
            self.log("val_epoch_hook", float(self.current_epoch) + 0.25)

    def test_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        self.log("test_acc", (self(x).argmax(1) == y).float().mean())

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def trainer(callbacks: list, max_epochs: int = 2, **kwargs: Any) -> L.Trainer:
    options: dict[str, Any] = dict(
        max_epochs=max_epochs,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        accelerator="cpu",
        devices=1,
    )
    options.update(kwargs)
    return L.Trainer(callbacks=callbacks, **options)
