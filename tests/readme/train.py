"""The ``train.py`` the docs pages' commands name: a tiny Lightning classifier, as a script or ``train.py:main``.

tests/test_readme_blocks.py copies it into the working directory where it runs the docs pages' blocks, so that
``deviate-replicate -n 8 --out runs/ -- python train.py --epochs 10`` and ``deviate audit --trainer
train.py:main`` train a real model (a few seconds each) instead of naming a file that is not there.
"""

from __future__ import annotations

import argparse
import sys

import lightning as L
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

__all__ = ["MLP", "main"]


def _data(n: int, seed: int) -> TensorDataset:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 8, generator=gen)
    y = (x[:, 0] + x[:, 1] + 0.8 * torch.randn(n, generator=gen) > 0).long()
    return TensorDataset(x, y)


class MLP(L.LightningModule):
    """An 8-16-2 MLP with dropout; logs ``train_loss``, ``val_loss`` and ``val_acc``."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        x, y = batch
        logits = self(x)
        self.log("val_loss", F.cross_entropy(logits, y))
        self.log("val_acc", (logits.argmax(dim=1) == y).float().mean())

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def main(argv: list[str] | None = None) -> None:
    """Train for ``--epochs`` (default 3) epochs of 96 samples, validating on 200."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    trainer = L.Trainer(
        max_epochs=args.epochs,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        accelerator="cpu",
    )
    trainer.fit(MLP(), DataLoader(_data(96, 0), batch_size=16, shuffle=True), DataLoader(_data(200, 1), batch_size=200))


if __name__ == "__main__":
    main()
