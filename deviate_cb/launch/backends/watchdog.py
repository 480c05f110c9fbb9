"""A launcher killed outright (``SIGKILL``) must not leave its replicas, or what they started, running.

Example:
    >>> watchdog = GroupWatchdog(grace_s=1.0)
    >>> watchdog.watch(os.getpid() + 10**6, Path("/nonexistent"), since=0); watchdog.close()
    >>> watchdog.popen is None or watchdog.popen.returncode == 0
    True
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Optional

from deviate_cb.launch.backends.survivors import find_leftovers, now_ticks, stop_leftovers

__all__ = ["GroupWatchdog", "die_with_parent", "watch_groups"]


def die_with_parent() -> None:  # pragma: no cover - runs in the forked child, before exec
    """``preexec_fn`` for a replica: SIGTERM when its parent dies (Linux ``PR_SET_PDEATHSIG``); a no-op elsewhere.

    A replica started by a launcher that is then killed outright would otherwise run on as an orphan, past its
    ``--timeout``, and could write into a later attempt of the same replica.
    """
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class GroupWatchdog:
    """A process that ends the replicas of a launcher which died without ending them.

    The launcher registers each replica's process group, run directory and start time (:meth:`watch`) and
    unregisters it once the replica ended and was reaped (:meth:`forget`; the launcher stops its leftovers), through
    a pipe only the watchdog reads. When the launcher dies (even by ``SIGKILL``) the pipe closes: the watchdog
    sends each group still registered ``SIGTERM`` and, after ``grace_s``, ``SIGKILL``, then stops those replicas'
    proven leftovers (:func:`watch_groups`). :meth:`close` is the launcher's clean end: the watchdog exits and
    signals nothing. The watchdog runs in its own session, so Ctrl-C in the terminal does not reach it. Where it
    cannot start, replicas still get ``SIGTERM`` from :func:`die_with_parent`.

    Example:
        >>> watchdog = GroupWatchdog(grace_s=1.0)
        >>> watchdog.forget(os.getpid() + 10**6); watchdog.close()
        >>> watchdog.popen is None or watchdog.popen.returncode == 0
        True
    """

    def __init__(self, grace_s: float) -> None:
        self.popen: Optional[subprocess.Popen[bytes]] = None
        self._write: Optional[int] = None
        read, write = os.pipe()  # not inherited by anything the launcher starts: only the watchdog gets `read`
        root = str(Path(__file__).resolve().parents[3])  # where deviate_cb is imported from
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
        code = "import sys; from deviate_cb.launch.backends.watchdog import watch_groups; watch_groups(*sys.argv[1:])"
        try:
            self.popen = subprocess.Popen(
                [sys.executable, "-c", code, str(read), repr(float(grace_s))],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                pass_fds=(read,),
                start_new_session=True,
            )
        except OSError:  # no watchdog: the replicas still get SIGTERM when the launcher dies
            os.close(write)
        else:
            os.set_blocking(write, False)  # a stopped watchdog never blocks the launcher
            self._write = write
        finally:
            os.close(read)

    def watch(self, pgid: int, run_dir: Optional[Path] = None, since: int = 0) -> None:
        """Register a replica's process group (its leader's pid), its run directory and when it started (``/proc``
        ticks: :func:`deviate_cb.launch.backends.survivors.now_ticks`); without ``run_dir`` only its group is ended."""
        where = "" if run_dir is None else f" {int(since)} {json.dumps(os.fspath(run_dir))}"  # one line, any name
        self._send(f"+{pgid}{where}\n")

    def forget(self, pgid: int) -> None:
        """Unregister a group whose leader ended and was reaped."""
        self._send(f"-{pgid}\n")

    def close(self, timeout_s: float = 5.0) -> None:
        """The launcher's clean end: the watchdog exits without signalling anything; wait for it."""
        self._send("done\n")
        if self._write is not None:
            os.close(self._write)
            self._write = None
        if self.popen is not None and self.popen.poll() is None:
            try:
                self.popen.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()

    def _send(self, line: str) -> None:
        if self._write is not None:
            with contextlib.suppress(OSError):  # the watchdog is gone, or not reading: best effort
                os.write(self._write, line.encode())


def watch_groups(fd: Any, grace_s: Any) -> None:
    """The watchdog's loop (:class:`GroupWatchdog`): read ``+PGID [SINCE "RUN_DIR"]``/``-PGID`` lines from pipe
    ``fd`` until it closes; then, unless the launcher said ``done``, ``SIGTERM`` every group still registered,
    ``SIGKILL`` those still alive ``grace_s`` seconds later, and stop their replicas' proven leftovers, those started
    before the launcher was seen gone (a rerun may already run in the same run directory by then)."""
    fd, grace = int(fd), float(grace_s)
    for signum in (signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)
    groups: dict[int, Optional[tuple[int, Path]]] = {}
    buffer = b""
    done = False
    while chunk := os.read(fd, 4096):
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            if line == b"done":
                done = True
            elif line[:1] == b"-" and line[1:].isdigit():
                groups.pop(int(line[1:]), None)
            elif line[:1] == b"+":
                _register(groups, line[1:])
    if done:
        return
    died = now_ticks()  # a process started later is a later attempt's (a rerun), never this launcher's replica's
    for pgid in groups:
        _signal_group(pgid, signal.SIGTERM)
    alive = set(groups)
    deadline = time.monotonic() + grace
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = {pgid for pgid in alive if _signal_group(pgid, 0)}
    for pgid in alive:
        _signal_group(pgid, signal.SIGKILL)
    leftovers = []
    for pgid, replica in groups.items():
        if replica is not None:  # proven the replica's: its DEVIATE_RUN_DIR or its logs, started after it
            leftovers += find_leftovers(replica[1], since=replica[0], until=died or None, exclude_group=pgid)
    stop_leftovers(leftovers, grace)


def _register(groups: dict[int, Optional[tuple[int, Path]]], text: bytes) -> None:
    """Add one ``PGID [SINCE "RUN_DIR"]`` registration to ``groups``; a malformed one is ignored.

    Example:
        >>> groups = {}
        >>> _register(groups, b'12 345 "/runs/replica=0"'); _register(groups, b"13"); _register(groups, b"x")
        >>> groups
        {12: (345, PosixPath('/runs/replica=0')), 13: None}
    """
    pgid, _, rest = text.partition(b" ")
    if not pgid.isdigit():
        return
    replica = None
    with contextlib.suppress(ValueError, TypeError):
        since, _, where = rest.partition(b" ")
        replica = (int(since), Path(json.loads(where)))
    groups[int(pgid)] = replica


def _signal_group(pgid: int, signum: int) -> bool:
    """Signal process group ``pgid``; whether it still has a process."""
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True
