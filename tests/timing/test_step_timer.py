"""StepTimer and timings.parquet: a row for every step, profiled steps flagged and left out, no duplicates."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from deviate_cb.capture.step_timer import StepTimer, step_statistics
from deviate_cb.store.timings import TIMINGS_FILE, read_timings, timings_schema, write_timings


def op_row(op: str, window: int, self_us: float = 1.0) -> dict:
    return {
        "op": op,
        "device_type": "cpu",
        "calls": 1,
        "self_time_us": self_us,
        "total_time_us": self_us,
        "window": window,
        "source": "torch",
    }


def test_every_step_has_a_row_and_profiled_steps_are_left_out_of_the_statistics() -> None:
    timer = StepTimer()
    for step in range(10):
        timer.start_step()
        sum(range(100))
        timer.end_step("train", epoch=step // 5, step=step, profiled=step in (3, 4))
    rows = timer.rows()
    assert [r["step"] for r in rows] == list(range(10)) and [r["epoch"] for r in rows] == [0] * 5 + [1] * 5
    assert all(r["wall_s"] > 0 for r in rows)
    stats = timer.compute()["train"]
    assert stats["steps"] == 8 and stats["profiled"] == 2
    assert stats["total_s"] == pytest.approx(sum(r["wall_s"] for r in rows if not r["profiled"]))


def test_synchronize_is_called_before_each_clock_read() -> None:
    calls = []
    timer = StepTimer(synchronize=lambda: calls.append("sync"))
    timer.start_step()
    timer.end_step("train", 0, 0)
    assert calls == ["sync", "sync"]


def test_end_without_start_records_nothing_and_reset_forgets() -> None:
    timer = StepTimer()
    assert timer.end_step("train", 0, 0) is None and len(timer) == 0
    timer.update("val", 0, 0, 0.5)
    timer.reset()
    assert len(timer) == 0 and timer.compute() == {}


def test_bad_synchronize_is_one_line_naming_the_argument() -> None:
    with pytest.raises(TypeError, match=r"^`synchronize` must be a callable or None\. Received: synchronize=3\.$"):
        StepTimer(synchronize=3)  # type: ignore[arg-type]


def test_write_merges_by_step_and_by_window_so_a_resumed_run_never_duplicates(tmp_path: Path) -> None:
    first = StepTimer()
    for step in range(4):
        first.update("train", 0, step, 1.0)
    write_timings(tmp_path, first.rows(), [op_row("aten::mm", 0), op_row("aten::add", 0)])
    resumed = StepTimer()  # resumed from a checkpoint at step 2: steps 2 and 3 run again
    for step in range(2, 6):
        resumed.update("train", 0, step, 2.0)
    write_timings(tmp_path, resumed.rows(), [op_row("aten::mm", 0, 7.0)])
    table = read_timings(tmp_path)
    assert table.schema == timings_schema()
    steps = [r for r in table.to_pylist() if r["kind"] == "step"]
    assert sorted((r["step"], r["wall_s"]) for r in steps) == [(0, 1.0), (1, 1.0)] + [(k, 2.0) for k in range(2, 6)]
    ops = [r for r in table.to_pylist() if r["kind"] == "op"]
    assert [(r["op"], r["self_time_us"]) for r in ops] == [("aten::mm", 7.0)]
    assert all(r["op"] is None for r in steps) and all(r["stage"] is None for r in ops)
    assert pq.read_table(tmp_path / TIMINGS_FILE).num_rows == 7
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_rows_without_the_columns_are_refused_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"^`op_rows` rows must have the columns .* Received a row without \['window'"):
        write_timings(tmp_path, [], [{k: v for k, v in op_row("x", 0).items() if k != "window"}])


def test_read_without_a_file_is_an_empty_table(tmp_path: Path) -> None:
    assert read_timings(tmp_path).num_rows == 0
    assert step_statistics([]) == {}
