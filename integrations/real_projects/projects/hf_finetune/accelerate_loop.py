"""A plain Accelerate training loop that seeds itself with accelerate's set_seed (no Trainer, no callback).

python accelerate_loop.py --seed 42
"""

from __future__ import annotations

import argparse

import torch
from accelerate import Accelerator
from accelerate.utils import set_seed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()
    set_seed(args.seed)
    accelerator = Accelerator(cpu=True)
    data = torch.utils.data.TensorDataset(torch.linspace(-1, 1, 64).unsqueeze(1), torch.linspace(-1, 1, 64).pow(2))
    loader = torch.utils.data.DataLoader(data, batch_size=16, shuffle=True)
    model = torch.nn.Sequential(torch.nn.Linear(1, 16), torch.nn.Tanh(), torch.nn.Dropout(0.1), torch.nn.Linear(16, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    for epoch in range(args.epochs):
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x).squeeze(1), y)
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
        print(f"epoch {epoch}: loss={loss.item():.8f}")


if __name__ == "__main__":
    main()
