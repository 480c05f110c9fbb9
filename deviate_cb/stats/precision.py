"""When a std's interval can be claimed, and ``--until-precision``'s look: is the std known to ±REL yet?

Example:
    >>> std_interval_note([0.9, 0.9, 0.9])
    'cannot tell the std from 3 runs with only 1 distinct value'
    >>> std_interval_note([0.0, 0.0, 0.0, 0.0, 0.0, 0.3, -0.2])
    'cannot tell the std from 7 runs: only 2 differ from the other 5'
    >>> look = precision_look([0.84, 0.85, 0.86, 0.81, 0.90, 0.83, 0.85, 0.86, 0.84, 0.82], 0.25)
    >>> look.decision, round(look.precision, 2)
    ('continue', 0.82)
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from deviate_cb.stats._checks import as_vector
from deviate_cb.stats._results import check_level, json_value
from deviate_cb.stats._std import guarded_std, is_constant
from deviate_cb.stats.intervals import bonett_std_interval, std_kurtosis

__all__ = [
    "KURTOSIS_FROM",
    "MIN_DIFFERING",
    "MIN_DISTINCT",
    "PrecisionLook",
    "can_tell_along",
    "planning_precision",
    "precision_look",
    "std_interval_note",
]

MIN_DISTINCT = 3
MIN_DIFFERING = 3
KURTOSIS_FROM = 10
METHOD = "Bonett (2006) log-scale interval, kurtosis the largest of the looks from 10 runs"


def std_interval_note(values: Any) -> str:
    """Why no interval of the std holds for these values, or ``""`` when one does (see the module's notes).

    Example:
        >>> std_interval_note([0.1, 0.2, 0.4]), std_interval_note([0.5, 0.5, 0.6, 0.7])
        ('', '')
    """
    x = np.asarray(values, dtype=np.float64).ravel()
    n = int(x.size)
    runs = f"{n} run{'s' * (n != 1)}"
    if n < 2:
        return f"cannot tell the std from {runs}"
    _, counts = np.unique(x, return_counts=True)
    if counts.size < MIN_DISTINCT:
        return f"cannot tell the std from {runs} with only {counts.size} distinct value{'s' * (counts.size != 1)}"
    mode = int(counts.max())
    if mode > n - mode and n - mode < MIN_DIFFERING:
        return f"cannot tell the std from {runs}: only {n - mode} differ from the other {mode}"
    return ""


def can_tell_along(values: np.ndarray) -> np.ndarray:
    """:func:`std_interval_note` is empty, for each row of a 2-D array (vectorised, for simulations).

    Example:
        >>> can_tell_along(np.array([[1.0, 2.0, 3.0], [1.0, 1.0, 2.0]])).tolist()
        [True, False]
    """
    x = np.sort(np.asarray(values, dtype=np.float64), axis=-1)
    rows, n = x.shape
    starts = np.ones(x.shape, dtype=bool)
    starts[:, 1:] = x[:, 1:] != x[:, :-1]
    distinct = starts.sum(axis=1)
    labels = np.cumsum(starts, axis=1) - 1
    counts = np.zeros((rows, n), dtype=np.int64)
    np.add.at(counts, (np.arange(rows)[:, None], labels), 1)
    mode = counts.max(axis=1)
    differing = n - mode
    return (distinct >= MIN_DISTINCT) & ~((mode > differing) & (differing < MIN_DIFFERING))


def planning_precision(n: Any, kurtosis: Any = 3.0, level: float = 0.95) -> Any:
    """Bonett's interval's half-width over the std, from ``n`` runs of a metric with this ``kurtosis``.

    ``sqrt(c) sinh(z c sqrt((kurtosis - (n-3)/n) / (n-1)) / 2)`` with ``c = n / (n - z)``: what
    :func:`precision_look` reaches when the runs show that kurtosis (3: normal; vectorised).

    Example:
        >>> round(float(planning_precision(39)), 3), round(float(planning_precision(39, 9.0)), 3)
        (0.25, 0.507)
    """
    from scipy.special import ndtri

    z = float(ndtri(1.0 - (1.0 - check_level(level, "level")) / 2.0))
    n_arr = np.asarray(n, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        c = n_arr / (n_arr - z)
        se = c * np.sqrt(np.maximum(np.asarray(kurtosis, np.float64) - (n_arr - 3.0) / n_arr, 0.0) / (n_arr - 1.0))
        out = np.where(n_arr - z > 0, np.sqrt(c) * np.sinh(z * se / 2.0), np.inf)
    return float(out) if out.ndim == 0 else out


@dataclass(frozen=True)
class PrecisionLook:
    """One look of ``--until-precision``.

    Attributes:
        n: Runs so far. std: their std (``ddof=1``, 0 for equal runs).
        low, high: Bonett's interval (:attr:`kurtosis` sets its width); NaN where :attr:`note` says why not.
        precision: ``(high - low) / (2 std)``; infinite where there is no interval, 0 for a group equal by design.
        kurtosis: The kurtosis the interval uses (the largest estimate of the looks from 10 runs, and this one's).
        target, level: The precision asked for and the interval's level.
        note: ``""``, or why no interval holds (:func:`std_interval_note`).
        decision: ``"known"``, ``"continue"`` or ``"not known"`` (the last look, not known). text: one line.
    """

    n: int
    std: float
    low: float
    high: float
    precision: float
    kurtosis: float
    target: float
    level: float
    note: str
    decision: str
    text: str

    @property
    def stop(self) -> bool:
        """Whether the sequence stops here."""
        return self.decision != "continue"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (NaN and infinite values become ``None``)."""
        names = ("n", "std", "low", "high", "precision", "kurtosis", "target", "level")
        out = {name: json_value(getattr(self, name)) for name in names}
        return {**out, "note": self.note, "decision": self.decision, "text": self.text, "method": METHOD}


def precision_look(
    values: Sequence[float],
    target: float,
    *,
    looks: Sequence[int] = (),
    level: float = 0.95,
    last: bool = False,
    by_design: bool = False,
    name: str = "",
) -> PrecisionLook:
    """Is the std of ``values`` known to ``±target`` (half-width of its interval over the std)?

    Args:
        values: The metric of every run so far, in replica order (finite).
        target: The precision asked for, a positive number (0.25: ±25%).
        looks: The numbers of runs at the sequence's earlier looks: the interval uses the largest kurtosis of
            ``values[:m]`` over those ``m`` from :data:`KURTOSIS_FROM` runs on, so that a look whose runs happen
            to miss the tail does not stop the sequence with too narrow an interval.
        level: The interval's level.
        last: Whether this is the last look (``--max-runs``): not known here is ``"not known"``.
        by_design: The group is bit-identical by design (the ``control`` variant): equal runs are then std 0,
            known exactly. Otherwise equal runs show nothing about the std (:func:`std_interval_note`).
        name: The metric's name, for the text.

    Example:
        >>> precision_look([0.9, 0.9, 0.9], 0.25).text
        'after 3 runs: cannot tell the std from 3 runs with only 1 distinct value (target ±25%)'
        >>> precision_look([0.9, 0.9, 0.9], 0.25, by_design=True).decision
        'known'
    """
    x, target, level = _validate(values, target, looks, level)
    n = int(x.size)
    of = f" of {name}" if name else ""
    std = guarded_std(x)
    if by_design and n >= 2 and is_constant(x):
        text = f"after {n} runs: std{of} 0: the {n} runs are bit-identical, as this group is by design: known exactly"
        return PrecisionLook(n, 0.0, 0.0, 0.0, 0.0, math.nan, target, level, "", "known", text)
    note = std_interval_note(x)
    if note:
        decision = "not known" if last else "continue"
        text = f"after {n} runs: {note.replace('the std', f'the std{of}')} (target ±{target:.0%})"
        return PrecisionLook(n, std, math.nan, math.nan, math.inf, math.nan, target, level, note, decision, text)
    kurtosis = float(std_kurtosis(x))
    for m in looks:
        if KURTOSIS_FROM <= m < n and not std_interval_note(x[:m]):
            kurtosis = max(kurtosis, float(std_kurtosis(x[:m])))
    low, high = (float(v) for v in bonett_std_interval(x, level, kurtosis))
    reached = (high - low) / (2.0 * std)
    decision = "known" if reached <= target else ("not known" if last else "continue")
    text = (
        f"after {n} runs: std{of} {std:.4g} [{low:.4g}, {high:.4g}] ({level:.0%} Bonett CI, kurtosis "
        f"{kurtosis:.3g}): known to ±{reached:.0%} (target ±{target:.0%})"
    )
    return PrecisionLook(n, std, low, high, reached, kurtosis, target, level, "", decision, text)


def _validate(
    values: Sequence[float], target: object, looks: Sequence[int], level: object
) -> tuple[np.ndarray, float, float]:
    x = as_vector(values, "values")
    if not np.all(np.isfinite(x)):
        raise ValueError(
            f"`values` must hold one finite value per run. Received: {int(np.sum(~np.isfinite(x)))} non-finite."
        )
    if isinstance(target, bool) or not isinstance(target, numbers.Real) or not 0 < float(target) < math.inf:
        raise ValueError(f"`target` must be a positive number, e.g. 0.25. Received: target={target!r}.")
    for m in looks:
        if isinstance(m, bool) or not isinstance(m, numbers.Integral) or m < 1:
            raise ValueError(f"`looks` must hold positive integers. Received: looks={list(looks)!r}.")
    return x, float(target), check_level(level, "level")
