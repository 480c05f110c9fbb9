"""Per-run values of a study straight from the series summaries, without the long table.

When every completed run's metrics file was summarised (from its footer, or by the DuckDB scan), ``last``,
``best`` and ``mean`` need no further pass over the data: this module turns the summaries into the report's
per-run rows (``experiment``, ``variant``, ``run``, ``metric``, ``value``) in plain Python, with the same
metric names, filters, directions and warnings as :func:`deviate_cb.stats.aggregate_table` on the long table
(``tests/report/test_footer_summaries.py`` checks both give the same report). :class:`PerRun` holds them as
plain tuples, so that a report built from summaries never loads pyarrow.

Example:
    >>> skipped_warning("lr")[:40]
    'metric `lr`: cannot tell whether higher '
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional

from deviate_cb.report.metrics.names import direction_warnings, display_names, kept_metrics, name_directions
from deviate_cb.report.metrics.scan import SeriesScan
from deviate_cb.report.runs import RunRecord
from deviate_cb.stats.directions import resolve_direction
from deviate_cb.store.run_directory import METRICS_FILE

__all__ = ["PerRun", "PerRunRow", "per_run_from_scan", "rows_from_table", "skipped_warning"]

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
