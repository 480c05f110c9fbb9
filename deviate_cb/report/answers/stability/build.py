"""The stability section of ``deviate report``: churn, weight distance, per-class and sub-group spread, and the
test set's own sampling spread of the accuracy beside the run-to-run spread.

Example:
    >>> import tempfile
    >>> from deviate_cb.store.predictions import write_predictions
    >>> from deviate_cb.store.manifest import LaunchEnd
    >>> from deviate_cb.store.run_directory import RunDirectory, run_path
    >>> root = Path(tempfile.mkdtemp())
    >>> for k, preds in enumerate([[0, 1, 1, 0], [0, 1, 0, 0], [1, 1, 1, 0]]):
    ...     run = run_path(root, "mlp", "algo", k)
    ...     _ = RunDirectory(run).record(LaunchEnd(status="completed"))
    ...     _ = write_predictions(run, outputs=np.array(preds), labels=[0, 1, 1, 0])
    >>> group = build_stability(root)[0]
    >>> group.n_runs, round(group.churn.mean, 4), group.per_class.worst_class
    (3, 0.3333, 0)
    >>> group.sampling.metric, group.sampling.n_samples, round(group.sampling.binomial_std, 3)
    ('accuracy', 4, 0.186)
    >>> from deviate_cb.report.rendering.stability import write_stability
    >>> from deviate_cb.report.answers.stability.rows import stability_rows
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
from functools import partial
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np

from deviate_cb.errors import UsageError
from deviate_cb.report.reading.runs import RunRecord, find_runs
from deviate_cb.report.text.safe import reason
from deviate_cb.stats.stability.groups import PerClassAccuracy, SubgroupRates, per_class_accuracy, subgroup_rates
from deviate_cb.stats.stability.predictions import (
    Churn,
    SampleInstability,
    align_runs,
    prediction_churn,
    sample_instability,
)
from deviate_cb.stats.stability.sampling import SamplingSpread, sampling_spread
from deviate_cb.stats.stability.sketch import WeightDistance, weight_distance_blocks, weight_distance_from_sketches
from deviate_cb.store.bounded_read import check_npz
from deviate_cb.store.predictions import PREDICTIONS_FILE, predictions_metadata, read_predictions
from deviate_cb.store.weights import (
    WEIGHTS_FULL_FILE,
    WEIGHTS_SKETCH_FILE,
    WeightSketch,
    iter_full_weights,
    read_weight_sketch,
)

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
    sampling: Optional[SamplingSpread] = None
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

    A file that cannot be used (unreadable, not the file it should be, or not comparable with the group's other
    runs: another task, another sketch projection, another parameter layout) is left out with one warning naming
    it; the group's measures come from its other runs.
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
        tables, task = _prediction_tables(with_preds, warnings)
        if tables:
            import pyarrow as pa

            try:
                fields.update(_prediction_measures(tables, task, positive, where, notes, warnings))
            except (ValueError, TypeError, KeyError, pa.ArrowException) as exc:  # files that do not fit together
                warnings.append(
                    f"{where}: the predictions cannot be compared ({reason(exc)}); prediction measures left out."
                )
        fields.update(_weight_fields(members, full, sketched, delta, notes, warnings))
        if fields or notes:  # nothing when every file of the group was left out (the warnings say why)
            out.append(StabilityGroup(experiment, variant, **fields, notes=tuple(notes)))
    return out


def _left_out(exc: BaseException, path: Path, what: str) -> str:
    return f"{path}: {reason(exc, path).rstrip('.')}; left out of the {what}."


def _prediction_tables(runs: Sequence[RunRecord], warnings: list[str]) -> tuple[list[tuple[RunRecord, Any]], str]:
    """The readable predictions of ``runs`` that share the group's task (the most common one), and that task; one
    warning per file left out."""
    read: list[tuple[RunRecord, Any, str]] = []
    for run in runs:
        path = run.path / PREDICTIONS_FILE
        try:
            table = read_predictions(run.path)
        except UsageError as exc:
            warnings.append(_left_out(exc, path, "stability measures"))
            continue
        task = predictions_metadata(table).get("task")
        if task not in ("classification", "regression"):
            task = "regression" if table.column("predicted").null_count == table.num_rows else "classification"
        if task == "classification" and table.column("predicted").null_count:
            warnings.append(
                f"{path}: classification rows without a predicted class; left out of the stability measures."
            )
            continue
        read.append((run, table, task))
    if not read:
        return [], ""
    counts: dict[str, int] = {}
    for _, _, task in read:
        counts[task] = counts.get(task, 0) + 1
    task = max(counts, key=lambda t: (counts[t], t == read[0][2]))  # the most common; a tie: the first run's
    for run, _, other in read:
        if other != task:
            warnings.append(
                f"{run.path / PREDICTIONS_FILE}: {other} predictions in a group of {task} runs; left out of the "
                "stability measures."
            )
    return [(run, table) for run, table, other in read if other == task], task


def _prediction_measures(
    runs_tables: Sequence[tuple[RunRecord, Any]],
    task: str,
    positive: Any,
    where: str,
    notes: list[str],
    warnings: list[str],
) -> dict[str, Any]:
    import pyarrow.compute as pc

    runs = [run for run, _ in runs_tables]
    tables = [table for _, table in runs_tables]
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
    fields: dict[str, Any] = {"n_runs": len(runs), "snapshot": snapshot, "task": task}
    if snapshot != "final":
        notes.append(f"no common 'final' snapshot: using {snapshot}")
    samples = [t.column("sample").to_numpy() for t in tables]
    column = "value" if task == "regression" else "predicted"
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
        fields["sampling"] = sampling_spread(matrix == labels[None, :], seed=0)
        fields["subgroups"] = {
            name[len("group_") :]: subgroup_rates(
                matrix, labels, first.column(name).to_numpy(zero_copy_only=False)[order], positive=positive
            )
            for name in first.schema.names
            if name.startswith("group_") and first.column(name).null_count < first.num_rows
        }
    else:
        notes.append(
            "no true labels: per-class and sub-group accuracy and the test set's sampling spread are not computed"
        )
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


def _weight_fields(
    members: Sequence[RunRecord],
    full: Sequence[RunRecord],
    sketched: Sequence[RunRecord],
    delta: float,
    notes: list[str],
    warnings: list[str],
) -> dict[str, Any]:
    """The weight distance of a group, from the full weights where at least as many runs have usable ones, else
    from the sketches; a file that cannot be read or compared is left out with a warning."""
    usable_full = _comparable(
        [(run, layout) for run in full if (layout := _full_layout(run, warnings)) is not None],
        WEIGHTS_FULL_FILE,
        lambda layout, first: "parameter layout differs from",
        "exact weight distance",
        warnings,
    )
    sketches = _comparable(
        [(run, sketch) for run in sketched if (sketch := _sketch(run, warnings)) is not None],
        WEIGHTS_SKETCH_FILE,
        _sketch_difference,
        "weight distance",
        warnings,
    )
    distance = None
    if len(usable_full) >= 2 and len(usable_full) >= len(sketches):
        distance, n_weight_runs = _full_distance([run for run, _ in usable_full], warnings)
        if n_weight_runs < len(sketches):  # a file failed on the way: more runs have a sketch
            distance = None
    if distance is None and len(sketches) >= 2:
        matrix = np.stack([sketch.sketch for _, sketch in sketches])
        distance, n_weight_runs = weight_distance_from_sketches(matrix, delta=delta), len(sketches)
    if distance is None:
        if full or sketched:
            notes.append("weight distance needs the weights of at least 2 runs")
        return {}
    if n_weight_runs < len(members):
        notes.append(f"weight distance over the {n_weight_runs} of {len(members)} runs that saved weights")
    return {"weights": distance, "n_weight_runs": n_weight_runs}


def _sketch(run: RunRecord, warnings: list[str]) -> Optional[WeightSketch]:
    try:
        return read_weight_sketch(run.path)
    except UsageError as exc:
        warnings.append(_left_out(exc, run.path / WEIGHTS_SKETCH_FILE, "weight distance"))
        return None


def _sketch_difference(sketch: WeightSketch, first: WeightSketch) -> str:
    for name, label in (("method", "method"), ("sketch_seed", "sketch seed"), ("sketch_dim", "sketch dim")):
        if getattr(sketch, name) != getattr(first, name):
            return f"{label} {getattr(sketch, name)!r} differs from {getattr(first, name)!r} in"
    return f"parameter layout ({sketch.num_params} weights, {sketch.layout}) differs from"


def _full_layout(run: RunRecord, warnings: list[str]) -> Optional[tuple[tuple[str, int], ...]]:
    """The parameter names and sizes ``weights.npz`` lists (its two small index arrays only), or ``None``."""
    path = run.path / WEIGHTS_FULL_FILE
    try:
        check_npz(path)  # refused before np.load allocates what a hostile member claims
        with np.load(path, allow_pickle=False) as data:
            names = [str(n) for n in data["__names__"].tolist()]  # the keys write_weights stores the index under
            sizes = [int(n) for n in data["__sizes__"].tolist()]
            missing = [n for n in names if n not in data.files]
    except Exception as exc:  # zipfile, ValueError (pickled object), KeyError (no index), OSError
        warnings.append(
            f"{path}: not a readable full weights file ({reason(exc, path)}); left out of the exact weight distance."
        )
        return None
    if missing or len(sizes) != len(names):
        listed = ", ".join(missing) or "sizes"
        warnings.append(f"{path}: weight(s) {listed} listed but not stored; left out of the exact weight distance.")
        return None
    return tuple(zip(names, sizes, strict=True))


def _comparable(
    items: list[tuple[RunRecord, Any]], file: str, difference: Any, what: str, warnings: list[str]
) -> list[tuple[RunRecord, Any]]:
    """The items whose key (a sketch's projection and layout, a full file's layout) is the group's most common
    one (a tie: the first run's); a warning for each other run."""
    if not items:
        return []

    def key(value: Any) -> Any:
        if isinstance(value, WeightSketch):
            return (value.method, value.sketch_seed, value.sketch_dim, value.layout, value.num_params)
        return value

    counts: dict[Any, int] = {}
    for _, value in items:
        counts[key(value)] = counts.get(key(value), 0) + 1
    first_key = key(items[0][1])
    chosen = max(counts, key=lambda k: (counts[k], k == first_key))
    reference = next((run, value) for run, value in items if key(value) == chosen)
    kept = []
    for run, value in items:
        if key(value) == chosen:
            kept.append((run, value))
            continue
        warnings.append(
            f"{run.path / file}: {difference(value, reference[1])} {reference[0].path / file}; the runs are not "
            f"comparable, so it is left out of the {what}."
        )
    return kept


def _full_distance(runs: list[RunRecord], warnings: list[str]) -> tuple[Optional[WeightDistance], int]:
    """The exact distance over the runs' full weights (one parameter of every run in memory at a time).

    A file that fails while its parameters are read (a damaged entry) is left out with a warning and the
    distance is computed again without it.
    """
    while len(runs) >= 2:
        try:
            distance = weight_distance_blocks(partial(iter_full_weights, [r.path for r in runs]), n_runs=len(runs))
            return distance, len(runs)
        except UsageError as exc:
            bad = next((r for r in runs if str(exc).startswith(f"{r.path / WEIGHTS_FULL_FILE}:")), None)
            if bad is None:  # not one file's fault
                warnings.append(f"the full weights cannot be compared ({reason(exc)}); using the sketches.")
                return None, 0
            warnings.append(_left_out(exc, bad.path / WEIGHTS_FULL_FILE, "exact weight distance"))
            runs = [r for r in runs if r is not bad]
    return None, 0
