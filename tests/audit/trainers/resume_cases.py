"""Tiny Lightning trainings for ``deviate audit --resume-at``: 4 batches an epoch, 3 epochs (12 steps).

- ``exact``: no dropout, and a sampler that shuffles each epoch from a generator seeded with the epoch (Lightning
  calls ``set_epoch``), SGD with momentum and a per-epoch StepLR, all of which the checkpoint restores: resuming at
  an epoch boundary continues bit for bit;
- ``exact_mid_epoch``: the same with a DataLoader that says where it is in its epoch (``state_dict``), which
  Lightning 2 saves in the checkpoint and gives back: resuming mid-epoch continues bit for bit;
- ``shuffles_and_drops``: ``DataLoader(shuffle=True, generator=...)`` and dropout: the checkpoint restores neither
  the sampler's generator nor torch's global RNG, so the resumed run diverges at its first step;
- ``crashes_after_resume``: ``exact``, but the resumed process (``DEVIATE_RESUME_FROM`` set) raises in its second
  step;
- ``not_reproducible``: ``exact`` plus noise from operating-system entropy (no seed reaches it) in the gradient step
  of step 1: runs differ before any checkpoint.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import lightning as L
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Sampler, TensorDataset

BATCHES_PER_EPOCH = 4
EPOCHS = 3


class EpochSeededSampler(Sampler[int]):
    """A shuffle that depends on the epoch alone: nothing to restore."""

    def __init__(self, size: int) -> None:
        self.size, self.epoch = size, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return self.size

    def __iter__(self) -> Iterator[int]:
        generator = torch.Generator().manual_seed(1000 + self.epoch)
        return iter(torch.randperm(self.size, generator=generator).tolist())


class ResumableLoader(DataLoader):
    """A DataLoader that records how many batches of its epoch it gave (``state_dict``) and, given that state back,
    starts its next epoch's iteration after them."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.given = 0
        self.skip = 0

    def __iter__(self) -> Any:
        return self._batches()

    def _batches(self) -> Iterator[Any]:
        skip, self.skip, self.given = self.skip, 0, 0
        for index, batch in enumerate(super().__iter__()):
            self.given = index + 1
            if index >= skip:
                yield batch

    def state_dict(self) -> dict[str, int]:
        return {"given": self.given}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.skip = int(state["given"])


class Net(L.LightningModule):
    def __init__(self, dropout: float = 0.0) -> None:
        super().__init__()
        layers: list[nn.Module] = [nn.Linear(8, 16), nn.ReLU()]
        if dropout:
            layers.append(nn.Dropout(dropout))
        self.net = nn.Sequential(*layers, nn.Linear(16, 2))

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = F.cross_entropy(self.net(x), y)
        self.log("train_loss", loss)
        return loss

    def configure_optimizers(self) -> Any:
        optimizer = torch.optim.SGD(self.parameters(), lr=0.1, momentum=0.9)
        return {"optimizer": optimizer, "lr_scheduler": torch.optim.lr_scheduler.StepLR(optimizer, 1, gamma=0.5)}


class CrashesAfterResume(Net):
    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        resumed = bool(os.environ.get("DEVIATE_RESUME_FROM"))
        if resumed and self.trainer.fit_loop.epoch_loop.total_batch_idx > BATCHES_PER_EPOCH:
            raise RuntimeError("boom after the resume")
        return super().training_step(batch, batch_idx)


class NoisyFromStep1(Net):
    def on_before_optimizer_step(self, optimizer: Any) -> None:
        if self.trainer.fit_loop.epoch_loop.total_batch_idx == 1:
            noise = torch.Generator().manual_seed(int.from_bytes(os.urandom(7), "little"))
            for parameter in self.parameters():
                parameter.grad.add_(1e-3 * torch.randn(parameter.shape, generator=noise))


def _dataset() -> TensorDataset:
    gen = torch.Generator().manual_seed(1234)
    x = torch.randn(16 * BATCHES_PER_EPOCH, 8, generator=gen)
    return TensorDataset(x, (x[:, 0] > 0).long())


def _fit(model: L.LightningModule, loader: DataLoader) -> dict[str, float]:
    trainer = L.Trainer(
        max_epochs=EPOCHS,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        accelerator="cpu",
    )
    trainer.fit(model, loader)
    return {"train_loss": float(trainer.callback_metrics["train_loss"])}


def exact() -> dict[str, float]:
    data = _dataset()
    return _fit(Net(), DataLoader(data, batch_size=16, sampler=EpochSeededSampler(len(data))))


def exact_mid_epoch() -> dict[str, float]:
    data = _dataset()
    return _fit(Net(), ResumableLoader(data, batch_size=16, sampler=EpochSeededSampler(len(data))))


def shuffles_and_drops() -> dict[str, float]:
    loader = DataLoader(_dataset(), batch_size=16, shuffle=True, generator=torch.Generator().manual_seed(7))
    return _fit(Net(dropout=0.5), loader)


def crashes_after_resume() -> dict[str, float]:
    data = _dataset()
    return _fit(CrashesAfterResume(), DataLoader(data, batch_size=16, sampler=EpochSeededSampler(len(data))))


def not_reproducible() -> dict[str, float]:
    data = _dataset()
    return _fit(NoisyFromStep1(), DataLoader(data, batch_size=16, sampler=EpochSeededSampler(len(data))))
