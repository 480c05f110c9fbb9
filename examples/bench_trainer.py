"""A ``deviate bench --trainer`` step factory: what determinism costs *your* model.

The contract: a function taking ``device`` and ``batch_size`` keyword arguments (either may be left out)
that returns ``(model, step)``, ``step()`` running one whole training step (forward, backward, optimizer update)
on data it already holds. ``deviate bench`` turns torch's determinism switches off and on between windows of
calls to ``step``; the step itself must not change them.

    deviate bench --trainer examples/bench_trainer.py:make_step --windows 6 --steps-per-window 10

Example:
    >>> model, step = make_step(device="cpu", batch_size=4)
    >>> step()
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def make_step(device: str = "cpu", batch_size: int = 32) -> tuple[Any, Callable[[], None]]:
    """A small 1-D convolutional classifier on a fixed random batch of 64-step sequences."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv1d(8, 32, 5, padding=2),
        nn.ReLU(),
        nn.Conv1d(32, 32, 5, padding=2),
        nn.ReLU(),
        nn.AdaptiveAvgPool1d(1),
        nn.Flatten(),
        nn.Linear(32, 5),
    ).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(batch_size, 8, 64, device=device)
    y = torch.randint(0, 5, (batch_size,), device=device)

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()

    return model, step
