"""Whether a process a run store names is one of the replica's own: the only processes deviate ever signals.

Example:
    >>> import os, tempfile
    >>> mark = process_mark()
    >>> sorted(mark) in ([], ["start"])
    True
    >>> why_not_ours(1, Path(tempfile.gettempdir()), 0)
    'pid 1 is not a process a replica can have'
    >>> why_not_ours(os.getpid(), Path(tempfile.gettempdir()), mark.get("start"))
    'it is this launcher itself'
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any, Optional

from deviate_cb.store.processes import start_ticks

__all__ = [
    "RUN_DIR_VARIABLE",
    "is_our_replica_process",
    "names_run_dir",
    "process_mark",
    "signal_if_ours",
    "why_not_ours",
]

RUN_DIR_VARIABLE = "DEVIATE_RUN_DIR"


def process_mark() -> dict[str, Any]:
    """What a replica's process records beside its ``pid`` so that a later launcher can prove it is the one:
    ``{"start": <ticks>}``, empty where the start time cannot be read (then nothing will ever signal it).

    Example:
        >>> set(process_mark()) <= {"start"}
        True
    """
    ticks = start_ticks(os.getpid())
    return {} if ticks is None else {"start": ticks}


def why_not_ours(pid: Any, run_dir: Path, start: Any) -> Optional[str]:
    """Why the live process ``pid``, recorded in ``run_dir``'s manifest as started at ``start`` (ticks), is not
    proven to be that replica's; ``None`` when it is.

    Example:
        >>> import tempfile
        >>> why_not_ours(os.getpid() + 2**22, Path(tempfile.gettempdir()), None)
        'recorded without its start time (an older deviate-cb): not proven to be the replica'
    """
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 1:
        return f"pid {pid!r} is not a process a replica can have"
    if pid in (os.getpid(), getattr(os, "getpgrp", os.getpid)()):  # no process groups on Windows
        return "it is this launcher itself"
    if not isinstance(start, int) or isinstance(start, bool):
        return "recorded without its start time (an older deviate-cb): not proven to be the replica"
    live = start_ticks(pid)
    if live is None:
        return "its start time cannot be read here: not proven to be the replica"
    if live != start:
        return "it started at another time than the replica's process: another process has that id"
    if _owner(pid) != os.getuid():
        return "it is another user's process"
    with contextlib.suppress(OSError):
        if os.getpgid(pid) == os.getpgrp():
            return "it is in this launcher's own process group"
    if _writes_into(pid, run_dir):  # its stdout or stderr is the run's log (a replica forked warm, too)
        return None
    named = _run_dir_of(pid)
    if named is None:
        return f"its environment cannot be read or sets no {RUN_DIR_VARIABLE}: not proven to be the replica"
    if os.path.realpath(named) != os.path.realpath(run_dir):
        return f"its {RUN_DIR_VARIABLE} is another folder ({named})"
    return None


def is_our_replica_process(pid: Any, run_dir: Path, start: Any) -> bool:
    """Whether process ``pid`` is proven to be a process of the replica of ``run_dir`` (:func:`why_not_ours`).

    Example:
        >>> is_our_replica_process(1, Path("/nonexistent"), 0)
        False
    """
    return why_not_ours(pid, run_dir, start) is None


def names_run_dir(pid: int, run_dir: Path) -> bool:
    """Whether live process ``pid``'s environment names ``run_dir`` (``DEVIATE_RUN_DIR``) or its stdout or stderr
    is a file of that folder: what proves a process the replica's, once its start time and user are checked.

    Example:
        >>> names_run_dir(os.getpid(), Path("/nonexistent/run"))
        False
    """
    if _writes_into(pid, run_dir):
        return True
    named = _run_dir_of(pid)
    return named is not None and os.path.realpath(named) == os.path.realpath(run_dir)


def signal_if_ours(pid: int, run_dir: Path, start: Any, signum: int) -> bool:
    """Send ``signum`` to ``pid`` only when it is proven the replica's (checked again right before); whether sent.

    Example:
        >>> import signal
        >>> signal_if_ours(1, Path("/nonexistent"), 0, signal.SIGTERM)
        False
    """
    if not is_our_replica_process(pid, run_dir, start):
        return False
    try:
        os.kill(pid, signum)
    except OSError:
        return False
    return True


def _owner(pid: int) -> Optional[int]:
    """The real user id of process ``pid`` (``/proc/<pid>/status``), ``None`` where unknown."""
    try:
        with open(f"/proc/{pid}/status") as handle:
            line = next(line for line in handle if line.startswith("Uid:"))
        return int(line.split()[1])
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def _writes_into(pid: int, run_dir: Path) -> bool:
    """Whether process ``pid``'s stdout or stderr is a file directly in ``run_dir`` (its ``stdout.log``,
    ``stderr.log``): a replica forked from a warm-start template got its ``DEVIATE_RUN_DIR`` after its start, so
    its environment as ``/proc`` shows it is the template's; its output files say whose it is."""
    folder = os.path.realpath(run_dir)
    for fd in (1, 2):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:  # another user's process, no /proc, or closed
            continue
        if target.startswith("/") and os.path.dirname(os.path.realpath(target)) == folder:
            return True
    return False


def _run_dir_of(pid: int) -> Optional[str]:
    """``DEVIATE_RUN_DIR`` in process ``pid``'s environment as it started; ``None`` where unreadable or unset."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:  # another user's process, or no /proc
        return None
    prefix = f"{RUN_DIR_VARIABLE}=".encode()
    for entry in environ.split(b"\0"):
        if entry.startswith(prefix):
            return os.fsdecode(entry[len(prefix) :]) or None
    return None
