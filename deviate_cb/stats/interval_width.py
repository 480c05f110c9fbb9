"""How precisely a std is known from ``n`` runs, and how many runs a precision needs: the planning numbers of
``deviate-replicate --until-precision``, by normal theory or by Bonett's interval at a given kurtosis.
"""

from __future__ import annotations

import math
import numbers
from typing import Optional

from deviate_cb.stats._checks import positive_int
from deviate_cb.stats._results import check_level

__all__ = ["runs_for_precision", "std_precision"]


def std_precision(n: int, level: float = 0.95, kurtosis: Optional[float] = None) -> float:
    """The half-width of a std's interval from ``n`` runs, relative to the std: a planning number.

    Without ``kurtosis``, the chi-square interval's (normal theory: it depends on ``n`` only, and holds for normal
    runs only). With ``kurtosis`` (3 for normal runs, about 9 for lognormal(0, 0.5), more for heavier tails), the
    half-width of Bonett's interval when the runs show that kurtosis
    (:func:`~deviate_cb.stats.precision.planning_precision`): what ``deviate-replicate --until-precision``
    reaches, since its interval is Bonett's and its width follows the kurtosis of the runs.

    Example:
        >>> round(std_precision(10), 4), round(std_precision(100), 4), round(std_precision(39, kurtosis=3.0), 3)
        (0.5689, 0.1418, 0.25)
    """
    n = positive_int(n, "n")
    if n < 2:
        raise ValueError(f"`n` must be at least 2 (a std needs two runs). Received: n={n}.")
    return _precision(n, check_level(level), _kurtosis(kurtosis))


def runs_for_precision(rel: float, level: float = 0.95, kurtosis: Optional[float] = None) -> int:
    """The fewest runs whose std interval's half-width is at most ``rel`` times the std (:func:`std_precision`).

    A planning number: normal theory without ``kurtosis``; with it, for runs of that kurtosis (a metric with heavy
    tails needs several times more runs: 39 for ±25% at kurtosis 3, 133 at 9).

    Example:
        >>> runs_for_precision(0.2), round(std_precision(runs_for_precision(0.2)), 4)
        (53, 0.199)
        >>> runs_for_precision(0.25, kurtosis=3.0), runs_for_precision(0.25, kurtosis=9.0)
        (39, 133)
    """
    if isinstance(rel, bool) or not isinstance(rel, numbers.Real) or not math.isfinite(rel) or rel <= 0:
        raise ValueError(f"`rel` must be a positive number. Received: rel={rel!r}.")
    level = check_level(level)
    kurt = _kurtosis(kurtosis)
    if rel < 1e-4:
        raise ValueError(f"`rel` must be at least 1e-4 (about 1e9 runs). Received: rel={rel!r}.")
    low, high = 1, 2  # precision(low) > rel >= precision(high), with precision(1) taken as infinite
    while _precision(high, level, kurt) > rel:
        low, high = high, 2 * high
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if _precision(mid, level, kurt) <= rel else (mid, high)
    return high


def _precision(n: int, level: float, kurtosis: Optional[float] = None) -> float:
    if kurtosis is not None:
        from deviate_cb.stats.precision import planning_precision

        return float(planning_precision(n, kurtosis, level))
    from scipy.special import chdtri

    df, tail = float(n - 1), (1.0 - level) / 2.0
    return 0.5 * (math.sqrt(df / chdtri(df, 1.0 - tail)) - math.sqrt(df / chdtri(df, tail)))


def _kurtosis(kurtosis: object) -> Optional[float]:
    if kurtosis is None:
        return None
    if isinstance(kurtosis, bool) or not isinstance(kurtosis, numbers.Real) or not 1 <= float(kurtosis) < math.inf:
        raise ValueError(
            f"`kurtosis` must be a number of at least 1 (3: normal runs). Received: kurtosis={kurtosis!r}."
        )
    return float(kurtosis)
