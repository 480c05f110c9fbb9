"""Normalized L2 distance between the final weights of runs: exact, or estimated from a random sketch.

Example:
    >>> rng = np.random.default_rng(0)
    >>> weights = rng.normal(size=(3, 5000))
    >>> weights[1] = weights[0]
    >>> exact = weight_distance(weights)
    >>> sketches = np.stack([sketch_vector(w, sketch_dim=256) for w in weights])
    >>> est = weight_distance_from_sketches(sketches, delta=0.05)
    >>> float(exact.matrix[0, 1]), float(est.matrix[0, 1])
    (0.0, 0.0)
    >>> bool(est.lower[0, 2] <= exact.matrix[0, 2] <= est.upper[0, 2])
    True
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

__all__ = [
    "SKETCH_CHUNK",
    "SKETCH_METHOD",
    "SketchAccumulator",
    "WeightDistance",
    "jl_epsilon",
    "rademacher_signs",
    "sketch_vector",
    "weight_distance",
    "weight_distance_blocks",
    "weight_distance_from_sketches",
]

SKETCH_METHOD = "rademacher-pcg64-v1"
# Values per chunk (a 1 MiB table stays in cache); part of the method: the random stream is laid out by chunk.
SKETCH_CHUNK = 2048


def _stream(sketch_dim: int, sketch_seed: int, position: int) -> np.random.PCG64:
    return np.random.PCG64(np.random.SeedSequence([int(sketch_seed), int(sketch_dim), int(position)]))


def _chunk_bytes(bitgen: np.random.PCG64, sketch_dim: int, length: int) -> np.ndarray:
    words = -(-length // 64)
    raw = bitgen.random_raw(sketch_dim * words).astype("<u8", copy=False)
    return raw.view(np.uint8).reshape(sketch_dim, words * 8)[:, : -(-length // 8)]


class SketchAccumulator:
    """Accumulates ``S w`` and ``||w||^2`` parameter by parameter (the sketch: docs/design/stats.md).

    Example:
        >>> acc = SketchAccumulator(sketch_dim=8, sketch_seed=0)
        >>> acc.add(0, np.ones(10))
        >>> sketch, norm, count = acc.result()
        >>> sketch.shape, round(norm, 4), count
        ((8,), 3.1623, 10)
    """

    def __init__(self, sketch_dim: int, sketch_seed: int) -> None:
        if isinstance(sketch_dim, bool) or not isinstance(sketch_dim, (int, np.integer)) or sketch_dim < 1:
            raise ValueError(f"`sketch_dim` must be a positive integer. Received: sketch_dim={sketch_dim!r}.")
        if isinstance(sketch_seed, bool) or not isinstance(sketch_seed, (int, np.integer)) or sketch_seed < 0:
            raise ValueError(f"`sketch_seed` must be a non-negative integer. Received: sketch_seed={sketch_seed!r}.")
        self.sketch_dim = int(sketch_dim)
        self.sketch_seed = int(sketch_seed)
        self._sum = np.zeros(self.sketch_dim)
        self._squares = 0.0
        self._count = 0

    def add(self, position: int, values: np.ndarray) -> None:
        """Add the flattened parameter at ``position`` (its signs depend on the position only)."""
        bitgen = _stream(self.sketch_dim, self.sketch_seed, position)
        flat = np.asarray(values).reshape(-1)
        for start in range(0, flat.size, SKETCH_CHUNK):
            x = flat[start : start + SKETCH_CHUNK].astype(np.float64)
            groups = -(-x.size // 8)
            padded = np.zeros((groups, 8))
            padded.reshape(-1)[: x.size] = x
            table = np.empty((groups, 256))  # table[g, b]: sum of the values of group g whose bit is set in b
            table[:, 0] = 0.0
            for bit in range(8):
                np.add(table[:, : 1 << bit], padded[:, bit : bit + 1], out=table[:, 1 << bit : 2 << bit])
            picks = _chunk_bytes(bitgen, self.sketch_dim, x.size).astype(np.intp)
            picks += np.arange(groups, dtype=np.intp) * 256
            self._sum += 2.0 * table.reshape(-1)[picks].sum(axis=1) - x.sum()
            self._squares += float(x @ x)
        self._count += int(flat.size)

    def result(self) -> tuple[np.ndarray, float, int]:
        """``(sketch of the unit-norm weights, ||w||, number of weights)``; the sketch is NaN when ``||w|| = 0``."""
        norm = math.sqrt(self._squares)
        scale = math.sqrt(self.sketch_dim) * norm
        sketch = self._sum / scale if scale > 0 else np.full(self.sketch_dim, np.nan)
        return sketch, norm, self._count


def rademacher_signs(size: int, *, sketch_dim: int, sketch_seed: int = 0, position: int = 0) -> np.ndarray:
    """The dense ``sketch_dim x size`` sign matrix of one parameter (for tests and small vectors only).

    Example:
        >>> signs = rademacher_signs(100, sketch_dim=4)
        >>> x = np.arange(100.0)
        >>> acc = SketchAccumulator(4, 0)
        >>> acc.add(0, x)
        >>> bool(np.allclose(acc.result()[0], signs @ x / (2 * np.linalg.norm(x))))
        True
    """
    bitgen = _stream(sketch_dim, sketch_seed, position)
    parts = []
    for start in range(0, size, SKETCH_CHUNK):
        length = min(SKETCH_CHUNK, size - start)
        bits = np.unpackbits(_chunk_bytes(bitgen, sketch_dim, length), axis=1, bitorder="little")[:, :length]
        parts.append(bits.astype(np.int8) * 2 - 1)
    return np.concatenate(parts, axis=1) if parts else np.zeros((sketch_dim, 0), np.int8)


def sketch_vector(values: Any, *, sketch_dim: int = 256, sketch_seed: int = 0) -> np.ndarray:
    """The sketch of one flattened weight vector, treated as a single parameter at position 0.

    Example:
        >>> sketch_vector(np.ones(4), sketch_dim=2).shape
        (2,)
    """
    acc = SketchAccumulator(sketch_dim, sketch_seed)
    acc.add(0, np.asarray(values))
    return acc.result()[0]


def jl_epsilon(sketch_dim: int, delta: float) -> float:
    """The ``eps`` with ``sketch_dim (eps^2/4 - eps^3/6) = ln(2/delta)``; ``inf`` when no ``eps < 1`` works.

    Example:
        >>> round(jl_epsilon(256, 0.05), 3)
        0.265
    """
    if not 0.0 < delta < 1.0:
        raise ValueError(f"`delta` must be in (0, 1). Received: delta={delta!r}.")
    target = math.log(2.0 / delta) / sketch_dim
    if target >= 1.0 / 12.0:
        return math.inf
    low, high = 0.0, 1.0
    for _ in range(100):  # eps^2/4 - eps^3/6 increases on (0, 1)
        mid = (low + high) / 2.0
        low, high = (mid, high) if mid * mid / 4.0 - mid**3 / 6.0 < target else (low, mid)
    return high


@dataclass(frozen=True)
class WeightDistance:
    """Normalized L2 distances between the final weights of every pair of runs.

    Attributes:
        matrix: ``(runs, runs)`` distances (exact, or the sketch estimates).
        method: ``"exact"`` or ``"sketch"``.
        mean, std, min, max: Over the ``runs (runs - 1) / 2`` pairs (std with ddof=1; NaN for one pair).
        lower, upper: For ``"sketch"``: per pair, the interval holding the exact distance with probability at
            least ``1 - delta``; equal to ``matrix`` for ``"exact"``.
        delta: Failure probability of the interval, per pair.
        epsilon: Relative error bound of the squared distance (0 for ``"exact"``).
        sketch_dim: ``k`` of the sketch (``None`` for ``"exact"``).
    """

    matrix: np.ndarray
    method: str
    mean: float
    std: float
    min: float
    max: float
    lower: np.ndarray
    upper: np.ndarray
    delta: float = 0.0
    epsilon: float = 0.0
    sketch_dim: Optional[int] = None

    @property
    def n_runs(self) -> int:
        return int(self.matrix.shape[0])

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (the matrix as nested lists; NaN becomes ``None``)."""
        out: dict[str, Any] = {
            "method": self.method,
            "n_runs": self.n_runs,
            "mean": self.mean,
            "std": self.std,
            "min": self.min,
            "max": self.max,
            "delta": self.delta,
            "epsilon": self.epsilon,
            "sketch_dim": self.sketch_dim,
            "matrix": self.matrix.tolist(),
        }
        if self.method == "sketch":
            out["lower"], out["upper"] = self.lower.tolist(), self.upper.tolist()
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in out.items()}


def _pair_summary(matrix: np.ndarray) -> tuple[float, float, float, float]:
    upper = matrix[np.triu_indices(matrix.shape[0], k=1)]
    if upper.size == 0:
        return math.nan, math.nan, math.nan, math.nan
    std = float(np.std(upper, ddof=1)) if upper.size > 1 else math.nan
    return float(upper.mean()), std, float(upper.min()), float(upper.max())


def _as_runs(values: Any, name: str, what: str) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 2 or array.shape[0] < 2:
        raise ValueError(
            f"`{name}` must be a 2-D array of shape (runs, {what}) with at least 2 runs. Received: shape {array.shape}."
        )
    return array


def weight_distance(weights: Any) -> WeightDistance:
    """Exact normalized L2 distances between full flattened weight vectors, shape ``(runs, params)``.

    Distances come from the Gram matrix of the rows divided by their norms; pairs closer than 1e-4 are
    recomputed from their difference, so identical models are exactly 0 apart.

    Example:
        >>> weight_distance([[1.0, 0.0], [0.0, 2.0], [3.0, 0.0]]).matrix.round(4).tolist()
        [[0.0, 1.4142, 0.0], [1.4142, 0.0, 1.4142], [0.0, 1.4142, 0.0]]
    """
    array = _as_runs(weights, "weights", "params")
    return weight_distance_blocks(lambda: [array], n_runs=array.shape[0])


def weight_distance_blocks(blocks: Callable[[], Iterable[Any]], *, n_runs: int) -> WeightDistance:
    """:func:`weight_distance` over weights given block by block, so that they never sit in memory at once.

    Args:
        blocks: Returns an iterable of ``(runs, size)`` arrays: the same parameter (or slice of the flattened
            weights) of every run, in the same order each time. Called once, and once more when two runs are
            closer than 1e-4 (their distance is then recomputed from their difference).
        n_runs: Number of runs (rows of every block).

    Example:
        >>> w = np.array([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0], [3.0, 2.0, 1.0]])
        >>> d = weight_distance_blocks(lambda: (w[:, :2], w[:, 2:]), n_runs=3)
        >>> float(d.matrix[0, 1]), round(float(d.matrix[0, 2]), 4)
        (0.0, 0.7559)
    """
    gram = np.zeros((n_runs, n_runs))
    squares = np.zeros(n_runs)
    for part in _columns(blocks(), n_runs):
        gram += part @ part.T
        squares += np.einsum("ij,ij->i", part, part)
    norms = np.sqrt(squares)
    with np.errstate(invalid="ignore", divide="ignore"):
        cosine = gram / np.outer(norms, norms)
    matrix = np.sqrt(np.clip(2.0 - 2.0 * cosine, 0.0, None))
    close = np.argwhere(np.triu(~(matrix >= 1e-4), k=1))  # NaN (a zero-norm run) counts as close: recomputed
    if close.size:  # only near-identical pairs need their difference, for an exact 0
        exact = np.zeros(len(close))
        for part in _columns(blocks(), n_runs):
            unit = part / norms[:, None]
            exact += np.sum((unit[close[:, 0]] - unit[close[:, 1]]) ** 2, axis=1)
        matrix[close[:, 0], close[:, 1]] = matrix[close[:, 1], close[:, 0]] = np.sqrt(exact)
    np.fill_diagonal(matrix, 0.0)
    return WeightDistance(matrix, "exact", *_pair_summary(matrix), lower=matrix, upper=matrix)


def _columns(blocks: Iterable[Any], n_runs: int) -> Iterator[np.ndarray]:
    """The blocks as float64, at most 65,536 columns at a time."""
    for block in blocks:
        array = np.asarray(block)
        if array.ndim != 2 or array.shape[0] != n_runs:
            raise ValueError(f"every block must have shape ({n_runs}, size). Received: shape {array.shape}.")
        for start in range(0, array.shape[1], 65536):
            yield array[:, start : start + 65536].astype(np.float64)


def weight_distance_from_sketches(sketches: Any, *, delta: float = 0.05) -> WeightDistance:
    """Estimated normalized L2 distances from sketches of shape ``(runs, k)``, with ``1 - delta`` intervals.

    Example:
        >>> d = weight_distance_from_sketches([[0.6, 0.8], [0.8, 0.6]], delta=0.5)
        >>> round(float(d.matrix[0, 1]), 4), d.method
        (0.2828, 'sketch')
    """
    array = _as_runs(sketches, "sketches", "sketch_dim")
    diff = array[:, None, :] - array[None, :, :]
    matrix = np.sqrt(np.einsum("ijk,ijk->ij", diff, diff))
    eps = jl_epsilon(array.shape[1], delta)
    lower = matrix / math.sqrt(1.0 + eps) if math.isfinite(eps) else np.zeros_like(matrix)
    upper = matrix / math.sqrt(1.0 - eps) if eps < 1.0 else np.full_like(matrix, np.inf)
    return WeightDistance(
        matrix,
        "sketch",
        *_pair_summary(matrix),
        lower=lower,
        upper=upper,
        delta=delta,
        epsilon=eps,
        sketch_dim=int(array.shape[1]),
    )
