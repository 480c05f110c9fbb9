"""Every Keras run records its step times in timings.parquet; profile=... adds per-op rows (torch backend)."""

from __future__ import annotations

from pathlib import Path

from deviate_cb.keras import DeviateCallback
from deviate_cb.store.timings import read_timings
from keras_cb.models import data, model


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
