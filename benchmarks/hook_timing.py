"""Timing a callback's per-step hooks, shared by ``callback_overhead.py`` (Lightning) and ``keras_overhead.py``.

Framework-free (standard library only), so that the Keras benchmark does not import torch through it.

Example:
    >>> class Hooks:
    ...     def on_step(self) -> None:
    ...         pass
    >>> hooks = Hooks()
    >>> spent = hook_timer(hooks, ("on_step",))
    >>> hooks.on_step(); hooks.on_step()
    >>> len(spent), per_step_us([1000, 3000], 1)
    (2, 2.0)
"""

from __future__ import annotations

import statistics
import time
from typing import Any

__all__ = ["hook_timer", "per_step_us"]


def hook_timer(callback: Any, names: tuple[str, ...]) -> list[int]:
    """Wrap ``callback``'s per-step hooks (instance attributes shadow the methods) so that each call adds its
    ``perf_counter_ns`` duration to the returned list (``len(names)`` entries a step)."""
    spent: list[int] = []
    for name in names:
        method = getattr(callback, name)

        def timed(*args: Any, _method: Any = method, **kwargs: Any) -> None:
            start = time.perf_counter_ns()
            _method(*args, **kwargs)
            spent.append(time.perf_counter_ns() - start)

        setattr(callback, name, timed)
    return spent


def per_step_us(spent: list[int], hooks: int) -> float:
    """Median over steps of the summed time of a step's ``hooks`` hook calls, in microseconds."""
    return statistics.median(sum(spent[i : i + hooks]) for i in range(0, len(spent) - hooks + 1, hooks)) / 1e3
