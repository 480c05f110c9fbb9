"""Build the variance report of a study: per (experiment, variant) group and metric, the spread across runs.

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

from deviate_cb.report.reading.group_identity import one_configuration
from deviate_cb.report.reading.loading import check_study_arguments, load_per_run
from deviate_cb.report.reading.runs import RunRecord
from deviate_cb.report.reading.selection import RunValues
from deviate_cb.report.reading.table_input import read_run_table
from deviate_cb.stats import describe

__all__ = ["COLUMNS", "IQM_COLUMNS", "Report", "ReportRow", "build_report", "describe_series", "table_report"]

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
        decomposition: :class:`~deviate_cb.report.answers.decomposition.DecompositionRow` per experiment, pair and
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
    directory = check_study_arguments(directory, aggregate, directions, stage, level)
    loaded = load_per_run(directory, aggregate=aggregate, directions=directions, metrics=metrics, stage=stage)
    runs, completed, warnings = loaded.runs, loaded.completed, list(loaded.warnings)
    series = loaded.series()
    rows = describe_series(series, aggregate, level, iqm=iqm, seed=seed, interest=metrics)
    groups = sorted({(r.experiment, r.variant) for r in runs})
    counts = tuple((e, v, sum(1 for r in completed if (r.experiment, r.variant) == (e, v))) for e, v in groups)
    excluded = tuple(r for r in runs if not r.completed)
    from deviate_cb.report.reading.fingerprints import fingerprint_warnings

    warnings += fingerprint_warnings(completed)  # replicas of a group that ran on different machines/software
    decomposition: tuple[Any, ...] = ()
    if decompose:
        from deviate_cb.report.answers.decomposition import decompose_series

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
    from deviate_cb.report.answers.headline import headline_metrics

    first = set(headline_metrics(Report(tuple(rows), ()), interest))  # the answers' metrics: the same rule
    return sorted(rows, key=lambda r: (r.experiment, r.variant, r.metric not in first, r.metric))


def table_report(
    path: Any,
    group_by: Optional[str],
    *,
    level: float = 0.95,
    metrics: Optional[Sequence[str]] = None,
    decompose: bool = False,
    seed: int = 0,
    iqm: bool = False,
    pool: bool = False,
) -> Report:
    """The variance report of a run table: experiment = the file's stem, variant = the ``group_by`` value
    (``iqm``: with the interquartile mean and its interval, as
    :func:`build_report`).

    Each group must be one configuration (:mod:`~deviate_cb.report.reading.group_identity`): a group whose rows differ
    in another text column is a :class:`UsageError` naming them, unless ``pool`` (then a warning of the report says so).

    Example:
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp()) / "runs.csv"
        >>> _ = path.write_text("setting,acc\\nimpl,0.8\\nimpl,0.82\\nimpl,0.84\\n")
        >>> row = table_report(path, "setting").rows[0]
        >>> row.experiment, row.variant, row.n, round(row.std, 2)
        ('runs', 'impl', 3, 0.02)
    """
    warnings: list[str] = []
    runs = read_run_table(path, group_by, warnings, metrics)
    experiment = Path(os.fspath(path)).stem
    series: dict[tuple[str, str, str], list[float]] = {}
    counts: dict[str, int] = {}
    by_group: dict[str, list[RunValues]] = {}
    for run in runs:
        by_group.setdefault(run.keys[group_by] if group_by is not None else "all", []).append(run)
    for variant, members in sorted(by_group.items()):
        pooled = one_configuration(
            members,
            option="--group-by",
            received=f"--table {os.fspath(path)}" + (f" --group-by {group_by}" if group_by else ""),
            pool=pool,
            subject=f"group {variant} holds",
            fix="Group by the column that tells them apart (--group-by {key}: {values})",
        )
        if pooled:
            warnings.append(f"group {variant} {pooled} (--pool): its spread counts their difference as noise.")
    for run in runs:
        variant = run.keys[group_by] if group_by is not None else "all"
        counts[variant] = counts.get(variant, 0) + 1
        for metric, value in run.values.items():
            series.setdefault((experiment, variant, metric), []).append(value)
    rows = describe_series(series, "as given", level, iqm=iqm, seed=seed)
    decomposition: tuple[Any, ...] = ()
    if decompose:
        from deviate_cb.report.answers.decomposition import decompose_series

        decomposition = tuple(decompose_series(series, level=level, seed=seed))
    groups = tuple((experiment, v, n) for v, n in sorted(counts.items()))
    values = {key: tuple(found) for key, found in series.items()}
    from deviate_cb.report.reading.metrics.per_run import nonfinite_notes

    warnings = [*warnings, *nonfinite_notes((), values, "as given")]  # NaN/Inf values of the table, per metric
    return Report(tuple(rows), (), tuple(warnings), "as given", level, len(runs), groups, decomposition, values=values)
