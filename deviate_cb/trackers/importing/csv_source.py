"""Read Lightning's CSVLogger: every folder under LOGDIR holding a ``metrics.csv`` is one run.

``metrics.csv`` has one column per logged name plus ``step`` and ``epoch``, one row per logging call, and an
empty cell where a name was not logged; each filled cell becomes one recorded value at the row's ``step``. The
``epoch`` column fills the run's ``epoch`` column. CSVLogger records no time, so ``wall_time`` is null, and no run
status: every run is ``completed`` unless ``--min-step`` says how far a finished run gets
(:func:`deviate_cb.trackers.importing.imported.apply_min_step`). ``hparams.yaml`` beside the file gives the
``hparams.<key>`` keys (:mod:`~deviate_cb.trackers.importing.hparams`). The run's id is its folder's absolute
path; its name, the path below LOGDIR (``version_0``).

Example:
    >>> import tempfile
    >>> logs = Path(tempfile.mkdtemp())
    >>> (logs / "version_0").mkdir()
    >>> _ = (logs / "version_0" / "metrics.csv").write_text("epoch,step,val_acc,train_loss\\n0,4,,0.9\\n0,4,0.5,\\n")
    >>> [(r.run_name, list(r.names), r.values.tolist()) for r in read_csv_logs(logs)]
    [('version_0', ['epoch', 'train_loss', 'epoch', 'val_acc'], [0.0, 0.9, 0.0, 0.5])]
"""

from __future__ import annotations

import csv
import math
import os
from pathlib import Path

import numpy as np

from deviate_cb.errors import UsageError
from deviate_cb.trackers.importing.hparams import HPARAMS_FILE, read_hparams
from deviate_cb.trackers.importing.imported import TrackerRun

__all__ = ["METRICS_CSV", "read_csv_logs"]

METRICS_CSV = "metrics.csv"


def read_csv_logs(logdir: Path) -> list[TrackerRun]:
    """Every CSVLogger run under ``logdir``, in path order.

    Raises:
        UsageError: No ``metrics.csv`` under ``logdir``, or one without a ``step`` column.
    """
    logdir = Path(logdir)
    found = sorted(Path(folder) for folder, _, files in os.walk(logdir) if METRICS_CSV in files)
    if not found:
        raise UsageError(
            f"`LOGDIR` holds no {METRICS_CSV} (Lightning's CSVLogger writes <name>/version_N/{METRICS_CSV}). "
            f"Received: {logdir}."
        )
    return [_read_run(logdir, folder) for folder in found]


def _read_run(logdir: Path, folder: Path) -> TrackerRun:
    path = folder / METRICS_CSV
    names: list[str] = []
    steps: list[int] = []
    values: list[float] = []
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.reader(handle)
        header = next(reader, [])
        if "step" not in header:
            raise UsageError(f"{path}: not a CSVLogger metrics file (no `step` column). Received: {header[:8]}.")
        step_at = header.index("step")
        columns = [(i, name) for i, name in enumerate(header) if i != step_at]
        for row in reader:
            step = _number(row[step_at]) if step_at < len(row) else None
            if step is None or not math.isfinite(step):
                continue
            for i, name in columns:
                if i < len(row):
                    value = _number(row[i])
                    if value is not None:
                        names.append(name)
                        steps.append(int(step))
                        values.append(value)
    stat = path.stat()
    return TrackerRun(
        tracker="csv-logs",
        uri=str(logdir.resolve()),
        run_id=str(folder.resolve()),
        experiment=logdir.resolve().name,
        run_name=folder.relative_to(logdir).as_posix() if folder != logdir else folder.name,
        ended=stat.st_mtime,
        keys=read_hparams(folder / HPARAMS_FILE),
        names=names,
        steps=np.asarray(steps, dtype=np.int64),
        values=np.asarray(values, dtype=np.float64),
        wall_times=np.full(len(values), np.nan),
    )


def _number(text: str) -> float | None:
    text = text.strip()
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        return None
