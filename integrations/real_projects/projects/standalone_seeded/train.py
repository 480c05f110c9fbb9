"""A Lightning script that uses deviate-cb's callback itself (the one project here that imports deviate-cb): it
seeds the run with ``L.seed_everything(42)`` and records it with ``DeviateCallback(metrics=["val_*"])``.

    python train.py --epochs 2      # standalone: deviate_runs/experiment=train/variant=standalone/replica=0/

Run alone, the callback records the seed the script set (run.json ``seed`` 42, ``seed_source``) under an
experiment named after the script; replicated (``deviate-replicate -n 4 -- python train.py``) the same callback
records each replica, and the seeding takeover gives each ``algo`` replica its own seed. Only the validation
metrics are recorded (``metrics=["val_*"]``). The data set is fixed (its own generator); the weight
initialisation, the batch order and dropout follow the global seed.
"""

from __future__ import annotations

import argparse

import lightning as L
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

from deviate_cb.lightning import DeviateCallback


class Classifier(L.LightningModule):
    def __init__(self, hidden: int = 32, lr: float = 0.05) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(nn.Linear(8, hidden), nn.ReLU(), nn.Dropout(0.3), nn.Linear(hidden, 2))

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


def loaders(batch_size: int = 32) -> tuple[DataLoader, DataLoader]:
    gen = torch.Generator().manual_seed(0)  # the data set is fixed: its own generator
    labels = torch.randint(0, 2, (256,), generator=gen)
    x = torch.randn(256, 8, generator=gen) + (labels[:, None].float() * 2 - 1) * 0.6
    train = TensorDataset(x[:192], labels[:192])
    val = TensorDataset(x[192:], labels[192:])
    return DataLoader(train, batch_size=batch_size, shuffle=True), DataLoader(val, batch_size=batch_size)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()
    L.seed_everything(42)
    train, val = loaders()
    trainer = L.Trainer(
        max_epochs=args.epochs,
        accelerator="cpu",
        callbacks=[DeviateCallback(metrics=["val_*"])],
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(Classifier(), train, val)
    print(f"deviate callbacks: {sum(isinstance(cb, DeviateCallback) for cb in trainer.callbacks)}")


if __name__ == "__main__":
    main()
