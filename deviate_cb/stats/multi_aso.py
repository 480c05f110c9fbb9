"""Almost Stochastic Order for k groups: ``epsilon_min`` of every ordered pair, Bonferroni-corrected, and a ranking.

Example:
    >>> groups = {"a": [0.80, 0.81, 0.82, 0.81], "b": [0.85, 0.86, 0.87, 0.86], "c": [0.90, 0.91, 0.92, 0.91]}
    >>> r = multi_aso(groups, rng=0)
    >>> r.ranking, r.n_comparisons, round(r.pair_alpha, 5)
    (('c', 'b', 'a'), 6, 0.00833)
    >>> r.eps_min[2, 0].item(), r.eps_min[0, 2].item()
    (0.0, 1.0)
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Union

import numpy as np

from deviate_cb.stats._checks import check_rng, positive_int, seed_of
from deviate_cb.stats._groups import _group
from deviate_cb.stats.aso import almost_stochastic_order

__all__ = ["MultiASO", "multi_aso"]

RngLike = Union[int, np.random.Generator, None]
Groups = Union[Mapping[Any, Iterable[float]], Sequence[Iterable[float]]]


@dataclass(frozen=True)
class MultiASO:
    """Almost Stochastic Order between every ordered pair of k groups.

    Attributes:
        groups: The group names, in the order of the matrices' rows and columns.
        eps_min: ``k x k`` read-only matrix: ``eps_min[i, j]`` is ``epsilon_min`` of group ``i`` over group ``j``
            at confidence ``1 - pair_alpha``; NaN on the diagonal.
        violation_ratio: ``k x k`` matrix of the point estimates ``eps_W`` (NaN on the diagonal).
        wins: Per group, how many others it almost stochastically dominates (``eps_min < threshold``).
        means: Per group, the mean of its finite values.
        ranking: The group names, most wins first; ties by the larger mean, then by name.
        alpha: The family-wise significance level.
        pair_alpha: ``alpha / n_comparisons``, the level of each ``epsilon_min``.
        n_comparisons: ``k (k - 1)``, the ordered pairs.
        threshold: Dominance threshold of ``epsilon_min``.
        settings: ``n`` and ``n_nonfinite`` per group (dicts by name), ``n_resamples``, ``grid_size``, ``seed``,
            ``n_permutations``.
        pvalue: ``k x k`` read-only matrix: the one-sided permutation p-value of "row above column" (NaN on the
            diagonal); a pair is dominant only where it is at most ``pair_alpha``.
        claimable: ``k x k`` booleans: whether the group sizes let the permutation test reach ``pair_alpha`` at
            all (``1 / C(n_i + n_j, n_i) <= pair_alpha``).
    """

    groups: tuple[str, ...]
    eps_min: np.ndarray = field(repr=False)
    violation_ratio: np.ndarray = field(repr=False)
    wins: tuple[int, ...]
    means: tuple[float, ...]
    ranking: tuple[str, ...]
    alpha: float
    pair_alpha: float
    n_comparisons: int
    threshold: float
    settings: Mapping[str, Any] = field(default_factory=dict)
    pvalue: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)), repr=False)
    claimable: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=bool), repr=False)

    @property
    def statistic(self) -> np.ndarray:
        """The ``eps_min`` matrix (SciPy's name for what a test computes)."""
        return self.eps_min

    @property
    def dominant(self) -> np.ndarray:
        """``k x k`` booleans: ``dominant[i, j]`` when group ``i`` almost stochastically dominates group ``j``
        (``eps_min[i, j] < threshold`` and the permutation p-value at most ``pair_alpha``)."""
        with np.errstate(invalid="ignore"):
            bound = np.where(np.isnan(self.eps_min), False, self.eps_min < self.threshold)
            if self.pvalue.shape != self.eps_min.shape:  # built by hand without p-values: ASO's bound alone
                return bound
            return bound & np.where(np.isnan(self.pvalue), False, self.pvalue <= self.pair_alpha)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: the matrices as ``{row: {column: value}}`` (NaN becomes ``None``) and the rest.

        Example:
            >>> d = multi_aso({"a": [1.0, 2.0, 3.0], "b": [11.0, 12.0, 13.0]}, rng=0).to_dict()
            >>> d["eps_min"]["b"], d["ranking"]
            ({'a': 0.0, 'b': None}, ['b', 'a'])
        """

        def matrix(values: np.ndarray) -> dict[str, dict[str, Any]]:
            return {
                row: {col: (None if math.isnan(v) else float(v)) for col, v in zip(self.groups, line, strict=True)}
                for row, line in zip(self.groups, values.tolist(), strict=True)
            }

        return {
            "groups": list(self.groups),
            "eps_min": matrix(self.eps_min),
            "violation_ratio": matrix(self.violation_ratio),
            "wins": dict(zip(self.groups, self.wins, strict=True)),
            "means": dict(zip(self.groups, self.means, strict=True)),
            "ranking": list(self.ranking),
            "alpha": self.alpha,
            "pair_alpha": self.pair_alpha,
            "n_comparisons": self.n_comparisons,
            "threshold": self.threshold,
            "pvalue": matrix(self.pvalue) if self.pvalue.shape == self.eps_min.shape else None,
            "dominant": {
                row: dict(zip(self.groups, (bool(v) for v in line), strict=True))
                for row, line in zip(self.groups, self.dominant.tolist(), strict=True)
            },
            **{f"setting_{k}": v for k, v in self.settings.items()},
        }


def multi_aso(
    groups: Groups,
    alpha: float = 0.05,
    threshold: float = 0.2,
    n_resamples: int = 1000,
    rng: RngLike = None,
    *,
    grid_size: int = 1000,
    n_permutations: int = 9999,
) -> MultiASO:
    """Almost Stochastic Order of every ordered pair of k groups at the Bonferroni level ``alpha / (k (k - 1))``.

    Args:
        groups: ``{name: values}`` (one value per run; larger is better; at least two finite values each, non-
            finite ones left out), or a sequence of value lists, named ``"0"``, ``"1"``, ... At least 2 groups.
        alpha: Family-wise significance level; each ``epsilon_min`` is taken at ``alpha / (k (k - 1))``.
        threshold: Group ``i`` almost stochastically dominates ``j`` when ``eps_min[i, j] < threshold``.
        n_resamples: Bootstrap resamples of each pair.
        rng: An int seed, a ``numpy.random.Generator`` (one seed is drawn from it) or ``None`` (fresh entropy);
            recorded in ``settings["seed"]``. The global random state is never used.
        grid_size: Points of the midpoint grid on (0, 1) for the quantile functions.
        n_permutations: Random relabellings of each pair's permutation test (raised to ``20 / pair_alpha`` when
            smaller, so that ``pair_alpha`` can be reached).

    Returns:
        A frozen :class:`MultiASO`.

    Example:
        >>> r = multi_aso([[1.0, 2.0, 3.0, 4.0], [11.0, 12.0, 13.0, 14.0]], rng=0)
        >>> r.groups, r.ranking, r.wins, r.dominant.tolist()
        (('0', '1'), ('1', '0'), (0, 1), [[False, False], [True, False]])
    """
    names, samples, n_bad, alpha, threshold = _validate_multi_aso(groups, alpha, threshold, n_resamples, grid_size, rng)
    positive_int(n_permutations, "n_permutations")
    seed = seed_of(rng)
    k = len(names)
    m = k * (k - 1)
    pair_alpha = alpha / m
    n_permutations = max(int(n_permutations), math.ceil(20.0 / pair_alpha))
    seeds = np.random.default_rng(seed).integers(2**63, size=(k, k))
    eps_min = np.full((k, k), math.nan)
    eps_w = np.full((k, k), math.nan)
    pvalue = np.full((k, k), math.nan)
    claimable = np.zeros((k, k), dtype=bool)
    for i in range(k):
        for j in range(k):
            if i != j:
                r = almost_stochastic_order(
                    samples[i], samples[j], pair_alpha, threshold, n_resamples, int(seeds[i, j]), grid_size=grid_size
                )
                eps_min[i, j], eps_w[i, j] = r.statistic, r.settings["violation_ratio"]
                claimable[i, j] = 1.0 / math.comb(samples[i].size + samples[j].size, samples[i].size) <= pair_alpha
            if i < j:  # one set of relabellings per unordered pair: its two tails are the two ordered questions
                upper, lower = _permutation_pvalues(samples[i], samples[j], n_permutations, int(seeds[j, i]))
                pvalue[i, j], pvalue[j, i] = upper, lower
    for matrix in (eps_min, eps_w, pvalue, claimable):
        matrix.setflags(write=False)
    with np.errstate(invalid="ignore"):
        dominant = (eps_min < threshold) & (pvalue <= pair_alpha)  # NaN (the diagonal) never counts
        wins = tuple(int(np.sum(row)) for row in dominant)
    means = tuple(float(np.mean(x)) for x in samples)
    ranking = tuple(names[i] for i in sorted(range(k), key=lambda i: (-wins[i], -means[i], names[i])))
    settings = {
        "n": {name: int(x.size) for name, x in zip(names, samples, strict=True)},
        "n_nonfinite": dict(zip(names, n_bad, strict=True)),
        "n_resamples": n_resamples,
        "grid_size": grid_size,
        "seed": seed,
        "n_permutations": n_permutations,
    }
    return MultiASO(
        names, eps_min, eps_w, wins, means, ranking, alpha, pair_alpha, m, threshold, settings, pvalue, claimable
    )


def _permutation_pvalues(x: np.ndarray, y: np.ndarray, n_permutations: int, seed: int) -> tuple[float, float]:
    """One-sided permutation p-values of "x above y" and "y above x" (statistic: the rank sum of x, midranks).

    Example:
        >>> _permutation_pvalues(np.array([5.0, 6.0, 7.0]), np.array([1.0, 2.0, 3.0]), 999, 0)[0] < 0.1
        True
    """
    from scipy.stats import rankdata

    ranks = rankdata(np.concatenate([x, y]))
    observed = float(ranks[: x.size].sum())
    generator = np.random.default_rng(seed)
    total = ranks.size
    above = below = 0
    batch = max(1, 2_000_000 // total)
    for start in range(0, n_permutations, batch):
        size = min(batch, n_permutations - start)
        chosen = np.argpartition(generator.random((size, total)), x.size, axis=1)[:, : x.size]  # a random subset
        sums = ranks[chosen].sum(axis=1)
        tolerance = 1e-9 * total * total  # equal rank sums computed in another order
        above += int(np.count_nonzero(sums >= observed - tolerance))
        below += int(np.count_nonzero(sums <= observed + tolerance))
    return (1 + above) / (1 + n_permutations), (1 + below) / (1 + n_permutations)


def _validate_multi_aso(
    groups: Groups, alpha: object, threshold: object, n_resamples: object, grid_size: object, rng: object
) -> tuple[tuple[str, ...], list[np.ndarray], tuple[int, ...], float, float]:
    if isinstance(groups, Mapping):
        items = [(str(name), values) for name, values in groups.items()]
    elif isinstance(groups, (str, bytes)) or not isinstance(groups, Sequence):
        raise TypeError(
            "`groups` must be a mapping of names to values or a sequence of value lists. "
            f"Received: groups of type {type(groups).__name__}."
        )
    else:
        items = [(str(i), values) for i, values in enumerate(groups)]
    if len(items) < 2:
        raise ValueError(f"`groups` must hold at least 2 groups. Received: {len(items)}.")
    names = tuple(name for name, _ in items)
    if len(set(names)) != len(names):
        raise ValueError(f"`groups` must have distinct names. Received: {list(names)}.")
    for name, value in (("alpha", alpha), ("threshold", threshold)):
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0.0 < float(value) < 1.0:
            raise ValueError(f"`{name}` must be a number in (0, 1). Received: {name}={value!r}.")
    positive_int(n_resamples, "n_resamples")
    positive_int(grid_size, "grid_size")
    check_rng(rng)
    checked = [_group(values, f"groups[{name!r}]") for name, values in items]
    samples = [x for x, _ in checked]
    return names, samples, tuple(bad for _, bad in checked), float(alpha), float(threshold)  # type: ignore[arg-type]
