"""A script that trains a tiny model and only prints its result, seeded the quick way (``random.seed(0)``,
``torch.manual_seed(0)``); it logs nothing anywhere.

    python train.py
    final: acc=0.8123 loss=0.4567

The data set is fixed (its own torch generator); the weight initialisation (torch) and the sample order of each
epoch (``random.shuffle``) follow the global seeds.
"""

import random

import torch
from torch.nn import functional as F

random.seed(0)
torch.manual_seed(0)

gen = torch.Generator().manual_seed(0)
labels = torch.randint(0, 2, (200,), generator=gen)
x = torch.randn(200, 4, generator=gen) + (labels[:, None].float() * 2 - 1) * 0.5
x_train, y_train, x_val, y_val = x[:150], labels[:150], x[150:], labels[150:]

weights = (torch.randn(4, 2) * 0.5).requires_grad_()
bias = torch.zeros(2, requires_grad=True)
order = list(range(len(x_train)))
for _epoch in range(10):
    random.shuffle(order)
    for start in range(0, len(order), 16):
        batch = order[start : start + 16]
        loss = F.cross_entropy(x_train[batch] @ weights + bias, y_train[batch])
        loss.backward()
        with torch.no_grad():
            for param in (weights, bias):
                param -= 0.1 * param.grad
                param.grad = None

with torch.no_grad():
    logits = x_val @ weights + bias
    acc = (logits.argmax(dim=1) == y_val).float().mean().item()
    loss = F.cross_entropy(logits, y_val).item()
print(f"final: acc={acc:.4f} loss={loss:.4f}")
