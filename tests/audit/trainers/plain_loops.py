"""Plain PyTorch training loops (no Lightning, no Keras) for ``deviate audit``, as a script or ``--trainer`` functions.

Noise comes from fresh operating-system entropy (``os.urandom``), which no seed reaches, so ``control`` replicas
differ exactly where it is added. Run as ``python plain_loops.py CASE`` or ``--trainer plain_loops.py:CASE``:

- ``seeded``: an MLP, SGD, a shuffled ``DataLoader``; after each epoch an evaluation pass under ``torch.no_grad()``
  with a batch of another size (:data:`EVAL_BATCH`): :data:`EPOCHS` x :data:`BATCHES` optimizer steps;
- ``unseeded_layer``: the same, with module ``net.2`` drawing noise from an unseeded generator from its
  :data:`NOISY_FROM_STEP`-th training call on (training step 3, 0-based);
- ``replica_1_crashes``: the seeded loop, where replica 1 raises at training step :data:`CRASH_STEP`.

The nanoGPT-style script is ``tiny_gpt.py``.
"""

from __future__ import annotations

import os
import sys

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

EPOCHS = 3
BATCHES = 2  # per epoch: 8 samples in batches of 4
TRAIN_BATCH = 4
EVAL_BATCH = 5
NOISY_FROM_STEP = 3
CRASH_STEP = 2


class NoisyFrom(nn.Module):
    """Identity until the ``start``-th training call, then adds noise from an unseeded generator."""

    def __init__(self, start: int) -> None:
        super().__init__()
        self.start, self.calls = start, 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training:
            self.calls += 1
            if self.calls > self.start:
                generator = torch.Generator().manual_seed(int.from_bytes(os.urandom(7), "little"))
                return x + 1e-3 * torch.randn(x.shape, generator=generator)
        return x


def _train(noisy: bool = False, crash_replica: int = -1) -> dict[str, float]:
    data = torch.randn(BATCHES * TRAIN_BATCH, 6)
    labels = torch.randint(0, 3, (BATCHES * TRAIN_BATCH,))
    held_out = torch.randn(EVAL_BATCH, 6)
    middle: nn.Module = NoisyFrom(NOISY_FROM_STEP) if noisy else nn.Identity()
    model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), middle, nn.Linear(16, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    loader = DataLoader(TensorDataset(data, labels), batch_size=TRAIN_BATCH, shuffle=True)
    replica = int(os.environ.get("DEVIATE_REPLICA", "0"))
    step, loss = 0, torch.zeros(())
    for _ in range(EPOCHS):
        model.train()
        for x, y in loader:
            if step == CRASH_STEP and replica == crash_replica:
                raise RuntimeError(f"replica {replica} crashed at training step {step}")
            loss = F.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
        model.eval()
        with torch.no_grad():  # evaluation: not a training step
            model(held_out).sum()
    return {"loss": float(loss.detach())}


def seeded() -> dict[str, float]:
    return _train()


def unseeded_layer() -> dict[str, float]:
    return _train(noisy=True)


def replica_1_crashes() -> dict[str, float]:
    return _train(crash_replica=1)


if __name__ == "__main__":
    print(globals()[sys.argv[1]]())
