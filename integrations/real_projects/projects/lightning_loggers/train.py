"""A plain Lightning script that logs with its own TensorBoardLogger and CSVLogger, as the Lightning docs show.

    python train.py
    python train.py --version 0

``TensorBoardLogger("tb_logs")`` and ``CSVLogger("csv_logs")`` write ``tb_logs/lightning_logs/<version>/`` and
``csv_logs/lightning_logs/<version>/`` in the working directory; without ``--version`` Lightning numbers the
versions itself (``version_0``, ``version_1``, ...: the next free folder when the logger is first asked). The
model is tiny and the data set fixed (its own generator); weight initialisation, batch order and dropout follow
the global seed.
"""

from __future__ import annotations

import argparse

import lightning as L
import torch
from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

N_FEATURES = 8


class Model(L.LightningModule):
    def __init__(self, hidden: int = 16, lr: float = 0.05) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(nn.Linear(N_FEATURES, hidden), nn.ReLU(), nn.Dropout(0.3), nn.Linear(hidden, 2))

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
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr, momentum=0.9)


def loaders() -> tuple[DataLoader, DataLoader]:
    gen = torch.Generator().manual_seed(0)  # the data set is fixed: its own generator
    labels = torch.randint(0, 2, (128,), generator=gen)
    x = torch.randn(128, N_FEATURES, generator=gen) + (labels[:, None].float() * 2 - 1) * 0.6
    train, val = TensorDataset(x[:96], labels[:96]), TensorDataset(x[96:], labels[96:])
    return DataLoader(train, batch_size=32, shuffle=True), DataLoader(val, batch_size=32)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--version", type=int, default=None, help="the loggers' version (default: the next free)")
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()
    L.seed_everything(42)
    loggers = [TensorBoardLogger("tb_logs", version=args.version), CSVLogger("csv_logs", version=args.version)]
    trainer = L.Trainer(
        max_epochs=args.epochs,
        logger=loggers,
        log_every_n_steps=1,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        accelerator="cpu",
    )
    train, val = loaders()
    trainer.fit(Model(), train, val)
    print(f"logged to {trainer.loggers[0].log_dir} and {trainer.loggers[1].log_dir}")


if __name__ == "__main__":
    main()
