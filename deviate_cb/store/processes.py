"""Whether the processes a run's manifest records still run on this host: read from ``/proc``, never signalled.

Example:
    >>> import os
    >>> process_alive(os.getpid()), process_alive(2**22 + 12345)
    (True, False)
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Optional

from deviate_cb.store.manifest import RunManifest
from deviate_cb.store.pids import is_pid

__all__ = ["alive_processes", "is_local_here", "process_alive", "recorded_processes", "start_ticks"]


def start_ticks(pid: int) -> Optional[int]:
    """When process ``pid`` started, in clock ticks since boot (``/proc/<pid>/stat`` field 22); ``None`` where
    that cannot be read (the process is gone, or no ``/proc``).

    Example:
        >>> import os
        >>> start_ticks(os.getpid()) is None or start_ticks(os.getpid()) >= 0
        True
    """
    try:
        stat = Path(f"/proc/{int(pid)}/stat").read_text()
        return int(stat.rsplit(")", 1)[1].split()[19])  # field 22, counted after the command name (may hold ')')
    except (OSError, ValueError, IndexError, OverflowError):
        return None


def process_alive(pid: int, not_after: Optional[float] = None) -> bool:
    """Whether process ``pid`` runs here; with ``not_after`` (Unix time), only if it started no later than that.

    A zombie (a process that ended and that its parent has not reaped yet: a launcher killed outright whose
    shell has not waited for it) is not alive.
    """
    if not is_pid(pid):  # 2**70, -5, 0, a string: never passed to os.kill
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive, but not ours to judge further
        return True
    except OSError:
        return False
    if _process_state(pid) in ("Z", "X"):  # a zombie (dead, not yet reaped by its parent) or being reaped
        return False
    if not_after is not None:
        started = _process_start(pid)
        if started is not None and started > not_after + 1.0:  # the id was reused by a newer process
            return False
    return True


def is_local_here(manifest: RunManifest, host: Optional[str]) -> bool:
    """Whether ``manifest`` is a replica of the ``local`` backend started on this host (or ``host``).

    Example:
        >>> is_local_here(RunManifest.from_json({"backend": "slurm", "host": socket.gethostname()}), None)
        False
    """
    local = manifest.backend == "local" or not manifest.recorded("backend")
    return local and manifest.host == (host or socket.gethostname())


def recorded_processes(manifest: RunManifest) -> list[tuple[int, Any]]:
    """``(pid, start)`` of each process the manifest records (``pid``/``pid_start``, ``bootstrap[]``), once each.

    Example:
        >>> recorded_processes(
        ...     RunManifest.from_json({"pid": 7, "pid_start": 1, "bootstrap": [{"pid": 7}, {"pid": 9, "start": 2}]})
        ... )
        [(7, 1), (9, 2)]
    """
    pairs: list[tuple[Any, Any]] = [(manifest.pid, manifest.pid_start)]
    listed = manifest.bootstrap
    if listed is not None:
        pairs += [(entry.get("pid"), entry.get("start")) for entry in listed if isinstance(entry, Mapping)]
    found: dict[int, Any] = {}
    for pid, start in pairs:
        if is_pid(pid) and found.get(pid) is None:
            found[pid] = start
    return list(found.items())


def alive_processes(manifest: RunManifest, written_at: Optional[float], host: Optional[str]) -> list[int]:
    """The processes ``manifest`` records still alive here, started no later than ``written_at`` (a reused id
    is not one of them), and at their recorded start where one is recorded; ``[]`` for another host or backend."""
    if not is_local_here(manifest, host):
        return []
    alive = []
    for pid, start in recorded_processes(manifest):
        if pid in (1, os.getpid()) or not process_alive(pid, not_after=written_at):  # a replica is never init
            continue
        live = start_ticks(pid) if isinstance(start, int) else None
        if live is None or live == start:  # a process that started at another time is a reused id
            alive.append(pid)
    return alive


def _process_state(pid: int) -> Optional[str]:
    """The state letter of process ``pid`` (``R``, ``S``, ``Z``...; Linux ``/proc``), ``None`` where unknown.

    Example:
        >>> _process_state(os.getpid()) in ("R", "S", None)
        True
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0]  # field 3, after the command name (which may hold ')')
    except (OSError, IndexError):
        return None


def _process_start(pid: int) -> Optional[float]:
    """Unix time process ``pid`` started (Linux ``/proc``); ``None`` where that cannot be read."""
    ticks = start_ticks(pid)  # field 22 of /proc/<pid>/stat, as a replica records it
    if ticks is None:
        return None
    try:
        with open("/proc/stat") as handle:
            boot = next(int(line.split()[1]) for line in handle if line.startswith("btime "))
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None
