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
from typing import Any

from deviate_cb.store.footer_summary import footer_summary, valid_summary
from deviate_cb.store.run_directory import METRICS_FILE

__all__ = ["footer_values", "manifest_values", "summary_values"]


def footer_values(files: Sequence[str], reduce: str) -> tuple[dict[tuple[str, str, str], tuple[Any, ...]], list[str]]:
    """What the footers of ``files`` say about each series, and the files without a trustworthy summary.

    Args:
        files: ``metrics.parquet`` paths.
        reduce: ``"last"``: ``(last seq, last value)`` per series; ``"summary"``: ``(largest, smallest, mean)``
            of the finite values, NaN when there are none.

    Returns:
        ``{(path, stage, name): values}`` for the files whose footer holds a summary that agrees with the file,
        and the other files (no summary, another writer, an unreadable file: the caller scans or checks them).
    """
    found: dict[tuple[str, str, str], tuple[Any, ...]] = {}
    rest: list[str] = []
    if not files:
        return found, rest  # without loading pyarrow (0.05-0.2 s): every value came from the manifests
    import pyarrow as pa
    import pyarrow.parquet as pq

    for path in files:
        try:
            summary = footer_summary(pq.read_metadata(path, memory_map=True))
        except (OSError, pa.ArrowException):
            summary = None
        if summary is None:
            rest.append(path)
            continue
        found.update(summary_values(path, summary, reduce))
    return found, rest


def manifest_values(runs: Sequence[Any], reduce: str) -> tuple[dict[tuple[str, str, str], tuple[Any, ...]], set[str]]:
    """What the manifests' copies of the series summaries say, for the runs whose metrics file has not changed
    since (same size and modification time), and the metrics files they cover.

    Args:
        runs: :class:`~deviate_cb.report.runs.RunRecord` objects (their ``metrics_summary``).
        reduce: As for :func:`footer_values`.
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
        found.update(summary_values(path, copy, reduce))
        covered.add(path)
    return found, covered


def summary_values(path: str, summary: dict[str, Any], reduce: str) -> dict[tuple[str, str, str], tuple[Any, ...]]:
    """One file's series summary as ``{(path, stage, name): values}`` (see :func:`footer_values`)."""
    found: dict[tuple[str, str, str], tuple[Any, ...]] = {}
    for stage, name, last_seq, last, high, low, total, count in summary["series"]:
        if reduce == "last":
            found[(path, stage, name)] = (last_seq, last)
        else:
            found[(path, stage, name)] = (high, low, total / count if count else math.nan)
    return found
