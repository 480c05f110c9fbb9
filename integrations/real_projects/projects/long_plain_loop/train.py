"""A plain PyTorch loop of many tiny optimizer steps that prints each step, as minGPT's trainer does.

    python train.py [--steps 400] [--pause SECONDS]
    iter 0: loss 0.7012
    ...
    done: 400 steps

``--pause`` sleeps that long after the loop (a long evaluation, or a checkpoint upload), for an audit whose
``--timeout`` ends the replica after its audited steps agreed.
"""

import argparse
import time

import torch
from torch.nn import functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=400)
parser.add_argument("--pause", type=float, default=0.0)
args = parser.parse_args()

torch.manual_seed(0)
gen = torch.Generator().manual_seed(1)
x = torch.randn(256, 8, generator=gen)
y = (x[:, :2].sum(dim=1) > 0).long()
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
for step in range(args.steps):
    batch = torch.randint(0, len(x), (16,))
    optimizer.zero_grad()
    loss = F.cross_entropy(model(x[batch]), y[batch])
    loss.backward()
    optimizer.step()
    print(f"iter {step}: loss {loss.item():.4f}", flush=True)
print(f"done: {args.steps} steps", flush=True)
time.sleep(args.pause)
