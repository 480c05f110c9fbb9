"""Process ids read from a run store: validated before anything looks a process up by one.

Example:
    >>> [pid_problem(value) is None for value in (4242, 2**70, -5, 0, "12", 3.5, True)]
    [True, False, False, False, False, False, False]
    >>> print(bad_pid_line("runs/run.json", "launcher_pid", -5))  # doctest: +ELLIPSIS
    runs/run.json: `launcher_pid` is not a process id (received -5; expected a whole number from 1 to ...)
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, Optional, TypeGuard

from deviate_cb.store.manifest import RunManifest

__all__ = ["bad_pid_line", "bad_pids", "is_pid", "pid_limit", "pid_problem"]

# Linux's PID_MAX_LIMIT on 64-bit systems; elsewhere a pid_t is a C int
_LINUX_LIMIT = 2**22
_INT_LIMIT = 2**31 - 1


@functools.lru_cache(maxsize=1)
def pid_limit() -> int:
    """The largest process id of this system: Linux ``/proc/sys/kernel/pid_max``, else the largest C ``int``.

    Example:
        >>> 1 < pid_limit() <= 2**31 - 1
        True
    """
    try:
        with open("/proc/sys/kernel/pid_max", encoding="ascii") as handle:
            value = int(handle.read(32).strip())
    except (OSError, ValueError):
        return _INT_LIMIT
    return value if 1 < value <= _LINUX_LIMIT else _LINUX_LIMIT


def pid_problem(value: Any) -> Optional[str]:
    """Why ``value`` (read from a run store) is not a process id, as ``"received ...; expected ..."``; ``None``
    when it is one: an ``int`` (not a ``bool``) from 1 to :func:`pid_limit`.

    Example:
        >>> pid_problem(2**70)  # doctest: +ELLIPSIS
        'received 1180591620717411303424; expected a whole number from 1 to ...'
    """
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= pid_limit():
        return None
    shown = repr(value)
    if len(shown) > 40:  # a string or number of any length: the start says what it is
        shown = shown[:37] + "..."
    return f"received {shown}; expected a whole number from 1 to {pid_limit()}"


def is_pid(value: Any) -> TypeGuard[int]:
    """Whether ``value`` is a process id (:func:`pid_problem`).

    Example:
        >>> is_pid(4242), is_pid(2**70), is_pid(False)
        (True, False, False)
    """
    return pid_problem(value) is None


def bad_pid_line(where: Any, field: str, value: Any) -> str:
    """One warning line naming the file ``where`` and its ``field`` whose ``value`` is not a process id."""
    return f"{where}: `{field}` is not a process id ({pid_problem(value)})"


def bad_pids(manifest: RunManifest) -> list[tuple[str, Any]]:
    """``(field, value)`` of each process id field of ``manifest`` (``launcher_pid``, ``pid``,
    ``bootstrap[k].pid``) present but not a process id.

    Example:
        >>> from deviate_cb.store.manifest import RunManifest
        >>> bad_pids(RunManifest.from_json({"launcher_pid": 7, "pid": "7", "bootstrap": [{"pid": 8}, {"pid": -1}]}))
        [('pid', '7'), ('bootstrap[1].pid', -1)]
    """
    data = manifest.to_json()  # as read: the values of another type are the ones to name
    found = [(key, data[key]) for key in ("launcher_pid", "pid") if data.get(key) is not None]
    listed = data.get("bootstrap")
    if isinstance(listed, list):
        found += [
            (f"bootstrap[{k}].pid", entry["pid"])
            for k, entry in enumerate(listed)
            if isinstance(entry, Mapping) and entry.get("pid") is not None
        ]
    return [(field, value) for field, value in found if pid_problem(value) is not None]
