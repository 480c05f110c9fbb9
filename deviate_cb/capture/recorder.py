"""Metric events buffered in memory, converted in bulk and flushed through the store.

The recorder is framework-free: adapters hand it values as they are (Python floats, or framework tensors
still on their device) and a ``to_floats`` converter that turns a list of such values into floats in one go.
Converting once per flush instead of once per value is what keeps per-step capture free of device syncs.
"""

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
        for *_, items in self._groups:
            for name, _ in items:
                self._decisions.setdefault(name, True)
        return dict(self._decisions)

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
        if self._patterns is not None:
            items = [(name, value) for name, value in items if self.keeps(name)]
        elif not isinstance(items, list):
            items = list(items)
        if items:
            self._groups.append((step, epoch, stage, scope, wall_time, items))
            self._count += len(items)

    def __len__(self) -> int:
        return self._count

    def compute(self) -> dict[str, list[Any]]:
        """The buffered events as columns of :func:`deviate_cb.store.metrics.metrics_schema` (without ``seq``)."""
        columns: dict[str, list[Any]] = {k: [] for k in ("step", "epoch", "stage", "scope", "name", "wall_time")}
        values: list[Any] = []
        for step, epoch, stage, scope, wall_time, items in self._groups:
            n = len(items)
            columns["step"] += [step] * n
            columns["epoch"] += [epoch] * n
            columns["stage"] += [stage] * n
            columns["scope"] += [scope] * n
            columns["wall_time"] += [wall_time] * n
            for name, value in items:
                columns["name"].append(name)
                values.append(value)
        columns["value"] = list(self._to_floats(values)) if values else []
        return columns

    def reset(self) -> None:
        """Drop every buffered event."""
        self._groups: list[tuple[int, Optional[int], str, str, float, list[tuple[str, Any]]]] = []
        self._count = 0

    def flush(self, metrics_file: MetricsFile) -> int:
        """Append the buffer to ``metrics_file`` as one part and empty it; return the number of rows written."""
        if not self._count:
            return 0
        written = metrics_file.append_part(self.compute())
        self.reset()
        return written
