"""Who still owns a replica: its launcher and its processes, alive or gone.

A launcher that is killed outright (``SIGKILL``, a crashed login node) cannot record anything: its replicas'
manifests still say ``running``. Whoever looks next (``deviate status``, ``deviate report``, a rerun) settles
them with :func:`settle_replica`: a replica of the ``local`` backend started on this host whose launcher is gone
and none of whose recorded processes (``pid``, the ``bootstrap`` list) is alive is recorded ``killed`` with the
reason, so it is rerun and never counted as running, and the parts it flushed are compacted into its files. A
process id that was reused since (a process started after the replica) does not count as alive. Replicas on a
cluster (Slurm, Ray) are left to their backend, which asks the scheduler; replicas of another host cannot be
checked from here and are left alone.

:func:`live_processes` gives the processes of an earlier attempt that are still running (after a launcher
was killed, an orphaned replica may still write): a rerun stops them before it starts a new attempt.

Example:
    >>> import os
    >>> process_alive(os.getpid()), process_alive(2**22 + 12345)
    (True, False)
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import signal
import socket
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Optional

from deviate_cb.store.run_directory import RunDirectory, iso_time

__all__ = [
    "LOST_REASON",
    "compact_what_it_left",
    "die_with_parent",
    "live_processes",
    "process_alive",
    "settle_replica",
    "stop_processes",
]

LOST_REASON = "the launcher (pid {pid}) is gone and so are the replica's processes: lost before it ended"


def process_alive(pid: int, not_after: Optional[float] = None) -> bool:
    """Whether process ``pid`` runs here; with ``not_after`` (Unix time), only if it started no later than that."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive, but not ours to judge further
        return True
    except OSError:
        return False
    if not_after is not None:
        started = _process_start(pid)
        if started is not None and started > not_after + 1.0:  # the id was reused by a newer process
            return False
    return True


def live_processes(run_dir: Path, host: Optional[str] = None) -> list[int]:
    """The processes ``run_dir``'s manifest records (``pid``, ``bootstrap[].pid``) still alive on this host.

    A process that started after the manifest was last written is a reused id, not the replica's.
    """
    recorded = _recorded(RunDirectory(run_dir))
    return [] if recorded is None else _alive_processes(*recorded, host)


def settle_replica(run_dir: Path, host: Optional[str] = None) -> Optional[str]:
    """Record a ``running`` replica whose launcher and processes are gone as ``killed``; return the reason.

    ``None`` when there is nothing to settle (not running, another host or backend, or still alive).
    """
    run = RunDirectory(run_dir)
    recorded = _recorded(run)
    if recorded is None:
        return None
    manifest, written_at = recorded
    if manifest.get("status") != "running" or not _local_here(manifest, host):
        return None
    launcher = manifest.get("launcher_pid")
    started = _epoch(manifest.get("started_at"))
    if not isinstance(launcher, int) or process_alive(launcher, not_after=started):
        return None
    if _alive_processes(manifest, written_at, host):
        return None
    reason = LOST_REASON.format(pid=launcher)
    try:
        run.update_manifest(status="killed", reason=reason, error=reason, ended_at=iso_time())
    except OSError:
        return None
    compact_what_it_left(run)
    return reason


def compact_what_it_left(run: RunDirectory) -> int:
    """Compact the parts a replica whose processes have ended left behind (it died before its own end of run
    compacted them: :meth:`~deviate_cb.store.run_directory.RunDirectory.compact_parts`); return the metric rows
    merged. Never raises: parts that cannot be compacted now (a full disk) stay, and are read as they are."""
    try:
        return run.compact_parts()
    except Exception:
        return 0


def _recorded(run: RunDirectory) -> Optional[tuple[dict[str, Any], Optional[float]]]:
    """The manifest and when it was last written; ``None`` when it cannot be read (the readers say so)."""
    try:
        manifest = run.read_manifest()
    except Exception:  # unreadable or newer
        return None
    try:
        written_at: Optional[float] = run.manifest_path.stat().st_mtime
    except OSError:
        written_at = None
    return manifest, written_at


def _alive_processes(manifest: Mapping[str, Any], written_at: Optional[float], host: Optional[str]) -> list[int]:
    if not _local_here(manifest, host):
        return []
    pids = [manifest.get("pid")]
    listed = manifest.get("bootstrap")
    if isinstance(listed, list):
        pids += [entry.get("pid") for entry in listed if isinstance(entry, Mapping)]
    seen = []
    for pid in pids:
        if isinstance(pid, int) and pid not in seen and pid != os.getpid():
            seen.append(pid)
    return [pid for pid in seen if process_alive(pid, not_after=written_at)]


def stop_processes(pids: list[int], grace_s: float = 5.0) -> list[int]:
    """SIGTERM ``pids``, SIGKILL what is left after ``grace_s``; return the pids that had to be killed."""
    for pid in pids:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(process_alive(pid) for pid in pids):
        time.sleep(0.05)
    killed = [pid for pid in pids if process_alive(pid)]
    for pid in killed:
        _signal(pid, signal.SIGKILL)
    return killed


def die_with_parent() -> None:  # pragma: no cover - runs in the forked child, before exec
    """``preexec_fn`` for a replica: SIGTERM when its parent dies (Linux ``PR_SET_PDEATHSIG``); a no-op elsewhere.

    A replica started by a launcher that is then killed outright would otherwise run on as an orphan, past its
    ``--timeout``, and could write into a later attempt of the same replica.
    """
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _signal(pid: int, signum: int) -> None:
    with contextlib.suppress(OSError):
        os.kill(pid, signum)


def _local_here(manifest: Mapping[str, Any], host: Optional[str]) -> bool:
    backend = manifest.get("backend", "local")
    return backend == "local" and manifest.get("host") == (host or socket.gethostname())


def _epoch(text: Any) -> Optional[float]:
    if not isinstance(text, str):
        return None
    try:
        moment = _dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=_dt.timezone.utc)
    return moment.timestamp()


def _process_start(pid: int) -> Optional[float]:
    """Unix time process ``pid`` started (Linux ``/proc``); ``None`` where that cannot be read."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        ticks = int(stat.rsplit(")", 1)[1].split()[19])  # field 22, counted after the command name
        with open("/proc/stat") as handle:
            boot = next(int(line.split()[1]) for line in handle if line.startswith("btime "))
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None
