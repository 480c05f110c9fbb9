"""The stability section of ``deviate report``: churn, weight distance, per-class and sub-group spread.

For every (experiment, variant) group whose completed runs stored ``predictions.parquet`` or weight files
(:mod:`deviate_cb.store.predictions`, :mod:`deviate_cb.store.weights`), :func:`build_stability` computes the measures
of :mod:`deviate_cb.stats.stability.predictions`, :mod:`deviate_cb.stats.stability.groups` and
:mod:`deviate_cb.stats.stability.sketch` into one :class:`StabilityGroup` each. Two views of them:
:func:`~deviate_cb.report.stability.rows.stability_rows` flattens them into records
(:data:`~deviate_cb.report.stability.rows.STABILITY_COLUMNS`, for ``--stability`` with csv or json) and
:func:`~deviate_cb.report.stability.render.write_stability` writes the section as Markdown or terminal tables.

Example:
    >>> import tempfile
    >>> from deviate_cb.store.predictions import write_predictions
    >>> from deviate_cb.store.run_directory import RunDirectory, run_path
    >>> root = Path(tempfile.mkdtemp())
    >>> for k, preds in enumerate([[0, 1, 1, 0], [0, 1, 0, 0], [1, 1, 1, 0]]):
    ...     run = run_path(root, "mlp", "algo", k)
    ...     _ = RunDirectory(run).update_manifest(status="completed")
    ...     _ = write_predictions(run, outputs=np.array(preds), labels=[0, 1, 1, 0])
    >>> group = build_stability(root)[0]
    >>> group.n_runs, round(group.churn.mean, 4), group.per_class.worst_class
    (3, 0.3333, 0)
    >>> from deviate_cb.report.stability.render import write_stability
    >>> from deviate_cb.report.stability.rows import stability_rows
    >>> [r["measure"] for r in stability_rows([group])][:3]
    ['churn', 'majority_agreement', 'accuracy']
    >>> import io
    >>> buffer = io.StringIO()
    >>> write_stability([group], "md", buffer)
    >>> print(buffer.getvalue().splitlines()[1])
    ## Stability: experiment=mlp variant=algo
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np

from deviate_cb.errors import UsageError
from deviate_cb.report.runs import RunRecord, find_runs
from deviate_cb.stats.stability.groups import PerClassAccuracy, SubgroupRates, per_class_accuracy, subgroup_rates
from deviate_cb.stats.stability.predictions import (
    Churn,
    SampleInstability,
    align_runs,
    prediction_churn,
    sample_instability,
)
from deviate_cb.stats.stability.sketch import WeightDistance, weight_distance_blocks, weight_distance_from_sketches
from deviate_cb.store.predictions import PREDICTIONS_FILE, predictions_metadata, read_predictions
from deviate_cb.store.weights import WEIGHTS_FULL_FILE, WEIGHTS_SKETCH_FILE, iter_full_weights, read_weight_sketches

__all__ = ["StabilityGroup", "build_stability"]


@dataclass(frozen=True)
class StabilityGroup:
    """The stability measures of one (experiment, variant) group; ``None`` where the data are missing."""

    experiment: str
    variant: str
    n_runs: int = 0
    n_samples: int = 0
    snapshot: str = "final"
    task: Optional[str] = None
    churn: Optional[Churn] = None
    per_class: Optional[PerClassAccuracy] = None
    subgroups: dict[str, SubgroupRates] = field(default_factory=dict)
    instability: Optional[SampleInstability] = None
    regression: Optional[dict[str, float]] = None
    weights: Optional[WeightDistance] = None
    n_weight_runs: int = 0
    notes: tuple[str, ...] = ()


def build_stability(
    directory: Union[str, Path],
    *,
    positive: Any = 1,
    delta: float = 0.05,
    warnings: Optional[list[str]] = None,
    runs: Optional[Sequence[RunRecord]] = None,
) -> list[StabilityGroup]:
    """The stability measures of every group under ``directory`` that has predictions or weights.

    Args:
        directory: A study directory (as ``deviate report DIR``).
        runs: The runs of ``directory`` when the caller has read them already (as ``deviate report`` has):
            ``directory`` is then not searched again.
        positive: Positive class of the sub-group FPR/FNR (one-vs-rest with more than two classes).
        delta: Failure probability of the sketch's distance interval, per pair of runs.
        warnings: Where to append one line per problem that does not stop the report.

    Raises:
        UsageError: A predictions or weight file is unreadable, or two runs' weights cannot be compared.
    """
    warnings = warnings if warnings is not None else []
    groups: dict[tuple[str, str], list[RunRecord]] = {}
    for run in find_runs(Path(directory)) if runs is None else runs:
        if run.completed:
            groups.setdefault((run.experiment, run.variant), []).append(run)
    out = []
    for (experiment, variant), members in groups.items():
        with_preds = [r for r in members if os.path.isfile(os.path.join(r.path, PREDICTIONS_FILE))]
        full = [r for r in members if os.path.isfile(os.path.join(r.path, WEIGHTS_FULL_FILE))]
        sketched = [r for r in members if os.path.isfile(os.path.join(r.path, WEIGHTS_SKETCH_FILE))]
        if not (with_preds or full or sketched):
            continue
        where = f"experiment={experiment} variant={variant}"
        fields: dict[str, Any] = {}
        notes: list[str] = []
        if with_preds:
            try:
                fields.update(_prediction_measures(with_preds, positive, where, notes, warnings))
            except UsageError:
                raise
            except ValueError as exc:  # inconsistent files: one line naming the group, not a traceback
                raise UsageError(f"{where}: the predictions cannot be compared ({exc})") from exc
        weight_runs = full if len(full) >= 2 and len(full) >= len(sketched) else sketched
        if len(weight_runs) >= 2:
            fields["weights"] = _weight_measure(weight_runs, full=weight_runs is full, delta=delta)
            fields["n_weight_runs"] = len(weight_runs)
            if len(weight_runs) < len(members):
                notes.append(f"weight distance over the {len(weight_runs)} of {len(members)} runs that saved weights")
        elif weight_runs:
            notes.append("weight distance needs the weights of at least 2 runs")
        out.append(StabilityGroup(experiment, variant, **fields, notes=tuple(notes)))
    return out


def _prediction_measures(
    runs: Sequence[RunRecord], positive: Any, where: str, notes: list[str], warnings: list[str]
) -> dict[str, Any]:
    import pyarrow.compute as pc

    tables = [read_predictions(r.path) for r in runs]
    names = [set(pc.unique(t.column("snapshot")).to_pylist()) for t in tables]
    common = set.intersection(*names)
    snapshot = "final" if "final" in common else max(common, key=_epoch_of, default=None)
    if snapshot is None:
        warnings.append(f"{where}: the runs' predictions share no snapshot; stability is not computed.")
        return {}
    tables = [
        t if n == {snapshot} else t.filter(pc.equal(t.column("snapshot"), snapshot))
        for t, n in zip(tables, names, strict=True)
    ]
    meta = predictions_metadata(tables[0])
    task = meta.get("task") or ("regression" if tables[0].column("predicted").null_count else "classification")
    fields: dict[str, Any] = {"n_runs": len(runs), "snapshot": snapshot, "task": task}
    if snapshot != "final":
        notes.append(f"no common 'final' snapshot: using {snapshot}")
    samples = [t.column("sample").to_numpy() for t in tables]
    column = "value" if task == "regression" else "predicted"
    for run, table in zip(runs, tables, strict=True):
        if task != "regression" and table.column(column).null_count:
            raise UsageError(f"{run.path / PREDICTIONS_FILE}: classification rows without a predicted class.")
    values = [t.column(column).to_numpy(zero_copy_only=False) for t in tables]
    try:
        ids, matrix = align_runs(samples, values)
    except ValueError:
        ids, matrix = align_runs(samples, values, on_mismatch="intersect")
        warnings.append(f"{where}: runs were evaluated on different samples; using the {ids.size} they share.")
    fields["n_samples"] = int(ids.size)
    first = tables[0]
    position = np.searchsorted(np.sort(samples[0]), ids)
    order = np.argsort(samples[0])[position]
    if task == "regression":
        fields["regression"] = _regression_measures(
            matrix, first.column("target").to_numpy(zero_copy_only=False)[order]
        )
        return fields
    if len(runs) >= 2:
        fields["churn"] = prediction_churn(matrix)
    else:
        notes.append("churn needs the predictions of at least 2 runs")
    label_col = first.column("label")
    labels = None if label_col.null_count else label_col.to_numpy()[order]
    fields["instability"] = sample_instability(matrix, labels, ids)
    if labels is not None:
        fields["per_class"] = per_class_accuracy(matrix, labels)
        fields["subgroups"] = {
            name[len("group_") :]: subgroup_rates(
                matrix, labels, first.column(name).to_numpy(zero_copy_only=False)[order], positive=positive
            )
            for name in first.schema.names
            if name.startswith("group_") and first.column(name).null_count < first.num_rows
        }
    else:
        notes.append("no true labels: per-class and sub-group accuracy are not computed")
    return fields


def _epoch_of(snapshot: str) -> int:
    name, _, number = snapshot.partition("=")
    return int(number) if name == "epoch" and number.isdigit() else -1


def _regression_measures(matrix: np.ndarray, targets: np.ndarray) -> dict[str, float]:
    spread = np.std(matrix, axis=0, ddof=1) if matrix.shape[0] >= 2 else np.full(matrix.shape[1], np.nan)
    out = {"value_std_mean": float(np.mean(spread)), "value_std_max": float(np.max(spread))}
    if np.all(np.isfinite(targets)):
        rmse = np.sqrt(np.mean((matrix - targets[None, :]) ** 2, axis=1))
        out["rmse_mean"] = float(rmse.mean())
        out["rmse_std"] = float(np.std(rmse, ddof=1)) if rmse.size >= 2 else math.nan
    return out


def _weight_measure(runs: Sequence[RunRecord], *, full: bool, delta: float) -> WeightDistance:
    if full:  # one parameter of every run in memory at a time
        return weight_distance_blocks(lambda: iter_full_weights([r.path for r in runs]), n_runs=len(runs))
    sketches = read_weight_sketches(r.path for r in runs)
    return weight_distance_from_sketches(np.stack([s.sketch for s in sketches]), delta=delta)
