"""Training curves for the HTML report: each group's series per step, their mean and spread, a few replicas.

Example:
    >>> import tempfile
    >>> from deviate_cb.store.manifest import LaunchEnd
    >>> from deviate_cb.store.run_directory import RunDirectory, run_path
    >>> from deviate_cb.report.reading.runs import find_runs
    >>> root = Path(tempfile.mkdtemp())
    >>> for k in range(2):
    ...     run = RunDirectory(run_path(root, "mlp", "algo", k))
    ...     _ = run.record(LaunchEnd(status="completed"))
    ...     _ = run.metrics().append({"step": [0, 1], "epoch": [0, 0], "stage": ["train"] * 2, "scope": ["step"] * 2,
    ...                               "name": ["loss"] * 2, "value": [1.0 + k, 0.5], "wall_time": [0.0, 1.0]})
    >>> curves = read_curves(find_runs(root), [])
    >>> c = curves[("mlp", "algo", "loss")]
    >>> c.steps.tolist(), c.mean.tolist(), c.std.tolist(), c.n_runs
    ([0, 1], [1.5, 0.5], [0.7071067811865476, 0.0], 2)
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import numpy as np

from deviate_cb.report.reading.metrics.names import display_names
from deviate_cb.report.reading.runs import RunRecord
from deviate_cb.report.text.safe import reason
from deviate_cb.store.bounded_read import check_parquet
from deviate_cb.store.run_directory import METRICS_FILE

__all__ = ["Curves", "read_curves"]

MAX_REPLICAS = 20
MAX_POINTS = 300
_READ_AHEAD = 4  # files read ahead in threads while the current one is folded


@dataclass(frozen=True)
class Curves:
    """One metric of one group over training.

    Attributes:
        steps: The steps at which any replica has a value (thinned to at most ``max_points``).
        mean, std: Across the replicas with a value at that step (std ``ddof=1``; 0 where one replica).
        n_runs: Replicas with this metric.
        replicas: ``(steps, values)`` of the replicas drawn (the first ``max_replicas``, thinned alike).
    """

    steps: np.ndarray
    mean: np.ndarray
    std: np.ndarray
    n_runs: int
    replicas: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)


class _Fold:
    """Per-step count, mean and M2 of one series across runs (Welford), and the replicas kept for drawing."""

    def __init__(self) -> None:
        self.steps = np.zeros(0, dtype=np.int64)
        self.count = np.zeros(0)
        self.mean = np.zeros(0)
        self.m2 = np.zeros(0)
        self.n_runs = 0
        self.replicas: list[tuple[np.ndarray, np.ndarray]] = []

    def add(self, steps: np.ndarray, values: np.ndarray, keep: bool, max_points: int) -> None:
        if steps.size == self.steps.size and np.array_equal(steps, self.steps):  # the common case: same steps
            self._fold(slice(None), values)
        else:
            self._grow(steps)
            self._fold(np.searchsorted(self.steps, steps), values)
        self.n_runs += 1
        if keep:
            thin = _thin(steps.size, max_points)
            self.replicas.append((steps[thin], values[thin]))

    def _fold(self, at: Any, values: np.ndarray) -> None:
        self.count[at] += 1
        delta = values - self.mean[at]
        self.mean[at] += delta / self.count[at]
        self.m2[at] += delta * (values - self.mean[at])

    def _grow(self, steps: np.ndarray) -> None:
        if not np.isin(steps, self.steps).all():
            merged = np.union1d(self.steps, steps)
            where = np.searchsorted(merged, self.steps)
            for name in ("count", "mean", "m2"):
                grown = np.zeros(merged.size)
                grown[where] = getattr(self, name)
                setattr(self, name, grown)
            self.steps = merged

    def curves(self, max_points: int) -> Curves:
        with np.errstate(invalid="ignore", divide="ignore"):
            std = np.where(self.count > 1, np.sqrt(np.maximum(self.m2, 0.0) / (self.count - 1)), 0.0)
        keep = _thin(self.steps.size, max_points)
        return Curves(self.steps[keep], self.mean[keep], std[keep], self.n_runs, self.replicas)


def read_curves(
    runs: Sequence[RunRecord],
    warnings: list[str],
    *,
    wanted: Optional[Collection[tuple[str, str, str]]] = None,
    max_replicas: int = MAX_REPLICAS,
    max_points: int = MAX_POINTS,
) -> dict[tuple[str, str, str], Curves]:
    """``(experiment, variant, metric) -> Curves`` of the completed ``runs`` (only ``wanted`` keys when given).

    Each run's file is folded as soon as it is read (keyed by its ``(stage, name)`` series), so memory holds the
    per-step accumulators and the replicas drawn, never every run's series; the report's metric names are
    given to the series at the end, once every series is known.
    """
    folds: dict[tuple[str, str, tuple[str, str]], _Fold] = {}
    pairs: set[tuple[str, str]] = set()
    ordered = sorted((r for r in runs if r.completed), key=lambda r: (r.experiment, r.variant, _order(r)))
    for run, series in zip(ordered, _read_ahead([Path(r.path) / METRICS_FILE for r in ordered], warnings), strict=True):
        for pair, (steps, values) in (series or {}).items():
            pairs.add(pair)
            fold = folds.setdefault((run.experiment, run.variant, pair), _Fold())
            fold.add(steps, values, fold.n_runs < max_replicas, max_points)
    display = display_names(sorted(pairs))
    out = {}
    for (experiment, variant, pair), fold in folds.items():
        key = (experiment, variant, display[pair])
        if wanted is None or key in wanted:
            out[key] = fold.curves(max_points)
    return out


def _read_ahead(
    paths: Sequence[Path], warnings: list[str], ahead: int = _READ_AHEAD
) -> Iterator[Optional[dict[tuple[str, str], tuple[np.ndarray, np.ndarray]]]]:
    """Each file's series (:func:`_read`), in order, while up to ``ahead`` later files are read in threads
    (Parquet decoding releases the GIL): memory holds a bounded window, never every run's series."""
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor

    def read(path: Path) -> tuple[Any, list[str]]:
        said: list[str] = []  # each file's warnings, kept in file order
        return (_read(path, said) if path.is_file() else None), said

    with ThreadPoolExecutor(max_workers=min(ahead, os.cpu_count() or 1) or 1) as pool:
        pending: deque[Any] = deque()
        for path in paths:
            pending.append(pool.submit(read, path))
            if len(pending) > ahead:
                series, said = pending.popleft().result()
                warnings.extend(said)
                yield series
        while pending:
            series, said = pending.popleft().result()
            warnings.extend(said)
            yield series


def _order(run: RunRecord) -> tuple[int, str]:
    replica = str(run.replica)
    return (int(replica), "") if replica.isdigit() else (1 << 30, replica)


def _read(path: Path, warnings: list[str]) -> Optional[dict[tuple[str, str], tuple[np.ndarray, np.ndarray]]]:
    """``(stage, name) -> (steps, values)`` of one metrics file: finite values, each step once (its last value)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    try:
        check_parquet(path)  # a FIFO or too many rows: HostileFileError (a ValueError), never read
        # stage and name read as dictionaries: codes without hashing every row's text
        table = pq.read_table(
            os.fspath(path), columns=["step", "stage", "name", "value"], read_dictionary=["stage", "name"]
        ).unify_dictionaries()
        values = table.column("value").cast(pa.float64()).to_numpy()
        steps = table.column("step").to_numpy()
        stages, names = (_codes(table.column(c), pc) for c in ("stage", "name"))
    except (pa.ArrowException, OSError, ValueError) as exc:
        warnings.append(f"{path}: left out of the training curves ({reason(exc, path)}).")
        return None
    width = max(len(names.dictionary), 1)
    codes = stages.indices.to_numpy(zero_copy_only=False).astype(np.int64) * width
    codes += names.indices.to_numpy(zero_copy_only=False)
    keep = np.isfinite(values)
    codes, steps, values = codes[keep], steps[keep], values[keep]
    order = np.argsort(codes, kind="stable")  # by series; steps in file order, which is by step as a rule
    same = codes[order][1:] == codes[order][:-1]
    if (np.diff(steps[order])[same] < 0).any():  # else by series, then by step; equal steps keep their order
        order = np.lexsort((steps, codes))
    codes, steps, values = codes[order], steps[order], values[order]
    last = np.ones(codes.size, dtype=bool)  # a step logged twice keeps its last value
    last[:-1] = (codes[1:] != codes[:-1]) | (steps[1:] != steps[:-1])
    codes, steps, values = codes[last], steps[last], values[last]
    bounds = np.flatnonzero(np.diff(codes)) + 1
    stage_names, metric_names = stages.dictionary.to_pylist(), names.dictionary.to_pylist()
    found: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]] = {}
    for start, stop in zip(np.r_[0, bounds], np.r_[bounds, codes.size], strict=True):
        if stop > start:
            code = int(codes[start])
            key = (str(stage_names[code // width]), str(metric_names[code % width]))
            found[key] = (steps[start:stop].astype(np.int64), values[start:stop].astype(float))
    return found


def _codes(column: Any, pc: Any) -> Any:
    """A text column as one dictionary array (encoded here when the file did not store it as one)."""
    import pyarrow as pa

    if not pa.types.is_dictionary(column.type):
        column = pc.dictionary_encode(column)
    return column.combine_chunks()


def _thin(n: int, most: int) -> np.ndarray:
    """At most ``most`` indices of ``range(n)``, evenly spread, first and last kept."""
    if n <= most:
        return np.arange(n)
    return np.unique(np.linspace(0, n - 1, most).round().astype(int))
