"""What the Lightning snippets of the docs pages take as given: ``model``, ``train_loader`` and ``val_loader``.

tests/test_readme_blocks.py runs this file before a ```python block marked
``<!-- readme-check: given tests/readme/lightning_given.py (...) -->``: a tiny real classifier and its loaders,
whose batches are dicts with a ``sex`` field (the sub-group the stability snippet names).
"""

from __future__ import annotations

import lightning as L
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader

__all__ = ["Tiny", "model", "train_loader", "val_loader"]


def _samples(n: int, seed: int) -> list[dict[str, torch.Tensor]]:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 8, generator=gen)
    y = (x[:, 0] + 0.5 * torch.randn(n, generator=gen) > 0).long()
    sex = torch.randint(0, 2, (n,), generator=gen)
    return [{"x": x[i], "y": y[i], "sex": sex[i]} for i in range(n)]


class Tiny(L.LightningModule):
    """An 8-16-2 MLP on dict batches; logs ``train_loss``, ``val_loss`` and ``val_acc``."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.net(batch["x"])

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        loss = F.cross_entropy(self(batch), batch["y"])
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        logits = self(batch)
        self.log("val_loss", F.cross_entropy(logits, batch["y"]))
        self.log("val_acc", (logits.argmax(dim=1) == batch["y"]).float().mean())

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


model = Tiny()
train_loader = DataLoader(_samples(64, 0), batch_size=16, shuffle=True)
val_loader = DataLoader(_samples(32, 1), batch_size=32)
