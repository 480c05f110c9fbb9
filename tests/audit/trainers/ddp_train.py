"""A tiny Lightning MLP trained on 2 CPU processes (DDP over gloo), for ``deviate audit`` on distributed training.

``python ddp_train.py CASE`` (or ``--trainer ddp_train.py:CASE``) trains 2 ranks with ``strategy="ddp"``
(Lightning re-runs this script, or the ``--trainer`` bootstrap, for rank 1) for :data:`STEPS` training steps, each
rank on its half of the data (Lightning's ``DistributedSampler``). ``CASE``:

- ``deterministic``: nothing random but what the replica's seed controls;
- ``rank1_noise``: on rank 1 only, module ``net.2`` adds noise from fresh operating-system entropy (no seed
  reaches it) to its output at training step :data:`NOISE_STEP`; rank 0 computes the same as always until the
  gradient all-reduce of that step mixes rank 1's gradients into its parameters;
- ``rank1_crashes``: in replica 1 of a study only (``DEVIATE_REPLICA``), rank 1 raises at training step
  :data:`NOISE_STEP`.

``python ddp_train.py CASE OUT`` runs standalone (no launcher): the script gives the Trainer its own
``DeviateCallback(OUT, experiment="ddp", seed=0, audit=STEPS)``.
"""

from __future__ import annotations

import os
import sys
from typing import Optional

import lightning as L
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

STEPS = 4
NOISE_STEP = 2
CASES = ("deterministic", "rank1_noise", "rank1_crashes")


def _rank() -> int:
    return torch.distributed.get_rank() if torch.distributed.is_initialized() else 0


class RankNoise(nn.Module):
    """Identity, except on rank 1 at training call ``NOISE_STEP`` (0-based): unseeded noise, or a crash."""

    def __init__(self, case: str) -> None:
        super().__init__()
        self.case, self.calls = case, 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training:
            return x
        step, self.calls = self.calls, self.calls + 1
        if step != NOISE_STEP or _rank() != 1:
            return x
        if self.case == "rank1_noise":
            entropy = torch.Generator().manual_seed(int.from_bytes(os.urandom(7), "little"))
            return x + 1e-3 * torch.randn(x.shape, generator=entropy)
        if self.case == "rank1_crashes" and os.environ.get("DEVIATE_REPLICA") == "1":
            raise RuntimeError("rank 1 crashed on purpose")
        return x


class MLP(L.LightningModule):
    def __init__(self, case: str) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), RankNoise(case), nn.Linear(8, 2))

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        x, y = batch
        return F.cross_entropy(self.net(x), y)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def main(case: str, out: Optional[str] = None) -> None:
    if case not in CASES:
        raise SystemExit(f"usage: ddp_train.py {{{','.join(CASES)}}}; received {case!r}")
    data = torch.Generator().manual_seed(1)
    x = torch.randn(2 * 8 * STEPS, 6, generator=data)
    y = (x[:, 0] > 0).long()
    loader = DataLoader(TensorDataset(x, y), batch_size=8, shuffle=False)
    callbacks = []
    if out is not None:  # standalone: the project's own callback
        from deviate_cb.lightning import DeviateCallback

        callbacks.append(DeviateCallback(out, experiment="ddp", seed=0, deterministic=True, audit=STEPS))
    trainer = L.Trainer(
        callbacks=callbacks,
        accelerator="cpu",
        devices=2,
        strategy="ddp",
        max_steps=STEPS,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(MLP(case), loader)


def deterministic() -> None:
    """``--trainer ddp_train.py:deterministic``."""
    main("deterministic")


def rank1_noise() -> None:
    """``--trainer ddp_train.py:rank1_noise``."""
    main("rank1_noise")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "deterministic", sys.argv[2] if len(sys.argv) > 2 else None)
