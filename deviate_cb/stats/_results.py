"""The result object every statistic returns, in SciPy's style.

``statistic`` and ``pvalue`` (NaN for estimates that are not tests), ``confidence_interval(level)`` (recomputed
for another level; resampling intervals reuse the seed they were first computed with, so the same call
gives the same interval), the test's name and its settings, and ``to_dict()`` for JSON output.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Optional

from deviate_cb.stats.intervals import ConfidenceInterval

__all__ = ["StatResult", "check_level", "json_value"]


def check_level(level: object, name: str = "level") -> float:
    """Validate a confidence level in (0, 1).

    Example:
        >>> check_level(0.9)
        0.9
    """
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0 < level < 1:
        raise ValueError(f"`{name}` must be a number in (0, 1). Received: {name}={level!r}.")
    return float(level)


@dataclass(frozen=True)
class StatResult:
    """The outcome of one statistic.

    Attributes:
        test: What ran, e.g. ``"welch_t"``, ``"mann_whitney_u"``, ``"cohens_d"``.
        statistic: The statistic or estimate.
        pvalue: The p-value; NaN when the result is an estimate, not a test.
        level: Confidence level of the default interval.
        settings: How it ran (``alternative``, ``n_resamples``, ``seed``, group sizes, ...).

    Example:
        >>> r = StatResult("mean_difference", 0.5, level=0.95, interval=lambda level: (0.5 - level, 0.5 + level))
        >>> r.confidence_interval(0.9)
        ConfidenceInterval(low=-0.4, high=1.4)
        >>> r.to_dict()["ci_high"]
        1.45
    """

    test: str
    statistic: float
    pvalue: float = math.nan
    level: float = 0.95
    settings: Mapping[str, Any] = field(default_factory=dict)
    interval: Optional[Callable[[float], tuple[float, float]]] = field(default=None, repr=False, compare=False)

    def confidence_interval(self, level: Optional[float] = None) -> ConfidenceInterval:
        """The confidence interval of :attr:`statistic` at ``level`` (default: :attr:`level`)."""
        level = self.level if level is None else check_level(level)
        if self.interval is None:
            return ConfidenceInterval(math.nan, math.nan)
        low, high = self.interval(level)
        return ConfidenceInterval(float(low), float(high))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (NaN and infinite bounds, as in one-sided intervals, become ``None``)."""
        low, high = self.confidence_interval()
        out = {
            "test": self.test,
            "statistic": self.statistic,
            "pvalue": self.pvalue,
            "level": self.level,
            "ci_low": low,
            "ci_high": high,
            **{f"setting_{k}": v for k, v in self.settings.items()},
        }
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in out.items()}


def json_value(value: Any) -> Any:
    """``value`` ready for JSON: NaN and infinities become ``None``, NumPy scalars Python numbers.

    Example:
        >>> import numpy as np
        >>> json_value(float("nan")), json_value(np.float32(0.5)), json_value(np.int64(3)), json_value("a")
        (None, 0.5, 3, 'a')
    """
    import numpy as np

    if isinstance(value, (float, np.floating)):
        return None if not math.isfinite(value) else float(value)
    if isinstance(value, np.integer):
        return int(value)
    return value
