"""A LightningCLI project: the model and data module are configured from the command line and a YAML file.

    python main.py fit --config config.yaml
    python main.py fit --config config.yaml --trainer.max_epochs 1 --model.hidden 8

``config.yaml`` sets ``seed_everything: 42``, so LightningCLI seeds the run itself before building the model.
Logs and the saved config go to Lightning's default root directory (``lightning_logs/``). The data set is fixed
(its own generator); weight initialisation, batch order and dropout follow the global seed.
"""

from __future__ import annotations

import lightning as L
import torch
from lightning.pytorch.cli import LightningCLI
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

N_FEATURES = 8


class Model(L.LightningModule):
    def __init__(self, hidden: int = 32, dropout: float = 0.3, lr: float = 0.05) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(nn.Linear(N_FEATURES, hidden), nn.ReLU(), nn.Dropout(dropout), nn.Linear(hidden, 2))

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


class DataModule(L.LightningDataModule):
    def __init__(self, n_samples: int = 256, batch_size: int = 32) -> None:
        super().__init__()
        self.n_samples = n_samples
        self.batch_size = batch_size

    def setup(self, stage: str) -> None:
        gen = torch.Generator().manual_seed(0)  # the data set is fixed: its own generator
        labels = torch.randint(0, 2, (self.n_samples,), generator=gen)
        x = torch.randn(self.n_samples, N_FEATURES, generator=gen) + (labels[:, None].float() * 2 - 1) * 0.6
        cut = self.n_samples * 3 // 4
        self.train_set = TensorDataset(x[:cut], labels[:cut])
        self.val_set = TensorDataset(x[cut:], labels[cut:])

    def train_dataloader(self) -> DataLoader:
        return DataLoader(self.train_set, batch_size=self.batch_size, shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.val_set, batch_size=self.batch_size)


def main() -> None:
    LightningCLI(Model, DataModule)


if __name__ == "__main__":
    main()
