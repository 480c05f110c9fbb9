"""A training script shaped like nanoGPT's train.py: module-level defaults, a configurator that overrides them
from the command line, a plain PyTorch loop, and fixed output paths.

    python train.py                                   # writes out-tiny/ckpt.pt and history.json
    python train.py config/tiny.py max_iters=30       # a config file, then key=value overrides
    python train.py --out_dir=runs/a init_from=resume # resume from runs/a/ckpt.pt (a fresh start if absent)

The checkpoint goes to ``os.path.join(out_dir, 'ckpt.pt')`` and the loss history to ``history.json`` in the
working directory, whatever the run: two runs started from the same folder write the same files. The data set is
fixed (its own generator); the weight initialisation, the batches and dropout follow ``torch.manual_seed(seed)``.
It ends printing ``final: acc=... loss=...``.
"""

import json
import os

import torch
from torch import nn
from torch.nn import functional as F

# -----------------------------------------------------------------------------
# default config values
out_dir = "out-tiny"
eval_interval = 10
max_iters = 40
batch_size = 16
learning_rate = 1e-2
dropout = 0.2
n_embd = 32
seed = 1337
init_from = "scratch"  # 'scratch' or 'resume'
# -----------------------------------------------------------------------------
config_keys = [k for k, v in globals().items() if not k.startswith("_") and isinstance(v, (int, float, bool, str))]
exec(open("configurator.py").read())  # noqa: SIM115 - overrides from command line or config file
config = {k: globals()[k] for k in config_keys}  # will be useful for logging
# -----------------------------------------------------------------------------

os.makedirs(out_dir, exist_ok=True)
torch.manual_seed(seed)

# a fixed data set: two noisy blobs in 8 dimensions, always the same
gen = torch.Generator().manual_seed(0)
labels = torch.randint(0, 2, (320,), generator=gen)
data = torch.randn(320, 8, generator=gen) + (labels[:, None].float() * 2 - 1) * 0.6
train_x, train_y, val_x, val_y = data[:256], labels[:256], data[256:], labels[256:]


def get_batch() -> tuple[torch.Tensor, torch.Tensor]:
    ix = torch.randint(len(train_x), (batch_size,))
    return train_x[ix], train_y[ix]


model = nn.Sequential(nn.Linear(8, n_embd), nn.GELU(), nn.Dropout(dropout), nn.Linear(n_embd, 2))
optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)
iter_num = 0
history: list[dict] = []
ckpt_path = os.path.join(out_dir, "ckpt.pt")
if init_from == "resume" and os.path.exists(ckpt_path):
    print(f"Resuming training from {out_dir}")
    checkpoint = torch.load(ckpt_path, map_location="cpu")
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    iter_num = checkpoint["iter_num"]
    history = checkpoint["history"]
elif init_from == "resume":
    print(f"no checkpoint in {out_dir}: starting from scratch")


@torch.no_grad()
def estimate_loss() -> tuple[float, float]:
    model.eval()
    logits = model(val_x)
    loss = F.cross_entropy(logits, val_y).item()
    acc = (logits.argmax(dim=1) == val_y).float().mean().item()
    model.train()
    return acc, loss


while iter_num < max_iters:
    x, y = get_batch()
    loss = F.cross_entropy(model(x), y)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    iter_num += 1
    if iter_num % eval_interval == 0 or iter_num == max_iters:
        acc, val_loss = estimate_loss()
        history.append({"iter": iter_num, "train_loss": loss.item(), "val_loss": val_loss, "val_acc": acc})
        print(f"step {iter_num}: train loss {loss.item():.6f}, val loss {val_loss:.6f}, val acc {acc:.6f}")
        checkpoint = {
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "iter_num": iter_num,
            "config": config,
            "history": history,
        }
        print(f"saving checkpoint to {out_dir}")
        torch.save(checkpoint, ckpt_path)

with open("history.json", "w") as f:
    json.dump({"config": config, "history": history}, f, indent=1)
acc, val_loss = estimate_loss()
print(f"final: acc={acc:.6f} loss={val_loss:.6f}")
