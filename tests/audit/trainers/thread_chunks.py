"""A tiny Lightning training whose reduction order follows the thread count, for ``deviate audit --against``.

Module ``mix`` computes ``x @ W`` by adding partial sums over chunks of the input features, and the chunk size
comes from ``torch.get_num_threads()``, as a library build or a machine picks its blocking from the threads it
has. Every run with the same thread count is bit-identical (everything else is seeded); a run with another thread
count (``OMP_NUM_THREADS``, which the fingerprint records) adds the same products in another order, so its forward
output of ``mix`` differs in the last bits from training step 0 on, and everything after it follows.

- ``chunked``: the model above, 6 training steps;
- ``chunked_crashes``: the same model, raising at training step :data:`CRASH_STEP` in every replica.
"""

from __future__ import annotations

from typing import Any

import lightning as L
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

FEATURES = 64
CRASH_STEP = 1


def chunk_size() -> int:
    """The block size this process adds in: 3 per thread, plus one."""
    return 3 * torch.get_num_threads() + 1


class ChunkedLinear(nn.Module):
    """``x @ weight``, its inner sums added chunk by chunk (:func:`chunk_size` features at a time)."""

    def __init__(self, n_in: int, n_out: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n_in, n_out) / n_in**0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        products = x.unsqueeze(-1) * self.weight  # (batch, n_in, n_out)
        step = chunk_size()
        total = products[:, :step].sum(dim=1)
        for start in range(step, products.shape[1], step):
            total = total + products[:, start : start + step].sum(dim=1)
        return total


class Chunked(L.LightningModule):
    def __init__(self, crash_at: int = -1) -> None:
        super().__init__()
        self.mix = ChunkedLinear(FEATURES, 16)
        self.head = nn.Sequential(nn.ReLU(), nn.Linear(16, 2))
        self.crash_at = crash_at

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        if batch_idx == self.crash_at:
            raise RuntimeError(f"boom at step {batch_idx}")
        x, y = batch
        loss = F.cross_entropy(self.head(self.mix(x)), y)
        self.log("train_loss", loss)
        return loss

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def _fit(model: L.LightningModule) -> dict[str, float]:
    gen = torch.Generator().manual_seed(1234)
    x = torch.randn(96, FEATURES, generator=gen)
    data = TensorDataset(x, (x[:, 0] > 0).long())
    trainer = L.Trainer(
        max_epochs=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        accelerator="cpu",
    )
    trainer.fit(model, DataLoader(data, batch_size=16, shuffle=True))
    return {"train_loss": float(trainer.callback_metrics["train_loss"])}


def chunked() -> dict[str, float]:
    return _fit(Chunked())


def chunked_crashes() -> dict[str, float]:
    return _fit(Chunked(crash_at=CRASH_STEP))
