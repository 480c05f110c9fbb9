"""A plain PyTorch regression loop that checkpoints to a fixed relative path, ``out/ckpt.pt``, as many projects do.

It also keeps scratch copies through ``tempfile`` (a ``mkstemp`` file beside the checkpoint, a
``TemporaryDirectory``), which are its own and never shared. Run from a copy inside the temporary directory (a
clone in ``/tmp``, a job's ``$TMPDIR``), every replica still writes the one ``out/ckpt.pt``.
"""

import os
import tempfile

import torch

torch.manual_seed(0)
x = torch.randn(128, 8)
y = x @ torch.linspace(-1.0, 1.0, 8).unsqueeze(1) + 0.1 * torch.randn(128, 1)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
for step in range(30):
    batch = torch.randint(0, 128, (16,))
    loss = torch.nn.functional.mse_loss(model(x[batch]), y[batch])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss={loss.item():.6f}")

os.makedirs("out", exist_ok=True)
fd, scratch = tempfile.mkstemp(dir="out", suffix=".pt")  # a scratch copy of its own, beside the checkpoint
os.close(fd)
torch.save(model.state_dict(), scratch)
os.remove(scratch)
with tempfile.TemporaryDirectory() as folder:
    torch.save(model.state_dict(), os.path.join(folder, "best.pt"))
torch.save({"model": model.state_dict(), "step": 30}, os.path.join("out", "ckpt.pt"))
with torch.no_grad():
    final = torch.nn.functional.mse_loss(model(x), y).item()
print(f"final: acc={1.0 / (1.0 + final):.6f} loss={final:.6f}")
