"""Where a study stands: each replica's manifest status, with its cluster job's live state where there is one.

Example:
    >>> import tempfile
    >>> collect_status(Path(tempfile.mkdtemp()))
    []
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from deviate_cb.errors import UsageError
from deviate_cb.store.bounded_read import HostileFileError, load_json
from deviate_cb.store.manifest import RunManifest
from deviate_cb.store.run_directory import MANIFEST_FILE
from deviate_cb.store.settling import UNWRITTEN_STATUS, link_warning, settle_as_read

__all__ = ["ReplicaStatus", "collect_status", "format_status", "unwritten_note"]


@dataclass(frozen=True)
class ReplicaStatus:
    """One replica as ``deviate status`` shows it."""

    experiment: str
    variant: str
    replica: int
    seed: Optional[int]
    status: str
    backend: str = ""
    job: str = ""
    job_state: str = ""
    host: str = ""
    duration_s: Optional[float] = None


def _read(path: Path, warnings: list[str]) -> RunManifest:
    """The manifest at ``path``: one of status ``new`` when there is none yet; ``unknown`` when this user may not
    read it, ``unreadable`` when it is damaged, each after a warning naming it."""
    try:
        data = load_json(path)  # regular files only, bounded; UnicodeDecodeError is a ValueError
        if not isinstance(data, dict):
            raise ValueError(f"a JSON {type(data).__name__}, not an object")
    except FileNotFoundError:
        return _shown_as("new")
    except PermissionError:  # shared storage: its folder or the file is another user's
        where = path if _can_stat(path) else path.parent
        warnings.append(f"{where}: unreadable (permission denied); the replica is shown as 'unknown'.")
        return _shown_as("unknown")
    except (OSError, ValueError) as exc:
        if isinstance(exc, HostileFileError):
            why = exc.reason
        elif isinstance(exc, OSError) and exc.strerror:
            why = exc.strerror
        else:
            why = " ".join(str(exc).split())[:200]
        warnings.append(f"{path}: unreadable manifest ({why}); the replica is shown as 'unreadable'.")
        return _shown_as("unreadable")
    return RunManifest.from_json(data)


def _shown_as(status: str) -> RunManifest:
    """A stand-in manifest for a replica whose own cannot be read: only the ``status`` shown for it."""
    return RunManifest.from_json({"status": status})


def _replica_number(run_dir: Path) -> Optional[int]:
    """``k`` of a ``replica=<k>`` folder, ``None`` when ``k`` is not a number."""
    value = run_dir.name.partition("=")[2]
    return int(value) if value.isascii() and value.isdigit() else None


def _can_stat(path: Path) -> bool:
    try:
        path.stat()
    except PermissionError:
        return False
    except OSError:
        return True
    return True


def _listing(parent: Path, key: str, warnings: list[str]) -> Optional[list[os.DirEntry[str]]]:
    """The ``key=*`` entries of ``parent``, by name; ``None`` after a warning naming ``parent`` when it cannot be
    listed (another user's folder on shared storage)."""
    try:
        with os.scandir(parent) as entries:
            return sorted((e for e in entries if e.name.startswith(f"{key}=")), key=lambda e: e.name)
    except OSError as exc:
        why = "permission denied" if isinstance(exc, PermissionError) else (exc.strerror or type(exc).__name__)
        warnings.append(f"{parent}: unreadable ({why}); the replicas in it, if any, are not shown.")
        return None


def _folders(parent: Path, key: str, warnings: list[str]) -> list[Path]:
    """The ``key=*`` folders of ``parent``; one that is a symbolic link is named in a warning instead: nothing is
    read or written through a link (``deviate-replicate`` writes none)."""
    found = []
    for entry in _listing(parent, key, warnings) or []:
        if entry.is_symlink():
            warnings.append(f"{link_warning(entry.path)}; the replicas behind it are not shown.")
        elif entry.is_dir():
            found.append(Path(entry.path))
    return found


def _replica_dirs(out: Path, warnings: list[str]) -> Iterable[tuple[str, str, Path]]:
    for exp in _folders(out, "experiment", warnings):
        for var in _folders(exp, "variant", warnings):
            yield exp.name.partition("=")[2], var.name.partition("=")[2], var


def collect_status(out: Path, *, ask_cluster: bool = True, warnings: Optional[list[str]] = None) -> list[ReplicaStatus]:
    """Every replica under ``out`` (a ``--out`` directory), sorted by experiment, variant, replica.

    Args:
        ask_cluster: Ask Slurm (``squeue``, then ``sacct``) about replicas whose manifests say ``running``.
        warnings: Where to append one line per manifest that cannot be read (that replica is ``unreadable``).
    """
    from deviate_cb.launch.backends.slurm.jobs import SlurmQueryError, live_states, query_sacct, read_jobs_file

    sink = warnings if warnings is not None else []
    rows: list[ReplicaStatus] = []
    unwritten: list[str] = []  # why each replica settled in memory could not be recorded killed
    for experiment, variant, var_dir in _replica_dirs(out, sink):
        listing = _listing(var_dir, "replica", sink)
        if listing is None:
            continue
        jobs = read_jobs_file(var_dir).get("replicas", {})
        found = []
        numbered = [(k, Path(e.path)) for e in listing if (k := _replica_number(Path(e.path))) is not None]
        for _, run_dir in sorted(numbered):
            if run_dir.is_symlink():  # shown, never read or written through
                sink.append(f"{link_warning(str(run_dir))}; the replica is shown as 'unknown'.")
                found.append((run_dir, _shown_as("unknown"), ""))
                continue
            if not run_dir.is_dir():
                continue
            manifest = _read(run_dir / MANIFEST_FILE, sink)
            if manifest.status == "running":  # settled when its launcher died with it
                manifest = _settled(run_dir, manifest, sink, unwritten)
            found.append((run_dir, manifest, str(manifest.slurm_job_id or jobs.get(run_dir.name, ""))))
        nothing = _nothing_recorded([(run_dir, manifest) for run_dir, manifest, _ in found])
        if nothing:  # completed replicas with nothing to analyse: how to capture their metrics, once per group
            sink.append(f"experiment={experiment} variant={variant}: {nothing}")
        waiting = [job for _, m, job in found if job and m.status == "running"]
        live: dict[str, str] = {}
        ended: dict[str, str] = {}
        if waiting and ask_cluster:
            live = live_states(waiting) or {}
            gone = [j for j in waiting if j not in live]
            if gone:
                try:
                    ended = query_sacct(gone, timeout_s=10.0)
                except SlurmQueryError:
                    ended = {}
        for run_dir, manifest, job in found:
            status = "unknown" if manifest.status is None else manifest.status
            job_state = manifest.slurm_state or ""
            if status == "running" and job:
                if job in live:
                    job_state = live[job]
                    status = "queued" if job_state == "PENDING" else "running"
                elif ask_cluster:
                    job_state = ended.get(job, "UNKNOWN")
                    status = "running" if job_state in ("RUNNING", "COMPLETING") else "lost"
            status = _noted(run_dir, manifest, status, f"experiment={experiment} variant={variant}", sink)
            rows.append(
                ReplicaStatus(
                    experiment,
                    variant,
                    int(run_dir.name.partition("=")[2]),
                    manifest.seed,
                    status,
                    manifest.backend or "",
                    job,
                    job_state,
                    manifest.host or "",
                    manifest.duration_s,
                )
            )
    if unwritten:
        sink.append(unwritten_note(out, unwritten))
    return rows


def _noted(run_dir: Path, manifest: RunManifest, status: str, group: str, warnings: list[str]) -> str:
    """The status to show for a replica, after one warning each for what its ``run.json`` says that its row cannot:
    processes left running that could not be stopped (:func:`deviate_cb.store.left_running.survivors_note`), and a
    completed replica's configuration that cannot be read, shown ``unknown configuration`` as ``deviate report``
    shows it (:mod:`deviate_cb.report.reading.configurations`: never pooled).

    Example:
        >>> notes = []
        >>> null = RunManifest.from_json({"configuration": None})
        >>> _noted(Path("r"), null, "completed", "experiment=e variant=v", notes)
        'unknown configuration'
        >>> print(notes[0])  # doctest: +NORMALIZE_WHITESPACE
        r/run.json: `configuration` is null, not an object; replica r of experiment=e variant=v is shown as 'unknown
        configuration': deviate report leaves it out of the statistics (never pooled)
    """
    from deviate_cb.report.reading.configurations import UNKNOWN_CONFIGURATION
    from deviate_cb.store.configuration import configuration_of, unreadable_reason
    from deviate_cb.store.left_running import survivors_note

    where = run_dir / MANIFEST_FILE
    replica = f"replica {run_dir.name.partition('=')[2] or run_dir.name} of {group}"
    note = survivors_note(where, replica, manifest)
    if note is not None:
        warnings.append(note)
    if status != "completed":
        return status
    why = unreadable_reason(configuration_of(manifest))
    if why is None:
        return status
    warnings.append(
        f"{where}: {why}; {replica} is shown as '{UNKNOWN_CONFIGURATION}': deviate report leaves it out of the "
        "statistics (never pooled)"
    )
    return UNKNOWN_CONFIGURATION


def _settled(run_dir: Path, manifest: RunManifest, warnings: list[str], unwritten: list[str]) -> RunManifest:
    """The manifest of a ``running`` replica once settled (:func:`deviate_cb.store.settling.settle_as_read`), why
    the study could not be written appended to ``unwritten``; never raises (a warning says why instead)."""
    try:
        manifest, why = settle_as_read(run_dir, manifest, warnings, shown="shown")
    except Exception:  # recorded killed, then unreadable: shown as its manifest reads now, after a warning
        return _read(run_dir / MANIFEST_FILE, warnings)
    if why:
        unwritten.append(why)
    return manifest


def unwritten_note(out: Path, causes: list[str]) -> str:
    """The one warning for a study whose replicas were settled in memory only (it could not be written).

    Example:
        >>> print(unwritten_note(Path("runs"), ["read-only file system"] * 2))  # doctest: +NORMALIZE_WHITESPACE
        runs: the study cannot be updated here (read-only file system): 2 replicas whose launcher is gone are shown
        'killed (not written: read-only)', not completed, and their run.json still says 'running' (`deviate
        status` by a user who can write the study records them killed)
    """
    n = len(causes)
    why = ", ".join(sorted(set(causes)))
    return (
        f"{out}: the study cannot be updated here ({why}): {n} replica{'s' * (n != 1)} whose launcher is gone "
        f"{'are' if n != 1 else 'is'} shown '{UNWRITTEN_STATUS}', not completed, and {'their' if n != 1 else 'its'} "
        f"run.json still says 'running' (`deviate status` by a user who can write the study records "
        f"{'them' if n != 1 else 'it'} killed)"
    )


def _nothing_recorded(replicas: list[tuple[Path, RunManifest]]) -> str:
    """:func:`deviate_cb.store.metric_hint.nothing_recorded_text` of a group's completed replicas."""
    from deviate_cb.store.metric_hint import nothing_recorded_text

    completed = [(run_dir, m) for run_dir, m in replicas if m.status == "completed"]
    given = any(m.recorded("output_metrics") for _, m in completed)
    trainer = any(m.mode == "trainer" for _, m in completed)
    return nothing_recorded_text([run_dir for run_dir, _ in completed], regex_given=given, trainer=trainer)


def format_status(rows: list[ReplicaStatus], out: str) -> str:
    """A plain table and a summary line.

    Example:
        >>> print(format_status([ReplicaStatus("mlp", "algo", 0, 0, "queued", "slurm", "12_0", "PENDING")], "runs"))
        experiment  variant  replica  seed  status  backend  job   job state  host  duration
        mlp         algo     0        0     queued  slurm    12_0  PENDING
        runs: 1 replica: 1 queued
    """
    if not rows:
        raise UsageError(f"`DIR` holds no replica run directories (experiment=*/variant=*/replica=*). Received: {out}.")
    header = ("experiment", "variant", "replica", "seed", "status", "backend", "job", "job state", "host", "duration")
    table = [header] + [
        (
            r.experiment,
            r.variant,
            str(r.replica),
            "" if r.seed is None else str(r.seed),
            r.status,
            r.backend,
            r.job,
            r.job_state,
            r.host,
            "" if r.duration_s is None else f"{r.duration_s:.1f} s",
        )
        for r in rows
    ]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in table]
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.status] = counts.get(r.status, 0) + 1
    summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    lines.append(f"{out}: {len(rows)} replica{'s' * (len(rows) != 1)}: {summary}")
    return "\n".join(lines)
