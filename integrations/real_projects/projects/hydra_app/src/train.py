"""A Hydra app training a Lightning classifier, the way template-based projects do.

    python src/train.py                                  # configs/train.yaml: model=mlp, trainer=default
    python src/train.py model=small trainer.max_epochs=2

It seeds itself (``L.seed_everything(cfg.seed)``), writes checkpoints and CSV logs under Hydra's output
directory, and its LightningModule has no ``forward`` (the steps call ``self.net``). The data set is fixed (its
own generator); weight initialisation, batch order and dropout follow the global seed.
"""

from __future__ import annotations

import os

import hydra
import lightning as L
import torch
from hydra.core.hydra_config import HydraConfig
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.loggers import CSVLogger
from omegaconf import DictConfig
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

N_FEATURES = 8


def make_data(n: int) -> tuple[TensorDataset, TensorDataset]:
    """Two noisy Gaussian blobs, split 3:1; the same on every run."""
    gen = torch.Generator().manual_seed(0)
    labels = torch.randint(0, 2, (n,), generator=gen)
    x = torch.randn(n, N_FEATURES, generator=gen) + (labels[:, None].float() * 2 - 1) * 0.6
    cut = n * 3 // 4
    return TensorDataset(x[:cut], labels[:cut]), TensorDataset(x[cut:], labels[cut:])


class Classifier(L.LightningModule):
    def __init__(self, hidden: int, dropout: float, lr: float) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(nn.Linear(N_FEATURES, hidden), nn.ReLU(), nn.Dropout(dropout), nn.Linear(hidden, 2))

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = F.cross_entropy(self.net(x), y)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        x, y = batch
        logits = self.net(x)
        self.log("val_loss", F.cross_entropy(logits, y))
        self.log("val_acc", (logits.argmax(dim=1) == y).float().mean())

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr, momentum=0.9)


@hydra.main(version_base="1.3", config_path="../configs", config_name="train")
def main(cfg: DictConfig) -> float:
    L.seed_everything(cfg.seed)
    output_dir = HydraConfig.get().runtime.output_dir
    train, val = make_data(cfg.data.n_samples)
    model = Classifier(**cfg.model)
    checkpoint = ModelCheckpoint(dirpath=os.path.join(output_dir, "checkpoints"), monitor="val_acc", mode="max")
    trainer = L.Trainer(**cfg.trainer, callbacks=[checkpoint], logger=CSVLogger(save_dir=output_dir))
    trainer.fit(
        model,
        DataLoader(train, batch_size=cfg.data.batch_size, shuffle=True),
        DataLoader(val, batch_size=cfg.data.batch_size),
    )
    val_acc = float(trainer.callback_metrics["val_acc"])
    print(f"val_acc={val_acc:.6f} output_dir={output_dir}")
    return val_acc


if __name__ == "__main__":
    main()
