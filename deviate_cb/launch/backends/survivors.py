"""The processes a replica leaves running when it ends: found, proven the replica's, stopped, and named.

Example:
    >>> import tempfile
    >>> find_leftovers(Path(tempfile.mkdtemp()), since=0)
    []
    >>> print(leftovers_line("replica=0", [Leftover(4242, 0, "python loop.py")], stopped=True))
    replica=0: stopped 1 leftover process it left running (pid 4242: python loop.py)
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import dataclasses
import itertools
import os
import signal
import sys
import time
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import NamedTuple, Optional

from deviate_cb.launch.ownership import names_run_dir
from deviate_cb.store.left_running import SHOWN_COMMAND, SHOWN_PROCESSES

__all__ = [
    "Leftover",
    "become_subreaper",
    "find_leftovers",
    "leftovers_line",
    "now_ticks",
    "stop_leftovers",
]

_PR_SET_CHILD_SUBREAPER = 36
_PR_GET_CHILD_SUBREAPER = 37
_TEMPLATE_MODULE = b"deviate_cb.launch.backends.template"  # what a warm-start template runs (launch/backends/warm.py)


@dataclasses.dataclass(frozen=True)
class Leftover:
    """A live process proven to be a replica's: its ``pid``, its start time (ticks) and its command line."""

    pid: int
    start: int
    command: str

    def describe(self) -> str:
        """``pid N: command``.

        Example:
            >>> Leftover(7, 0, "sleep 60").describe()
            'pid 7: sleep 60'
        """
        return f"pid {self.pid}: {self.command}"


def become_subreaper(on: bool = True) -> Optional[bool]:
    """Make this process a child subreaper (``on``) or stop being one; whether it was one before, ``None`` where
    this cannot be done (not Linux, no ``prctl``).

    Example:
        >>> before = become_subreaper()
        >>> before in (None, True, False)
        True
        >>> _ = become_subreaper(bool(before))
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        was = ctypes.c_int(0)
        if libc.prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(was), 0, 0, 0) != 0:
            return None
        if libc.prctl(_PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) != 0:
            return None
    except (OSError, AttributeError):
        return None
    return bool(was.value)


def now_ticks() -> int:
    """Now, in the clock ticks since boot that ``/proc/<pid>/stat`` start times use (0 where unknown).

    Example:
        >>> now_ticks() >= 0
        True
    """
    try:
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return max(0, int(uptime * os.sysconf("SC_CLK_TCK")) - 1)
    except (OSError, ValueError, IndexError):
        return 0


def find_leftovers(
    run_dir: Path,
    *,
    since: int,
    until: Optional[int] = None,
    exclude: Collection[int] = (),
    exclude_group: Optional[int] = None,
    strays: bool = False,
) -> list[Leftover]:
    """The live processes proven to be left by the replica of ``run_dir``, which started at ``since`` (ticks).

    ``until``: processes started later (ticks) are not listed (a later attempt's, once the launcher is gone);
    ``exclude``: pids never listed (the launcher's own children: replicas, templates, its watchdog);
    ``exclude_group``: the replica's process group, which the backend kills itself; ``strays``: also any other
    child of this launcher still running a warm-start template's program (an orphan forked from a warm replica and
    reparented to it), for when no other replica runs.

    Example:
        >>> find_leftovers(Path("/nonexistent"), since=now_ticks(), strays=True)  # nothing started since now
        []
    """
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    me, uid = os.getpid(), os.getuid()
    own_session = _session_of(me)
    found = []
    for name in names:
        if not name.isdigit() or int(name) in exclude or int(name) <= 1 or int(name) == me:
            continue
        pid = int(name)
        stat = _stat(pid)
        if stat is None or stat.start < since or (until is not None and stat.start > until):
            continue
        if stat.session == own_session:
            continue
        if stat.state in ("Z", "X"):  # an orphan reparented to this launcher that ended by itself: reap it
            if strays and stat.parent == me:
                with contextlib.suppress(OSError):
                    os.waitpid(pid, os.WNOHANG)
            continue
        if exclude_group is not None and stat.group == exclude_group:
            continue
        if _uid(pid) != uid:
            continue
        if names_run_dir(pid, run_dir) or (strays and stat.parent == me and _forked_from_template(pid)):
            found.append(Leftover(pid, stat.start, _command(pid)))
    return sorted(found, key=lambda leftover: leftover.pid)


def stop_leftovers(leftovers: Sequence[Leftover], grace_s: float, poll_s: float = 0.05) -> list[Leftover]:
    """``SIGTERM`` each of ``leftovers``, ``SIGKILL`` those alive after ``grace_s``; those that could not be
    stopped (still running after both). A pid whose start time changed is another process now: never signalled.

    Example:
        >>> stop_leftovers([Leftover(os.getpid(), -1, "not this one")], grace_s=0.1)
        []
    """
    for signum, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, max(1.0, grace_s))):
        for leftover in leftovers:
            if _running(leftover):
                with contextlib.suppress(OSError):
                    os.kill(leftover.pid, signum)
        deadline = time.monotonic() + wait_s
        while any(_running(leftover) for leftover in leftovers) and time.monotonic() < deadline:
            time.sleep(poll_s)
        if not any(_running(leftover) for leftover in leftovers):
            break
    return [leftover for leftover in leftovers if _running(leftover)]


def leftovers_line(replica: str, leftovers: Sequence[Leftover], *, stopped: bool) -> str:
    """One line about ``replica``'s leftover processes: ``stopped`` ones, or those that could not be stopped.

    Example:
        >>> print(leftovers_line("replica=3", [Leftover(9, 0, "sleep 9")], stopped=False))
        replica=3: 1 leftover process it left running could not be stopped (pid 9: sleep 9)
    """
    count = f"{len(leftovers)} leftover process{'es' * (len(leftovers) != 1)}"
    shown = "; ".join(leftover.describe() for leftover in leftovers[:SHOWN_PROCESSES])
    more = f"; and {len(leftovers) - SHOWN_PROCESSES} more" if len(leftovers) > SHOWN_PROCESSES else ""
    if stopped:
        return f"{replica}: stopped {count} it left running ({shown}{more})"
    return f"{replica}: {count} it left running could not be stopped ({shown}{more})"


def _running(leftover: Leftover) -> bool:
    """Whether ``leftover`` still runs (not a zombie: a zombie child of this launcher is reaped here)."""
    stat = _stat(leftover.pid)
    if stat is None or stat.start != leftover.start:
        return False
    if stat.state in ("Z", "X"):
        if stat.parent == os.getpid():  # reparented to this subreaper: nobody else will reap it
            with contextlib.suppress(OSError):
                os.waitpid(leftover.pid, os.WNOHANG)
        return False
    return True


class _Stat(NamedTuple):
    state: str
    parent: int
    group: int
    session: int
    start: int


def _stat(pid: int) -> Optional[_Stat]:
    """State, parent, group, session and start time of ``pid`` (``/proc/<pid>/stat``); ``None`` where unknown."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return _Stat(fields[0], int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19]))
    except (OSError, ValueError, IndexError):
        return None


def _session_of(pid: int) -> Optional[int]:
    stat = _stat(pid)
    return None if stat is None else stat.session


def _uid(pid: int) -> Optional[int]:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def _forked_from_template(pid: int) -> bool:
    """Whether ``pid`` still runs a warm-start template's program (``python -m deviate_cb.launch.backends.template``): a
    process forked from a warm replica that never exec'd, whose environment is the template's, not the replica's.
    Any other child of the launcher (one the user's own code started beside ``replicate()``) is not proven ours."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return any(a == b"-m" and b == _TEMPLATE_MODULE for a, b in itertools.pairwise(argv))


def _command(pid: int) -> str:
    """Process ``pid``'s command line, shortened for a line of text (its name where the line is empty)."""
    try:
        text = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        text = text or Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "?"
    text = "".join(char if char.isprintable() else "?" for char in text)
    return text if len(text) <= SHOWN_COMMAND else text[: SHOWN_COMMAND - 3] + "..."
