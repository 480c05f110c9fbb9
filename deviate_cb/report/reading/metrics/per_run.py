"""Per-run values of a study straight from the series summaries, without the long table.

Example:
    >>> skipped_warning("lr")[:40]
    'metric `lr`: cannot tell whether higher '
    >>> nonfinite_notes([], {("mlp", "algo", "val_loss"): (0.3, float("nan"), 0.2)}, "last")[0][:58]
    'metric `val_loss`: the last value of 1 of 3 runs is NaN or'
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional

from deviate_cb.report.reading.metrics.footers import series_problem
from deviate_cb.report.reading.metrics.names import direction_warnings, display_names, kept_metrics, name_directions
from deviate_cb.report.reading.metrics.scan import SeriesScan
from deviate_cb.report.reading.runs import RunRecord
from deviate_cb.stats.directions import resolve_direction
from deviate_cb.store.bounded_read import check_parquet
from deviate_cb.store.footer_summary import valid_summary
from deviate_cb.store.run_directory import METRICS_FILE

__all__ = ["PerRun", "PerRunRow", "nonfinite_notes", "per_run_from_scan", "rows_from_table", "skipped_warning"]

# (experiment, variant, run: an index into ``PerRun.completed``, metric, value)
PerRunRow = tuple[str, str, int, str, float]
_COLUMNS = ("experiment", "variant", "run", "metric", "value")


@dataclass(frozen=True)
class PerRun:
    """The per-run aggregates of a study: one row ``(experiment, variant, run, metric, value)`` per completed
    run and metric, where ``run`` is an index into ``completed``.

    Attributes:
        runs: Every run found, completed or not.
        completed: The completed runs, which the rows come from.
        warnings: One line per thing the reader skipped or could not tell.
        rows: The per-run values, as plain tuples.
    """

    runs: tuple[RunRecord, ...]
    completed: tuple[RunRecord, ...]
    warnings: tuple[str, ...]
    rows: tuple[PerRunRow, ...]

    def series(self) -> dict[tuple[str, str, str], list[float]]:
        """``(experiment, variant, metric) -> [value of each run]``, in row order."""
        series: dict[tuple[str, str, str], list[float]] = {}
        for experiment, variant, _, metric, value in self.rows:
            series.setdefault((experiment, variant, metric), []).append(value)
        return series


def rows_from_table(table: Any) -> tuple[PerRunRow, ...]:
    """The rows of a pyarrow per-run table (nulls become NaN)."""
    columns = [table.column(name).to_pylist() for name in _COLUMNS]
    return tuple((e, v, r, m, math.nan if x is None else x) for e, v, r, m, x in zip(*columns, strict=True))


def skipped_warning(metric: str) -> str:
    """Why ``--aggregate best`` left a metric out."""
    return (
        f"metric `{metric}`: cannot tell whether higher or lower is better, so --aggregate best skips it; "
        f"pass --direction {metric}=max or --direction {metric}=min."
    )


def per_run_from_scan(
    completed: Sequence[RunRecord],
    scan: SeriesScan,
    aggregate: str,
    directions: Optional[Mapping[str, str]],
    metrics: Optional[Sequence[str]],
    stage: Optional[str],
    warnings: list[str],
) -> Optional[tuple[PerRunRow, ...]]:
    """The per-run rows of ``completed`` from ``scan``'s summaries, or ``None`` when some file was not summarised.

    Raises:
        UsageError: ``stage`` or ``metrics`` match nothing.
    """
    from deviate_cb.errors import UsageError

    present = set(scan.files)  # the scan was made over every existing metrics file of the study
    files = {os.path.join(run.path, METRICS_FILE): i for i, run in enumerate(completed)}
    if aggregate not in ("last", "best", "mean") or any(os.path.isfile(p) for p in files.keys() - present):
        return None  # a metrics file the scan does not know of
    files = {path: i for path, i in files.items() if path in present}
    found = scan.result()
    if set(scan.uncovered) & set(files):
        return None
    series = [(files[path], st, name, values) for (path, st, name), values in found.items() if path in files]
    if stage is not None:
        stages = sorted({st for _, st, _, _ in series})
        series = [s for s in series if s[1] == stage]
        if not series and stages:
            raise UsageError(
                f"`--stage` matches no metric. Received: --stage={stage!r}. Expected one of: {', '.join(stages)}."
            )
    display = display_names(sorted({(st, name) for _, st, name, _ in series}))
    keep = kept_metrics(metrics, display, stage) if metrics else set(display.values())
    warnings += direction_warnings(directions, display)
    oriented = name_directions(directions, display)
    rows: list[PerRunRow] = []
    skipped: set[str] = set()
    for run, st, name, values in series:
        metric = display[(st, name)]
        if metric not in keep:
            continue
        if aggregate == "best":
            direction = resolve_direction(metric, oriented)
            if direction is None:
                skipped.add(metric)
                continue
            value = values[0] if direction == "max" else values[1]  # (largest, smallest, mean) of finite values
        else:
            value = values[1] if aggregate == "last" else values[2]  # last: (order key, value)
        record = completed[run]
        rows.append((record.experiment, record.variant, run, metric, float(value)))
    warnings += [skipped_warning(metric) for metric in sorted(skipped)]
    rows.sort()  # by (experiment, variant, run, metric): unique per row, so values are never compared
    return tuple(rows)


# How each aggregate treats the finite values it keeps, for the note
_KEPT = {"mean": "each run's mean is over its finite values", "best": "each run's best is its best finite value"}


def nonfinite_notes(
    completed: Sequence[RunRecord],
    values: Mapping[tuple[str, str, str], Sequence[float]],
    aggregate: str,
    *,
    stage: Optional[str] = None,
) -> list[str]:
    """One line per metric whose runs held NaN or Inf values: how many, and what the aggregate did with them.

    Args:
        completed: The runs the report's values come from (``Report.completed``; empty for a ``--table`` report).
        values: ``(experiment, variant, metric) -> per-run values`` (``Report.values``): the metrics reported.
        aggregate: The per-run aggregate (``last``, ``best``, ``mean``; ``as given`` for a ``--table`` report).
        stage: The ``--stage`` the report kept, if any.
    """
    runs: dict[str, int] = {}  # metric -> runs with the metric
    empty: dict[str, int] = {}  # metric -> runs whose aggregate is NaN or Inf
    for (_, _, metric), found in values.items():
        runs[metric] = runs.get(metric, 0) + len(found)
        empty[metric] = empty.get(metric, 0) + sum(not math.isfinite(v) for v in found)
    if aggregate not in _KEPT:  # last (or a --table's values as given): a run's one value, NaN or Inf
        return [_one_value_note(metric, bad, runs[metric], aggregate) for metric, bad in sorted(empty.items()) if bad]
    dropped: dict[str, int] = {}  # metric -> NaN/Inf values left out
    touched: dict[str, int] = {}  # metric -> runs that had any
    for (_, experiment, variant, stage_, name), n in _nonfinite_series(completed, stage).items():
        shown = next((m for m in (f"{stage_}/{name}", name) if (experiment, variant, m) in values), None)
        if shown is not None:  # a metric the report kept (its stage, --metric, a direction for best)
            dropped[shown] = dropped.get(shown, 0) + n
            touched[shown] = touched.get(shown, 0) + 1
    lines = []
    for metric, n in sorted(dropped.items()):
        line = (
            f"metric `{metric}`: {n} NaN or Inf value{'s' if n != 1 else ''}, in {touched[metric]} of "
            f"{runs[metric]} runs, {'are' if n != 1 else 'is'} left out of --aggregate {aggregate} ({_KEPT[aggregate]})"
        )
        k = empty.get(metric, 0)
        if k:
            line += f"; {k} of those runs {'has' if k == 1 else 'have'} no finite value and {'is' if k == 1 else 'are'}"
            line += " left out of the statistics"
        lines.append(line + ".")
    return lines


def _one_value_note(metric: str, bad: int, n: int, aggregate: str) -> str:
    if aggregate == "last":
        return (
            f"metric `{metric}`: the last value of {bad} of {n} runs is NaN or Inf; --aggregate last leaves those "
            "runs out of the statistics (mean and best use each run's finite values)."
        )
    return (
        f"metric `{metric}`: {bad} of {n} runs {'has' if bad == 1 else 'have'} a NaN or Inf value, left out of "
        "the statistics."
    )


def _nonfinite_series(completed: Sequence[RunRecord], stage: Optional[str]) -> dict[tuple[Any, ...], int]:
    """``(run index, experiment, variant, stage, name) -> NaN/Inf values`` of every series that has any;
    ``stage`` keeps that stage only."""
    out: dict[tuple[Any, ...], int] = {}
    for index, run in enumerate(completed):
        path = os.path.join(run.path, METRICS_FILE)
        if _all_finite(run, path):
            continue
        for (stage_, name), n in _count(path).items():
            if stage is None or stage_ == stage:
                out[(index, run.experiment, run.variant, stage_, name)] = n
    return out


def _all_finite(run: RunRecord, path: str) -> bool:
    """Whether the series summary of ``path`` (the manifest's copy while the file is unchanged, else its footer)
    says every named row holds a finite value: its series' finite counts add up to the file's rows."""
    summary = _summary(run, path)
    if summary is None or series_problem(summary) is not None:
        return False
    return sum(entry[7] for entry in summary["series"]) == summary["rows"]


def _summary(run: RunRecord, path: str) -> Optional[dict[str, Any]]:
    copy = valid_summary(run.metrics_summary)
    if copy is not None:
        try:
            stat = os.stat(path)
        except OSError:
            return None
        if (copy.get("file_size"), copy.get("file_mtime_ns")) == (stat.st_size, stat.st_mtime_ns):
            return copy
    import pyarrow as pa

    from deviate_cb.store.footer_summary import footer_summary

    try:
        return footer_summary(check_parquet(path))  # a FIFO or too many rows: HostileFileError (a ValueError)
    except (OSError, ValueError, pa.ArrowException):
        return None


def _count(path: str) -> dict[tuple[str, str], int]:
    """``(stage, name) -> NaN/Inf values`` of one metrics file (a null value counts as NaN, a null stage is
    ``unknown``, rows without a name are not metrics); empty when the file cannot be read."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    try:
        check_parquet(path)  # a FIFO or too many rows: HostileFileError (a ValueError), never read
        table = pq.read_table(path, columns=["stage", "name", "value"])
        value = pc.cast(table.column("value"), pa.float64()).fill_null(math.nan)
        bad = np.flatnonzero(~np.isfinite(value.to_numpy()))
        if not bad.size:
            return {}
        picked = table.take(pa.array(bad))
    except (OSError, pa.ArrowException, ValueError):
        return {}
    counts: dict[tuple[str, str], int] = {}
    stages = picked.column("stage").to_pylist()
    for stage, name in zip(stages, picked.column("name").to_pylist(), strict=True):
        if name is not None:
            key = ("unknown" if stage is None else str(stage), str(name))
            counts[key] = counts.get(key, 0) + 1
    return counts
