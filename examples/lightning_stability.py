"""Model stability beyond accuracy: record per-sample predictions and final weights of each replica.

The classifier of ``lightning_mlp.py``, with ``DeviateCallback(predictions=..., weights=...)``: the callback
predicts on the held-out set after every other epoch and at the end of ``fit`` (``predictions.parquet``, with a
sub-group column), and stores a sketch of the final weights (``weights_sketch.npz``). ``trainer.test`` then
records the outputs of the module's own ``test_step`` as the ``final`` snapshot, without a second pass.

    deviate-replicate --trainer examples/lightning_stability.py:main -n 4 --variant algo+impl --out runs/
    deviate report runs/

Replicas with the same accuracy still disagree on individual samples (prediction churn), differ more on some
classes and sub-groups than overall, and end far apart in weight space. Under ``--variant control`` the
replicas are identical: churn 0 and weight distance 0.
"""

from __future__ import annotations

from typing import Any

import lightning as L
import torch
from lightning_mlp import MLP, make_data  # the sibling example (its directory is on sys.path)
from torch.utils.data import DataLoader, Dataset

from deviate_cb.lightning import DeviateCallback, Predictions, Weights


class WithGroup(Dataset):
    """Held-out samples as dicts, with a synthetic sub-group (``site``: ``a`` for one sample in five)."""

    def __init__(self, base: Any) -> None:
        self.x, self.y = base.tensors

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> dict[str, Any]:
        return {"x": self.x[i], "y": self.y[i], "site": "a" if i % 5 == 0 else "b"}


class GroupedMLP(MLP):
    """The MLP whose ``test_step`` also returns the batch's logits, so ``trainer.test`` yields predictions."""

    def test_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> dict[str, torch.Tensor]:
        logits = self(batch["x"])
        self.log("test_acc", (logits.argmax(dim=1) == batch["y"]).float().mean(), batch_size=len(batch["y"]))
        return {"logits": logits}


def main(epochs: int = 4) -> dict[str, float]:
    """Train once, predict on the held-out set, and return the test accuracy."""
    train, val = make_data()
    held_out = DataLoader(WithGroup(val), batch_size=200)  # a fixed order: the sample index is the position
    predictions = Predictions(
        data=held_out,  # predicted on by the callback after every 2nd epoch ...
        every_n_epochs=2,
        from_stage="test",  # ... and the outputs of trainer.test() become the final snapshot
        groups="site",  # a field of the dict batches; labels: the batch's "y"
        predict_fn=lambda module, batch: module(batch["x"]),
    )
    callback = DeviateCallback(predictions=predictions, weights=Weights(sketch_dim=256))
    trainer = L.Trainer(
        max_epochs=epochs,
        callbacks=[callback],
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        accelerator="cpu",
    )
    model = GroupedMLP()
    trainer.fit(model, DataLoader(train, batch_size=32, shuffle=True))
    trainer.test(model, held_out, verbose=False)
    return {name: float(value) for name, value in trainer.callback_metrics.items() if name.startswith("test_")}


if __name__ == "__main__":
    print(main())
