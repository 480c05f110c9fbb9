"""Who still owns a replica: its launcher and its processes, alive or gone.

A launcher that is killed outright (``SIGKILL``, a crashed login node) cannot record anything: its replicas'
manifests still say ``running``. Whoever looks next (``deviate status``, ``deviate report``, a rerun) settles
them with :func:`settle_replica`: a replica of the ``local`` backend started on this host whose launcher is gone
and none of whose recorded processes (``pid``, the ``bootstrap`` list) is alive is recorded ``killed`` with the
reason, so it is rerun and never counted as running, and the parts it flushed are compacted into its files. A
process id that was reused since (a process started after the replica) does not count as alive. Replicas on a
cluster (Slurm, Ray) are left to their backend, which asks the scheduler; replicas of another host cannot be
checked from here and are left alone. A reader that cannot write the store (a read-only mount, another user's
study) settles in memory: :class:`Settlement` says so, and the readers show :data:`UNWRITTEN_STATUS`. A process id
field that is not a process id (:func:`deviate_cb.launch.pids.pid_problem`: ``2**70``, ``-5``, a string) is
never looked up: one warning line names the file, and a replica whose ``launcher_pid`` is one stays as recorded.

:func:`earlier_processes` gives the processes of an earlier attempt that are still running (after a launcher
was killed, an orphaned replica may still write): a rerun stops them before it starts a new attempt
(:func:`stop_processes`), but only those proven to be the replica's
(:func:`deviate_cb.launch.ownership.why_not_ours`: the recorded start time, the user, ``DEVIATE_RUN_DIR``); a
``run.json`` may name any process, and the others are named and left alone.

That a launcher killed outright leaves no replica running is :mod:`deviate_cb.launch.watchdog`'s.

Example:
    >>> import os
    >>> process_alive(os.getpid()), process_alive(2**22 + 12345)
    (True, False)
"""

from __future__ import annotations

import datetime as _dt
import os
import signal
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from deviate_cb.launch.ownership import signal_if_ours, start_ticks, why_not_ours
from deviate_cb.launch.pids import bad_pid_line, bad_pids, is_pid
from deviate_cb.store.run_directory import RunDirectory, iso_time

__all__ = [
    "LOST_REASON",
    "UNWRITTEN_STATUS",
    "Settlement",
    "compact_what_it_left",
    "earlier_processes",
    "linked_partition",
    "live_processes",
    "process_alive",
    "settle_replica",
    "stop_processes",
]

LOST_REASON = "the launcher (pid {pid}) is gone and so are the replica's processes: lost before it ended"
UNWRITTEN_STATUS = "killed (not written: read-only)"


@dataclass(frozen=True)
class Settlement:
    """What :func:`settle_replica` found for a ``running`` replica of this host.

    ``reason`` says why it is ``killed`` (``""``: it stays as recorded); ``unwritten`` why that could not be
    recorded in its manifest (``"read-only file system"``, ``"permission denied"``; ``""``: it was), so the readers
    show it :data:`UNWRITTEN_STATUS`, settled in memory only; ``warnings`` has one line per process id field of
    its ``run.json`` that is not a process id.

    Example:
        >>> Settlement("gone", unwritten="read-only file system").status
        'killed (not written: read-only)'
        >>> Settlement(warnings=("run.json: `pid` is not a process id",)).status is None
        True
    """

    reason: str = ""
    unwritten: str = ""
    warnings: tuple[str, ...] = ()

    @property
    def status(self) -> Optional[str]:
        """The status to show: ``killed``, :data:`UNWRITTEN_STATUS`, or ``None`` (as its manifest says)."""
        if not self.reason:
            return None
        return UNWRITTEN_STATUS if self.unwritten else "killed"


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


def live_processes(run_dir: Path, host: Optional[str] = None) -> list[int]:
    """The processes ``run_dir``'s manifest records (``pid``, ``bootstrap[].pid``) still alive on this host and
    proven to be the replica's (:func:`earlier_processes`)."""
    return [pid for pid, _ in earlier_processes(run_dir, host)[0]]


def earlier_processes(run_dir: Path, host: Optional[str] = None) -> tuple[list[tuple[int, Any]], list[str]]:
    """The processes ``run_dir``'s manifest records still alive on this host: ``(pid, recorded start)`` of those
    proven to be the replica's, and one line for each other one, saying why it is not and is left alone.

    A process whose start time is not the one recorded (a reused id) is one of the others.

    Example:
        >>> import tempfile
        >>> earlier_processes(Path(tempfile.mkdtemp()))
        ([], [])
    """
    recorded = _recorded(RunDirectory(run_dir))
    if recorded is None or not _local_here(recorded[0], host):
        return [], []
    ours: list[tuple[int, Any]] = []
    where = RunDirectory(run_dir).manifest_path
    refused = [f"{bad_pid_line(where, field, value)}: ignored" for field, value in bad_pids(recorded[0])]
    for pid, start in _recorded_processes(recorded[0]):
        if pid == os.getpid() or not process_alive(pid):
            continue
        why = why_not_ours(pid, run_dir, start)
        if why is None:
            ours.append((pid, start))
        else:
            refused.append(
                f"the process its run.json records (pid {pid}) is not proven to be its own ({why}): left alone"
            )
    return ours, refused


def settle_replica(run_dir: Path, host: Optional[str] = None) -> Optional[Settlement]:
    """Record a ``running`` replica whose launcher and processes are gone as ``killed``; say what was found.

    ``None`` when there is nothing to settle or say (not running, another host or backend, or still alive), and
    when the run directory is reached through a symbolic link (:func:`linked_partition`): nothing is ever written
    through a link, as ``deviate-replicate`` refuses them. When the manifest cannot be written (a read-only
    store) the :class:`Settlement` says why, and nothing is compacted; a ``launcher_pid`` that is not a process id
    leaves the replica as recorded, with a warning.

    Example:
        >>> import json, socket, tempfile
        >>> run_dir = Path(tempfile.mkdtemp())
        >>> manifest = {"status": "running", "host": socket.gethostname(), "launcher_pid": 2**70}
        >>> _ = (run_dir / "run.json").write_text(json.dumps(manifest))
        >>> settle_replica(run_dir).warnings[0].endswith("cannot be checked: shown as recorded ('running')")
        True
    """
    if linked_partition(run_dir) is not None:
        return None
    run = RunDirectory(run_dir)
    recorded = _recorded(run)
    if recorded is None:
        return None
    manifest, written_at = recorded
    if manifest.get("status") != "running" or not _local_here(manifest, host):
        return None
    launcher = manifest.get("launcher_pid")
    warnings = tuple(
        f"{bad_pid_line(run.manifest_path, field, value)}: "
        + ("its launcher cannot be checked: shown as recorded ('running')" if field == "launcher_pid" else "ignored")
        for field, value in bad_pids(manifest)
    )
    nothing = Settlement(warnings=warnings) if warnings else None
    started = _epoch(manifest.get("started_at"))
    if not is_pid(launcher) or process_alive(launcher, not_after=started):
        return nothing
    if _alive_processes(manifest, written_at, host):
        return nothing
    reason = LOST_REASON.format(pid=launcher)
    try:
        run.update_manifest(status="killed", reason=reason, error=reason, ended_at=iso_time())
    except OSError as exc:  # a read-only store (a mount, another user's study): settled in memory only
        return Settlement(reason, unwritten=(exc.strerror or type(exc).__name__).lower(), warnings=warnings)
    compact_what_it_left(run)
    return Settlement(reason, warnings=warnings)


def compact_what_it_left(run: RunDirectory) -> int:
    """Compact the parts a replica whose processes have ended left behind (it died before its own end of run
    compacted them: :meth:`~deviate_cb.store.run_directory.RunDirectory.compact_parts`); return the metric rows
    merged. Never raises: parts that cannot be compacted now (a full disk) stay, and are read as they are; so
    do the parts of a run reached through a symbolic link (:func:`linked_partition`)."""
    if linked_partition(run.path) is not None:
        return 0
    try:
        return run.compact_parts()
    except Exception:
        return 0


_PARTITION_KEYS = ("experiment", "variant", "replica")


def link_warning(path: str) -> str:
    """The start of the warning for a partition folder that is a symbolic link (the readers do not follow it).

    Example:
        >>> link_warning("/nowhere/experiment=e").endswith("(deviate-replicate refuses links there too)")
        True
    """
    try:
        target = f" (to {os.readlink(path)})"
    except OSError:
        target = ""
    return (
        f"{path}: a symbolic link{target}, not followed: deviate reads and writes a study only in its own folders "
        "(deviate-replicate refuses links there too)"
    )


def linked_partition(run_dir: Path) -> Optional[Path]:
    """The first of ``run_dir``'s partition folders (``replica=``, ``variant=``, ``experiment=``, from the inside
    out) that is a symbolic link, or ``None``. A run reached through one is never written (settled, compacted),
    and the readers do not follow one: ``deviate-replicate`` refuses to write through them
    (:func:`deviate_cb.launch.outdir.check_store_path`), so what is behind it is not the store's.

    Example:
        >>> import tempfile
        >>> root = Path(tempfile.mkdtemp())
        >>> (root / "experiment=e" / "variant=v" / "replica=0").mkdir(parents=True)
        >>> (root / "experiment=f").symlink_to(root / "experiment=e")
        >>> linked_partition(root / "experiment=e" / "variant=v" / "replica=0") is None
        True
        >>> linked_partition(root / "experiment=f" / "variant=v" / "replica=0") == root / "experiment=f"
        True
    """
    path = Path(os.path.abspath(run_dir))
    for key in reversed(_PARTITION_KEYS):
        if not path.name.startswith(f"{key}="):
            continue
        if path.is_symlink():
            return path
        path = path.parent
    return None


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
    alive = []
    for pid, start in _recorded_processes(manifest):
        if pid in (1, os.getpid()) or not process_alive(pid, not_after=written_at):  # a replica is never init
            continue
        live = start_ticks(pid) if isinstance(start, int) else None
        if live is None or live == start:  # a process that started at another time is a reused id
            alive.append(pid)
    return alive


def _recorded_processes(manifest: Mapping[str, Any]) -> list[tuple[int, Any]]:
    """``(pid, start)`` of each process the manifest records (``pid``/``pid_start``, ``bootstrap[]``), once each."""
    pairs = [(manifest.get("pid"), manifest.get("pid_start"))]
    listed = manifest.get("bootstrap")
    if isinstance(listed, list):
        pairs += [(entry.get("pid"), entry.get("start")) for entry in listed if isinstance(entry, Mapping)]
    found: dict[int, Any] = {}
    for pid, start in pairs:
        if is_pid(pid) and found.get(pid) is None:
            found[pid] = start
    return list(found.items())


def stop_processes(processes: list[tuple[int, Any]], run_dir: Path, grace_s: float = 5.0) -> list[int]:
    """SIGTERM the ``(pid, recorded start)`` processes of the replica of ``run_dir``, SIGKILL what is left after
    ``grace_s``; return the pids that had to be killed. Each signal goes only to a process proven, right before,
    to be that replica's (:func:`deviate_cb.launch.ownership.signal_if_ours`).

    Example:
        >>> stop_processes([(1, 0)], Path("/nonexistent"), grace_s=0.0)
        []
    """
    sent = [(pid, start) for pid, start in processes if signal_if_ours(pid, run_dir, start, signal.SIGTERM)]
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(process_alive(pid) for pid, _ in sent):
        time.sleep(0.05)
    return [pid for pid, start in sent if process_alive(pid) and signal_if_ours(pid, run_dir, start, signal.SIGKILL)]


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
