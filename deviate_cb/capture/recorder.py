"""Metric events buffered in memory, converted in bulk and flushed through the store."""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Optional

from deviate_cb.store.metrics import MetricsFile

__all__ = ["MetricRecorder", "floats_of"]

ValuesToFloats = Callable[[list[Any]], Sequence[float]]


def floats_of(values: list[Any]) -> list[float]:
    """Default converter: ``float(v)`` for each value (Python and NumPy numbers, 0-d tensors).

    Example:
        >>> floats_of([1, 2.5, True])
        [1.0, 2.5, 1.0]
    """
    return [float(v) for v in values]


class MetricRecorder:
    """Buffers metric events; :meth:`flush` appends them to a run's ``metrics.parquet``.

    Follows the ``update``/``compute``/``reset`` pattern: :meth:`update` records one event cheaply,
    :meth:`compute` converts the buffer to columns, :meth:`reset` empties it.

    Args:
        keep: Metric names or ``fnmatch`` patterns to keep; ``None`` keeps every metric.
        to_floats: Converts a list of buffered values to floats in one call (see :func:`floats_of`).

    Example:
        >>> rec = MetricRecorder(keep=["val_*"])
        >>> rec.update(step=3, epoch=0, stage="val", scope="epoch", name="val_acc", value=0.5, wall_time=0.0)
        >>> rec.update(step=3, epoch=0, stage="train", scope="step", name="train_loss", value=1.0, wall_time=0.0)
        >>> len(rec), rec.compute()["value"]
        (1, [0.5])
    """

    def __init__(self, keep: Optional[Sequence[str]] = None, to_floats: ValuesToFloats = floats_of) -> None:
        self._patterns = None if keep is None else tuple(keep)
        self._decisions: dict[str, bool] = {}
        self._to_floats = to_floats
        self.reset()

    @property
    def patterns(self) -> Optional[list[str]]:
        """The ``keep`` filter as given (``None``: keep all)."""
        return None if self._patterns is None else list(self._patterns)

    @property
    def seen_names(self) -> dict[str, bool]:
        """Every metric name offered so far (buffered or filtered), and whether it was kept."""
        for name in dict.fromkeys(self._names):  # each buffered name once (C-level), not once per value
            self._decisions.setdefault(name, True)
        return dict(self._decisions)

    def nothing_kept(self) -> str:
        """Why the ``keep`` filter kept nothing, as a warning's text (metrics were logged, none matched); else ``""``.

        Example:
            >>> rec = MetricRecorder(keep=["val_*"])
            >>> rec.update(step=0, epoch=0, stage="train", scope="step", name="loss", value=1.0, wall_time=0.0)
            >>> rec.nothing_kept()
            "DeviateCallback(metrics=['val_*']) matched none of the logged metrics ['loss']; nothing was recorded."
        """
        if self._patterns is None:  # no filter: every logged metric is kept
            return ""
        seen = self.seen_names
        if not seen or any(seen.values()):
            return ""
        return (
            f"DeviateCallback(metrics={self.patterns!r}) matched none of the logged metrics {sorted(seen)}; "
            "nothing was recorded."
        )

    def keeps(self, name: str) -> bool:
        """Whether metric ``name`` passes the ``keep`` filter (decisions are cached per name)."""
        decision = self._decisions.get(name)
        if decision is None:
            patterns = self._patterns
            decision = patterns is None or any(fnmatch.fnmatchcase(name, p) for p in patterns)
            self._decisions[name] = decision
        return decision

    def update(
        self, *, step: int, epoch: Optional[int], stage: str, scope: str, name: str, value: Any, wall_time: float
    ) -> None:
        """Record one value (kept only if its name passes the filter)."""
        self.update_many(step=step, epoch=epoch, stage=stage, scope=scope, items=((name, value),), wall_time=wall_time)

    def update_many(
        self,
        *,
        step: int,
        epoch: Optional[int],
        stage: str,
        scope: str,
        items: Iterable[tuple[str, Any]],
        wall_time: float,
    ) -> None:
        """Record several values that share step, epoch, stage, scope and time (the per-hook fast path)."""
        names, values, before = self._names, self._values, len(self._names)
        if self._patterns is None:
            for name, value in items:
                names.append(name)
                values.append(value)
        else:
            for name, value in items:
                if self.keeps(name):
                    names.append(name)
                    values.append(value)
        n = len(names) - before
        if n:
            self._step.append(step)
            self._epoch.append(epoch)
            self._stage.append(stage)
            self._scope.append(scope)
            self._time.append(wall_time)
            self._size.append(n)

    def __len__(self) -> int:
        return len(self._values)

    def compute(self) -> dict[str, list[Any]]:
        """The buffered events as columns of :func:`deviate_cb.store.metrics.metrics_schema` (without ``seq``)."""
        columns: dict[str, list[Any]] = {"name": list(self._names)}
        sizes, total = self._size, len(self._names)
        for key, per_call in (
            ("step", self._step),
            ("epoch", self._epoch),
            ("stage", self._stage),
            ("scope", self._scope),
            ("wall_time", self._time),
        ):
            columns[key] = _expand(per_call, sizes, total)
        columns["value"] = list(self._to_floats(self._values)) if self._values else []
        return columns

    def reset(self) -> None:
        """Drop every buffered event."""
        self._names: list[str] = []
        self._values: list[Any] = []
        # one entry per update_many call that kept something: its shared fields and how many values it added
        self._step: list[int] = []
        self._epoch: list[Optional[int]] = []
        self._stage: list[str] = []
        self._scope: list[str] = []
        self._time: list[float] = []
        self._size: list[int] = []

    def flush(self, metrics_file: MetricsFile, *, compact: bool = False) -> int:
        """Append the buffer to ``metrics_file`` as one part and empty it; return the number of rows written.
        ``compact`` (the run's end): straight into ``metrics.parquet`` with the parts before
        (:meth:`~deviate_cb.store.metrics.MetricsFile.append`), no part written."""
        if not self._values:
            return 0
        columns = self.compute()
        written = metrics_file.append(columns) if compact else metrics_file.append_part(columns)
        self.reset()
        return written


def _expand(per_call: list[Any], sizes: list[int], total: int) -> list[Any]:
    """One column of rows from a field given once per :meth:`MetricRecorder.update_many` call that added ``sizes``
    rows each (``total`` in all), with list operations done in C for the usual shapes: a field equal in every call
    (the stage, the scope, an epoch), and calls that each added the same number of values (a step logging the
    same metrics every time).

    Example:
        >>> _expand([3, 4], [2, 1], 3), _expand(["train", "train"], [2, 1], 3), _expand([0, 1], [2, 2], 4)
        ([3, 3, 4], ['train', 'train', 'train'], [0, 0, 1, 1])
    """
    if not per_call:
        return []
    first = per_call[0]
    if per_call.count(first) == len(per_call):  # equal in every call (the column's Arrow type makes them one value)
        return [first] * total
    k = sizes[0]
    if sizes.count(k) == len(sizes):  # every call added k rows: k strided slice assignments
        column: list[Any] = [None] * total
        for offset in range(k):
            column[offset::k] = per_call
        return column
    column = []
    for value, n in zip(per_call, sizes, strict=True):
        column += [value] * n
    return column
