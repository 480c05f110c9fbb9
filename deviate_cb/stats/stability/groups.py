"""Spread across runs of per-class accuracy and of sub-group accuracy, false-positive and false-negative rates.

Example:
    >>> preds = [[0, 0, 1, 1], [0, 1, 1, 1], [1, 0, 1, 0]]
    >>> pc = per_class_accuracy(preds, labels=[0, 0, 1, 1])
    >>> pc.classes.tolist(), pc.mean.round(3).tolist(), pc.worst_class
    ([0, 1], [0.667, 0.833], 0)
    >>> sg = subgroup_rates(preds, labels=[0, 0, 1, 1], groups=["a", "a", "b", "b"])
    >>> [row["group"] for row in sg.rows], sg.rows[1]["fpr_mean"], sg.rows[2]["fnr_mean"]
    (['(all)', 'a', 'b'], 0.333..., 0.166...)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from deviate_cb.stats._results import json_value
from deviate_cb.stats.stability.predictions import _as_labels, as_prediction_matrix

__all__ = ["PerClassAccuracy", "SubgroupRates", "per_class_accuracy", "std_ratio", "subgroup_rates"]


def _std(values: np.ndarray) -> np.ndarray:
    """Std with ddof=1 along axis 0, ignoring NaN; NaN with fewer than 2 finite values."""
    count = np.sum(np.isfinite(values), axis=0)
    mean = np.nanmean(np.where(count > 0, values, 0.0), axis=0) if values.size else np.nan
    squares = np.nansum((values - mean) ** 2, axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count >= 2, np.sqrt(squares / np.maximum(count - 1, 1)), np.nan)


def std_ratio(numerator: float, denominator: float) -> float:
    """``numerator / denominator`` of two stds: NaN where either is NaN or neither varies, inf where one does.

    Example:
        >>> std_ratio(0.04, 0.01), std_ratio(0.0, 0.0), std_ratio(0.01, 0.0)
        (4.0, nan, inf)
    """
    if math.isnan(numerator) or math.isnan(denominator):
        return math.nan
    if denominator == 0:
        return math.nan if numerator == 0 else math.inf
    return numerator / denominator


@dataclass(frozen=True)
class PerClassAccuracy:
    """Per-class accuracy across runs.

    Attributes:
        classes: The classes present in the labels (sorted).
        n_samples: Samples of each class.
        per_run: ``(runs, classes)`` accuracy of each run on each class.
        mean, std: Across runs, per class (std with ddof=1).
        overall: Overall accuracy of each run.
        overall_std: Std (ddof=1) of overall accuracy across runs.
        worst_class: The class with the largest std.
        max_std: Its std.
        ratio: ``max_std / overall_std`` (inf when only the per-class accuracies vary; NaN when nothing varies).
    """

    classes: np.ndarray
    n_samples: np.ndarray
    per_run: np.ndarray
    mean: np.ndarray
    std: np.ndarray
    overall: np.ndarray
    overall_std: float
    worst_class: Any
    max_std: float
    ratio: float

    def rows(self) -> list[dict[str, Any]]:
        """One dict per class: class, n_samples, mean, std, std_ratio (to the overall-accuracy std)."""
        return [
            {
                "class": json_value(c),
                "n_samples": int(n),
                "mean": json_value(m),
                "std": json_value(s),
                "std_ratio": json_value(std_ratio(float(s), self.overall_std)),
            }
            for c, n, m, s in zip(self.classes, self.n_samples, self.mean, self.std, strict=True)
        ]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: the headline numbers and the per-class rows."""
        return {
            "n_runs": int(self.per_run.shape[0]),
            "overall_mean": json_value(float(np.mean(self.overall))),
            "overall_std": json_value(self.overall_std),
            "worst_class": json_value(self.worst_class),
            "max_std": json_value(self.max_std),
            "ratio": json_value(self.ratio),
            "classes": self.rows(),
        }


def per_class_accuracy(predictions: Any, labels: Any) -> PerClassAccuracy:
    """Accuracy of every run on every class, and its spread across runs.

    Args:
        predictions: ``(runs, samples)`` predicted classes.
        labels: True class of each sample.

    Example:
        >>> pc = per_class_accuracy([[0, 1, 1], [0, 0, 1]], labels=[0, 1, 1])
        >>> pc.per_run.tolist(), round(pc.overall_std, 4), pc.worst_class, round(pc.ratio, 4)
        ([[1.0, 1.0], [1.0, 0.5]], 0.2357, 1, 1.5)
    """
    matrix = as_prediction_matrix(predictions)
    labels_arr = _as_labels(labels, matrix.shape[1])
    correct = (matrix == labels_arr[None, :]).astype(np.float64)
    order = np.argsort(labels_arr, kind="stable")
    classes, starts, counts = np.unique(labels_arr[order], return_index=True, return_counts=True)
    per_run = np.add.reduceat(correct[:, order], starts, axis=1) / counts[None, :]
    std = _std(per_run)
    overall = correct.mean(axis=1)
    overall_std = float(_std(overall[:, None])[0])
    if np.all(np.isnan(std)):
        worst, max_std = classes[0], math.nan
    else:
        index = int(np.nanargmax(std))
        worst, max_std = classes[index], float(std[index])
    worst = worst.item() if hasattr(worst, "item") else worst
    return PerClassAccuracy(
        classes,
        counts,
        per_run,
        per_run.mean(axis=0),
        std,
        overall,
        overall_std,
        worst,
        max_std,
        std_ratio(max_std, overall_std),
    )


@dataclass(frozen=True)
class SubgroupRates:
    """Accuracy, FPR and FNR of every sub-group across runs.

    Attributes:
        groups: Group values (sorted, as strings).
        n_samples: Samples per group.
        accuracy, fpr, fnr: ``(runs, groups)`` per-run rates (NaN where undefined).
        overall_accuracy_std: Std (ddof=1) of overall accuracy across runs: the denominator of the ratios.
        positive: The positive class of FPR and FNR.
        rows: One dict per group (plus ``"(all)"`` first): n, ``<rate>_mean``, ``<rate>_std``, ``<rate>_ratio``.
    """

    groups: np.ndarray
    n_samples: np.ndarray
    accuracy: np.ndarray
    fpr: np.ndarray
    fnr: np.ndarray
    overall_accuracy_std: float
    positive: Any
    rows: list[dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: the positive class, the overall std and the rows."""
        return {
            "positive": json_value(self.positive),
            "overall_accuracy_std": json_value(self.overall_accuracy_std),
            "rows": [{k: json_value(v) for k, v in row.items()} for row in self.rows],
        }


def subgroup_rates(predictions: Any, labels: Any, groups: Any, *, positive: Any = 1) -> SubgroupRates:
    """Accuracy, FPR = FP / (FP + TN) and FNR = FN / (FN + TP) per sub-group and run, with their spread.

    Args:
        predictions: ``(runs, samples)`` predicted classes.
        labels: True class of each sample.
        groups: Sub-group of each sample (any values; compared as strings).
        positive: The positive class (default 1); one-vs-rest with more than two classes.

    Example:
        >>> sg = subgroup_rates([[1, 0, 1, 0], [1, 1, 0, 0]], labels=[1, 0, 1, 0], groups=[0, 0, 0, 0])
        >>> row = sg.rows[1]
        >>> row["accuracy_mean"], row["fpr_mean"], row["fnr_mean"], row["fnr_std"]
        (0.75, 0.25, 0.25, 0.353...)
    """
    matrix = as_prediction_matrix(predictions)
    runs, n = matrix.shape
    labels_arr = _as_labels(labels, n)
    names, codes = np.unique(_as_labels(groups, n, "groups").astype(str), return_inverse=True)
    n_groups = names.size
    truth = labels_arr == positive
    said = matrix == positive
    # cell 0: TN, 1: FN, 2: FP, 3: TP (2 * predicted positive + actually positive)
    cell = 2 * said.astype(np.int64) + truth[None, :].astype(np.int64)
    index = (np.arange(runs)[:, None] * (n_groups + 1) + codes[None, :]) * 4 + cell
    everyone = (np.arange(runs)[:, None] * (n_groups + 1) + n_groups) * 4 + cell  # the "(all)" pseudo-group
    counts = np.bincount(np.concatenate([index.ravel(), everyone.ravel()]), minlength=runs * (n_groups + 1) * 4)
    counts = counts.reshape(runs, n_groups + 1, 4).astype(np.float64)
    tn, fn, fp, tp = counts[..., 0], counts[..., 1], counts[..., 2], counts[..., 3]
    correct = (matrix == labels_arr[None, :]).astype(np.float64)
    sizes = np.bincount(codes, minlength=n_groups).astype(np.float64)
    flat = (np.arange(runs)[:, None] * n_groups + codes[None, :]).ravel()
    per_group_correct = np.bincount(flat, weights=correct.ravel(), minlength=runs * n_groups).reshape(runs, n_groups)
    accuracy = np.concatenate([per_group_correct / sizes[None, :], correct.mean(axis=1)[:, None]], axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        fpr = np.where(fp + tn > 0, fp / (fp + tn), np.nan)
        fnr = np.where(fn + tp > 0, fn / (fn + tp), np.nan)
    overall_std = float(_std(accuracy[:, -1:])[0])
    rows = []
    for g in [n_groups, *range(n_groups)]:  # "(all)" first
        row: dict[str, Any] = {
            "group": "(all)" if g == n_groups else str(names[g]),
            "n_samples": int(n if g == n_groups else sizes[g]),
        }
        for rate_name, rate in (("accuracy", accuracy), ("fpr", fpr), ("fnr", fnr)):
            column = rate[:, g]
            finite = column[np.isfinite(column)]
            std = float(_std(column[:, None])[0])
            row[f"{rate_name}_mean"] = float(finite.mean()) if finite.size else math.nan
            row[f"{rate_name}_std"] = std
            row[f"{rate_name}_ratio"] = std_ratio(std, overall_std)
        rows.append(row)
    return SubgroupRates(
        names, sizes.astype(np.int64), accuracy[:, :-1], fpr[:, :-1], fnr[:, :-1], overall_std, positive, rows
    )
