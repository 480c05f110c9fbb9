"""The replicated unit of work of ``replicate_throughput.py`` for Lightning: a tiny MLP, 3 epochs on 64 samples.

Lightning and torch are imported at the top of this file on purpose: a warm-start template of
``deviate-replicate`` pre-imports the frameworks that the trainer's module imports at top level (found by
reading its imports), so this is the layout that lets replicas skip those imports.

    deviate-replicate --trainer benchmarks/throughput_lightning.py:tiny -n 8 --parallel 2

Example:
    >>> Tiny().net[0].in_features
    8
"""

from __future__ import annotations

from typing import Any

import lightning as L
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

__all__ = ["Tiny", "tiny"]


class Tiny(L.LightningModule):
    """8 -> 16 -> 2 MLP with dropout, SGD at learning rate 0.1."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 2))

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        x, y = batch
        loss = F.cross_entropy(self.net(x), y)
        self.log("train_loss", loss, on_epoch=True)
        return loss

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def tiny(seed: int = 0) -> dict[str, float]:
    """Train :class:`Tiny` for 3 epochs on 64 fixed samples (batch 16, one thread); return the last epoch's loss."""
    torch.set_num_threads(1)
    L.seed_everything(seed, workers=True, verbose=False)
    gen = torch.Generator().manual_seed(1234)
    x = torch.randn(64, 8, generator=gen)
    y = (x[:, 0] > 0).long()
    trainer = L.Trainer(
        max_epochs=3,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        accelerator="cpu",
    )
    trainer.fit(Tiny(), DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True))
    return {"train_loss": float(trainer.callback_metrics["train_loss"])}
