"""A script as users write them: argparse, its own ``L.seed_everything(42)``, no deviate_cb import, no ``forward``.

``--ddp`` trains on two CPU processes (Lightning re-executes this script for rank 1).
"""

from __future__ import annotations

import argparse
import os
import sys

import lightning as L
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=42)
parser.add_argument("--epochs", type=int, default=1)
parser.add_argument("--ddp", action="store_true")
args = parser.parse_args()
L.seed_everything(args.seed)


class Tiny(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 2))

    def training_step(self, batch, batch_idx):
        loss = F.cross_entropy(self.net(batch[0]), batch[1])
        self.log("train_loss", loss, on_epoch=True, sync_dist=args.ddp)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


gen = torch.Generator().manual_seed(1234)  # a fixed data set: the project's explicit generator stays untouched
x = torch.randn(64, 8, generator=gen)
y = (x.sum(dim=1) > 0).long()
print(f"rank={os.environ.get('LOCAL_RANK', '0')} initial_seed={torch.initial_seed()}", file=sys.stderr)
trainer = L.Trainer(
    max_epochs=args.epochs,
    enable_progress_bar=False,
    enable_model_summary=False,
    accelerator="cpu",
    **({"devices": 2, "strategy": "ddp"} if args.ddp else {"devices": 1}),
)
trainer.fit(Tiny(), DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True))
print(f"final: weight_sum={sum(p.sum().item() for p in trainer.model.parameters()):.10f}")
