"""Every Keras run records its step times in timings.parquet; profile=... adds per-op rows (torch backend)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import keras
import pytest

from deviate_cb.keras import DeviateCallback
from deviate_cb.store.timings import read_timings
from keras_cb.models import data, model
from tests.helpers.stand_in_events import StampEvent


def test_step_times_and_profiled_ops(tmp_path: Path) -> None:
    x, y = data()
    cb = DeviateCallback(tmp_path / "runs", experiment="k", profile={"wait": 1, "warmup": 1, "active": 2})
    model().fit(x, y, batch_size=40, epochs=2, validation_split=0.2, callbacks=[cb], verbose=0)
    rows = read_timings(cb.run_dir).to_pylist()
    steps = [r for r in rows if r["kind"] == "step"]
    assert [(r["epoch"], r["step"]) for r in steps] == [(e, e * 4 + k) for e in range(2) for k in range(4)]
    assert [r["profiled"] for r in steps] == [False, True, True, True] + [False] * 4
    assert all(0 < r["wall_s"] < 5 for r in steps)
    ops = {r["op"] for r in rows if r["kind"] == "op"}
    assert any(op.startswith("aten::") for op in ops), sorted(ops)[:10]


class ClockSpy(keras.callbacks.Callback):
    """Reads ``time.perf_counter`` (the step clock) at each training batch start and when validation begins."""

    def __init__(self) -> None:
        super().__init__()
        self.starts: list[float] = []
        self.validation: list[float] = []

    def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
        self.starts.append(time.perf_counter())

    def on_test_begin(self, logs: Any = None) -> None:
        self.validation.append(time.perf_counter())


class SlowValidation(keras.callbacks.Callback):
    def on_test_batch_end(self, batch: int, logs: Any = None) -> None:
        time.sleep(0.05)


@pytest.mark.parametrize("clock", ["host", "events"])
def test_each_step_lasts_from_its_start_to_the_next_and_the_last_ends_where_validation_begins(
    tmp_path: Path, clock: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Keras calls the callbacks in list order: DeviateCallback reads its clock between the two spies' readings, so
    # each step's recorded time lies between what the spies saw (no tolerance: one monotonic clock); the last step
    # of an epoch ends when validation begins, without the (slow) validation in it. With device events (as on torch
    # with CUDA; here events stamped with the host clock) each reading is an event: one a step and one where an
    # epoch's steps end, read when the steps are written, never a step at a time.
    if clock == "events":
        monkeypatch.setattr("deviate_cb.keras.step_events", lambda backend: StampEvent)
        StampEvent.reset()
    x, y = data()
    before, after = ClockSpy(), ClockSpy()
    cb = DeviateCallback(tmp_path / "runs", experiment="k")
    model().fit(
        x,
        y,
        batch_size=40,
        epochs=2,
        validation_split=0.2,
        callbacks=[before, cb, after, SlowValidation()],
        verbose=0,
    )
    steps = [r for r in read_timings(cb.run_dir).to_pylist() if r["kind"] == "step"]
    assert [(r["epoch"], r["step"], r["profiled"]) for r in steps] == [
        (e, e * 4 + k, False) for e in range(2) for k in range(4)
    ]
    for i, row in enumerate(steps):
        epoch, k = divmod(i, 4)
        if k < 3:
            low, high = before.starts[i + 1] - after.starts[i], after.starts[i + 1] - before.starts[i]
        else:
            low, high = before.validation[epoch] - after.starts[i], after.validation[epoch] - before.starts[i]
        assert low - 1e-9 <= row["wall_s"] <= high + 1e-9, (i, low, row["wall_s"], high)
    assert "problems" not in json.loads((Path(cb.run_dir) / "run.json").read_text())
    if clock == "events":
        assert StampEvent.made == 8 + 2  # one a step, one at each epoch's end of training
        assert 1 <= StampEvent.waits <= 3  # at the flushes, never a step
