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


class FakeEvent:
    """Stands in for ``torch.cuda.Event(enable_timing=True)`` to test our own deferred reading: ``record`` stamps
    the time a fake stream reaches it, ``elapsed_time`` is in milliseconds, ``synchronize`` is counted."""

    stream_time = 0.0
    made = 0
    waits = 0

    def __init__(self) -> None:
        FakeEvent.made += 1
        self.stamp: float | None = None

    def record(self) -> None:
        self.stamp = FakeEvent.stream_time

    def synchronize(self) -> None:
        FakeEvent.waits += 1

    def elapsed_time(self, end: FakeEvent) -> float:
        assert self.stamp is not None and end.stamp is not None
        return (end.stamp - self.stamp) * 1000.0


def test_device_events_are_read_at_the_flush_with_one_wait_and_recycled() -> None:
    FakeEvent.stream_time, FakeEvent.made, FakeEvent.waits = 0.0, 0, 0
    clock_reads: list[int] = []
    timer = StepTimer(clock=lambda: clock_reads.append(1) or 0.0, events=FakeEvent)
    for step in range(4):  # the fake stream spends (step + 1) * 0.25 s in each step, 1 s between steps
        timer.start_step()
        FakeEvent.stream_time += (step + 1) * 0.25
        assert timer.end_step("train", 0, step, profiled=step == 2) is None  # not read per step: no wait
        FakeEvent.stream_time += 1.0
    assert FakeEvent.waits == 0 and not clock_reads and FakeEvent.made == 8 and len(timer) == 4
    rows = timer.rows()
    assert [r["wall_s"] for r in rows] == [0.25, 0.5, 0.75, 1.0] and FakeEvent.waits == 1
    assert [(r["step"], r["profiled"]) for r in rows] == [(0, False), (1, False), (2, True), (3, False)]
    assert timer.compute()["train"]["steps"] == 3 and FakeEvent.waits == 1  # read once only
    for step in range(4, 6):  # the next flush's steps reuse the events read at the first
        timer.start_step()
        FakeEvent.stream_time += 2.0
        timer.end_step("train", 1, step)
    assert FakeEvent.made == 8
    assert [r["wall_s"] for r in timer.rows(4)] == [2.0, 2.0] and FakeEvent.waits == 2


def test_a_failed_event_read_is_tried_again_at_the_next_flush() -> None:
    class Failing(FakeEvent):
        fail = True

        def synchronize(self) -> None:
            if Failing.fail:
                raise RuntimeError("CUDA error")

    FakeEvent.stream_time = 0.0
    timer = StepTimer(events=Failing)
    timer.start_step()
    FakeEvent.stream_time += 0.5
    timer.end_step("train", 0, 0)
    with pytest.raises(RuntimeError, match="CUDA error"):
        timer.rows()
    Failing.fail = False
    assert [r["wall_s"] for r in timer.rows()] == [0.5]


def test_events_and_synchronize_do_not_mix() -> None:
    with pytest.raises(ValueError, match="not both"):
        StepTimer(synchronize=lambda: None, events=FakeEvent)


def test_cuda_events_only_for_a_cuda_device() -> None:
    from deviate_cb.capture.step_timer import cuda_events

    assert cuda_events("cpu") is None and cuda_events(None) is None
    factory = cuda_events("cuda:0")
    assert factory is not None and factory.keywords == {"enable_timing": True}  # type: ignore[attr-defined]


def test_a_chain_of_events_is_read_like_pairs_and_its_starts_are_reused() -> None:
    # An adapter's hot path (HostSteps on CUDA) records one event a step with record_event and hands the timer
    # [start, end] lists where a step's end is the next one's start; a read returns each start to the pool and
    # keeps the chain's last end out of it (the chain may go on from it), so no event is ever recorded twice
    # while still needed.
    FakeEvent.stream_time, FakeEvent.made, FakeEvent.waits = 0.0, 0, 0
    timer = StepTimer(events=FakeEvent)
    marks = [timer.record_event()]
    for step in range(3):
        FakeEvent.stream_time += step + 1.0
        marks.append(timer.record_event())
    timer.extend("train", 0, [0, 1, 2], [[marks[i], marks[i + 1]] for i in range(3)])
    assert FakeEvent.made == 4 and FakeEvent.waits == 0
    assert timer.columns().wall_s == [1.0, 2.0, 3.0] and FakeEvent.waits == 1
    FakeEvent.stream_time += 0.5  # the chain goes on from its last end, with an event read before
    following = timer.record_event()
    assert FakeEvent.made == 4 and following is not marks[-1] and any(following is e for e in marks[:3])
    timer.extend("train", 0, [3], [[marks[-1], following]])
    timer.start_step()  # the timer's own pair beside it, from the pool too
    FakeEvent.stream_time += 0.25
    timer.end_step("train", 0, 4)
    assert FakeEvent.made == 4
    assert timer.columns(3).wall_s == [0.5, 0.25] and FakeEvent.waits == 2
