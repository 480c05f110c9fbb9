"""Constant-cost writes (issue 14, item 10): a flush writes only what it adds, and one attempt's parts only.

While a run is live each flush appends one part to ``metrics.parts/`` and ``timings.parts/``; the run's end
compacts them into ``metrics.parquet`` and ``timings.parquet``. Before, every flush rewrote both files whole (and
the timings writer read every earlier row back): the cost of a flush grew with the length of the run. The time
figures are in ``benchmarks/long_run.py``; here the behaviour: what each flush touches, what a killed process
leaves, and that nothing is merged twice or across attempts.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path
from typing import Any, Optional

import pyarrow.parquet as pq
import pytest
from lightning_cb.models import TinyModule, loader, trainer

from deviate_cb.capture.session import FLUSH_INTERVAL_ENV, RunSession
from deviate_cb.errors import UsageError
from deviate_cb.lightning import DeviateCallback
from deviate_cb.store.footer_summary import footer_summary
from deviate_cb.store.metrics import MetricsFile
from deviate_cb.store.parts import list_parts, parts_dir, write_part
from deviate_cb.store.run_directory import RunDirectory
from deviate_cb.store.timings import TIMINGS_FILE, append_timings_part, compact_timings, read_timings

REPO = Path(__file__).resolve().parents[2]


def record(session: RunSession, first_step: int, n: int) -> None:
    for step in range(first_step, first_step + n):
        session.recorder.update(
            step=step,
            epoch=step // 100,
            stage="train",
            scope="step",
            name="loss",
            value=1.0 / (step + 1),
            wall_time=0.0,
        )


def step_rows(epoch: int, n: int, wall: float = 0.1) -> list[dict[str, Any]]:
    return [
        {"stage": "train", "epoch": epoch, "step": epoch * n + k, "wall_s": wall, "profiled": False} for k in range(n)
    ]


def test_each_flush_writes_one_part_with_its_own_rows_and_touches_nothing_else(tmp_path: Path) -> None:
    session = RunSession(out_dir=tmp_path, experiment="long", seed=1)
    run = session.open()
    seen: dict[str, int] = {}
    for flush in range(30):
        record(session, flush * 100, 100)
        assert session.flush() == 100
        parts = list_parts(run.metrics_path)
        assert len(parts) == flush + 1
        for part in parts:  # earlier parts are never rewritten: a flush costs what it adds
            stamp = part.path.stat().st_mtime_ns
            assert seen.setdefault(part.path.name, stamp) == stamp
        newest = pq.read_table(parts[-1].path)
        assert newest.num_rows == 100 and newest.column("seq").to_pylist() == list(
            range(flush * 100, flush * 100 + 100)
        )
        assert not run.metrics_path.exists()  # no whole-file rewrite while the run is live
    assert run.metrics().read().num_rows == 3000  # a live reader sees every flushed row
    manifest = session.close()
    assert manifest.status == "completed"
    table = pq.read_table(run.metrics_path)
    assert table.column("seq").to_pylist() == list(range(3000))
    assert not parts_dir(run.metrics_path).exists()
    summary = footer_summary(pq.read_metadata(run.metrics_path))
    assert summary is not None and summary["rows"] == 3000
    assert manifest.metrics_summary["series"] == summary["series"]
    assert manifest.metrics_summary["file_size"] == run.metrics_path.stat().st_size


def test_timings_parts_replace_by_key_and_window_when_read_or_compacted(tmp_path: Path) -> None:
    op = {"op": "aten::mm", "device_type": "cpu", "calls": 3, "self_time_us": 1.0, "total_time_us": 2.0}
    append_timings_part(tmp_path, step_rows(0, 4), [{**op, "window": 0, "source": "torch"}])
    append_timings_part(tmp_path, step_rows(1, 4), [])
    # a resumed run records epoch 1 again, and window 0 again with other ops: later parts win
    append_timings_part(
        tmp_path, step_rows(1, 4, wall=0.5), [{**op, "op": "aten::add", "window": 0, "source": "torch"}]
    )
    assert len(list_parts(tmp_path / TIMINGS_FILE)) == 3
    live = read_timings(tmp_path)
    assert compact_timings(tmp_path) == 3
    assert not parts_dir(tmp_path / TIMINGS_FILE).exists()
    for table in (live, read_timings(tmp_path)):
        steps = [r for r in table.to_pylist() if r["kind"] == "step"]
        assert [r["step"] for r in steps] == list(range(8))
        assert [r["wall_s"] for r in steps] == [0.1] * 4 + [0.5] * 4
        assert [r["op"] for r in table.to_pylist() if r["kind"] == "op"] == ["aten::add"]
    compact_timings(tmp_path)  # nothing pending: the file stays as it is
    assert read_timings(tmp_path).num_rows == 9


def test_an_interrupted_compaction_never_merges_rows_twice(tmp_path: Path) -> None:
    metrics = MetricsFile(tmp_path / "metrics.parquet")
    columns = {"step": [0, 1], "epoch": [0, 0], "stage": ["val"] * 2, "scope": ["epoch"] * 2,
               "name": ["acc"] * 2, "value": [0.5, 0.6], "wall_time": [0.0, 0.0]}  # fmt: skip
    metrics.append_part(columns)
    kept = pq.read_table(list_parts(metrics.path)[0].path)
    assert metrics.compact() == 2
    # killed after the file was written but before the part was deleted: the part is back
    write_part(metrics.path, kept, attempt=1, first=0)
    assert MetricsFile(metrics.path).read().num_rows == 2
    assert MetricsFile(metrics.path).compact() == 0
    assert pq.read_table(metrics.path).num_rows == 2 and not parts_dir(metrics.path).exists()
    again = MetricsFile(metrics.path)
    again.append_part(columns)  # seq continues after the compacted rows
    assert again.read().column("seq").to_pylist() == [0, 1, 2, 3]


def test_parts_of_another_attempt_are_never_read_as_this_runs(tmp_path: Path) -> None:
    run = RunDirectory(tmp_path / "replica=0")
    run.update_manifest(status="running", attempt=2)
    columns = {"step": [0], "epoch": [0], "stage": ["val"], "scope": ["epoch"], "name": ["acc"], "value": [0.9],
               "wall_time": [0.0]}  # fmt: skip
    MetricsFile(run.metrics_path, attempt=1).append_part(columns)  # an orphan of attempt 1 wrote this
    append_timings_part(run.path, step_rows(0, 3), [], attempt=1)
    with pytest.warns(UserWarning, match=r"parts of attempt\(s\) \[1\], not of this run's attempt 2"):
        assert run.metrics().read().num_rows == 0
    assert read_timings(run.path).num_rows == 0
    run.metrics().append_part({**columns, "value": [0.1]})
    with pytest.warns(UserWarning, match="attempt"):
        assert run.compact_parts() == 1
    assert pq.read_table(run.metrics_path).column("value").to_pylist() == [0.1]
    assert [p.attempt for p in list_parts(run.metrics_path)] == [1]  # left alone, as evidence


KILLED = """
import os, sys, time
from deviate_cb.capture.session import FLUSH_INTERVAL_ENV, RunSession
from deviate_cb.errors import UsageError
session = RunSession(out_dir=sys.argv[1], experiment="killed", seed=0)
run = session.open()
session.timings = None
for flush in range(5):
    for step in range(flush * 50, flush * 50 + 50):
        session.recorder.update(step=step, epoch=flush, stage="train", scope="step", name="loss", value=float(step),
                                wall_time=0.0)
    session.flush()
for step in range(250, 260):  # recorded, never flushed: lost with the process
    session.recorder.update(step=step, epoch=5, stage="train", scope="step", name="loss", value=0.0, wall_time=0.0)
print(run.path, flush=True)
time.sleep(600)
"""


@pytest.mark.slow
def test_a_killed_process_leaves_whole_parts_that_settling_compacts(tmp_path: Path) -> None:
    script = tmp_path / "killed.py"
    script.write_text(textwrap.dedent(KILLED))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    env = {k: v for k, v in env.items() if not k.startswith("DEVIATE_")}
    proc = subprocess.Popen([sys.executable, str(script), str(tmp_path / "runs")], stdout=subprocess.PIPE, text=True,
                            env=env)  # fmt: skip
    try:
        assert proc.stdout is not None
        run_dir = Path(proc.stdout.readline().strip())
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    run = RunDirectory(run_dir)
    assert not run.metrics_path.exists() and len(list_parts(run.metrics_path)) == 5
    assert run.metrics().read().column("step").to_pylist() == list(range(250))  # every flushed row, none torn
    assert run.compact_parts() == 250
    assert pq.read_table(run.metrics_path).column("step").to_pylist() == list(range(250))
    assert json.loads((run_dir / "run.json").read_text())["status"] == "running"  # its settler says killed


def _watched_fit(tmp_path: Path, interval_s: Optional[float]) -> tuple[list[tuple[int, int, bool]], RunDirectory]:
    counts: list[tuple[int, int, bool]] = []  # after each epoch end: metric parts, timing parts, metrics.parquet

    class Watch(DeviateCallback):
        def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
            super().on_train_epoch_end(trainer, pl_module)
            run = self._session.run
            metrics_path = run.metrics_path
            timings = len(list_parts(run.path / TIMINGS_FILE))
            counts.append((len(list_parts(metrics_path)), timings, metrics_path.exists()))

    cb = Watch(tmp_path / "runs")
    if interval_s is not None:
        cb._session.flush_interval_s = interval_s
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer([cb], max_epochs=4).fit(TinyModule(), loader())
    run = RunDirectory(cb.run_dir)
    assert not parts_dir(run.metrics_path).exists() and not parts_dir(run.path / TIMINGS_FILE).exists()
    table = pq.read_table(run.metrics_path)
    assert table.column("seq").to_pylist() == list(range(table.num_rows))
    assert read_timings(run.path).num_rows == 4 * 6  # every training step timed once
    return counts, run


def test_lightning_run_appends_one_part_per_epoch_and_compacts_at_its_end(tmp_path: Path) -> None:
    counts, _ = _watched_fit(tmp_path, interval_s=0.0)  # every epoch end is due (epochs longer than the interval)
    assert counts == [(1, 1, False), (2, 2, False), (3, 3, False), (4, 4, False)]


def test_short_epochs_share_one_write_and_record_the_same_rows(tmp_path: Path) -> None:
    """Epochs shorter than FLUSH_INTERVAL_S write no part each (issue 30: a part costs about as much as a thousand
    steps' hooks): the run's end writes their metric values and step times straight into the two files, the same
    rows as a run that writes at every epoch end."""
    counts, run = _watched_fit(tmp_path / "short", interval_s=None)
    assert counts == [(0, 0, False), (0, 0, False), (0, 0, False), (0, 0, False)]
    _, every_run = _watched_fit(tmp_path / "every", interval_s=0.0)
    columns = ["seq", "step", "epoch", "stage", "scope", "name", "finite"]
    assert pq.read_table(run.metrics_path, columns=columns) == pq.read_table(every_run.metrics_path, columns=columns)
    keys = ["kind", "stage", "epoch", "step", "profiled"]
    assert read_timings(run.path).select(keys) == read_timings(every_run.path).select(keys)


def test_a_report_compacts_what_an_ended_run_left_and_says_what_it_cannot(tmp_path: Path) -> None:
    from deviate_cb.report.answers.summary import build_report
    from deviate_cb.report.reading.runs import find_runs

    session = RunSession(out_dir=tmp_path, experiment="left", seed=0)
    run = session.open()
    session.recorder.update(step=1, epoch=0, stage="val", scope="epoch", name="acc", value=0.75, wall_time=0.0)
    session.flush()
    run.update_manifest(status="completed")  # its own compaction failed (a full disk at its end)
    assert not run.metrics_path.exists()
    warnings_seen: list[str] = []
    [record] = find_runs(tmp_path, warnings_seen)
    assert warnings_seen == [] and record.completed
    assert pq.read_table(run.metrics_path).column("value").to_pylist() == [0.75]
    assert not parts_dir(run.metrics_path).exists()
    report = build_report(tmp_path)
    [row] = [r for r in report.rows if r.metric == "acc"]
    assert row.n == 1 and row.mean == 0.75

    # a part that cannot be merged (here: the study is read-only for it) is named, and its rows left out
    MetricsFile(run.metrics_path).append_part(
        {
            "step": [2],
            "epoch": [1],
            "stage": ["val"],
            "scope": ["epoch"],
            "name": ["acc"],
            "value": [0.5],
            "wall_time": [0.0],
        }
    )
    folder = parts_dir(run.metrics_path)
    os.chmod(run.path, 0o555)
    try:
        if os.access(run.path, os.W_OK):  # root writes anyway: make the merge fail another way
            os.chmod(run.path, 0o755)
            run.metrics_path.unlink()
            run.metrics_path.mkdir()  # a folder where the file belongs: the merge cannot replace it
        warnings_seen = []
        find_runs(tmp_path, warnings_seen)
    finally:
        os.chmod(run.path, 0o755)
    assert len(warnings_seen) == 1, warnings_seen
    assert str(folder) in warnings_seen[0] and "1 part(s) of this run could not be merged" in warnings_seen[0]


def test_the_flush_interval_is_read_from_the_environment_and_checked_before_training(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(FLUSH_INTERVAL_ENV, "0")
    assert DeviateCallback(tmp_path / "runs")._session.flush_interval_s == 0.0
    monkeypatch.setenv(FLUSH_INTERVAL_ENV, "2.5")
    assert DeviateCallback(tmp_path / "runs")._session.flush_interval_s == 2.5
    for bad in ("soon", "-1", "nan", "inf"):
        monkeypatch.setenv(FLUSH_INTERVAL_ENV, bad)
        with pytest.raises(UsageError) as raised:
            DeviateCallback(tmp_path / "runs")
        assert str(raised.value) == (
            f"`DEVIATE_FLUSH_INTERVAL_S` must be a number of seconds >= 0 (0: write at every epoch end). "
            f"Received: DEVIATE_FLUSH_INTERVAL_S={bad!r}."
        )
    assert not (tmp_path / "runs").exists()  # refused before anything was created


def test_deviate_replicate_refuses_a_bad_flush_interval_before_any_replica(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEVIATE_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env[FLUSH_INTERVAL_ENV] = "10s"
    done = subprocess.run(
        [sys.executable, "-m", "deviate_cb.cli.replicate", "-n", "2", "--out", str(tmp_path / "runs"), "--",
         sys.executable, "-c", "print(1)"],
        env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        "deviate-replicate: error: `DEVIATE_FLUSH_INTERVAL_S` must be a number of seconds >= 0 (0: write at every "
        "epoch end). Received: DEVIATE_FLUSH_INTERVAL_S='10s'."
    ]
    assert not (tmp_path / "runs").exists()
