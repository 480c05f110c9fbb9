"""Read W&B offline runs (``offline-run-*`` folders of ``run-<id>.wandb`` logs) as tracker runs, without a server.

Example:
    >>> import tempfile
    >>> logs = Path(tempfile.mkdtemp())
    >>> read_wandb(logs)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    deviate_cb.errors.UsageError: `LOGDIR` holds no W&B run log (run-<id>.wandb)...
"""

from __future__ import annotations

import hashlib
import json
import math
import struct
from pathlib import Path
from typing import Any, Optional

import numpy as np

from deviate_cb.errors import UsageError, require
from deviate_cb.trackers.importing.imported import TrackerRun
from deviate_cb.trackers.importing.log_files import LogFileError, read_log_file, walk_logs

__all__ = ["STEP_KEYS", "read_wandb", "wandb_records"]

#: History keys that say the step of a row, first found wins (Lightning's WandbLogger logs its global step as
#: ``trainer/global_step``; W&B's own ``_step`` counts ``log`` calls).
STEP_KEYS = ("trainer/global_step", "_step")
_MAGIC = b":W&B"
_BLOCK = 32768  # a LevelDB-style log: 32 KiB blocks of records, each with a 7-byte header
_HEADER = 7
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4


def read_wandb(logdir: Path, notes: Optional[list[str]] = None) -> list[TrackerRun]:
    """Every run under ``logdir`` (a ``wandb/`` folder, or one above it), in path order; a line in ``notes`` for
    each log refused (not a regular file, too large, not a W&B log).

    Raises:
        UsageError: No ``run-<id>.wandb`` log under ``logdir``.
        MissingDependencyError: wandb is not installed (``deviate-cb[wandb]``).
    """
    logdir = Path(logdir)
    notes = [] if notes is None else notes
    found = sorted(
        folder / name
        for folder, files in walk_logs(logdir, notes, quiet_links=("latest-run",))
        for name in files
        if name.startswith("run-") and name.endswith(".wandb")
    )
    if not found:
        raise UsageError(
            f"`LOGDIR` holds no W&B run log (run-<id>.wandb). Received: {logdir}. Expected: a wandb/ folder of "
            "offline-run-* folders (WandbLogger or wandb.init in offline mode, deviate export wandb)."
        )
    require("wandb", extra="wandb")
    runs: dict[str, TrackerRun] = {}
    seen: set[bytes] = set()
    for path in found:
        try:
            data = read_log_file(path)
            digest = hashlib.sha256(data).digest()
            if digest in seen:  # the same log again (a copied folder, W&B's latest-run copied as a folder)
                continue
            seen.add(digest)
            records = wandb_records(data)
        except LogFileError as exc:
            notes.append(f"{exc}; run skipped")
            continue
        except OSError:
            continue
        except ValueError as exc:
            notes.append(f"{path}: not a W&B run log ({exc}); run skipped")
            continue
        run = _run(logdir, path, records)
        if run is not None:
            earlier = runs.get(run.run_id)
            runs[run.run_id] = run if earlier is None else _resumed(earlier, run)
    return list(runs.values())


def _resumed(earlier: TrackerRun, later: TrackerRun) -> TrackerRun:
    """One run from two logs of its id (a resumed run writes a log per session, in path order): the histories
    one after the other, the later session's status and end."""
    later.names = [*earlier.names, *later.names]
    later.steps = np.concatenate([earlier.steps, later.steps])
    later.values = np.concatenate([earlier.values, later.values])
    later.wall_times = np.concatenate([earlier.wall_times, later.wall_times])
    later.keys = {**earlier.keys, **later.keys}
    later.started = earlier.started if earlier.started is not None else later.started
    return later


def wandb_records(data: bytes) -> list[Any]:
    """Every protobuf ``Record`` of a ``.wandb`` log's bytes (W&B's package no longer ships a reader).

    Raises:
        ValueError: Not a W&B log, or a record cut short or out of order.
    """
    from google.protobuf.message import DecodeError
    from wandb.proto import wandb_internal_pb2  # generated protobuf: no type stubs

    if data[:4] != _MAGIC:
        raise ValueError("it does not start with :W&B")
    pos, pending, out = _HEADER, b"", []
    while pos + _HEADER <= len(data):
        left = _BLOCK - pos % _BLOCK
        if left < _HEADER:  # a block's tail too short for a header is padding
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + _HEADER])
        if kind == 0 and length == 0:
            pos += left
            continue
        if kind not in (_FULL, _FIRST, _MIDDLE, _LAST) or length > left - _HEADER:
            raise ValueError(f"a record of kind {kind} and {length} bytes at byte {pos}")
        piece = data[pos + _HEADER : pos + _HEADER + length]
        pending = piece if kind in (_FULL, _FIRST) else pending + piece
        pos += _HEADER + length
        if kind in (_FULL, _LAST):
            record = wandb_internal_pb2.Record()  # type: ignore[attr-defined]
            try:
                record.ParseFromString(pending)
            except DecodeError as exc:
                raise ValueError(f"a record that does not decode: {exc}") from None
            out.append(record)
            pending = b""
    return out


def _run(logdir: Path, path: Path, records: list[Any]) -> Optional[TrackerRun]:
    """The run a log holds; ``None`` for a log without its run record."""
    run: Any = None
    config: dict[str, Any] = {}
    rows: list[dict[str, Any]] = []
    exit_code: Optional[int] = None
    runtime: Optional[float] = None
    for record in records:
        kind = record.WhichOneof("record_type")
        if kind == "run":
            run = record.run
            config.update(_items(run.config.update))
        elif kind == "config":
            config.update(_items(record.config.update))
        elif kind == "history":
            rows.append(_items(record.history.item))
        elif kind == "exit":
            exit_code, runtime = int(record.exit.exit_code), float(record.exit.runtime)
    if run is None:
        return None
    started = run.start_time.seconds + run.start_time.nanos / 1e9 if run.HasField("start_time") else None
    names, steps, values, walls = _history(rows)
    keys = {f"params.{k}": _text(v) for k, v in config.items() if not k.startswith(("_", "deviate."))}
    keys.update({f"tags.{k}": _text(v) for k, v in config.items() if k.startswith("deviate.")})  # our live tags
    keys.update({f"tags.{k}": v for k, v in (("group", run.run_group), ("job_type", run.job_type)) if v})
    if exit_code is None:
        status, said, reason = "incomplete", None, "its W&B log has no exit record (still running, or killed)"
    else:
        status, said, reason = ("completed" if exit_code == 0 else "failed"), f"exit code {exit_code}", None
    ended = started + runtime if started is not None and runtime is not None else None
    return TrackerRun(
        tracker="wandb",
        uri=str(logdir.resolve()),
        run_id=run.run_id,
        experiment=run.project or logdir.resolve().name,
        status=status,
        tracker_status=said,
        run_name=run.display_name or None,
        started=started,
        ended=ended,
        keys=keys,
        names=names,
        steps=np.asarray(steps, dtype=np.int64),
        values=np.asarray(values, dtype=np.float64),
        wall_times=np.asarray(walls, dtype=np.float64),
        reason=reason,
        parent=config.get("deviate.role") == "study",  # the study run of `deviate export wandb`: no replica
    )


def _history(rows: list[dict[str, Any]]) -> tuple[list[str], list[int], list[float], list[float]]:
    """Every number logged, at its row's step and time (W&B's ``_``-keys and the step keys are no metrics)."""
    names: list[str] = []
    steps: list[int] = []
    values: list[float] = []
    walls: list[float] = []
    for row in rows:
        step = next((row[k] for k in STEP_KEYS if _number(row.get(k)) is not None), None)
        if step is None:
            continue
        wall = _number(row.get("_timestamp"))
        for key, value in row.items():
            number = _number(value)
            if key.startswith("_") or key in STEP_KEYS or number is None:
                continue
            names.append(key)
            steps.append(int(step))
            values.append(number)
            walls.append(math.nan if wall is None else wall)
    return names, steps, values, walls


def _items(items: Any) -> dict[str, Any]:
    """``key`` (or ``nested_key`` joined by ``/``) -> the decoded ``value_json`` of config or history items."""
    out = {}
    for item in items:
        key = item.key or "/".join(item.nested_key)
        try:
            out[key] = json.loads(item.value_json)
        except (ValueError, RecursionError):  # a value nested past Python's limit: a hostile log, the item skipped
            continue
    return out


def _number(value: Any) -> Optional[float]:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _text(value: Any) -> str:
    """A config value as text: W&B keeps ``{"value": v, "desc": ...}`` for a config item; strings as they are."""
    if isinstance(value, dict) and "value" in value:
        value = value["value"]
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)
