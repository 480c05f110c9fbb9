"""Every Lightning run records its step times in timings.parquet; profile=... adds per-op rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from deviate_cb.capture.step_timer import step_statistics
from deviate_cb.lightning import DeviateCallback, ProfileWindow
from deviate_cb.store.timings import read_timings
from lightning_cb.models import TinyModule, loader, trainer


def _fit(tmp_path: Path, epochs: int = 2, **cb_kwargs) -> Path:
    cb = DeviateCallback(tmp_path / "runs", experiment="t", **cb_kwargs)
    trainer([cb], max_epochs=epochs).fit(TinyModule(), loader(), loader(shuffle=False))
    assert cb.run_dir is not None
    return Path(cb.run_dir)


def test_every_training_step_has_a_time(tmp_path: Path) -> None:
    run_dir = _fit(tmp_path, epochs=3)
    table = read_timings(run_dir)
    steps = [r for r in table.to_pylist() if r["kind"] == "step"]
    assert [r["step"] for r in steps] == list(range(18))  # 96 samples / 16 = 6 batches x 3 epochs
    assert [r["epoch"] for r in steps] == [e for e in range(3) for _ in range(6)]
    assert {r["stage"] for r in steps} == {"train"} and not any(r["profiled"] for r in steps)
    assert all(0 < r["wall_s"] < 5 for r in steps)
    assert not [r for r in table.to_pylist() if r["kind"] == "op"]  # no profiler unless asked


def test_profile_window_records_real_aten_ops_and_flags_its_steps(tmp_path: Path) -> None:
    run_dir = _fit(tmp_path, epochs=2, profile=ProfileWindow(wait=2, warmup=1, active=3))
    rows = read_timings(run_dir).to_pylist()
    steps = [r for r in rows if r["kind"] == "step"]
    assert [r["profiled"] for r in steps] == [False, False, True, True, True, True] + [False] * 6
    ops = [r for r in rows if r["kind"] == "op"]
    names = {r["op"] for r in ops}
    assert {"aten::addmm", "aten::relu"} <= names or {"aten::linear", "aten::relu"} <= names, sorted(names)[:20]
    assert all(r["source"] == "torch" and r["window"] == 0 and r["calls"] > 0 for r in ops)
    train = step_statistics(steps)["train"]
    assert (train["steps"], train["profiled"]) == (8, 4)  # profiled steps are left out of the statistics


def test_a_window_still_open_at_the_end_is_kept(tmp_path: Path) -> None:
    run_dir = _fit(tmp_path, epochs=1, profile={"wait": 4, "warmup": 0, "active": 10})  # 6 steps only
    ops = [r for r in read_timings(run_dir).to_pylist() if r["kind"] == "op"]
    assert any(r["op"].startswith("aten::") for r in ops)


@pytest.mark.parametrize(
    ("profile", "error", "message"),
    [
        ({"wait": -1}, ValueError, "`wait` must be a non-negative integer. Received: wait=-1."),
        ({"every": 3}, ValueError, "`profile` keys must be among wait, warmup, active, repeat."),
        (3, TypeError, "`profile` must be True, False, None, a dict"),
    ],
)
def test_bad_profile_is_one_line(profile, error, message) -> None:
    with pytest.raises(error) as info:
        DeviateCallback(profile=profile)
    assert str(info.value).startswith(message) and "\n" not in str(info.value)
