"""The hot path records exactly what the module logged (issue 30): every step value, each epoch value, the same
columns, the steps and epochs Lightning gave them, and one timed row per step."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import torch
from torch.nn import functional as F

from deviate_cb.lightning import DeviateCallback
from deviate_cb.store.metrics import metrics_schema
from deviate_cb.store.timings import read_timings
from lightning_cb.models import TinyModule, loader, trainer


class Logging(TinyModule):
    """Logs two metrics every step and keeps, by itself, what it logged (as floats, after the fact)."""

    def __init__(self) -> None:
        super().__init__()
        self.logged: list[tuple[int, int, str, torch.Tensor]] = []

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        logits = self(x)
        loss = F.cross_entropy(logits, y)
        acc = (logits.argmax(1) == y).float().mean()
        self.log("train_loss", loss, on_step=True, on_epoch=True)
        self.log("train_acc", acc, on_step=True, on_epoch=False)
        # the step the trainer's global_step reads after this batch's optimizer step
        for name, value in (("train_loss_step", loss), ("train_acc", acc)):
            self.logged.append((self.global_step + 1, self.current_epoch, name, value.detach().clone()))
        return loss


def test_metrics_parquet_holds_what_the_module_logged(tmp_path: Path) -> None:
    module = Logging()
    cb = DeviateCallback(tmp_path / "runs", experiment="values", seed=0)
    trainer([cb], max_epochs=3).fit(module, loader())
    assert cb.run_dir is not None
    table = pq.read_table(Path(cb.run_dir) / "metrics.parquet")
    assert table.schema.names == metrics_schema().names  # same columns
    rows = table.to_pylist()
    step_rows = [(r["step"], r["epoch"], r["name"], r["value"]) for r in rows if r["scope"] == "step"]
    expected = [(step, epoch, name, value.item()) for step, epoch, name, value in module.logged]
    assert step_rows == expected  # the same values, bit for bit, in logging order
    assert [r["seq"] for r in rows] == list(range(len(rows)))
    assert all(r["stage"] == "train" and r["finite"] and r["wall_time"] > 0 for r in rows)
    epoch_rows = [(r["step"], r["epoch"], r["name"]) for r in rows if r["scope"] == "epoch"]
    assert epoch_rows == [(6 * (e + 1), e, "train_loss_epoch") for e in range(3)]  # 6 batches an epoch
    for epoch in range(3):  # the epoch value is Lightning's mean of the epoch's step values (equal batch sizes)
        values = [v.item() for _, e, n, v in module.logged if e == epoch and n == "train_loss_step"]
        (recorded,) = [r["value"] for r in rows if r["scope"] == "epoch" and r["epoch"] == epoch]
        assert abs(recorded - sum(values) / len(values)) < 1e-6
    steps = [r for r in read_timings(Path(cb.run_dir)).to_pylist() if r["kind"] == "step"]
    assert [(r["step"], r["epoch"]) for r in steps] == [(k, k // 6) for k in range(18)]
    assert all(isinstance(r["wall_s"], float) and r["wall_s"] > 0 for r in steps)
