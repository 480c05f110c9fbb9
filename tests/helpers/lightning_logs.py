"""Real Lightning runs that write TensorBoard and CSV logs, for the import tests (a tiny regression, CPU).

``train_runs(root, lrs, seeds)`` trains one tiny model per (lr, seed) with both ``TensorBoardLogger`` and
``CSVLogger`` (``root/tb/version_N``, ``root/csv/version_N``, each with ``hparams.yaml``) and returns, per run,
its hparams and the last ``val_loss`` it logged, which the tests compare with what the import stored.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class TinyRegression(L.LightningModule):
    def __init__(self, lr: float, seed: int) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.layer = nn.Linear(4, 1)
        self.last_val: float | None = None

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = nn.functional.mse_loss(self.layer(x), y)
        self.log("train_loss", loss, on_step=True, on_epoch=True)
        return loss

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        loss = nn.functional.mse_loss(self.layer(x), y)
        self.log("val_loss", loss, on_epoch=True)

    def on_validation_epoch_end(self) -> None:
        self.last_val = float(self.trainer.callback_metrics["val_loss"])

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)


def _data(seed: int) -> tuple[DataLoader, DataLoader]:
    generator = torch.Generator().manual_seed(1234)
    x = torch.randn(64, 4, generator=generator)
    y = x.sum(dim=1, keepdim=True) + 0.1 * torch.randn(64, 1, generator=generator)
    train = DataLoader(
        TensorDataset(x[:48], y[:48]), batch_size=8, shuffle=True, generator=torch.Generator().manual_seed(seed)
    )
    return train, DataLoader(TensorDataset(x[48:], y[48:]), batch_size=16)


def train_runs(root: Path, lrs: list[float], seeds: list[int], epochs: int = 2) -> list[dict[str, Any]]:
    """Train one run per (lr, seed); return ``{"lr", "seed", "version", "val_loss"}`` per run, in order."""
    done = []
    for lr in lrs:
        for seed in seeds:
            L.seed_everything(seed, workers=True, verbose=False)
            model = TinyRegression(lr, seed)
            tb = TensorBoardLogger(str(root), name="tb")  # with its hp_metric placeholder, as users have it
            csv = CSVLogger(str(root), name="csv")
            trainer = L.Trainer(
                max_epochs=epochs,
                logger=[tb, csv],
                accelerator="cpu",
                devices=1,
                enable_checkpointing=False,
                enable_progress_bar=False,
                enable_model_summary=False,
                log_every_n_steps=1,
            )
            train, val = _data(seed)
            trainer.fit(model, train, val)
            done.append({"lr": lr, "seed": seed, "version": tb.version, "val_loss": model.last_val})
    return done
