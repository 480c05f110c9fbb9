"""Timing a callback's per-step hooks, shared by ``callback_overhead.py`` (Lightning) and ``keras_overhead.py``.

Framework-free (the standard library, ``deviate_cb.store.atomic`` and, for the verdict, ``deviate_cb.bench.stats``
with SciPy), so that the Keras benchmark does not import torch through it.

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

import os
import statistics
import tempfile
import time
from typing import Any, Optional

from deviate_cb.store.atomic import atomic_write_bytes

__all__ = ["files_cost", "goal_verdict", "hook_timer", "per_step_us", "print_fit_costs"]

# What one run writes (DeviateCallback, a short fit): run.json at the start and at the end, fingerprint.json,
# metrics.parquet and timings.parquet, each atomically (a new file, written, fsynced, renamed over the target),
# in a new replica directory. Sizes as the worst case writes them.
RUN_FILES = (("run.json", 3_000), ("fingerprint.json", 9_000), ("timings.parquet", 6_000),
             ("metrics.parquet", 14_000), ("run.json", 3_500))  # fmt: skip


def files_cost(directory: Optional[str], repeats: int = 20) -> tuple[float, str]:
    """Process CPU seconds one run's files cost on ``directory``'s file system (median of ``repeats``): a new
    directory and :data:`RUN_FILES` written with the store's own ``atomic_write_bytes``; and that file system's
    type and mount point as ``/proc/mounts`` lists them (``"unknown"`` where it cannot be read).

    Example:
        >>> seconds, where = files_cost(None, repeats=2)
        >>> seconds > 0 and isinstance(where, str)
        True
    """
    spent = []
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        for i in range(repeats):
            start = time.process_time()
            run = os.path.join(tmp, f"replica={i}")
            os.mkdir(run)
            for name, size in RUN_FILES:
                atomic_write_bytes(os.path.join(run, name), b"x" * size)
            spent.append(time.process_time() - start)
        return statistics.median(spent), _file_system(tmp)


def goal_verdict(ratios: list[float], goal: float, level: float = 0.95) -> str:
    """One line that answers whether the fits with the callback meet ``goal`` (at most that many times the bare
    fit): the median of the paired ratios with its order-statistic confidence interval
    (:func:`deviate_cb.bench.stats.median_ratio_ci`, distribution-free), and "meets" only when the whole interval
    is at or below the goal, "misses" only when it is above, "cannot tell at this noise" otherwise (and "too few
    pairs" where even the widest interval does not reach ``level``).

    Example:
        >>> goal_verdict([1.00, 1.01, 1.005, 0.995, 1.002, 1.008, 0.999, 1.004], 1.02)
        'meets the goal of <= 1.02x: median 1.003x, 99% CI [0.995, 1.010] (order statistics, 8 pairs)'
    """
    from deviate_cb.bench.stats import median_ratio_ci

    ci = median_ratio_ci(ratios, level)
    if ci.level < level:  # too few pairs for the level: the widest interval, which says less
        answer = "too few pairs to tell whether it meets"
    elif ci.high <= goal:
        answer = "meets"
    elif ci.low > goal:
        answer = "misses"
    else:
        answer = "cannot tell at this noise whether it meets"
    return (
        f"{answer} the goal of <= {goal:g}x: median {ci.median:.3f}x, {ci.level:.0%} CI [{ci.low:.3f}, "
        f"{ci.high:.3f}] (order statistics, {ci.n} pairs)"
    )


def _file_system(path: str) -> str:
    real, best = os.path.realpath(path), ("", "unknown")
    try:
        with open("/proc/mounts") as mounts:
            for line in mounts:
                fields = line.split()
                under = len(fields) >= 3 and (real == fields[1] or real.startswith(fields[1].rstrip("/") + "/"))
                if under and len(fields[1]) >= len(best[0]):
                    best = (fields[1], f"{fields[2]} at {fields[1]}")
    except OSError:
        pass
    return best[1]


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


def print_fit_costs(
    *,
    bare: list[float],
    ratios: list[float],
    extra: list[float],
    per_step: list[float],
    hooks: str,
    kept: int,
    expected: int,
    per_fit: dict[str, list[float]],
    empty_extra: list[float],
    empty: str,
    steps: int,
    runs_dir: Optional[str] = None,
    one_hook_extra: Optional[list[float]] = None,
    one_hook: str = "",
) -> None:
    """The worst case's lines (issue 30), for Lightning and Keras alike: the verdict on the goal with the median
    ratio's confidence interval (:func:`goal_verdict`), the bare fit and the ratio, the per-step hook microseconds
    with the rows kept, and the milliseconds inside each group of hooks next to what an empty callback (``empty``,
    e.g. ``"L.Callback()"``) costs, and where given what a callback with one no-op per-step hook (``one_hook``)
    costs. Seconds in, except ``per_step`` (microseconds) and ``per_fit`` (milliseconds); medians printed."""
    median = statistics.median
    q1, middle, q3 = statistics.quantiles(ratios, n=4)
    print(f"  {goal_verdict(ratios, 1.02)}")
    print(
        f"  bare fit {median(bare) * 1e3:.0f} ms ({median(bare) / steps * 1e6:.0f} us/step); with DeviateCallback "
        f"{middle:.3f}x (IQR {q1:.3f}-{q3:.3f}), +{median(extra) * 1e3:.1f} ms per fit (goal <= 1.02x)"
    )
    print(
        f"  per-step hooks ({hooks}): {median(per_step):.1f} us median per step, "
        f"{median(per_fit['per-step']) / steps * 1e3:.1f} us mean (work done every few steps counted) (goal <= 20 us); "
        f"rows kept: {kept} of {expected} logged values"
    )
    inside = {name: median(values) for name, values in per_fit.items()}
    print(
        f"  in the callback's hooks (wall ms a fit, median): {sum(inside.values()):.1f} = "
        + ", ".join(f"{name} {ms:.1f}" for name, ms in inside.items())
        + f"; an empty {empty} costs {median(empty_extra) * 1e3:+.1f} ms a fit (the framework calls its hooks: the "
        "floor of any callback)"
    )
    if one_hook_extra:
        print(
            f"  a callback with one no-op per-step hook ({one_hook}) costs {median(one_hook_extra) * 1e3:+.1f} ms a "
            "fit: the framework's share of a callback that reads every step, which no work inside the hook removes"
        )
    seconds, where = files_cost(runs_dir)
    print(
        f"  the runs directory's file system ({where}): one run's files (a directory; run.json twice, "
        f"fingerprint.json, metrics.parquet, timings.parquet, each a new file written, fsynced and renamed) cost "
        f"{seconds * 1e3:.2f} ms of CPU a run, part of the extra above"
    )
