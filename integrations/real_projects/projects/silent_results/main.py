"""pytorch/examples' MNIST script in miniature: it trains a tiny classifier and prints its results, nothing else.

    python main.py
    Train Epoch: 1 [0/240]	Loss: 0.693147
    ...
    Test set: Average loss: 0.5210, Accuracy: 47/60 (78%)

No callback, no logger, no return value: replicated without ``--metric-regex``, nothing is recorded.
"""

import torch
from torch.nn import functional as F

torch.manual_seed(1)
gen = torch.Generator().manual_seed(0)
x = torch.randn(300, 6, generator=gen)
y = (x[:, 0] - x[:, 1] > 0).long()
train_x, train_y, test_x, test_y = x[:240], y[:240], x[240:], y[240:]
model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(1, 3):
    order = torch.randperm(len(train_x))
    for start in range(0, len(order), 30):
        batch = order[start : start + 30]
        optimizer.zero_grad()
        loss = F.cross_entropy(model(train_x[batch]), train_y[batch])
        loss.backward()
        optimizer.step()
        if start % 120 == 0:
            print(f"Train Epoch: {epoch} [{start}/{len(train_x)}]\tLoss: {loss.item():.6f}")
with torch.no_grad():
    logits = model(test_x)
    test_loss = F.cross_entropy(logits, test_y, reduction="sum").item() / len(test_x)
    correct = int((logits.argmax(dim=1) == test_y).sum())
print(
    f"\nTest set: Average loss: {test_loss:.4f}, Accuracy: {correct}/{len(test_x)} "
    f"({100.0 * correct / len(test_x):.0f}%)\n"
)
