"""A tiny character-level GPT trained the way nanoGPT-style repositories write ``train.py``: top-level code, no
Lightning, no Keras, run as it is (``python tiny_gpt.py --max_iters=6``).

Causal self-attention, weight tying, dropout, AdamW with weight-decay groups, a warmup-cosine learning rate set on
the param groups, gradient accumulation, gradient clipping, ``zero_grad(set_to_none=True)`` and an
``estimate_loss()`` under ``@torch.no_grad()`` every ``eval_interval`` iterations. Options ``--name=value``:
``max_iters``, ``eval_interval``, ``noisy_attention`` (1: the attention adds unseeded noise from iteration 2 on).
"""

import math
import os
import sys

import torch
from torch import nn
from torch.nn import functional as F

# -- configuration (nanoGPT's configurator: --key=value overrides the globals) --------------------------------
max_iters = 6
eval_interval = 3
eval_iters = 2
gradient_accumulation_steps = 2
batch_size = 4
block_size = 8
n_layer, n_head, n_embd, dropout = 2, 2, 16, 0.1
learning_rate, min_lr, warmup_iters, weight_decay, grad_clip = 1e-2, 1e-3, 2, 0.1, 1.0
noisy_attention = 0
for arg in sys.argv[1:]:
    key, _, value = arg.removeprefix("--").partition("=")
    globals()[key] = int(value)

text = "the quick brown fox jumps over the lazy dog; " * 20
chars = sorted(set(text))
vocab_size = len(chars)
data = torch.tensor([chars.index(c) for c in text], dtype=torch.long)
train_data, val_data = data[: int(0.9 * len(data))], data[int(0.9 * len(data)) :]


def get_batch(split):
    source = train_data if split == "train" else val_data
    ix = torch.randint(len(source) - block_size, (batch_size,))
    x = torch.stack([source[i : i + block_size] for i in ix])
    y = torch.stack([source[i + 1 : i + 1 + block_size] for i in ix])
    return x, y


class CausalSelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.attn_dropout = nn.Dropout(dropout)
        self.resid_dropout = nn.Dropout(dropout)
        self.calls = 0

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(n_embd, dim=2)
        q, k, v = (t.view(B, T, n_head, C // n_head).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(torch.tril(torch.ones(T, T)) == 0, float("-inf"))
        att = self.attn_dropout(F.softmax(att, dim=-1))
        if noisy_attention and self.training:
            self.calls += 1
            if self.calls > 2 * gradient_accumulation_steps:  # from iteration 2 on
                noise = torch.Generator().manual_seed(int.from_bytes(os.urandom(7), "little"))
                att = att + 1e-4 * torch.rand(att.shape, generator=noise)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * n_embd, n_embd)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1, self.attn = nn.LayerNorm(n_embd), CausalSelfAttention()
        self.ln_2, self.mlp = nn.LayerNorm(n_embd), MLP()

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.transformer = nn.ModuleDict(
            dict(
                wte=nn.Embedding(vocab_size, n_embd),
                wpe=nn.Embedding(block_size, n_embd),
                drop=nn.Dropout(dropout),
                h=nn.ModuleList([Block() for _ in range(n_layer)]),
                ln_f=nn.LayerNorm(n_embd),
            )
        )
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # weight tying

    def forward(self, idx, targets=None):
        pos = torch.arange(0, idx.size(1), dtype=torch.long)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        loss = None if targets is None else F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss

    def configure_optimizers(self):
        params = [p for p in self.parameters() if p.requires_grad]
        groups = [
            {"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
        ]
        return torch.optim.AdamW(groups, lr=learning_rate, betas=(0.9, 0.95))


def get_lr(it):
    if it < warmup_iters:
        return learning_rate * (it + 1) / (warmup_iters + 1)
    ratio = (it - warmup_iters) / max(1, max_iters - warmup_iters)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (learning_rate - min_lr)


@torch.no_grad()
def estimate_loss():
    out = {}
    model.eval()
    for split in ("train", "val"):
        losses = torch.zeros(eval_iters)
        for k in range(eval_iters):
            X, Y = get_batch(split)
            _, loss = model(X, Y)
            losses[k] = loss.item()
        out[split] = losses.mean()
    model.train()
    return out


torch.manual_seed(1337)  # taken over by the replica's seed under deviate
model = GPT()
optimizer = model.configure_optimizers()
X, Y = get_batch("train")
for iter_num in range(max_iters + 1):
    for param_group in optimizer.param_groups:
        param_group["lr"] = get_lr(iter_num)
    if iter_num % eval_interval == 0:
        losses = estimate_loss()
        print(f"step {iter_num}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}")
    if iter_num == max_iters:
        break
    for _micro_step in range(gradient_accumulation_steps):
        logits, loss = model(X, Y)
        loss = loss / gradient_accumulation_steps
        X, Y = get_batch("train")
        loss.backward()
    if grad_clip != 0.0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
print(f"done: {max_iters} iterations")
