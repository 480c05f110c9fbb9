"""Settle a ``running`` replica whose launcher and processes are gone: recorded ``killed``, or so in memory only.

Example:
    >>> Settlement("gone", unwritten="read-only file system").status
    'killed (not written: read-only)'
"""

from __future__ import annotations

import datetime as _dt
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from deviate_cb.store.manifest import LaunchEnd, RunManifest
from deviate_cb.store.pids import bad_pid_line, bad_pids, is_pid
from deviate_cb.store.processes import alive_processes, is_local_here, process_alive
from deviate_cb.store.run_directory import MANIFEST_FILE, RunDirectory, iso_time, read_run_manifest

__all__ = [
    "LOST_REASON",
    "UNWRITTEN_STATUS",
    "Settlement",
    "compact_what_it_left",
    "link_warning",
    "linked_partition",
    "recorded_manifest",
    "settle_as_read",
    "settle_replica",
]

LOST_REASON = "the launcher (pid {pid}) is gone and so are the replica's processes: lost before it ended"
UNWRITTEN_STATUS = "killed (not written: read-only)"
_PARTITION_KEYS = ("experiment", "variant", "replica")


@dataclass(frozen=True)
class Settlement:
    """What :func:`settle_replica` found for a ``running`` replica of this host.

    ``reason`` says why it is ``killed`` (``""``: it stays as recorded); ``unwritten`` why that could not be
    recorded in its manifest (``"read-only file system"``, ``"permission denied"``; ``""``: it was), so the readers
    show it :data:`UNWRITTEN_STATUS`, settled in memory only; ``warnings`` has one line per process id field of
    its ``run.json`` that is not a process id.

    Example:
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


def settle_as_read(
    run_dir: Path, manifest: RunManifest, warnings: list[str], *, shown: str = "listed"
) -> tuple[RunManifest, str]:
    """The manifest of a ``running`` replica as ``deviate status`` and ``deviate report`` show it, and why it could
    not be written (``""`` where it was, or nothing was settled).

    Re-read once recorded ``killed`` (:func:`settle_replica`); a copy marked :data:`UNWRITTEN_STATUS` when the
    study could not be written; as it is otherwise. Never raises for settling: a warning says why it was not
    checked (an error, a partition folder that is a symbolic link), and the replica is ``shown`` (a verb) running.

    Example:
        >>> import tempfile
        >>> notes = []
        >>> running = RunManifest.from_json({"status": "running"})
        >>> manifest, unwritten = settle_as_read(Path(tempfile.mkdtemp()), running, notes)
        >>> manifest.status, unwritten
        ('running', '')
    """
    where = os.path.join(run_dir, MANIFEST_FILE)
    if (link := linked_partition(run_dir)) is not None:
        warnings.append(
            f"{where}: says 'running' and is reached through the symbolic link {link}; it is not checked for a "
            f"launcher that is gone (nothing is written through links) and is {shown} as running."
        )
        return manifest, ""
    try:
        settled = settle_replica(run_dir)
    except Exception as exc:  # reading goes on: the replica is shown as its manifest says
        why = _printable(" ".join(str(exc).replace(os.fspath(run_dir), "the run").split()))[:200]
        warnings.append(
            f"{where}: says 'running' and could not be checked for a launcher that is gone "
            f"({type(exc).__name__}: {why}); it is {shown} as running."
        )
        return manifest, ""
    if settled is None:
        return manifest, ""
    warnings.extend(settled.warnings)
    if settled.status == "killed":
        return read_run_manifest(where), ""  # as recorded now: killed, with the reason
    if settled.status == UNWRITTEN_STATUS:
        shown_as = {**manifest.to_json(), "status": UNWRITTEN_STATUS, "reason": settled.reason, "error": settled.reason}
        return RunManifest.from_json(shown_as), settled.unwritten
    return manifest, ""


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
    recorded = recorded_manifest(run)
    if recorded is None:
        return None
    manifest, written_at = recorded
    if manifest.status != "running" or not is_local_here(manifest, host):
        return None
    launcher = manifest.to_json().get("launcher_pid")  # as read: one that is not a process id is warned about
    warnings = tuple(
        f"{bad_pid_line(run.manifest_path, field, value)}: "
        + ("its launcher cannot be checked: shown as recorded ('running')" if field == "launcher_pid" else "ignored")
        for field, value in bad_pids(manifest)
    )
    nothing = Settlement(warnings=warnings) if warnings else None
    started = _epoch(manifest.started_at)
    if not is_pid(launcher) or process_alive(launcher, not_after=started):
        return nothing
    if alive_processes(manifest, written_at, host):
        return nothing
    reason = LOST_REASON.format(pid=launcher)
    try:
        run.record(LaunchEnd(status="killed", reason=reason, error=reason, ended_at=iso_time()))
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


def recorded_manifest(run: RunDirectory) -> Optional[tuple[RunManifest, Optional[float]]]:
    """The manifest of ``run`` and when it was last written; ``None`` when it cannot be read (the readers say so).

    Example:
        >>> import tempfile
        >>> recorded_manifest(RunDirectory(Path(tempfile.mkdtemp())))[0].is_empty
        True
    """
    try:
        manifest = run.manifest()
    except Exception:  # unreadable or newer
        return None
    try:
        written_at: Optional[float] = run.manifest_path.stat().st_mtime
    except OSError:
        written_at = None
    return manifest, written_at


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


def _printable(text: str) -> str:
    """``text`` with what a terminal would act on (control characters) shown as ``?``: a store is untrusted."""
    return "".join(char if char.isprintable() else "?" for char in text)
