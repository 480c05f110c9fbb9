"""Trained by test_ddp.py as a script: Lightning's DDP launcher re-runs this file for rank 1."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import lightning as L
import torch

from deviate_cb.lightning import DeviateCallback
from lightning_cb.models import TinyModule, loader


class Synced(TinyModule):
    def training_step(self, batch, batch_idx):  # type: ignore[no-untyped-def]
        loss = super().training_step(batch, batch_idx)
        self.log("loss_synced", loss, on_step=False, on_epoch=True, sync_dist=True)  # all-reduce at epoch end
        return loss


if __name__ == "__main__":
    torch.set_num_threads(1)
    trainer = L.Trainer(
        max_epochs=2,
        accelerator="cpu",
        devices=2,
        strategy="ddp",
        callbacks=[DeviateCallback(sys.argv[1], experiment="ddp")],
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(Synced(), loader(), loader(shuffle=False))
