"""The numbers of a framework's ``logs`` mapping (Keras hands floats), anything else skipped with one warning a name.

Example:
    >>> import warnings
    >>> numbers = LogNumbers()
    >>> numbers({"loss": 0.5, "acc": 1})
    [('loss', 0.5), ('acc', 1.0)]
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     numbers({"loss": 0.25, "names": "abc"}), len(caught)
    ([('loss', 0.25)], 1)
    >>> split_val([("loss", 0.5), ("val_loss", 0.75)])
    ([('loss', 0.5)], [('loss', 0.75)])
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

__all__ = ["LogNumbers", "split_val"]


class LogNumbers:
    """Converts ``logs`` to ``(name, float)`` pairs; remembers the names skipped (warned about once each)."""

    def __init__(self) -> None:
        self.skipped: set[str] = set()

    def __call__(self, logs: Mapping[str, Any]) -> list[tuple[str, float]]:
        """The numeric entries of ``logs``; anything else is skipped with one warning per name."""
        try:  # Keras hands over floats: one pass, no call per value
            return [(name, float(value)) for name, value in logs.items()]
        except (TypeError, ValueError):
            return self._of_mixed(logs)

    def _of_mixed(self, logs: Mapping[str, Any]) -> list[tuple[str, float]]:
        items = []
        for name, value in logs.items():
            try:
                number = float(value)
            except (TypeError, ValueError):
                if name not in self.skipped:
                    self.skipped.add(name)
                    shape = getattr(value, "shape", None)
                    warnings.warn(
                        f"DeviateCallback: metric {name!r} is not a number (received "
                        f"{type(value).__name__}{f' of shape {tuple(shape)}' if shape is not None else ''}); "
                        "it is not recorded.",
                        stacklevel=4,
                    )
                continue
            items.append((name, number))
        return items


def split_val(items: list[tuple[str, float]]) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
    """Epoch logs as ``(train, val)``: a ``val_<name>`` entry goes to ``val`` under ``<name>``."""
    train: list[tuple[str, float]] = []
    val: list[tuple[str, float]] = []
    for name, value in items:
        (val if name.startswith("val_") else train).append((name[4:] if name.startswith("val_") else name, value))
    return train, val
