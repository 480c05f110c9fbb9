"""The stability section as flat records: one per measure (and class, sub-group, sample) of each group.

Example:
    >>> from deviate_cb.report.answers.stability.build import StabilityGroup
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
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from deviate_cb.stats._results import json_value
from deviate_cb.stats.stability.groups import PerClassAccuracy, std_ratio

if TYPE_CHECKING:
    from deviate_cb.report.answers.stability.build import StabilityGroup

__all__ = [
    "RESIDUE_ULPS",
    "STABILITY_COLUMNS",
    "ShownPerClass",
    "shown_per_class",
    "shown_std",
    "shown_subgroup_rows",
    "stability_rows",
]

RESIDUE_ULPS = 16  # a std within this many units in the last place of the values' scale is rounding residue

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


class ShownPerClass(NamedTuple):
    """Per-class accuracy as shown: each class's std and the overall std with residue as 0, the class with the
    largest std, that std and its ratio to the overall std (inf when only classes vary, NaN when nothing does)."""

    std: list[float]
    overall_std: float
    worst_class: Any
    max_std: float
    ratio: float


def shown_std(std: Any, scale: Any) -> Any:
    """``std`` as shown: 0 where it is within :data:`RESIDUE_ULPS` units in the last place of ``scale`` (the
    magnitude of the values it spreads, such as their mean), the residue a floating-point mean of equal values
    leaves; anything else (NaN, ``None``, a real spread) as it is.

    Example:
        >>> runs = [0.8, 0.8, 0.8]
        >>> residue = float(np.std(runs, ddof=1))  # the mean of three 0.8 is not exactly 0.8
        >>> residue > 0, shown_std(residue, 0.8), shown_std(0.01, 0.8)
        (True, 0.0, 0.01)
    """
    if not isinstance(std, (int, float)) or not isinstance(scale, (int, float)):
        return std
    if not (math.isfinite(std) and math.isfinite(scale)):
        return std
    return 0.0 if abs(std) <= RESIDUE_ULPS * math.ulp(abs(scale)) else std


def shown_subgroup_rows(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Sub-group rows (:attr:`~deviate_cb.stats.stability.groups.SubgroupRates.rows`) as shown: each rate's std
    through :func:`shown_std` (its scale: the rate's mean), each ratio to the ``(all)`` row's accuracy std again
    from the stds shown (NaN where neither varies, inf where only the sub-group's does)."""
    overall = next((r for r in rows if r.get("group") == "(all)"), None)
    base = shown_std(overall["accuracy_std"], overall["accuracy_mean"]) if overall is not None else None
    out = []
    for row in rows:
        shown = dict(row)
        for rate in ("accuracy", "fpr", "fnr"):
            std = shown_std(row.get(f"{rate}_std"), row.get(f"{rate}_mean"))
            shown[f"{rate}_std"] = std
            if base is not None and isinstance(std, (int, float)):
                shown[f"{rate}_ratio"] = std_ratio(float(std), float(base))
        out.append(shown)
    return out


def shown_per_class(p: PerClassAccuracy) -> ShownPerClass:
    """``p``'s stds as shown (:func:`shown_std`, each class's against its mean accuracy), the largest and its
    ratio to the overall std as shown.

    Example:
        >>> from deviate_cb.stats.stability.groups import per_class_accuracy
        >>> p = per_class_accuracy([[0, 0, 0, 0, 1, 1]] * 3, [0, 0, 0, 0, 0, 1])  # class 0: 0.8 in every run
        >>> p.std.tolist(), p.ratio
        ([1.3597399555105182e-16, 0.0], inf)
        >>> shown = shown_per_class(p)
        >>> shown.std, shown.max_std, shown.ratio
        ([0.0, 0.0], 0.0, nan)
    """
    stds = [float(shown_std(float(s), float(m))) for s, m in zip(p.std, p.mean, strict=True)]
    overall = float(shown_std(p.overall_std, float(np.mean(p.overall)) if p.overall.size else math.nan))
    finite = [(s, i) for i, s in enumerate(stds) if not math.isnan(s)]
    if not finite:
        return ShownPerClass(stds, overall, p.worst_class, p.max_std, p.ratio)
    largest, index = max(finite, key=lambda pair: (pair[0], -pair[1]))
    return ShownPerClass(stds, overall, p.classes[index], largest, std_ratio(largest, overall))


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
        agreement = shown_std(_std(a), float(a.mean()))
        add("majority_agreement", mean=float(a.mean()), std=agreement, min=float(a.min()), max=float(a.max()))
    if g.per_class is not None:
        p = g.per_class
        shown = shown_per_class(p)
        add(
            "accuracy",
            mean=float(p.overall.mean()),
            std=shown.overall_std,
            min=float(p.overall.min()),
            max=float(p.overall.max()),
        )
        add(
            "class_accuracy_worst",
            shown.worst_class,
            std=shown.max_std,
            ratio=shown.ratio,
            note="largest per-class std / overall-accuracy std",
        )
        for r, std in zip(p.rows(), shown.std, strict=True):
            add(
                "class_accuracy",
                r["class"],
                n_samples=r["n_samples"],
                mean=r["mean"],
                std=std,
                ratio=std_ratio(std, shown.overall_std),
            )
    for name, sg in g.subgroups.items():
        for r in shown_subgroup_rows(sg.rows):
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
