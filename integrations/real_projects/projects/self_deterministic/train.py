"""A PyTorch script that makes itself reproducible, as the PyTorch notes on randomness recommend: it seeds torch
and switches deterministic algorithms and cuDNN determinism on before it builds anything.

    python train.py --epochs 3

It prints what is in effect when training starts (``determinism: algorithms=... cudnn=...``), each epoch's
validation metrics and ``final: acc=... loss=...``. The data set is fixed (its own generator); the weight
initialisation, the batch order and dropout follow ``torch.manual_seed(0)``.
"""

from __future__ import annotations

import argparse

import torch
from torch import nn
from torch.nn import functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=3)
args = parser.parse_args()

torch.manual_seed(0)
torch.use_deterministic_algorithms(True)
torch.backends.cudnn.deterministic = True
torch.backends.cudnn.benchmark = False

gen = torch.Generator().manual_seed(0)
labels = torch.randint(0, 2, (256,), generator=gen)
x = torch.randn(256, 8, generator=gen) + (labels[:, None].float() * 2 - 1) * 0.6
x_train, y_train, x_val, y_val = x[:192], labels[:192], x[192:], labels[192:]

model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Dropout(0.3), nn.Linear(32, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
print(
    f"determinism: algorithms={torch.are_deterministic_algorithms_enabled()} "
    f"cudnn={torch.backends.cudnn.deterministic} benchmark={torch.backends.cudnn.benchmark}"
)
for epoch in range(args.epochs):
    model.train()
    order = torch.randperm(len(x_train))
    for start in range(0, len(order), 32):
        batch = order[start : start + 32]
        loss = F.cross_entropy(model(x_train[batch]), y_train[batch])
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
