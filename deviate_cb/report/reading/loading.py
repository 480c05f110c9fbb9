"""Read a study: find its runs, leave out what did not complete, and reduce each metric of each run to one value.

Example:
    >>> import tempfile
    >>> from deviate_cb.store.manifest import LaunchEnd
    >>> from deviate_cb.store.run_directory import RunDirectory, run_path
    >>> root = Path(tempfile.mkdtemp())
    >>> for k, acc in enumerate([0.80, 0.84]):
    ...     run = RunDirectory(run_path(root, "mlp", "algo", k))
    ...     _ = run.record(LaunchEnd(status="completed"))
    ...     _ = run.metrics().append({"step": [9], "epoch": [0], "stage": ["val"], "scope": ["epoch"],
    ...                               "name": ["val_acc"], "value": [acc], "wall_time": [0.0]})
    >>> dict(load_per_run(root).series())
    {('mlp', 'algo', 'val_acc'): [0.8, 0.84]}
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Optional

from deviate_cb.errors import UsageError
from deviate_cb.report.reading.configurations import refuse_mixed_groups
from deviate_cb.report.reading.metrics.footers import manifest_values
from deviate_cb.report.reading.metrics.last_values import read_last_values
from deviate_cb.report.reading.metrics.long_table import read_metrics
from deviate_cb.report.reading.metrics.names import direction_warnings, display_names, kept_metrics, name_directions
from deviate_cb.report.reading.metrics.per_run import PerRun, per_run_from_scan, rows_from_table, skipped_warning
from deviate_cb.report.reading.metrics.scan import SeriesScan
from deviate_cb.report.reading.runs import RUN_LAYOUT, RunRecord, partition_base, read_runs, run_directories
from deviate_cb.report.text.safe import printable_message
from deviate_cb.stats import AGGREGATES, DIRECTIONS, aggregate_table
from deviate_cb.store.run_directory import METRICS_FILE, STAGES

__all__ = ["check_study_arguments", "excluded_line", "exit_text", "load_per_run"]


def load_per_run(
    directory: Path,
    *,
    aggregate: str = "last",
    directions: Optional[Mapping[str, str]] = None,
    metrics: Optional[Sequence[str]] = None,
    stage: Optional[str] = None,
    pool_configurations: bool = False,
) -> PerRun:
    """Find the runs under ``directory`` and aggregate each metric of each completed run to one number.

    ``pool_configurations``: keep the completed runs of a group whose replicas ran different configurations (the
    caller refuses or pools them: :mod:`deviate_cb.report.reading.group_identity`), instead of marking them not pooled.

    Raises:
        UsageError: A directory without runs, or a filter that matches nothing.
    """
    directory = check_study_arguments(directory, aggregate, directions, stage, 0.95)
    warnings: list[str] = []
    directories = run_directories(directory)
    found = read_runs(directories, warnings)  # pool_configurations: the caller checks its groups itself
    runs, mixed = refuse_mixed_groups(found, pool=pool_configurations)  # pooling: only unknown ones are left out
    warnings += mixed  # a group whose completed replicas ran different configurations is never pooled
    # Each series' last/best/mean: from the manifests' copies of the summaries, else the files' footers, else
    # a DuckDB scan, in a background thread while SciPy loads.
    reduce = "last" if aggregate == "last" else "summary"
    known, known_files = manifest_values([r for r in runs if r.completed], reduce)
    files = [os.fspath(path / METRICS_FILE) for path, _ in directories]
    scan = SeriesScan(files, reduce=reduce, known=known, known_files=known_files)
    _import_analysis_modules()
    if not runs:
        state = "is empty; it contains no runs" if not any(directory.iterdir()) else "contains no runs"
        # what the walk could not read is often why nothing was found: the error says it (warnings end here)
        more = f" (and {len(warnings) - 1} more)" if len(warnings) > 1 else ""
        seen = f" Found but not read: {warnings[0].rstrip('.')}{more}." if warnings else ""
        raise UsageError(f"`DIR` {state} (expected {RUN_LAYOUT}). Received: DIR={os.fspath(directory)!r}.{seen}")
    completed = [r for r in runs if r.completed]
    present = set(scan.files)  # the metrics files that exist
    for run in completed:
        if os.path.join(run.path, METRICS_FILE) not in present:
            warnings.append(f"{run.path}: completed run without {METRICS_FILE}; it has no metrics.")
    warnings += _nothing_recorded(completed, present)  # a group with nothing at all: how to capture its metrics
    # Every file summarised (footers, or the DuckDB scan): per-run values without the long table or pyarrow.compute
    fast = per_run_from_scan(completed, scan, aggregate, directions, metrics, stage, warnings)
    warnings += scan.problems  # malformed footer summaries (those files were read instead)
    if fast is not None:
        return _with_nonfinite_notes(PerRun(tuple(runs), tuple(completed), tuple(warnings), fast), aggregate, stage)
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if aggregate == "last":  # streamed: one row per (run, stage, name), never the whole long table
        table = read_last_values(completed, partition_base(directory), warnings, scan=scan)
        table = table.append_column("seq", pa.array(np.zeros(table.num_rows, dtype=np.int64)))
    else:  # some file neither summarised nor scanned by DuckDB: the long table, each file checked and warned on
        table = read_metrics(completed, partition_base(directory), warnings)
    if stage is not None:
        stages = sorted(set(table.column("stage").to_pylist()))
        table = table.filter(pc.equal(table.column("stage"), stage))
        if table.num_rows == 0 and stages:
            raise UsageError(
                f"`--stage` matches no metric. Received: --stage={stage!r}. Expected one of: {', '.join(stages)}."
            )
    table, display = _with_metric_column(table)
    if metrics:
        table = _filter_metrics(table, metrics, display, stage)
    warnings += direction_warnings(directions, display)
    result = aggregate_table(
        table,
        aggregate,
        keys=("experiment", "variant", "run", "metric"),
        directions=name_directions(directions, display),
        name="metric",
    )
    warnings += [skipped_warning(metric) for metric in result.skipped]
    loaded = PerRun(tuple(runs), tuple(completed), tuple(warnings), rows_from_table(result.table))
    return _with_nonfinite_notes(loaded, aggregate, stage)


def _with_nonfinite_notes(loaded: PerRun, aggregate: str, stage: Optional[str]) -> PerRun:
    """``loaded`` with one warning per metric whose NaN/Inf values the aggregate left out (report, compare, power)."""
    from deviate_cb.report.reading.metrics.per_run import nonfinite_notes

    notes = nonfinite_notes(loaded.completed, loaded.series(), aggregate, stage=stage)
    return replace(loaded, warnings=(*loaded.warnings, *notes)) if notes else loaded


def _nothing_recorded(completed: Sequence[RunRecord], present: set[str]) -> list[str]:
    """One line per group whose completed runs have no metrics file at all: what to rerun with to record the
    script's printed results (:func:`deviate_cb.store.metric_hint.nothing_recorded_text`)."""
    from deviate_cb.store.metric_hint import nothing_recorded_text

    groups: dict[tuple[str, str], list[RunRecord]] = {}
    for run in completed:
        groups.setdefault((run.experiment, run.variant), []).append(run)
    lines = []
    for (experiment, variant), runs in sorted(groups.items()):
        if any(os.path.join(run.path, METRICS_FILE) in present for run in runs):
            continue
        configuration = runs[0].configuration or {}
        given = bool(configuration.get("metric_regex"))
        trainer = configuration.get("mode") == "trainer" if "mode" in configuration else None
        text = nothing_recorded_text([Path(run.path) for run in runs], regex_given=given, trainer=trainer)
        if text:
            lines.append(f"experiment={experiment} variant={variant}: {text}")
    return lines


def _import_analysis_modules() -> None:
    """Import what the confidence intervals use (SciPy's special functions, about 0.2 s) now, while the
    background scan reads footers or keeps DuckDB busy, rather than after it."""
    import scipy.special  # noqa: F401


def _with_metric_column(table: Any) -> tuple[Any, dict[tuple[str, str], str]]:
    """Add the ``metric`` column: ``name``, or ``stage/name`` for a name that occurs in several stages."""
    import pyarrow as pa
    import pyarrow.compute as pc

    pairs = table.group_by(["stage", "name"]).aggregate([]).to_pylist()
    display = display_names((p["stage"], p["name"]) for p in pairs)
    multi = pa.array(sorted({n for (st, n), m in display.items() if m != n}), type=pa.string())
    metric = table.column("name")
    if len(multi):
        qualified = pc.binary_join_element_wise(table.column("stage"), metric, "/")
        metric = pc.if_else(pc.is_in(metric, value_set=multi), qualified, metric)
    return table.append_column("metric", metric), display


def _filter_metrics(table: Any, patterns: Sequence[str], display: Mapping[tuple[str, str], str], stage: Any) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    keep = kept_metrics(patterns, display, stage)
    return table.filter(pc.is_in(table.column("metric"), value_set=pa.array(sorted(keep), type=pa.string())))


def excluded_line(run: RunRecord) -> str:
    """One line describing a run left out of the statistics.

    Example:
        >>> from pathlib import Path
        >>> excluded_line(RunRecord(Path("r"), "mlp", "algo", "3", "failed", 1, "RuntimeError: boom"))
        'experiment=mlp variant=algo replica=3 left out of the statistics: failed (exit code 1): RuntimeError: boom'
    """
    detail = f" (exit code {exit_text(run)})" if run.exit_code is not None else f" ({run.signal})" if run.signal else ""
    error = f": {printable_message(run.error)}" if run.error else ""
    where = f"experiment={run.experiment} variant={run.variant} replica={run.replica}"
    return f"{where} left out of the statistics: {run.status}{detail}{error}"


def exit_text(run: RunRecord) -> str:
    """The exit status as shown: the code, the signal's name, or both (``-9 (SIGKILL)``)."""
    code = "" if run.exit_code is None else str(run.exit_code)
    if run.signal:
        return f"{code} ({run.signal})" if code else run.signal
    return code


def check_study_arguments(
    directory: Path, aggregate: str, directions: Optional[Mapping[str, str]], stage: Optional[str], level: float
) -> Path:
    """``directory`` as a path, after checking it and the options every reader of a study shares."""
    text = os.fspath(directory)
    path = Path(text)
    if not path.exists():
        raise UsageError(f"`DIR` does not exist. Received: DIR={text!r}.")
    if not path.is_dir():
        raise UsageError(f"`DIR` must be a directory. Received: DIR={text!r} (a file).")
    if aggregate not in AGGREGATES:
        raise UsageError(f"`--aggregate` must be one of {', '.join(AGGREGATES)}. Received: --aggregate={aggregate!r}.")
    for name, direction in (directions or {}).items():
        if direction not in DIRECTIONS:
            raise UsageError(f"`--direction` must be NAME=max or NAME=min. Received: --direction={name}={direction}.")
    if stage is not None and stage not in STAGES:
        raise UsageError(f"`--stage` must be one of {', '.join(STAGES)}. Received: --stage={stage!r}.")
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0.0 < level < 1.0:
        raise UsageError(f"`--level` must be in (0, 1). Received: --level={level!r}.")
    return path
