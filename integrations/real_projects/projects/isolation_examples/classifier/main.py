"""pytorch/examples' shape: run from its own folder, it reads ``../data`` and writes beside itself.

    cd classifier && python main.py --epochs 6
    epoch 1: val_loss=0.6012
    ...
    final: acc=0.8438 loss=0.4012

``../data/points.csv`` (160 rows: four features, a label) is split into train, validation and test rows; a tiny
MLP, seeded with ``torch.manual_seed(args.seed)``, is trained; the model of the best validation loss is saved to
``best.pt`` (``torch.save``), each epoch's line appended to ``history.txt``, and the test metrics are those of
``best.pt`` loaded back, as pytorch/examples and keras-io scripts do.
"""

import argparse
import csv
import os

import torch
from torch import nn
from torch.nn import functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=6)
parser.add_argument("--seed", type=int, default=1)
parser.add_argument("--lr", type=float, default=0.05)
args = parser.parse_args()
torch.manual_seed(args.seed)

with open(os.path.join("..", "data", "points.csv")) as f:
    rows = list(csv.reader(f))[1:]
x = torch.tensor([[float(v) for v in row[:4]] for row in rows])
y = torch.tensor([int(row[4]) for row in rows])
x_train, y_train = x[:100], y[:100]
x_val, y_val = x[100:130], y[100:130]
x_test, y_test = x[130:], y[130:]

model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
best = float("inf")
for epoch in range(1, args.epochs + 1):
    order = torch.randperm(len(x_train))
    for start in range(0, len(order), 10):
        batch = order[start : start + 10]
        optimizer.zero_grad()
        F.cross_entropy(model(x_train[batch]), y_train[batch]).backward()
        optimizer.step()
    with torch.no_grad():
        val_loss = F.cross_entropy(model(x_val), y_val).item()
    print(f"epoch {epoch}: val_loss={val_loss:.4f}")
    with open("history.txt", "a") as f:
        f.write(f"{epoch} {val_loss:.6f}\n")
    if val_loss < best:
        best = val_loss
        torch.save(model.state_dict(), "best.pt")

model.load_state_dict(torch.load("best.pt"))
with torch.no_grad():
    logits = model(x_test)
    acc = (logits.argmax(dim=1) == y_test).float().mean().item()
    loss = F.cross_entropy(logits, y_test).item()
print(f"final: acc={acc:.4f} loss={loss:.4f}")
