"""The stability section as flat records: one per measure (and class, sub-group, sample) of each group.

:func:`stability_rows` turns the :class:`~deviate_cb.report.stability.build.StabilityGroup` objects that
:func:`~deviate_cb.report.stability.build.build_stability` returns into records with the keys of
:data:`STABILITY_COLUMNS`, for ``deviate report --stability`` with csv or json (NaN and infinities become
``None``, NumPy scalars Python numbers).

Example:
    >>> from deviate_cb.report.stability.build import StabilityGroup
    >>> group = StabilityGroup(
    ...     "mlp", "algo", n_runs=3, n_samples=4, task="regression",
    ...     regression={"value_std_mean": 0.25, "value_std_max": 0.5},
    ... )
    >>> [(r["measure"], r["mean"], r["max"], r["note"]) for r in stability_rows([group])]
    [('value_std', 0.25, 0.5, 'per-sample std across runs')]
    >>> len(stability_rows([group])[0]) == len(STABILITY_COLUMNS)
    True
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from deviate_cb.stats._results import json_value

if TYPE_CHECKING:
    from deviate_cb.report.stability.build import StabilityGroup

__all__ = ["STABILITY_COLUMNS", "stability_rows"]

STABILITY_COLUMNS = (
    "experiment",
    "variant",
    "measure",
    "item",
    "n_runs",
    "n_samples",
    "mean",
    "std",
    "min",
    "max",
    "ratio",
    "low",
    "high",
    "note",
)


def stability_rows(groups: Sequence[StabilityGroup], top: int = 10) -> list[dict[str, Any]]:
    """Flat records with the keys of :data:`STABILITY_COLUMNS`, one per measure (and class, sub-group, sample)."""
    return [row for g in groups for row in _group_rows(g, top)]


def _group_rows(g: StabilityGroup, top: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []

    def add(measure: str, item: Any = "", **values: Any) -> None:
        row = {
            "experiment": g.experiment,
            "variant": g.variant,
            "measure": measure,
            "item": str(item),
            "n_runs": g.n_runs,
            "n_samples": g.n_samples,
        }
        row.update(values)
        rows.append({k: json_value(row.get(k)) for k in STABILITY_COLUMNS})

    if g.churn is not None:
        c = g.churn
        add("churn", mean=c.mean, std=c.std, min=c.min, max=c.max, note=f"{c.n_pairs} pairs")
        a = c.majority_agreement
        add("majority_agreement", mean=float(a.mean()), std=_std(a), min=float(a.min()), max=float(a.max()))
    if g.per_class is not None:
        p = g.per_class
        add(
            "accuracy",
            mean=float(p.overall.mean()),
            std=p.overall_std,
            min=float(p.overall.min()),
            max=float(p.overall.max()),
        )
        add(
            "class_accuracy_worst",
            p.worst_class,
            std=p.max_std,
            ratio=p.ratio,
            note="largest per-class std / overall-accuracy std",
        )
        for r in p.rows():
            add(
                "class_accuracy",
                r["class"],
                n_samples=r["n_samples"],
                mean=r["mean"],
                std=r["std"],
                ratio=r["std_ratio"],
            )
    for name, sg in g.subgroups.items():
        for r in sg.rows:
            for rate in ("accuracy", "fpr", "fnr"):
                add(
                    f"subgroup_{rate}",
                    f"{name}={r['group']}",
                    n_samples=r["n_samples"],
                    mean=r[f"{rate}_mean"],
                    std=r[f"{rate}_std"],
                    ratio=r[f"{rate}_ratio"],
                    note=f"positive class {sg.positive}",
                )
    if g.sampling is not None:
        sp = g.sampling
        add(
            "test_set_sampling",
            sp.metric,
            mean=sp.estimate,
            std=sp.sampling_std,
            ratio=sp.ratio,
            low=sp.ci_low,
            high=sp.ci_high,
            note=sp.sentence(),
        )
    if g.instability is not None:
        inst = g.instability
        add("unstable_samples", mean=inst.n_unstable / max(g.n_samples, 1), note=f"{inst.n_unstable} samples flip")
        for r in inst.top(top):
            add("sample_flip_rate", r["sample"], mean=r["flip_rate"], note=f"majority {r['majority']}")
    if g.regression is not None:
        reg = g.regression
        add("value_std", mean=reg["value_std_mean"], max=reg["value_std_max"], note="per-sample std across runs")
        if "rmse_mean" in reg:
            add("rmse", mean=reg["rmse_mean"], std=reg["rmse_std"])
    if g.weights is not None:
        w = g.weights
        upper = np.triu_indices(w.n_runs, k=1)
        note = (
            "exact"
            if w.method == "exact"
            else (f"sketch k={w.sketch_dim}: each pair's distance in [low, high] with probability >= {1 - w.delta:g}")
        )
        add(
            "weight_distance",
            w.method,
            n_runs=g.n_weight_runs,
            mean=w.mean,
            std=w.std,
            min=w.min,
            max=w.max,
            low=float(w.lower[upper].min()),
            high=float(w.upper[upper].max()),
            note=note,
        )
    for note in g.notes:
        add("note", note=note)
    return rows


def _std(values: np.ndarray) -> float:
    return float(np.std(values, ddof=1)) if values.size >= 2 else math.nan
