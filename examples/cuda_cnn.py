"""A small CNN on CIFAR-shaped data, for implementation noise on a GPU: one layer sums with ``index_add_``.

Its ``BucketSum`` layer adds each feature map's pixels into 16 buckets with ``Tensor.index_add_``: on CUDA that
is a float atomic add unless deterministic algorithms are on, so the order of the additions, and the last bits
of the sums, change from run to run. On the CPU (and on CUDA under ``torch.use_deterministic_algorithms``) the
sums are the same every time. Replicate it on a GPU and the control variant is bit-identical while ``impl``
differs::

    deviate-replicate --trainer examples/cuda_cnn.py:main -n 4 --variant control --out runs/ --experiment cnn
    deviate-replicate --trainer examples/cuda_cnn.py:main -n 4 --variant impl --out runs/ --experiment cnn
    deviate report runs/
    deviate audit --trainer examples/cuda_cnn.py:main --steps 5     # names the module where runs part: sum

The data (3x32x32 images, 10 classes) come from the example's own generator (seed 0) and are moved to the
device once, so the loader is not what a step times. Without CUDA it trains on the CPU.
"""

from __future__ import annotations

import lightning as L
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

from deviate_cb.lightning import DeviateCallback

N_CLASSES, BUCKETS = 10, 16


def make_data(n: int = 2048, seed: int = 0) -> tuple[TensorDataset, TensorDataset]:
    """Random CIFAR-shaped images whose class shifts one colour channel's mean, split 7:1."""
    gen = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, N_CLASSES, (n,), generator=gen)
    x = torch.randn(n, 3, 32, 32, generator=gen)
    x[torch.arange(n), labels % 3] += labels.view(-1, 1, 1) / N_CLASSES
    cut = n * 7 // 8
    return TensorDataset(x[:cut], labels[:cut]), TensorDataset(x[cut:], labels[cut:])


class BucketSum(nn.Module):
    """Sums each channel's pixels into :data:`BUCKETS` fixed buckets with ``index_add_`` (atomics on CUDA)."""

    def __init__(self, pixels: int) -> None:
        super().__init__()
        self.register_buffer("index", torch.arange(pixels) % BUCKETS)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.flatten(2).transpose(0, 2)  # (pixels, channels, batch): index_add_ over dim 0
        out = torch.zeros(BUCKETS, *flat.shape[1:], device=x.device, dtype=x.dtype)
        return out.index_add_(0, self.index, flat).permute(2, 1, 0).flatten(1)


class CNN(L.LightningModule):
    """conv-relu-pool, conv-relu, bucket sums, linear; logs ``train_loss``, ``val_loss`` and ``val_acc``."""

    def __init__(self, lr: float = 0.05) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.features = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32, 64, 3, padding=1), nn.ReLU()
        )
        self.sum = BucketSum(16 * 16)
        self.head = nn.Linear(64 * BUCKETS, N_CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.sum(self.features(x)) / 16.0)

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


def main(epochs: int = 3) -> dict[str, float]:
    """Train once (on CUDA when present) and return the final validation metrics."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    train, val = (TensorDataset(*(t.to(device) for t in part.tensors)) for part in make_data())
    trainer = L.Trainer(
        max_epochs=epochs,
        callbacks=[DeviateCallback()],  # optional under deviate-replicate: it injects one if missing
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        accelerator="cuda" if device == "cuda" else "cpu",
        devices=1,
    )
    trainer.fit(CNN(), DataLoader(train, batch_size=64, shuffle=True), DataLoader(val, batch_size=256))
    return {name: float(value) for name, value in trainer.callback_metrics.items() if name.startswith("val_")}


if __name__ == "__main__":
    print(main())
