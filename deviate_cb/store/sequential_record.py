"""Where a study replicated in rounds keeps its sequence: the plan, every look, the decision.

Example:
    >>> import tempfile
    >>> out = Path(tempfile.mkdtemp())
    >>> path = record_path(out, ("a", "algo"), ("b", "algo"))
    >>> path.name
    'a.algo--vs--b.algo.json'
    >>> write_record(path, {"kind": "until-decided", "looks": []})
    >>> [r["kind"] for r in read_records(out)]
    ['until-decided']
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Optional

from deviate_cb.store.atomic import atomic_write_bytes
from deviate_cb.store.bounded_read import load_json
from deviate_cb.store.safe_paths import make_folders

__all__ = ["SEQUENTIAL_DIR", "read_record", "read_records", "record_path", "write_record"]

SEQUENTIAL_DIR = ".sequential"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.+-]")


def record_path(out: Path, group: tuple[str, str], against: Optional[tuple[str, str]] = None) -> Path:
    """The record of the sequence of ``group`` (``(experiment, variant)``), tested against ``against`` if given."""
    name = ".".join(_UNSAFE.sub("_", part) for part in group)
    if against is not None:
        name += "--vs--" + ".".join(_UNSAFE.sub("_", part) for part in against)
    return Path(out) / SEQUENTIAL_DIR / f"{name}.json"


def read_record(path: Path) -> Optional[dict[str, Any]]:
    """The record at ``path``; ``None`` when there is none (or it cannot be read as a JSON object)."""
    try:
        found = load_json(path)  # bounded: a FIFO, a huge or deeply nested file is refused (a ValueError)
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def read_records(out: Path) -> list[dict[str, Any]]:
    """Every readable record under ``<out>/.sequential/``, sorted by file name."""
    folder = Path(out) / SEQUENTIAL_DIR
    try:
        paths = sorted(p for p in folder.iterdir() if p.suffix == ".json" and p.is_file() and not p.is_symlink())
    except OSError:
        return []
    records = []
    for path in paths:
        found = read_record(path)
        if found is not None:
            records.append(found)
    return records


def write_record(path: Path, record: dict[str, Any]) -> None:
    """Write ``record`` atomically (a reader never sees half of it), creating the folder; never through a link
    planted at ``.sequential`` (:class:`~deviate_cb.store.safe_paths.PlantedLinkError`)."""
    path = Path(path)
    make_folders(path.parent.parent, path.parent)
    atomic_write_bytes(path, (json.dumps(record, indent=2, sort_keys=True, allow_nan=False) + "\n").encode())
