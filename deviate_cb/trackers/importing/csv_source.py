"""Read Lightning's CSVLogger: every folder under LOGDIR holding a ``metrics.csv`` is one run.

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
import io
import math
import os
from pathlib import Path
from typing import Optional

import numpy as np

from deviate_cb.errors import UsageError
from deviate_cb.trackers.importing.hparams import HPARAMS_FILE, read_hparams
from deviate_cb.trackers.importing.imported import TrackerRun
from deviate_cb.trackers.importing.log_files import LogFileError, open_log_file, walk_logs

__all__ = ["METRICS_CSV", "read_csv_logs"]

METRICS_CSV = "metrics.csv"


def read_csv_logs(logdir: Path, notes: Optional[list[str]] = None) -> list[TrackerRun]:
    """Every CSVLogger run under ``logdir``, in path order; a line in ``notes`` for each file refused and for
    the folders not walked (links, a folder seen twice).

    Raises:
        UsageError: No ``metrics.csv`` under ``logdir`` (one that is not CSVLogger's is a note: its run skipped).
    """
    logdir = Path(logdir)
    notes = [] if notes is None else notes
    found = sorted(folder for folder, files in walk_logs(logdir, notes) if METRICS_CSV in files)
    if not found:
        raise UsageError(
            f"`LOGDIR` holds no {METRICS_CSV} (Lightning's CSVLogger writes <name>/version_N/{METRICS_CSV}). "
            f"Received: {logdir}."
        )
    runs = []
    for folder in found:
        try:
            run = _read_run(logdir, folder)
        except LogFileError as exc:
            notes.append(f"{exc}; run {_name(logdir, folder)} skipped")
            continue
        try:
            run.keys = read_hparams(folder / HPARAMS_FILE)
        except LogFileError as exc:
            notes.append(f"{exc}; run {run.run_name} imported without its hyperparameters")
        runs.append(run)
    return runs


def _name(logdir: Path, folder: Path) -> str:
    return folder.relative_to(logdir).as_posix() if folder != logdir else folder.name


def _read_run(logdir: Path, folder: Path) -> TrackerRun:
    path = folder / METRICS_CSV
    names: list[str] = []
    steps: list[int] = []
    values: list[float] = []
    with open_log_file(path) as raw, io.TextIOWrapper(raw, encoding="utf-8", newline="") as handle:
        try:
            reader = csv.reader(handle)
            header = next(reader, [])
            if "step" not in header:
                raise LogFileError(path, f"not a CSVLogger metrics file (no `step` column; header {header[:8]})")
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
        except (UnicodeDecodeError, csv.Error) as exc:
            raise LogFileError(path, f"not a UTF-8 CSV file ({' '.join(str(exc).split())[:120]})") from None
        ended = os.fstat(raw.fileno()).st_mtime
    return TrackerRun(
        tracker="csv-logs",
        uri=str(logdir.resolve()),
        run_id=str(folder.resolve()),
        experiment=logdir.resolve().name,
        run_name=_name(logdir, folder),
        ended=ended,
        keys={},
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
