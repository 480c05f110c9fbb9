"""Why a group's step-time spread may not be the model's: replicas that shared too few cores, a busy machine.

Example:
    >>> span = {"host": "n1", "cpu_count": 2, "started_at": "2026-01-01T10:00:00+00:00",
    ...         "ended_at": "2026-01-01T10:05:00+00:00"}
    >>> from deviate_cb.store.manifest import RunManifest
    >>> runs = {str(k): RunManifest.from_json(span) for k in range(4)}
    >>> for line in contention_caveats("mlp", "algo", runs):
    ...     print(line)
    experiment=mlp variant=algo: up to 4 replicas ran at once on host n1, which has 2 usable CPU cores: they competed for the cores, so the step-time spread may not be the model's.
"""  # noqa: E501

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Optional

from deviate_cb.store.manifest import RunManifest
from deviate_cb.store.run_directory import unix_time

__all__ = ["contention_caveats"]

_SHOWN = 10  # replicas named in a caveat; more are counted


@dataclass(frozen=True)
class _Span:
    host: str
    start: float
    end: float


def contention_caveats(
    experiment: str, variant: str, group: Mapping[str, RunManifest], others: Iterable[RunManifest] = ()
) -> list[str]:
    r"""One line per reason the step times of a group's replicas may reflect the machine rather than the model.

    Args:
        experiment: The group's experiment, named in each line.
        variant: The group's variant, named in each line.
        group: The manifests of the group's replicas whose step times are reported, by replica.
        others: The manifests of the study's other runs, which ran beside them on the same hosts.

    Example:
        >>> busy = {"host": "n1", "cpu_count": 4, "load_avg_start": [6.5, 3.0, 1.0], "load_avg_end": [2.0, 2.0, 1.0]}
        >>> calm = {**busy, "load_avg_start": [1.0] * 3}
        >>> group = {"0": RunManifest.from_json(busy), "1": RunManifest.from_json(calm)}
        >>> (line,) = contention_caveats("mlp", "algo", group)
        >>> print(line.replace(" (", "\n("))
        experiment=mlp variant=algo: the machine was busy when replica 0 started or ended
        (1-minute load average above its CPU cores: 6.5 on 4 cores), so the step-time spread may not be the model's.
    """
    where = f"experiment={experiment} variant={variant}"
    lines = []
    crowded = _crowded_host(group, others)
    if crowded is not None:
        host, at_once, cores = crowded
        lines.append(
            f"{where}: up to {at_once} replicas ran at once on host {host}, which has {cores} usable CPU "
            f"core{'s' * (cores != 1)}: they competed for the cores, so the step-time spread may not be the model's."
        )
    else:
        uneven = _uneven(group, others)
        if uneven is not None:
            host, alone, crowded_ones, at_once, cores = uneven
            lines.append(
                f"{where}: on host {host} ({cores} usable CPU core{'s' * (cores != 1)}) {_replicas(crowded_ones)} ran "
                f"with up to {at_once} replicas at once while {_replicas(alone)} ran with fewer: they did not run "
                "under the same conditions, so the step-time spread may not be the model's."
            )
    busy = _busy(group)
    if busy:
        (load, cores), replicas = max(busy.values()), _replicas(list(busy))
        lines.append(
            f"{where}: the machine was busy when {replicas} started or ended (1-minute load average above its CPU "
            f"cores: {load:g} on {cores} core{'s' * (cores != 1)}), so the step-time spread may not be the model's."
        )
    return lines


def _crowded_host(group: Mapping[str, RunManifest], others: Iterable[RunManifest]) -> Optional[tuple[str, int, int]]:
    """The host where most replicas ran at once for its cores while a replica of the group ran, when that is more
    than its cores: ``(host, replicas at once, usable cores)``."""
    worst: Optional[tuple[float, str, int, int]] = None
    for _, host, at_once, cores in _concurrency(group, others):
        if at_once > cores and (worst is None or at_once / cores > worst[0]):
            worst = (at_once / cores, host, at_once, cores)
    return None if worst is None else worst[1:]


def _uneven(
    group: Mapping[str, RunManifest], others: Iterable[RunManifest]
) -> Optional[tuple[str, list[str], list[str], int, int]]:
    """A host where the group's replicas ran beside different numbers of others, the most at once taking half its
    cores or more: ``(host, replicas with fewer, replicas with the most, the most at once, usable cores)``."""
    by_host: dict[str, list[tuple[str, int, int]]] = {}
    for replica, host, at_once, cores in _concurrency(group, others):
        by_host.setdefault(host, []).append((replica, at_once, cores))
    for host, found in sorted(by_host.items()):
        most, cores = max(at_once for _, at_once, _ in found), min(c for _, _, c in found)
        fewer = [replica for replica, at_once, _ in found if at_once < most]
        if fewer and most > 1 and 2 * most >= cores:
            return host, fewer, [replica for replica, at_once, _ in found if at_once == most], most, cores
    return None


def _concurrency(group: Mapping[str, RunManifest], others: Iterable[RunManifest]) -> list[tuple[str, str, int, int]]:
    """Per replica of the group: ``(replica, host, most replicas of the study at once during its run, cores)``."""
    mine = [(replica, span, cores) for replica, m in group.items() if (span := _span(m)) and (cores := _usable(m))]
    if not mine:
        return []
    spans = [s for m in (*group.values(), *others) if (s := _span(m)) is not None]
    starts: dict[str, list[float]] = {}
    ends: dict[str, list[float]] = {}
    for s in spans:
        starts.setdefault(s.host, []).append(s.start)
        ends.setdefault(s.host, []).append(s.end)
    for values in (*starts.values(), *ends.values()):
        values.sort()
    found = []
    for replica, span, cores in mine:
        host_starts, host_ends = starts[span.host], ends[span.host]
        first, last = bisect.bisect_left(host_starts, span.start), bisect.bisect_left(host_starts, span.end)
        # The most spans running at once during this one: the count peaks when one of them starts.
        at_once = max(
            (bisect.bisect_right(host_starts, t) - bisect.bisect_right(host_ends, t) for t in host_starts[first:last]),
            default=0,
        )
        found.append((replica, span.host, at_once, cores))
    return found


def _busy(group: Mapping[str, RunManifest]) -> dict[str, tuple[float, int]]:
    """The replicas whose machine's 1-minute load average was above its cores when they started or ended:
    replica -> (the higher of the two loads, cores)."""
    found = {}
    for replica, manifest in group.items():
        cores = _count(manifest.cpu_count)
        loads = [_minute_load(load) for load in (manifest.load_avg_start, manifest.load_avg_end)]
        highest = max((x for x in loads if x is not None), default=None)
        if cores and highest is not None and highest > cores:
            found[replica] = (highest, cores)
    return found


def _span(manifest: RunManifest) -> Optional[_Span]:
    host = manifest.host
    start, end = unix_time(manifest.started_at), unix_time(manifest.ended_at)
    if host is None or start is None or end is None or end < start:
        return None
    return _Span(host, start, end)


def _usable(manifest: RunManifest) -> Optional[int]:
    return _count(manifest.cpus_usable) or _count(manifest.cpu_count)


def _count(value: Any) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _minute_load(value: Any) -> Optional[float]:
    if not isinstance(value, (list, tuple)) or not value:
        return None
    first = value[0]
    if isinstance(first, bool) or not isinstance(first, (int, float)) or not math.isfinite(first):
        return None
    return float(first)


def _replicas(labels: list[str]) -> str:
    """``replica 3`` or ``replicas 0, 2 and 5``, numbers in order, at most :data:`_SHOWN` named.

    Example:
        >>> _replicas(["10", "2"]), _replicas([str(k) for k in range(12)])
        ('replicas 2 and 10', 'replicas 0, 1, 2, 3, 4, 5, 6, 7, 8, 9 and 2 more')
    """
    ordered = sorted(labels, key=lambda r: (not r.isdigit(), int(r) if r.isdigit() else 0, r))
    if len(ordered) == 1:
        return f"replica {ordered[0]}"
    shown, more = ordered[:_SHOWN], len(ordered) - _SHOWN
    return f"replicas {', '.join(shown[:-1] if more <= 0 else shown)} and {shown[-1] if more <= 0 else f'{more} more'}"
