"""A small, real classifier to replicate: an MLP with dropout on synthetic data made in-process.

Run it once, standalone (writes one run to ``deviate_runs/``)::

    python examples/lightning_mlp.py

or replicate it under a noise variant and report the spread::

    deviate-replicate --trainer examples/lightning_mlp.py:main -n 4 --variant algo+impl --out runs/
    deviate report runs/

and ask whether a lower learning rate is worse, replicating both until the answer is known::

    deviate-replicate --trainer examples/lightning_mlp.py:main_low_lr -n 3 --variant algo+impl --out runs/ \
        --experiment mlp_low_lr --until-decided --against experiment=mlp --against variant=algo+impl \
        --metric val_acc --max-runs 10 --parallel 2

The data set is fixed (its own generator, seed 0) so that replicas differ only in what the variant
varies: weight initialisation, batch order and dropout masks (the global seed) and kernel behaviour.
"""

from __future__ import annotations

import lightning as L
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

from deviate_cb.lightning import DeviateCallback

N_FEATURES, N_CLASSES = 20, 4


def make_data(n: int = 1200, seed: int = 0) -> tuple[TensorDataset, TensorDataset]:
    """A fixed synthetic classification problem: Gaussian clusters with label noise, split 5:1."""
    gen = torch.Generator().manual_seed(seed)
    centers = torch.randn(N_CLASSES, N_FEATURES, generator=gen) * 1.5
    labels = torch.randint(0, N_CLASSES, (n,), generator=gen)
    x = centers[labels] + torch.randn(n, N_FEATURES, generator=gen) * 2.0
    flip = torch.rand(n, generator=gen) < 0.1
    labels = torch.where(flip, torch.randint(0, N_CLASSES, (n,), generator=gen), labels)
    cut = n * 5 // 6
    return TensorDataset(x[:cut], labels[:cut]), TensorDataset(x[cut:], labels[cut:])


class MLP(L.LightningModule):
    """Two hidden layers with dropout; logs ``train_loss``, ``val_loss`` and ``val_acc``."""

    def __init__(self, hidden: int = 64, dropout: float = 0.3, lr: float = 1e-2) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(
            nn.Linear(N_FEATURES, hidden),
            nn.ReLU(),
            nn.Dropout(dropout),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
            nn.Dropout(dropout),
            nn.Linear(hidden, N_CLASSES),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        self.log("train_loss", loss, on_step=True, on_epoch=True)
        return loss

    def validation_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        x, y = batch
        logits = self(x)
        self.log("val_loss", F.cross_entropy(logits, y))
        self.log("val_acc", (logits.argmax(dim=1) == y).float().mean())

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr, momentum=0.9)


def main(epochs: int = 5, lr: float = 1e-2) -> dict[str, float]:
    """Train once and return the final validation metrics (recorded by deviate-replicate as ``final``)."""
    train, val = make_data()
    model = MLP(lr=lr)
    trainer = L.Trainer(
        max_epochs=epochs,
        callbacks=[DeviateCallback()],  # optional under deviate-replicate: it injects one if missing
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        accelerator="cpu",
    )
    trainer.fit(
        model,
        DataLoader(train, batch_size=32, shuffle=True),
        DataLoader(val, batch_size=200),
    )
    return {name: float(value) for name, value in trainer.callback_metrics.items() if name.startswith("val_")}


def main_low_lr() -> dict[str, float]:
    """The same MLP with a learning rate 20 times lower: is it worse, or is the difference noise?

    ``deviate-replicate --trainer examples/lightning_mlp.py:main_low_lr --until-decided --against experiment=mlp``
    runs it and tops up ``main`` in rounds until a sequential test decides.
    """
    return main(lr=5e-4)


if __name__ == "__main__":
    print(main())
