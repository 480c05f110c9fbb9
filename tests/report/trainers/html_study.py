"""A tiny Lightning training whose runs fill every section of the HTML report: a metric whose name holds markup
(``<b>acc</b>``, which the page must show as text), a single-value test metric whose name holds ``$`` (which
matplotlib must not read as mathtext) and a control character, training curves, predictions (churn, per-class
spread) and weights (distance) recorded by the callback."""

from __future__ import annotations

from typing import Any

import lightning as L
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

from deviate_cb.lightning import DeviateCallback, Predictions

MARKUP_METRIC = "<b>acc</b>"
SINGLE_METRIC = "test_$acc$\x07"  # logged once per run: a strip of runs, never a curve


class Tiny(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        self.log("train_loss", loss, on_step=True, on_epoch=False)
        return loss

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        logits = self(x)
        self.log("val_loss", F.cross_entropy(logits, y))
        self.log(MARKUP_METRIC, (logits.argmax(-1) == y).float().mean())

    def test_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        self.log(SINGLE_METRIC, (self(x).argmax(-1) == y).float().mean())

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.2)


def main() -> dict[str, float]:
    gen = torch.Generator().manual_seed(1234)
    x = torch.randn(192, 8, generator=gen)
    y = (x[:, 0] > 0).long() + (x[:, 1] > 0.5).long()
    train = DataLoader(TensorDataset(x[:128], y[:128]), batch_size=16, shuffle=True)
    val = DataLoader(TensorDataset(x[128:], y[128:]), batch_size=32)
    callback = DeviateCallback(predictions=Predictions(data=val), weights=True)
    trainer = L.Trainer(max_epochs=4, callbacks=[callback], logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, accelerator="cpu")  # fmt: skip
    model = Tiny()
    trainer.fit(model, train, val)
    val_loss = float(trainer.callback_metrics["val_loss"])
    trainer.test(model, val, verbose=False)
    return {"val_loss": val_loss}
