"""Prediction stability across runs: pairwise churn, agreement with the majority vote, per-sample flips.

Example:
    >>> preds = [[0, 1, 1, 2], [0, 1, 2, 2], [0, 0, 1, 2]]
    >>> churn = prediction_churn(preds)
    >>> churn.matrix.tolist()
    [[0.0, 0.25, 0.25], [0.25, 0.0, 0.5], [0.25, 0.5, 0.0]]
    >>> round(churn.mean, 4), churn.majority_agreement.tolist()
    (0.3333, [1.0, 0.75, 0.75])
    >>> table = sample_instability(preds, labels=[0, 1, 1, 2])
    >>> row = table.top(1)[0]
    >>> row["sample"], row["majority"], round(row["flip_rate"], 3), row["n_distinct"], round(row["correct_rate"], 3)
    (1, 1, 0.333, 2, 0.667)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

__all__ = [
    "Churn",
    "SampleInstability",
    "align_runs",
    "as_prediction_matrix",
    "majority_vote",
    "prediction_churn",
    "sample_instability",
]

_MAX_BLOCK = 1 << 24  # elements of one comparison block (runs x samples), to bound memory


def as_prediction_matrix(predictions: Any, name: str = "predictions", min_runs: int = 1) -> np.ndarray:
    """``predictions`` as an int64 array of shape ``(runs, samples)``, or a one-line ``ValueError``.

    Example:
        >>> as_prediction_matrix([[1.0, 2.0]]).dtype
        dtype('int64')
    """
    array = np.asarray(predictions)
    if array.ndim != 2:
        raise ValueError(f"`{name}` must be a 2-D array of shape (runs, samples). Received: shape {array.shape}.")
    if array.shape[0] < min_runs or array.shape[1] == 0:
        raise ValueError(f"`{name}` must hold at least {min_runs} run(s) and 1 sample. Received: shape {array.shape}.")
    if array.dtype.kind == "f" and np.all(np.isfinite(array)) and np.all(array == np.round(array)):
        array = array.astype(np.int64)
    if array.dtype.kind not in "biu":
        raise ValueError(f"`{name}` must hold integer class predictions. Received: dtype {array.dtype}.")
    return array.astype(np.int64, copy=False)


def _as_labels(labels: Any, n: int, name: str = "labels") -> np.ndarray:
    array = np.asarray(labels).reshape(-1) if np.ndim(labels) else np.asarray([labels])
    if array.shape[0] != n:
        raise ValueError(f"`{name}` must have one entry per sample. Received: {array.shape[0]} {name} for {n} samples.")
    return array


def align_runs(
    samples: Sequence[Any], values: Sequence[Any], *, on_mismatch: str = "refuse"
) -> tuple[np.ndarray, np.ndarray]:
    """Stack per-run values into a ``(runs, samples)`` matrix whose columns are the same sample in every run.

    Args:
        samples: One array of sample indices per run.
        values: One array of values per run, in the order of that run's ``samples``.
        on_mismatch: ``"refuse"`` (default): runs must hold the same sample set; ``"intersect"``: keep only
            the samples every run has.

    Returns:
        ``(sample_ids, matrix)`` with ``sample_ids`` sorted.

    Example:
        >>> ids, m = align_runs([[2, 0, 1], [0, 1, 2]], [[20, 0, 10], [1, 11, 21]])
        >>> ids.tolist(), m.tolist()
        ([0, 1, 2], [[0, 10, 20], [1, 11, 21]])
    """
    if on_mismatch not in ("refuse", "intersect"):
        raise ValueError(f"`on_mismatch` must be 'refuse' or 'intersect'. Received: on_mismatch={on_mismatch!r}.")
    if len(samples) != len(values) or not samples:
        raise ValueError(
            f"`samples` and `values` must hold one array per run. Received: {len(samples)} and {len(values)}."
        )
    ids = [np.asarray(s, dtype=np.int64).reshape(-1) for s in samples]
    vals = [np.asarray(v).reshape(-1) for v in values]
    orders: list[np.ndarray] = []
    ordered: list[np.ndarray] = []
    for run, (i, v) in enumerate(zip(ids, vals, strict=True)):
        if i.size != v.size:
            raise ValueError(f"run {run}: {i.size} sample indices for {v.size} values.")
        same = run > 0 and i.size == ids[0].size and np.array_equal(i, ids[0])  # the usual case: one order
        order = orders[0] if same else np.argsort(i, kind="stable")
        sorted_ids = ordered[0] if same else i[order]
        if not same and sorted_ids.size > 1 and np.any(sorted_ids[1:] == sorted_ids[:-1]):
            raise ValueError(f"run {run}: the sample indices are not distinct.")
        orders.append(order)
        ordered.append(sorted_ids)
    common = ordered[0]
    for run, sorted_ids in enumerate(ordered[1:], start=1):
        if sorted_ids is ordered[0] or np.array_equal(sorted_ids, ordered[0]):
            continue
        if on_mismatch == "refuse":
            extra = np.setdiff1d(sorted_ids, ordered[0], assume_unique=True)
            missing = np.setdiff1d(ordered[0], sorted_ids, assume_unique=True)
            raise ValueError(
                f"run {run} has {extra.size} sample(s) run 0 lacks and lacks {missing.size} of run 0's; the runs "
                "were evaluated on different samples (use on_mismatch='intersect' to keep the common ones)."
            )
        common = np.intersect1d(common, sorted_ids, assume_unique=True)
    rows = []
    for order, sorted_ids, v in zip(orders, ordered, vals, strict=True):
        row = v[order]
        rows.append(row if sorted_ids.size == common.size else row[np.searchsorted(sorted_ids, common)])
    return common, np.stack(rows)


def majority_vote(predictions: Any) -> tuple[np.ndarray, np.ndarray]:
    """The most frequent prediction of each sample across runs (ties: the smallest class) and its count.

    Example:
        >>> votes, counts = majority_vote([[0, 1, 2], [1, 1, 0], [1, 2, 2]])
        >>> votes.tolist(), counts.tolist()
        ([1, 1, 2], [2, 2, 2])
    """
    ordered, lengths, _ = _sorted_runs(as_prediction_matrix(predictions))
    best = np.argmax(lengths, axis=0)  # first maximal run in ascending order: the smallest tied class
    cols = np.arange(ordered.shape[1])
    return ordered[best, cols], lengths[best, cols]


def _sorted_runs(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Columns sorted along runs; at each row the length of the equal-value stretch ending there; stretch ends."""
    ordered = np.sort(matrix, axis=0)
    runs = ordered.shape[0]
    new = np.ones_like(ordered, dtype=bool)
    new[1:] = ordered[1:] != ordered[:-1]
    rows = np.arange(runs)[:, None]
    start = np.maximum.accumulate(np.where(new, rows, 0), axis=0)
    lengths = rows - start + 1
    ends = np.ones_like(new)
    ends[:-1] = new[1:]
    return ordered, lengths, ends


@dataclass(frozen=True)
class Churn:
    """Pairwise prediction churn of a group of runs.

    Attributes:
        matrix: ``(runs, runs)``: fraction of samples on which runs ``i`` and ``j`` disagree.
        mean, std, min, max: Over the pairs ``i < j`` (std with ddof=1; NaN with one pair).
        majority_agreement: Per run, the fraction of samples where it predicts the majority vote.
        n_samples: Number of samples compared.
    """

    matrix: np.ndarray
    mean: float
    std: float
    min: float
    max: float
    majority_agreement: np.ndarray
    n_samples: int

    @property
    def n_runs(self) -> int:
        return int(self.matrix.shape[0])

    @property
    def n_pairs(self) -> int:
        return self.n_runs * (self.n_runs - 1) // 2

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (NaN becomes ``None``)."""
        out = {
            "n_runs": self.n_runs,
            "n_pairs": self.n_pairs,
            "n_samples": self.n_samples,
            "churn_mean": self.mean,
            "churn_std": self.std,
            "churn_min": self.min,
            "churn_max": self.max,
            "majority_agreement_mean": float(np.mean(self.majority_agreement)),
            "majority_agreement_min": float(np.min(self.majority_agreement)),
            "majority_agreement": self.majority_agreement.tolist(),
            "matrix": self.matrix.tolist(),
        }
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in out.items()}


def prediction_churn(predictions: Any) -> Churn:
    """Pairwise churn of ``predictions`` (``(runs, samples)`` classes) and agreement with the majority vote.

    Example:
        >>> c = prediction_churn([[0, 1], [0, 1]])
        >>> c.mean, c.std, c.majority_agreement.tolist()
        (0.0, nan, [1.0, 1.0])
    """
    matrix = as_prediction_matrix(predictions, min_runs=2)
    runs, n = matrix.shape
    counts = np.zeros((runs, runs), dtype=np.int64)
    block = max(1, _MAX_BLOCK // max(runs, 1))
    for start in range(0, n, block):  # blocks of samples bound the memory of the comparison
        part = matrix[:, start : start + block]
        for i in range(runs - 1):  # one run against all later ones, vectorised over runs and samples
            counts[i, i + 1 :] += np.count_nonzero(part[i + 1 :] != part[i], axis=1)
    counts = counts + counts.T
    churn = counts / n
    pairs = churn[np.triu_indices(runs, k=1)]
    votes, _ = majority_vote(matrix)
    agreement = np.mean(matrix == votes[None, :], axis=1)
    std = float(np.std(pairs, ddof=1)) if pairs.size > 1 else math.nan
    return Churn(churn, float(pairs.mean()), std, float(pairs.min()), float(pairs.max()), agreement, int(n))


@dataclass(frozen=True)
class SampleInstability:
    """Per-sample instability, ranked from the least stable sample.

    Attributes:
        sample: Sample ids in ranked order (highest flip rate, then highest entropy, then smallest id).
        majority: Majority vote of each sample.
        flip_rate: Fraction of runs whose prediction differs from the majority.
        entropy: Entropy (natural log) of the distribution of predictions across runs.
        n_distinct: Number of distinct predictions.
        correct_rate: Fraction of runs predicting the true label (NaN without labels).
        n_runs: Number of runs.
    """

    sample: np.ndarray
    majority: np.ndarray
    flip_rate: np.ndarray
    entropy: np.ndarray
    n_distinct: np.ndarray
    correct_rate: np.ndarray
    n_runs: int

    @property
    def n_unstable(self) -> int:
        """Number of samples on which at least one run disagrees with the majority."""
        return int(np.count_nonzero(self.flip_rate > 0))

    def top(self, k: int = 10) -> list[dict[str, Any]]:
        """The ``k`` least stable samples as rows (dicts); NaN becomes ``None``."""
        rows = []
        for i in range(min(int(k), self.sample.size)):
            correct = float(self.correct_rate[i])
            rows.append(
                {
                    "sample": int(self.sample[i]),
                    "majority": int(self.majority[i]),
                    "flip_rate": float(self.flip_rate[i]),
                    "entropy": float(self.entropy[i]),
                    "n_distinct": int(self.n_distinct[i]),
                    "correct_rate": None if math.isnan(correct) else correct,
                }
            )
        return rows

    def to_dict(self, k: int = 10) -> dict[str, Any]:
        """Counts and the ``k`` least stable samples."""
        return {
            "n_runs": self.n_runs,
            "n_samples": int(self.sample.size),
            "n_unstable": self.n_unstable,
            "top": self.top(k),
        }


def sample_instability(predictions: Any, labels: Any = None, sample_ids: Optional[Any] = None) -> SampleInstability:
    """Rank the samples of ``predictions`` (``(runs, samples)`` classes) by how often they flip across runs.

    Args:
        predictions: Predicted classes, one row per run.
        labels: True class of each sample (optional; gives ``correct_rate``).
        sample_ids: Id of each column (default ``0..samples-1``).

    Example:
        >>> s = sample_instability([[0, 1, 1], [0, 1, 0], [0, 2, 0]])
        >>> s.sample.tolist(), s.flip_rate.round(3).tolist(), s.n_distinct.tolist()
        ([1, 2, 0], [0.333, 0.333, 0.0], [2, 2, 1])
    """
    matrix = as_prediction_matrix(predictions)
    runs, n = matrix.shape
    ids = np.arange(n, dtype=np.int64) if sample_ids is None else _as_labels(sample_ids, n, "sample_ids")
    ordered, lengths, ends = _sorted_runs(matrix)
    best = np.argmax(lengths, axis=0)
    cols = np.arange(n)
    majority, top = ordered[best, cols], lengths[best, cols]
    share = np.where(ends, lengths / runs, 1.0)  # one term per distinct prediction; 1.0 contributes 0
    entropy = -np.sum(share * np.log(share), axis=0)
    entropy = np.where(entropy > 0, entropy, 0.0)  # no -0.0
    flip = 1.0 - top / runs
    correct = np.full(n, np.nan)
    if labels is not None:
        correct = np.mean(matrix == _as_labels(labels, n)[None, :], axis=0)
    order = np.lexsort((ids, -entropy, -flip))
    return SampleInstability(
        ids[order], majority[order], flip[order], entropy[order], ends.sum(axis=0)[order], correct[order], runs
    )
