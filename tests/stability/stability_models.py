"""A tiny real torch classifier trained for a few steps: weights and predictions for the stability tests."""

from __future__ import annotations

import numpy as np


def train_tiny(seed: int, *, data_seed: int = 0, steps: int = 30, n: int = 256, classes: int = 3):
    """Train a 3-layer MLP on fixed synthetic data; return (named weights as NumPy, eval predictions, labels).

    The data and the evaluation set depend only on ``data_seed``; initialisation and batch order on ``seed``.
    """
    import torch

    with torch.random.fork_rng():  # leave the global torch RNG of the test process as it was
        return _train(torch, seed, data_seed, steps, n, classes)


def _train(torch, seed: int, data_seed: int, steps: int, n: int, classes: int):
    gen = np.random.default_rng(data_seed)
    centers = gen.normal(size=(classes, 8)) * 1.5
    labels = gen.integers(0, classes, n)
    x = (centers[labels] + gen.normal(size=(n, 8))).astype(np.float32)
    torch.manual_seed(seed)
    model = torch.nn.Sequential(  # 10,467 weights: several sketch chunks of 2,048
        torch.nn.Linear(8, 96), torch.nn.ReLU(), torch.nn.Linear(96, 96), torch.nn.ReLU(), torch.nn.Linear(96, classes)
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    xt, yt = torch.from_numpy(x), torch.from_numpy(labels)
    order = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        batch = torch.randint(0, n, (32,), generator=order)
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(xt[batch]), yt[batch])
        loss.backward()
        opt.step()
    with torch.no_grad():
        logits = model(xt).numpy()
    weights = [(name, p.detach().numpy().copy()) for name, p in model.named_parameters()]
    return weights, logits, labels
