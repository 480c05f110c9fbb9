"""The processes of an earlier attempt of a replica that still run: found, proven the replica's, and stopped.

Example:
    >>> import tempfile
    >>> live_processes(Path(tempfile.mkdtemp()))
    []
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any, Optional

from deviate_cb.launch.ownership import signal_if_ours, why_not_ours
from deviate_cb.store.pids import bad_pid_line, bad_pids
from deviate_cb.store.processes import is_local_here, process_alive, recorded_processes
from deviate_cb.store.run_directory import RunDirectory
from deviate_cb.store.settling import recorded_manifest

__all__ = ["earlier_processes", "live_processes", "stop_processes"]


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
    recorded = recorded_manifest(RunDirectory(run_dir))
    if recorded is None or not is_local_here(recorded[0], host):
        return [], []
    ours: list[tuple[int, Any]] = []
    where = RunDirectory(run_dir).manifest_path
    refused = [f"{bad_pid_line(where, field, value)}: ignored" for field, value in bad_pids(recorded[0])]
    for pid, start in recorded_processes(recorded[0]):
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
