"""The Lightning callback's hot path (issue 30): hooks it does not use are skipped by Lightning, a subclass keeps
the ones it overrides, and an error in a per-step hook becomes a problem of the run, not a crash."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import torch

from deviate_cb.capture.lightning_tap import LightningMetricTap
from deviate_cb.lightning import DeviateCallback
from lightning_cb.models import TinyModule, loader, trainer

UNUSED = (
    "on_after_backward",
    "on_before_optimizer_step",
    "on_before_zero_grad",
    "on_validation_batch_start",
    "on_test_batch_start",
    "on_predict_batch_start",
)


def test_unused_per_batch_hooks_are_none_and_lightning_skips_them(tmp_path: Path) -> None:
    cb = DeviateCallback(tmp_path / "runs")
    assert all(getattr(cb, name) is None for name in (*UNUSED, "on_before_backward"))
    assert callable(DeviateCallback(tmp_path / "runs", audit=2).on_before_backward)  # the audit records the loss
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = trainer([cb], max_epochs=2)
        fit.fit(TinyModule(), loader(), loader(shuffle=False))
        fit.test(TinyModule(), loader(shuffle=False))
    assert fit.state.finished
    table = pq.read_table(Path(cb.run_dir) / "metrics.parquet")  # type: ignore[arg-type]
    stages = set(zip(table.column("stage").to_pylist(), table.column("scope").to_pylist(), strict=True))
    assert {("train", "step"), ("train", "epoch"), ("val", "epoch"), ("test", "epoch")} <= stages


def test_a_subclass_keeps_the_hooks_it_overrides(tmp_path: Path) -> None:
    seen: list[tuple[str, int]] = []

    class Mine(DeviateCallback):
        def on_after_backward(self, trainer: Any, pl_module: Any) -> None:
            seen.append(("after_backward", trainer.global_step))

        def on_before_backward(self, trainer: Any, pl_module: Any, loss: torch.Tensor) -> None:
            super().on_before_backward(trainer, pl_module, loss)  # the parent's, though its instance slot is None
            seen.append(("before_backward", trainer.global_step))

    cb = Mine(tmp_path / "runs")
    assert cb.on_before_zero_grad is None and callable(cb.on_after_backward) and callable(cb.on_before_backward)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer([cb], max_epochs=1).fit(TinyModule(), loader())
    assert [step for kind, step in seen if kind == "after_backward"] == list(range(6))
    assert [step for kind, step in seen if kind == "before_backward"] == list(range(6))


def test_an_error_in_a_per_step_hook_is_a_problem_and_training_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    original = LightningMetricTap.step_values

    def failing(self: LightningMetricTap, stage: str, results: Any) -> Any:
        calls.append(1)
        if stage == "train" and len(calls) in (3, 4):
            raise KeyError("a bug in the tap")
        return original(self, stage, results)

    monkeypatch.setattr(LightningMetricTap, "step_values", failing)
    cb = DeviateCallback(tmp_path / "runs")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = trainer([cb], max_epochs=2)
        fit.fit(TinyModule(), loader())
    assert fit.state.finished and fit.global_step == 12
    manifest = json.loads((Path(cb.run_dir) / "run.json").read_text())  # type: ignore[arg-type]
    assert manifest["status"] == "completed"
    assert [(p["where"], p["error"], p["count"]) for p in manifest["problems"]] == [
        ("on_train_batch_end: metrics", "KeyError: 'a bug in the tap'", 2)
    ]
    shown = [str(w.message) for w in caught if type(w.message).__name__ == "RecordingWarning"]
    assert len(shown) == 1 and "on_train_batch_end: metrics" in shown[0]
    table = pq.read_table(Path(cb.run_dir) / "metrics.parquet")  # type: ignore[arg-type]
    steps = [s for s, sc in zip(table.column("step").to_pylist(), table.column("scope").to_pylist(), strict=True)
             if sc == "step"]  # fmt: skip
    assert len(steps) == 12 - 2  # the two failed steps' values are missing, every other step's kept
