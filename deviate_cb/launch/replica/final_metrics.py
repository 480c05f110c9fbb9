"""Record what the trainer function returns as final metrics, so a plain PyTorch loop is usable."""

from __future__ import annotations

import math
import numbers
import sys
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Optional, TextIO

from deviate_cb.store.run_directory import RunDirectory

__all__ = ["extract_metrics", "record_final_metrics", "to_number"]

_PREFIX = "deviate-replicate: warning:"


def to_number(value: Any) -> Optional[float]:
    """Return ``value`` as a float if it is a number (scalar, NumPy scalar, 0-d array/tensor), else ``None``.

    Example:
        >>> import numpy as np
        >>> to_number(3), to_number(np.float32(0.5)), to_number(True), to_number("1.0"), to_number([1])
        (3.0, 0.5, 1.0, None, None)
    """
    if isinstance(value, (str, bytes)):
        return None
    if isinstance(value, numbers.Real):  # int, float, bool, Fraction, Decimal-like, NumPy int/float scalars
        return float(value)
    kind = getattr(getattr(value, "dtype", None), "kind", None)
    if getattr(value, "ndim", None) == 0 or (kind is not None and getattr(value, "shape", None) == ()):
        if kind is not None and kind not in "biuf":  # NumPy: bool, int, unsigned, float (not complex/str)
            return None
        try:
            return float(value)
        except (TypeError, ValueError, RuntimeError):
            return None
    return None


def extract_metrics(result: Any, *, warn: TextIO | None = None) -> list[tuple[str, float]]:
    """The ``(name, value)`` pairs of a returned mapping or list of mappings; warn about what is skipped.

    Example:
        >>> import io
        >>> log = io.StringIO()
        >>> extract_metrics([{"acc": 0.9}, {"loss": 0.1, "tag": "x"}], warn=log)
        [('acc', 0.9), ('loss', 0.1)]
        >>> log.getvalue().count("\\n")
        1
    """
    warn = sys.stderr if warn is None else warn
    if result is None:
        return []
    if isinstance(result, Mapping):
        mappings: Iterable[Any] = [result]
    elif isinstance(result, (list, tuple)) and all(isinstance(item, Mapping) for item in result):
        mappings = result
    else:
        _warn(warn, f"the trainer returned a {_type_name(result)}, not a mapping of metrics; nothing recorded.")
        return []
    pairs: list[tuple[str, float]] = []
    for mapping in mappings:
        for key, value in mapping.items():
            number = to_number(value)
            if number is None:
                _warn(
                    warn,
                    f"metric {str(key)!r} returned by the trainer is a {_type_name(value)}, not a number; skipped.",
                )
                continue
            pairs.append((str(key), number))
    return pairs


def record_final_metrics(result: Any, run_dir: Path, *, warn: TextIO | None = None) -> list[str]:
    """Append the metrics in ``result`` to ``run_dir``'s ``metrics.parquet``; return their names.

    Example:
        >>> import io, tempfile
        >>> run_dir = Path(tempfile.mkdtemp())
        >>> record_final_metrics({"acc": 0.5, "loss": float("nan")}, run_dir)
        ['acc', 'loss']
        >>> RunDirectory(run_dir).metrics().read().column("finite").to_pylist()
        [True, False]
    """
    pairs = extract_metrics(result, warn=warn)
    if not pairs:
        return []
    metrics = RunDirectory(run_dir).metrics()
    table = metrics.read()
    step = 0
    if table.num_rows:
        import pyarrow.compute as pc

        largest = pc.max(table.column("step")).as_py()
        step = int(largest) if largest is not None else 0
        latest = _latest_values(table)
        pairs = [(name, value) for name, value in pairs if not _same(latest.get(name), value)]
        if not pairs:
            return []
    n = len(pairs)
    now = time.time()
    metrics.append(
        {
            "step": [step] * n,
            "epoch": [None] * n,
            "stage": ["final"] * n,
            "scope": ["final"] * n,
            "name": [name for name, _ in pairs],
            "value": [value for _, value in pairs],
            "wall_time": [now] * n,
        }
    )
    return [name for name, _ in pairs]


def _latest_values(table: Any) -> dict[str, float]:
    """The latest recorded value of each metric name (rows are in recording order)."""
    return dict(zip(table.column("name").to_pylist(), table.column("value").to_pylist(), strict=True))


def _same(recorded: Optional[float], value: float) -> bool:
    return recorded is not None and (recorded == value or (math.isnan(recorded) and math.isnan(value)))


def _type_name(value: Any) -> str:
    cls = type(value)
    module = cls.__module__
    name = cls.__qualname__ if module in ("builtins", None) else f"{module.split('.')[0]}.{cls.__qualname__}"
    shape = getattr(value, "shape", None)
    if isinstance(shape, tuple):  # NumPy arrays, torch.Size
        name += f" of shape {tuple(shape)}"
    return name


def _warn(stream: TextIO, message: str) -> None:
    stream.write(f"{_PREFIX} {message}\n")
    stream.flush()
