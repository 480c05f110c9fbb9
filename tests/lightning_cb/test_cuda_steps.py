"""On CUDA the Lightning callback takes its hot path and times steps with CUDA events (issue 30): one event recorded
a step, no `.item()` per step, every step timed and every logged value recorded. Runs where a CUDA device is
present (the GPU machines the project is lent); skipped, saying so, elsewhere. The CPU side, with stand-in
events: tests/lightning_cb/test_hot_path.py."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import lightning as L
import pyarrow.parquet as pq
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from deviate_cb.lightning import DeviateCallback
from lightning_cb.models import TinyModule, trainer

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")


class _Spy(L.Callback):
    def __init__(self, deviate: DeviateCallback) -> None:
        self.deviate = deviate
        self.hot: list[bool] = []
        self.armed: list[bool] = []
        self.logged: list[float] = []

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: Any, *args: Any) -> None:
        self.hot.append(self.deviate._steps.hot is not None)
        self.armed.append(callable(self.deviate.on_train_batch_start))

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: Any, *args: Any) -> None:
        cache = trainer.fit_loop.epoch_loop._results["training_step.train_loss"]._forward_cache
        self.logged.append(cache.item())


def test_on_cuda_the_hot_path_times_every_step_with_events_and_every_value_is_recorded(tmp_path: Path) -> None:
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(96, 8, generator=gen)
    data = TensorDataset(x, (x[:, 0] > 0).long())
    cb = DeviateCallback(tmp_path / "runs")
    spy = _Spy(cb)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = trainer([spy, cb], max_epochs=2, accelerator="cuda", val_check_interval=0.5, num_sanity_val_steps=0)
        fit.fit(TinyModule(), DataLoader(data, batch_size=16, shuffle=True), DataLoader(data, batch_size=32))
    assert fit.state.finished and len(spy.logged) == 12
    assert all(spy.hot)  # a chain of CUDA events: the start hook runs at each chain's start only
    assert [i for i, armed in enumerate(spy.armed) if armed] == [0, 3, 6, 9]  # each epoch and after validation
    run = Path(cb.run_dir)  # type: ignore[arg-type]
    steps = [r for r in pq.read_table(run / "timings.parquet").to_pylist() if r["kind"] == "step"]
    assert [r["step"] for r in steps] == list(range(12))
    assert all(0 < r["wall_s"] < 10 for r in steps)  # GPU time between the step's two events
    values = [r["value"] for r in pq.read_table(run / "metrics.parquet").to_pylist() if r["name"] == "train_loss_step"]
    assert values == spy.logged
    assert json.loads((run / "run.json").read_text())["status"] == "completed"
