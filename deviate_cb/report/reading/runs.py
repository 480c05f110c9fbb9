"""Find the runs of a study directory and read their manifests.

Example:
    >>> import tempfile
    >>> from deviate_cb.store.manifest import LaunchEnd
    >>> from deviate_cb.store.run_directory import RunDirectory, run_path
    >>> root = Path(tempfile.mkdtemp())
    >>> _ = RunDirectory(run_path(root, "mlp", "algo", 0)).record(LaunchEnd(status="completed"))
    >>> [(r.experiment, r.variant, r.replica, r.status) for r in find_runs(root)]
    [('mlp', 'algo', '0', 'completed')]
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from deviate_cb.errors import SchemaVersionError, UsageError
from deviate_cb.report.reading.metrics.footers import series_problem
from deviate_cb.report.text.safe import reason, strip_styles
from deviate_cb.store.configuration import configuration_of
from deviate_cb.store.footer_summary import valid_summary
from deviate_cb.store.left_running import survivors_note
from deviate_cb.store.manifest import RunManifest
from deviate_cb.store.run_directory import MANIFEST_FILE, METRICS_FILE, read_run_manifest
from deviate_cb.store.settling import (
    UNWRITTEN_STATUS,
    compact_what_it_left,
    link_warning,
    linked_partition,
    settle_as_read,
)

__all__ = [
    "RUN_LAYOUT",
    "RunDirectories",
    "RunRecord",
    "find_runs",
    "partition_base",
    "read_runs",
    "run_directories",
    "switches_on",
]

RUN_LAYOUT = "<DIR>/experiment=<name>/variant=<v>/replica=<k>/run.json"
_KEYS = ("experiment", "variant", "replica")
_EXIT_CODE_KEYS = ("exit_code", "returncode", "exit_status")
# Most specific first: the launcher records the exception as one line (`exception`), a bad trainer spec
# (`trainer_error`), why the replica ended (`reason`: exit code, signal, timeout) and the stderr tail (`error`).
_ERROR_KEYS = ("exception", "trainer_error", "reason", "error", "error_tail", "stderr_tail")


@dataclass(frozen=True)
class RunRecord:
    """One run as its directory and manifest describe it.

    Attributes:
        path: The run directory.
        experiment: Partition value ``experiment=``.
        variant: Partition value ``variant=``.
        replica: Partition value ``replica=`` (as written in the path).
        status: ``completed``, ``running``, ``failed``, ``incomplete`` (exited 0 before its training ended),
            ``timeout``, ``killed``, or ``unknown`` when the manifest is missing or unreadable.
        exit_code: The replica's exit status, when the manifest records one.
        signal: The name of the signal that ended it (``SIGKILL``), when one did.
        metrics_summary: The manifest's copy of the metrics file's series summary (see
            :mod:`deviate_cb.store.footer_summary`), when the writer left one.
        error: The first informative line of the recorded error, when there is one.
        configuration: What the replica trained (:func:`deviate_cb.store.configuration.configuration_of`), when
            the manifest records it; replicas of one group are pooled only when theirs agree.
        determinism_on: The determinism switches its manifest records in effect (``"torch deterministic
            algorithms, TensorFlow op determinism"``), ``None`` when none was: a replica of ``impl`` or
            ``algo+impl`` with one on measured no implementation noise.
    """

    path: Path
    experiment: str
    variant: str
    replica: str
    status: str
    exit_code: Optional[int] = None
    error: Optional[str] = None
    signal: Optional[str] = None
    metrics_summary: Optional[dict[str, Any]] = None
    configuration: Optional[dict[str, Any]] = None
    determinism_on: Optional[str] = None

    @property
    def metrics_path(self) -> Path:
        return self.path / METRICS_FILE

    @property
    def completed(self) -> bool:
        return self.status == "completed"

    @property
    def sort_key(self) -> tuple[str, str, int, str]:
        number = int(self.replica) if self.replica.isdigit() else -1
        return (self.experiment, self.variant, number, self.replica)


def partition_base(directory: Path) -> Path:
    """The folder above the Hive partitions: ``directory`` without trailing ``key=value`` parts.

    Example:
        >>> partition_base(Path("/runs/experiment=mlp/variant=algo")).as_posix()
        '/runs'
    """
    path = Path(os.path.abspath(directory))
    while "=" in path.name and path.name.split("=", 1)[0] in _KEYS:
        path = path.parent
    return path


def find_runs(directory: Path, warnings: Optional[list[str]] = None) -> list[RunRecord]:
    """Every run under ``directory``, sorted by experiment, variant and replica.

    Args:
        directory: A study directory (or a folder above it, or an ``experiment=``/``variant=`` folder).
        warnings: Where to append one line per unreadable manifest (that run gets status ``unknown``).

    Raises:
        SchemaVersionError: A manifest was written by a newer deviate-cb.
    """
    return read_runs(run_directories(directory), warnings)


class RunDirectories(list[tuple[Path, tuple[str, str, str]]]):
    """The run directories :func:`run_directories` found, and ``problems``: one warning line per partition folder
    it could not search (unreadable) or did not follow (a symbolic link), which :func:`read_runs` reports."""

    problems: list[str]

    def __init__(self) -> None:
        super().__init__()
        self.problems = []


def run_directories(directory: Path) -> RunDirectories:
    """The run directories under ``directory`` and their partition values, without reading any manifest.

    A directory counts as a run when it sits at ``experiment=/variant=/replica=`` and holds ``run.json`` or
    ``metrics.parquet``, or cannot be listed (it is then read as unreadable: status ``unknown``). Folders whose
    name starts with a dot are not searched; a partition folder that is a symbolic link is not followed, and an
    ``experiment=`` or ``variant=`` folder that cannot be read is skipped; each is named in ``problems``.

    Raises:
        UsageError: ``directory`` itself cannot be read (permission denied).

    Example:
        >>> import tempfile
        >>> from deviate_cb.store.manifest import LaunchStart
        >>> from deviate_cb.store.run_directory import RunDirectory, run_path
        >>> root = Path(tempfile.mkdtemp())
        >>> _ = RunDirectory(run_path(root, "mlp", "algo", 3)).record(LaunchStart(status="running"))
        >>> [keys for _, keys in run_directories(root)]
        [('mlp', 'algo', '3')]
    """
    found = RunDirectories()
    root = os.path.abspath(directory)
    stack = [root]
    while stack:
        current = stack.pop()
        keys = _partition_keys(current)
        try:
            with os.scandir(current) as listing:
                entries = sorted(listing, key=lambda entry: entry.name)
        except NotADirectoryError:
            continue
        except OSError as exc:
            if keys is not None:  # a run that cannot be listed: read as such (status unknown), never left out
                found.append((Path(current), keys))
            elif current == root and isinstance(exc, PermissionError):
                raise UsageError(
                    f"`DIR` cannot be read (permission denied). Received: DIR={os.fspath(directory)!r}."
                ) from None
            elif current == root or _partition_key(os.path.basename(current)):
                found.problems.append(
                    f"{current}: unreadable ({_why(exc)}); the runs in it, if any, are left out of every count."
                )
            continue
        if keys is not None:
            if any(entry.name in (MANIFEST_FILE, METRICS_FILE) for entry in entries):
                found.append((Path(current), keys))
            continue
        below = []
        for entry in entries:
            if entry.name.startswith(".") or not _is_dir(entry):
                continue
            if entry.is_symlink() and _partition_key(entry.name):
                found.problems.append(_link_problem(entry.path))
                continue
            if not entry.is_symlink():  # a link to a folder that is not a partition: not searched, as before
                below.append(entry.path)
        stack.extend(reversed(below))  # depth first, in name order
    return found


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def _partition_key(name: str) -> bool:
    """Whether a folder name is a partition of the run layout (``experiment=...``, ``variant=...``, ``replica=...``)."""
    key, sep, value = name.partition("=")
    return bool(sep) and key in _KEYS and bool(value)


def _link_problem(path: str) -> str:
    return f"{link_warning(path)}; the runs behind it are left out."


def _why(exc: OSError) -> str:
    """``permission denied``, or the error's own words, for a warning."""
    if isinstance(exc, PermissionError):
        return "permission denied"
    return exc.strerror.lower() if isinstance(exc.strerror, str) and exc.strerror else type(exc).__name__


def read_runs(
    directories: list[tuple[Path, tuple[str, str, str]]], warnings: Optional[list[str]] = None
) -> list[RunRecord]:
    """The runs of :func:`run_directories`, with their manifests read, sorted by experiment, variant, replica.

    Raises:
        SchemaVersionError: A manifest was written by a newer deviate-cb.
    """
    sink = warnings if warnings is not None else []
    sink.extend(getattr(directories, "problems", ()))
    return sorted((_read_run(path, keys, sink) for path, keys in directories), key=lambda r: r.sort_key)


# Where a live run appends its rows (deviate_cb.store.parts); what is left there once it ended is compacted here.
_PARTS_DIRS = ("metrics.parts", "timings.parts")


def _partition_keys(path: str) -> Optional[tuple[str, str, str]]:
    parts = path.rstrip(os.sep).split(os.sep)[-3:]
    if len(parts) != 3:
        return None
    values = []
    for key, part in zip(_KEYS, parts, strict=True):
        name, sep, value = part.partition("=")
        if not sep or name != key or not value:
            return None
        values.append(value)
    return values[0], values[1], values[2]


def _read_run(path: Path, keys: tuple[str, str, str], warnings: list[str]) -> RunRecord:
    manifest_path = os.path.join(path, MANIFEST_FILE)
    try:
        manifest = read_run_manifest(manifest_path)
        if manifest.is_empty and not os.path.isfile(manifest_path):
            warnings.append(f"{manifest_path}: no manifest; the run is listed as status 'unknown'.")
            return RunRecord(path, *keys, status="unknown", error="no run.json")
        if manifest.status == "running":  # settled when its launcher and processes are gone
            manifest = _settle(path, manifest, warnings)
    except SchemaVersionError:
        raise
    except PermissionError:  # shared storage: this user may not read the run (its folder, or its manifest)
        return _unreadable(path if not _can_stat(manifest_path) else Path(manifest_path), path, keys, warnings)
    except (UsageError, OSError, UnicodeDecodeError) as exc:
        why = reason(exc, manifest_path).rstrip(".")
        warnings.append(f"{manifest_path}: unreadable manifest ({why}); the run is listed as status 'unknown'.")
        return RunRecord(path, *keys, status="unknown", error="unreadable run.json")
    status = manifest.to_json().get("status")  # as read: a value of another type is named in a warning below
    metrics = path / METRICS_FILE
    if status == "completed" and not os.access(metrics, os.R_OK) and os.path.lexists(metrics):
        return _unreadable(metrics, path, keys, warnings)  # its statistics cannot be read: counted, not dropped
    if status not in ("running", UNWRITTEN_STATUS) and any(os.path.isdir(path / name) for name in _PARTS_DIRS):
        _compact_left_parts(path, warnings)  # (a run settled in memory only is in a study that cannot be written)
    summary = manifest.to_json().get("metrics_summary")  # as read: valid_summary checks it
    if (copy := valid_summary(summary)) is not None and (problem := series_problem(copy)) is not None:
        warnings.append(f"{manifest_path}: `metrics_summary` is malformed ({problem}); {METRICS_FILE} is read instead.")
        summary = None
    if status is not None and not (isinstance(status, str) and status):  # a store is input: say what was found
        found = f"a JSON {type(status).__name__}" if not isinstance(status, str) else "empty"
        warnings.append(f"{manifest_path}: `status` is {found}, expected a string; the run is listed as 'unknown'.")
    if (left := survivors_note(Path(manifest_path), _replica_words(keys), manifest)) is not None:
        warnings.append(left)  # processes it left that could not be stopped may still write into its folder
    return RunRecord(
        path,
        *keys,
        status=status if isinstance(status, str) and status else "unknown",
        exit_code=_exit_code(manifest),
        error=_first_error_line(manifest),
        signal=manifest.signal,
        metrics_summary=summary if isinstance(summary, dict) else None,
        configuration=configuration_of(manifest),
        determinism_on=switches_on(manifest),
    )


def _replica_words(keys: tuple[str, str, str]) -> str:
    """``replica 2 of experiment=e variant=v`` for a run's partition keys ``(experiment, variant, replica)``."""
    experiment, variant, replica = keys
    return f"replica {replica} of experiment={experiment} variant={variant}"


def switches_on(manifest: RunManifest) -> Optional[str]:
    """The determinism switches ``manifest`` records in effect, as a phrase; ``None`` when none was on.

    Example:
        >>> from deviate_cb.store.manifest import RunManifest as M
        >>> switches_on(M.from_json({"determinism": {"in_effect": {"tensorflow": {"op_determinism": True}}}}))
        'TensorFlow op determinism'
        >>> switches_on(M.from_json({"determinism": {"in_effect": {"torch": {"deterministic_algorithms": False}}}}))
    """
    record = manifest.determinism
    in_effect = record.get("in_effect") if record is not None else None
    if not isinstance(in_effect, Mapping):
        return None
    found = []
    torch_state, tf_state, jax_state = (in_effect.get(key) for key in ("torch", "tensorflow", "jax"))
    if isinstance(torch_state, Mapping) and torch_state.get("deterministic_algorithms") is True:
        found.append("torch deterministic algorithms")
    if isinstance(torch_state, Mapping) and torch_state.get("cudnn_deterministic") is True:
        found.append("cuDNN determinism")
    if isinstance(tf_state, Mapping) and tf_state.get("op_determinism") is True:
        found.append("TensorFlow op determinism")
    if isinstance(jax_state, Mapping) and jax_state.get("xla_deterministic_ops") is True:
        found.append("XLA deterministic ops")
    return ", ".join(found) or None


def _unreadable(what: Path, path: Path, keys: tuple[str, str, str], warnings: list[str]) -> RunRecord:
    """The record of a run this user may not read (``what``: its folder or a file of it), after one warning."""
    warnings.append(f"{what}: unreadable (permission denied); the run is listed as status 'unknown'.")
    return RunRecord(path, *keys, status="unknown", error="unreadable: permission denied")


def _can_stat(path: str) -> bool:
    """Whether ``path``'s folder lets this user look it up (a file there may still be unreadable itself)."""
    try:
        os.stat(path)
    except PermissionError:
        return False
    except OSError:
        return True
    return True


def _compact_left_parts(path: Path, warnings: list[str]) -> None:
    """Merge the parts that a run which is no longer running left uncompacted (it died, or its disk was full
    at its end) into its files, as its settler would; say so when some cannot be merged."""
    import warnings as python_warnings

    if (link := linked_partition(path)) is not None:
        warnings.append(
            f"{path}: its parts are not merged into its files, since it is reached through the symbolic link {link} "
            "(nothing is written through links); the rows in them are left out."
        )
        return
    from deviate_cb.store.parts import list_parts
    from deviate_cb.store.run_directory import RunDirectory

    run = RunDirectory(path)
    with python_warnings.catch_warnings(record=True) as caught:
        python_warnings.simplefilter("always")
        compact_what_it_left(run)
    warnings.extend(str(w.message).removeprefix("deviate-cb: ") for w in caught)
    attempt = run.attempt()
    for name in _PARTS_DIRS:
        table = path / (name.removesuffix(".parts") + ".parquet")
        left = [p for p in list_parts(table) if p.attempt == attempt]
        if left:
            warnings.append(
                f"{path / name}: {len(left)} part(s) of this run could not be merged into {table.name} (is the "
                "study read-only or the disk full?); the rows in them are left out."
            )


def _settle(path: Path, manifest: RunManifest, warnings: list[str]) -> RunManifest:
    """The manifest of a ``running`` replica as settled (:func:`deviate_cb.store.settling.settle_as_read`); where
    the study cannot be written (read-only), after one warning for the whole study."""
    manifest, unwritten = settle_as_read(path, manifest, warnings)
    if unwritten:
        study = path.parent.parent.parent
        note = f"{study}: the study cannot be updated here ({unwritten}): runs whose launcher is gone are "
        if not any(line.startswith(note) for line in warnings):  # once for the study
            warnings.append(
                f"{note}listed '{UNWRITTEN_STATUS}' (not completed), and their run.json still says 'running' "
                "(`deviate status` by a user who can write the study records them killed)"
            )
    return manifest


def _exit_code(manifest: RunManifest) -> Optional[int]:
    data = manifest.to_json()  # as read: manifests of older versions name it `returncode` or `exit_status`
    for key in _EXIT_CODE_KEYS:
        value = data.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def _first_error_line(manifest: RunManifest) -> Optional[str]:
    # An incomplete run exited 0: its `reason` says why it is not completed (and ends with the exception, if any).
    keys = ("reason", *_ERROR_KEYS) if manifest.status == "incomplete" else _ERROR_KEYS
    data = manifest.to_json()  # as read: older manifests name a stderr tail `error_tail`, some as a list of lines
    for key in keys:
        value = data.get(key)
        if isinstance(value, (list, tuple)):
            value = "\n".join(str(v) for v in value)
        if not isinstance(value, str) or not value.strip():
            continue
        lines = [line.strip() for line in value.splitlines() if line.strip()]
        # A Python traceback says what happened on its last line, not its first (a coloured one too).
        line = lines[-1] if strip_styles(lines[0]).startswith("Traceback (most recent call last)") else lines[0]
        return line if len(line) <= 160 else line[:157] + "..."
    return None
