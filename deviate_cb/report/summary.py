"""Build the variance report of a study: per (experiment, variant) group and metric, the spread across runs.

Runs whose status is not ``completed`` are listed apart and left out of the statistics. Each metric of
each completed run is first aggregated to one number (``last``, ``best`` or ``mean``), then described
across the runs of its group. Every group lists its metrics in the same order: the metrics of interest (those
the answers are about: :func:`~deviate_cb.report.headline.headline_metrics`, the ``--metric`` patterns or the
validation and test metrics) first, then the others, each part by name. A metric name that occurs in several
stages is shown as ``stage/name``.

Example:
    >>> import tempfile
    >>> from deviate_cb.store.manifest import LaunchEnd
    >>> from deviate_cb.store.run_directory import RunDirectory, run_path
    >>> root = Path(tempfile.mkdtemp())
    >>> for k, acc in enumerate([0.80, 0.84, 0.82]):
    ...     run = RunDirectory(run_path(root, "mlp", "algo", k))
    ...     _ = run.record(LaunchEnd(status="completed"))
    ...     _ = run.metrics().append({"step": [9], "epoch": [0], "stage": ["val"], "scope": ["epoch"],
    ...                               "name": ["val_acc"], "value": [acc], "wall_time": [0.0]})
    >>> row = build_report(root).rows[0]
    >>> row.metric, row.n, round(row.mean, 2), round(row.std, 2)
    ('val_acc', 3, 0.82, 0.02)
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Optional

from deviate_cb.errors import UsageError
from deviate_cb.report.configurations import refuse_mixed_groups
from deviate_cb.report.metrics.footers import manifest_values
from deviate_cb.report.metrics.last_values import read_last_values
from deviate_cb.report.metrics.long_table import read_metrics
from deviate_cb.report.metrics.names import (
    direction_warnings,
    display_names,
    kept_metrics,
    name_directions,
)
from deviate_cb.report.metrics.per_run import PerRun, per_run_from_scan, rows_from_table, skipped_warning
from deviate_cb.report.metrics.scan import SeriesScan
from deviate_cb.report.runs import RUN_LAYOUT, RunRecord, partition_base, read_runs, run_directories
from deviate_cb.stats import AGGREGATES, DIRECTIONS, aggregate_table, describe
from deviate_cb.store.run_directory import METRICS_FILE, STAGES

__all__ = ["COLUMNS", "IQM_COLUMNS", "Report", "ReportRow", "build_report", "describe_series", "load_per_run"]

COLUMNS = (
    "experiment",
    "variant",
    "metric",
    "aggregate",
    "n",
    "mean",
    "std",
    "cv",
    "min",
    "max",
    "range",
    "std_ci_low",
    "std_ci_high",
    "n_nonfinite",
)
IQM_COLUMNS = ("iqm", "iqm_ci_low", "iqm_ci_high")  # after COLUMNS with `deviate report --iqm`


@dataclass(frozen=True)
class ReportRow:
    """The spread of one metric across the completed runs of one (experiment, variant) group.

    ``iqm``, ``iqm_ci_low`` and ``iqm_ci_high`` (the interquartile mean across the runs and its percentile
    interval, Yuen's trimmed-mean t) are ``None`` unless the report was asked for them (``iqm=True``).
    """

    experiment: str
    variant: str
    metric: str
    aggregate: str
    n: int
    mean: float
    std: float
    cv: float
    min: float
    max: float
    range: float
    std_ci_low: float
    std_ci_high: float
    n_nonfinite: int = 0
    iqm: Optional[float] = None
    iqm_ci_low: Optional[float] = None
    iqm_ci_high: Optional[float] = None

    def as_dict(self) -> dict[str, Any]:
        """The row as a dict with the keys of :data:`COLUMNS`, in that order, then :data:`IQM_COLUMNS` when the
        row holds the IQM."""
        out = asdict(self)
        if self.iqm is None:
            for key in IQM_COLUMNS:
                del out[key]
        return out


@dataclass(frozen=True)
class Report:
    """A whole report.

    Attributes:
        rows: One row per group and metric, groups sorted by name, metrics in the same order in every group: the
            metrics of interest first, then the others, each by name.
        excluded: The runs left out of the statistics because they did not complete.
        warnings: One line per problem met on the way (unreadable files, skipped metrics).
        aggregate: The per-run aggregate used.
        level: The confidence level of the std interval.
        n_runs: The number of runs found.
        groups: ``(experiment, variant, completed runs)`` for every group found, sorted.
        decomposition: :class:`~deviate_cb.report.decomposition.DecompositionRow` per experiment, pair and
            metric, when asked for.
        completed: The runs the statistics came from.
        values: ``(experiment, variant, metric) -> per-run values`` (the completed runs' aggregates the rows
            describe, in run order), for plots.
    """

    rows: tuple[ReportRow, ...]
    excluded: tuple[RunRecord, ...]
    warnings: tuple[str, ...] = ()
    aggregate: str = "last"
    level: float = 0.95
    n_runs: int = 0
    groups: tuple[tuple[str, str, int], ...] = ()
    decomposition: tuple[Any, ...] = ()
    completed: tuple[RunRecord, ...] = ()
    values: Mapping[tuple[str, str, str], tuple[float, ...]] = field(default_factory=dict)


def build_report(
    directory: Path,
    *,
    aggregate: str = "last",
    directions: Optional[Mapping[str, str]] = None,
    metrics: Optional[Sequence[str]] = None,
    stage: Optional[str] = None,
    level: float = 0.95,
    decompose: bool = False,
    seed: int = 0,
    iqm: bool = False,
) -> Report:
    """Read a study directory and compute its variance report.

    Args:
        directory: The study directory (or an ``experiment=``/``variant=`` folder inside one).
        aggregate: Per-run aggregate: ``last``, ``best`` or ``mean``.
        directions: Metric name (or ``stage/name``) -> ``max``/``min`` for ``best``, overriding inference.
        metrics: Keep only metrics whose name or ``stage/name`` matches one of these fnmatch patterns.
        stage: Keep only this stage (``train``, ``val``, ``test`` or ``final``).
        level: Confidence level of the std interval, in (0, 1).
        decompose: Also compute the variance decomposition (``impl`` vs ``algo+impl``, ``control`` vs ``algo``).
        seed: Seed of any bootstrap (the default intervals are exact and draw nothing).
        iqm: Also give each row the interquartile mean across the runs with its interval (Yuen's trimmed-mean t).

    Raises:
        UsageError: A bad argument, a directory without runs, or a filter that matches nothing.
        SchemaVersionError: A manifest was written by a newer deviate-cb.
    """
    directory = _validate_build_report(directory, aggregate, directions, stage, level)
    loaded = load_per_run(directory, aggregate=aggregate, directions=directions, metrics=metrics, stage=stage)
    runs, completed, warnings = loaded.runs, loaded.completed, list(loaded.warnings)
    series = loaded.series()
    rows = describe_series(series, aggregate, level, iqm=iqm, seed=seed, interest=metrics)
    groups = sorted({(r.experiment, r.variant) for r in runs})
    counts = tuple((e, v, sum(1 for r in completed if (r.experiment, r.variant) == (e, v))) for e, v in groups)
    excluded = tuple(r for r in runs if not r.completed)
    from deviate_cb.report.fingerprints import fingerprint_warnings

    warnings += fingerprint_warnings(completed)  # replicas of a group that ran on different machines/software
    decomposition: tuple[Any, ...] = ()
    if decompose:
        from deviate_cb.report.decomposition import decompose_series

        on: dict[tuple[str, str], str] = {}
        for run in completed:  # impl noise is not measurable where the replicas ran deterministic
            if run.determinism_on and run.variant in ("impl", "algo+impl", "algo_impl", "algo-impl"):
                on.setdefault((run.experiment, run.variant), run.determinism_on)
        decomposition = tuple(decompose_series(series, level=level, seed=seed, deterministic=on))
    values = {key: tuple(found) for key, found in series.items()}
    return Report(
        tuple(rows),
        excluded,
        tuple(warnings),
        aggregate,
        level,
        len(runs),
        counts,
        decomposition,
        tuple(completed),
        values,
    )


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
    caller refuses or pools them: :mod:`deviate_cb.report.group_identity`), instead of marking them not pooled.

    Raises:
        UsageError: A directory without runs, or a filter that matches nothing.
    """
    directory = _validate_build_report(directory, aggregate, directions, stage, 0.95)
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
    from deviate_cb.report.metrics.per_run import nonfinite_notes

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


def describe_series(
    series: Mapping[tuple[str, str, str], Sequence[float]],
    how: str,
    level: float,
    *,
    iqm: bool = False,
    seed: int = 0,
    interest: Optional[Sequence[str]] = None,
) -> list[ReportRow]:
    """One :class:`ReportRow` per ``(experiment, variant, metric) -> values``, sorted as in the report (by group,
    then the metrics of interest, chosen by the fnmatch patterns ``interest`` or else as the answers choose them,
    then the other metrics, each part by name); with ``iqm``, the IQM across the runs and its interval (Yuen's
    trimmed-mean t; ``seed`` for a bootstrap).

    Example:
        >>> series = {("mlp", "algo", m): [1.0, 2.0, 4.0] for m in ("train_loss", "val_loss", "lr", "val_acc")}
        >>> [row.metric for row in describe_series(series, "last", 0.95)]
        ['val_acc', 'val_loss', 'lr', 'train_loss']
    """
    rows = []
    for (experiment, variant, metric), values in series.items():
        d = describe(values, rng=seed, by_design=variant == "control")  # bit-identical by design: [0, 0]
        low, high = d.confidence_interval(level)
        stats = (d.n, d.mean, d.std, d.cv, d.min, d.max, d.range, float(low), float(high), d.n_nonfinite)
        row = ReportRow(experiment, variant, metric, how, *stats)
        if iqm:
            iqm_low, iqm_high = d.iqm_confidence_interval(level)
            row = replace(row, iqm=d.iqm, iqm_ci_low=float(iqm_low), iqm_ci_high=float(iqm_high))
        rows.append(row)
    from deviate_cb.report.headline import headline_metrics

    first = set(headline_metrics(Report(tuple(rows), ()), interest))  # the answers' metrics: the same rule
    return sorted(rows, key=lambda r: (r.experiment, r.variant, r.metric not in first, r.metric))


def _validate_build_report(
    directory: Path, aggregate: str, directions: Optional[Mapping[str, str]], stage: Optional[str], level: float
) -> Path:
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
