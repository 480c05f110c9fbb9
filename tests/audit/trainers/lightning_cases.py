"""Tiny Lightning trainings for ``deviate audit``, each nondeterministic in one known place (or nowhere).

Noise comes from fresh operating-system entropy (``os.urandom``), which no seed reaches, so ``control`` replicas
differ exactly where it is added:

- ``deterministic``: nothing random but what the replica's seed controls;
- ``noisy_layer``: module ``net.2`` adds noise to its output from training step 3 on;
- ``unseeded_augmentation``: the dataset jitters every sample (the input batch of step 0 differs);
- ``noisy_backward``: module ``net.2``'s backward adds noise to the gradient it passes on (forward identical);
- ``perturbing_optimizer``: the optimizer nudges every parameter after its step.

And deterministic ones that do not end (``tests/faults/test_audit_crashes.py``), at training step
:data:`CRASH_STEP`:

- ``crashes``: every replica raises;
- ``replica_1_crashes``: replica 1 raises, the others train to the end;
- ``replica_1_exits``: replica 1 calls ``sys.exit(0)`` (exit status 0, but its ``fit`` never ends);
- ``replica_1_hangs``: replica 1 sleeps for :data:`HANG_S` seconds (for ``--timeout``).
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import lightning as L
import numpy as np
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset, TensorDataset

NOISY_FROM_STEP = 3
CRASH_STEP = 2
HANG_S = 600


def _entropy() -> torch.Generator:
    return torch.Generator().manual_seed(int.from_bytes(os.urandom(7), "little"))


class NoisyFrom(nn.Module):
    """Identity until the ``start``-th training call, then adds unseeded noise."""

    def __init__(self, start: int) -> None:
        super().__init__()
        self.start, self.calls = start, 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training:
            self.calls += 1
            if self.calls > self.start:
                return x + 1e-3 * torch.randn(x.shape, generator=_entropy())
        return x


class _NoisyGradient(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        return grad + 1e-3 * torch.randn(grad.shape, generator=_entropy())


class NoisyGradientLinear(nn.Linear):
    """A linear layer whose backward adds unseeded noise to the gradient of its output."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _NoisyGradient.apply(super().forward(x))


class PerturbingSGD(torch.optim.SGD):
    """SGD that nudges every parameter by unseeded noise after each step."""

    @torch.no_grad()
    def step(self, closure: Any = None) -> Any:
        loss = super().step(closure)
        for group in self.param_groups:
            for p in group["params"]:
                p.add_(1e-4 * torch.randn(p.shape, generator=_entropy()))
        return loss


class Jittered(Dataset):
    """The fixed samples, each with fresh unseeded jitter every time it is read."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor) -> None:
        self.x, self.y = x, y

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        jitter = np.random.default_rng().normal(0.0, 1e-3, size=self.x.shape[1]).astype("float32")
        return self.x[i] + torch.from_numpy(jitter), self.y[i]


class Classifier(L.LightningModule):
    def __init__(self, middle: nn.Module, optimizer: type = torch.optim.SGD) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), middle, nn.ReLU(), nn.Linear(16, 2))
        self.optimizer = optimizer

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = F.cross_entropy(self.net(x), y)
        self.log("train_loss", loss)
        return loss

    def configure_optimizers(self) -> Any:
        return self.optimizer(self.parameters(), lr=0.1)


class StopsAt(Classifier):
    """A deterministic classifier whose training stops at :data:`CRASH_STEP` in the replicas named: ``how`` is
    ``raise`` (an exception), ``exit`` (``sys.exit(0)``) or ``hang`` (sleep :data:`HANG_S` seconds)."""

    def __init__(self, how: str, replicas: tuple[int, ...]) -> None:
        super().__init__(nn.Linear(16, 16))
        self.how, self.replicas = how, replicas

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        replica = int(os.environ.get("DEVIATE_REPLICA", "0"))
        if batch_idx == CRASH_STEP and replica in self.replicas:
            if self.how == "exit":
                sys.exit(0)
            if self.how == "hang":
                time.sleep(HANG_S)
            raise RuntimeError(f"boom in replica {replica} at step {batch_idx}")
        return super().training_step(batch, batch_idx)


def _data() -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(1234)
    x = torch.randn(96, 8, generator=gen)
    return x, (x[:, 0] > 0).long()


def _fit(model: L.LightningModule, dataset: Dataset) -> dict[str, float]:
    trainer = L.Trainer(
        max_epochs=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        accelerator="cpu",
    )
    trainer.fit(model, DataLoader(dataset, batch_size=16, shuffle=True))
    return {"train_loss": float(trainer.callback_metrics["train_loss"])}


def deterministic() -> dict[str, float]:
    return _fit(Classifier(nn.Linear(16, 16)), TensorDataset(*_data()))


def noisy_layer() -> dict[str, float]:
    return _fit(Classifier(NoisyFrom(NOISY_FROM_STEP)), TensorDataset(*_data()))


def unseeded_augmentation() -> dict[str, float]:
    return _fit(Classifier(nn.Linear(16, 16)), Jittered(*_data()))


def noisy_backward() -> dict[str, float]:
    return _fit(Classifier(NoisyGradientLinear(16, 16)), TensorDataset(*_data()))


def perturbing_optimizer() -> dict[str, float]:
    return _fit(Classifier(nn.Linear(16, 16), optimizer=PerturbingSGD), TensorDataset(*_data()))


def crashes() -> dict[str, float]:
    return _fit(StopsAt("raise", (0, 1)), TensorDataset(*_data()))


def replica_1_crashes() -> dict[str, float]:
    return _fit(StopsAt("raise", (1,)), TensorDataset(*_data()))


def replica_1_exits() -> dict[str, float]:
    return _fit(StopsAt("exit", (1,)), TensorDataset(*_data()))


def replica_1_hangs() -> dict[str, float]:
    return _fit(StopsAt("hang", (1,)), TensorDataset(*_data()))
