"""A plain PyTorch training loop that takes its seed on the command line, prints its results and exits.

    python train.py --seed 7 --epochs 5

``--seed`` (default 42) seeds torch and NumPy. The data set is fixed (its own torch generator); weight
initialisation, the batch order (``torch.randperm``), dropout and the input jitter (``np.random``) follow the seed.
"""

from __future__ import annotations

import argparse

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

N_FEATURES = 8


def make_data(n: int = 256) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    labels = torch.randint(0, 2, (n,), generator=gen)
    x = torch.randn(n, N_FEATURES, generator=gen) + (labels[:, None].float() * 2 - 1) * 0.6
    return x, labels


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    print(f"seed: {args.seed}")

    x, y = make_data()
    x_train, y_train, x_val, y_val = x[:192], y[:192], x[192:], y[192:]
    model = nn.Sequential(nn.Linear(N_FEATURES, 32), nn.ReLU(), nn.Dropout(0.3), nn.Linear(32, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for epoch in range(args.epochs):
        model.train()
        order = torch.randperm(len(x_train))
        for start in range(0, len(order), args.batch_size):
            batch = order[start : start + args.batch_size]
            jitter = torch.from_numpy(np.random.normal(0.0, 0.1, size=(len(batch), N_FEATURES)).astype(np.float32))
            loss = F.cross_entropy(model(x_train[batch] + jitter), y_train[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            logits = model(x_val)
            val_loss = F.cross_entropy(logits, y_val).item()
            val_acc = (logits.argmax(dim=1) == y_val).float().mean().item()
        print(f"epoch {epoch}: val_loss={val_loss:.6f} val_acc={val_acc:.6f}")
    print(f"final: acc={val_acc:.6f} loss={val_loss:.6f}")


if __name__ == "__main__":
    main()
