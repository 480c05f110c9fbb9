"""A tiny real Lightning trainer. What it does depends on the replica index, so one replicate call covers:

replica 0: no callback (one gets injected); 1: ``callbacks=[DeviateCallback()]``; 2: ``callbacks=DeviateCallback()``
(a single callback, not a list); 3: no callback, and SIGKILL at the start of epoch 2 (after two flushed epochs).
Replicas 0-2 train identically, so under ``control`` their metrics must be bit-identical.
"""

from __future__ import annotations

import os
import signal

import lightning as L
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

from deviate_cb.lightning import DeviateCallback


class Tiny(L.LightningModule):
    def __init__(self, die_at_epoch: int | None = None) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 2))
        self.die_at_epoch = die_at_epoch

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.cross_entropy(self.net(x), y)
        self.log("train_loss", loss, on_step=True, on_epoch=True)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self.net(x)
        self.log("val_loss", F.cross_entropy(logits, y))
        self.log("val_acc", (logits.argmax(-1) == y).float().mean())

    def on_train_epoch_start(self) -> None:
        if self.current_epoch == self.die_at_epoch:
            os.kill(os.getpid(), signal.SIGKILL)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def _loader(shuffle: bool) -> DataLoader:
    gen = torch.Generator().manual_seed(1234)  # fixed data; order and init come from the replica's seed
    x = torch.randn(64, 8, generator=gen)
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).long()
    return DataLoader(TensorDataset(x, y), batch_size=16, shuffle=shuffle)


def main(ctx):
    torch.set_num_threads(1)
    callbacks = {0: None, 1: [DeviateCallback()], 2: DeviateCallback(), 3: None}[ctx.replica % 4]
    model = Tiny(die_at_epoch=2 if ctx.replica == 3 else None)
    trainer = L.Trainer(
        max_epochs=3,
        callbacks=callbacks,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        accelerator="cpu",
        default_root_dir=ctx.run_dir,
    )
    trainer.fit(model, _loader(shuffle=True), _loader(shuffle=False))
    n_callbacks = sum(isinstance(cb, DeviateCallback) for cb in trainer.callbacks)
    return {"deviate_callbacks": n_callbacks, **trainer.callback_metrics}
