"""Read the per-series summaries that the store keeps in each ``metrics.parquet`` footer.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> from deviate_cb.store.metrics import MetricsFile
    >>> path = str(Path(tempfile.mkdtemp()) / "metrics.parquet")
    >>> _ = MetricsFile(Path(path)).append({"step": [0, 1], "epoch": [0, 0], "stage": ["val"] * 2,
    ...                                     "scope": ["step"] * 2, "name": ["acc"] * 2, "value": [0.5, 0.7],
    ...                                     "wall_time": [0.0, 1.0]})
    >>> footer_values([path, "/no/such/file"], "last")
    ({('...metrics.parquet', 'val', 'acc'): (1, 0.7)}, ['/no/such/file'])
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any, Optional

from deviate_cb.store.bounded_read import HostileFileError, check_parquet
from deviate_cb.store.footer_summary import footer_summary, valid_summary
from deviate_cb.store.run_directory import METRICS_FILE

__all__ = ["footer_values", "manifest_values", "series_problem", "summary_values"]


def footer_values(
    files: Sequence[str], reduce: str, problems: Optional[list[str]] = None
) -> tuple[dict[tuple[str, str, str], tuple[Any, ...]], list[str]]:
    """What the footers of ``files`` say about each series, and the files without a trustworthy summary.

    Args:
        files: ``metrics.parquet`` paths.
        reduce: ``"last"``: ``(last seq, last value)`` per series; ``"summary"``: ``(largest, smallest, mean)``
            of the finite values, NaN when there are none.
        problems: Where to append one line per file whose footer summary is malformed (that file is returned
            with the others to read), or that :func:`~deviate_cb.store.bounded_read.check_parquet` refuses (a FIFO,
            more rows than a run holds: that file is neither found nor returned, so nothing reads it).

    Returns:
        ``{(path, stage, name): values}`` for the files whose footer holds a summary that agrees with the file,
        and the other files (no summary, another writer, an unreadable file: the caller scans or checks them).
    """
    found: dict[tuple[str, str, str], tuple[Any, ...]] = {}
    rest: list[str] = []
    if not files:
        return found, rest  # without loading pyarrow (0.05-0.2 s): every value came from the manifests
    import pyarrow as pa

    for path in files:
        try:
            summary = footer_summary(check_parquet(path))
        except HostileFileError as exc:  # a FIFO, too many rows: never read, by DuckDB either
            if problems is not None:
                problems.append(f"{exc.path}: {exc.reason}; skipped.")
            continue
        except (OSError, ValueError, pa.ArrowException):
            summary = None
        if summary is None:
            rest.append(path)
            continue
        try:
            found.update(summary_values(path, summary, reduce))
        except ValueError as exc:
            if problems is not None:
                problems.append(f"{path}: the series summary in its footer is malformed ({exc}); the file is read.")
            rest.append(path)
    return found, rest


def manifest_values(runs: Sequence[Any], reduce: str) -> tuple[dict[tuple[str, str, str], tuple[Any, ...]], set[str]]:
    """What the manifests' copies of the series summaries say, for the runs whose metrics file has not changed
    since (same size and modification time), and the metrics files they cover.

    Args:
        runs: :class:`~deviate_cb.report.reading.runs.RunRecord` objects (their ``metrics_summary``).
        reduce: As for :func:`footer_values`.

    A malformed copy is not used (its metrics file is then read); :func:`~deviate_cb.report.reading.runs.read_runs` has
    warned about it and left it out of the run's record already.
    """
    found: dict[tuple[str, str, str], tuple[Any, ...]] = {}
    covered: set[str] = set()
    for run in runs:
        copy = run.metrics_summary
        if valid_summary(copy) is None:
            continue
        path = os.path.join(run.path, METRICS_FILE)
        try:
            stat = os.stat(path)
        except OSError:
            continue
        if (copy.get("file_size"), copy.get("file_mtime_ns")) != (stat.st_size, stat.st_mtime_ns):
            continue  # rewritten since: its footer (or a scan) says what it holds now
        try:
            found.update(summary_values(path, copy, reduce))
        except ValueError:
            continue
        covered.add(path)
    return found, covered


def summary_values(path: str, summary: dict[str, Any], reduce: str) -> dict[tuple[str, str, str], tuple[Any, ...]]:
    """One file's series summary as ``{(path, stage, name): values}`` (see :func:`footer_values`).

    Raises:
        ValueError: A series entry is not ``[stage, name, last_seq, last, max, min, sum, n_finite]`` with texts,
            an integer and numbers (a summary another writer, or a damaged file, left).

    Example:
        >>> summary_values("m.parquet", {"series": [["val", "acc", 3]]}, "last")
        Traceback (most recent call last):
        ...
        ValueError: series entry 0 is not [stage, name, last_seq, last, max, min, sum, n_finite]
    """
    problem = series_problem(summary)
    if problem is not None:
        raise ValueError(problem)
    found: dict[tuple[str, str, str], tuple[Any, ...]] = {}
    for stage, name, last_seq, last, high, low, total, count in summary["series"]:
        if reduce == "last":
            found[(path, stage, name)] = (last_seq, last)
        else:
            found[(path, stage, name)] = (high, low, total / count if count else math.nan)
    return found


def series_problem(summary: dict[str, Any]) -> Optional[str]:
    """What is wrong with the ``series`` of a summary (one that :func:`~deviate_cb.store.footer_summary.valid_summary`
    accepts), or ``None`` when every entry is as the store writes it.

    Example:
        >>> series_problem({"series": [["val", "acc", 1, 0.5, 0.5, 0.5, 0.5, 1], ["val", "loss"]]})
        'series entry 1 is not [stage, name, last_seq, last, max, min, sum, n_finite]'
    """
    for index, entry in enumerate(summary["series"]):
        if not _series_entry(entry):
            return f"series entry {index} is not [stage, name, last_seq, last, max, min, sum, n_finite]"
    return None


def _series_entry(entry: Any) -> bool:
    """Whether ``entry`` is ``[stage, name, last_seq, last, max, min, sum, n_finite]`` as the store writes it."""
    if not isinstance(entry, (list, tuple)) or len(entry) != 8:
        return False
    stage, name, last_seq, *numbers, count = entry
    integers = (last_seq, count)
    return (
        isinstance(stage, str)
        and isinstance(name, str)
        and all(isinstance(n, int) and not isinstance(n, bool) for n in integers)
        and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in numbers)
    )
