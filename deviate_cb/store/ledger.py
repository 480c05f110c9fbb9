"""The study's ledger of writes outside the run directories: which replica wrote which path of the project.

Example:
    >>> import tempfile
    >>> root = Path(tempfile.mkdtemp())
    >>> append_write(root, {"path": "/p/ckpt.pt", "experiment": "e", "variant": "algo", "replica": 0, "time": 1.0})
    >>> [entry["replica"] for entry in writes_of(root, "/p/ckpt.pt")], list(read_ledger(root))
    ([0], ['/p/ckpt.pt'])
    >>> writer_name({"experiment": "e", "variant": "algo", "replica": 0})
    'experiment=e variant=algo replica=0'
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Union

from deviate_cb.store.bounded_read import loads_json, read_regular
from deviate_cb.store.safe_paths import open_append

__all__ = ["LEDGER_DIR", "append_write", "ledger_file", "read_ledger", "writer_name", "writes_of"]

LEDGER_DIR = (".deviate", "writes")
_MAX_ENTRIES = 10_000  # entries read per path (a project rewriting one file every step)
_MAX_LEDGER_BYTES = 16 * 1024 * 1024  # the end of a ledger read: far more than _MAX_ENTRIES lines


def ledger_file(root: Union[str, os.PathLike[str]], path: str) -> Path:
    """The ledger file of ``path`` (absolute) in the study under ``root``."""
    return Path(root).joinpath(
        *LEDGER_DIR, hashlib.sha1(path.encode("utf-8", "surrogateescape")).hexdigest() + ".jsonl"
    )


def append_write(root: Union[str, os.PathLike[str]], entry: Mapping[str, Any]) -> None:
    """Append ``entry`` (with its ``path``) to the path's ledger file; raises ``OSError`` when it cannot, and
    :class:`~deviate_cb.store.safe_paths.PlantedLinkError` when the file or a folder down to it from ``root`` is a
    link the tool did not make."""
    target = ledger_file(root, str(entry["path"]))
    line = (json.dumps(dict(entry), separators=(",", ":")) + "\n").encode("utf-8", "surrogateescape")
    fd = open_append(root, target)  # never through a link planted in the store (PlantedLinkError)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def writes_of(root: Union[str, os.PathLike[str]], path: str) -> list[dict[str, Any]]:
    """The entries recorded for ``path`` (none when it has no ledger file or it cannot be read)."""
    return _entries(ledger_file(root, path), path)


def read_ledger(root: Union[str, os.PathLike[str]]) -> dict[str, list[dict[str, Any]]]:
    """Every path in the study's ledger with its entries; ``{}`` when there is none."""
    folder = Path(root).joinpath(*LEDGER_DIR)
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return {}
    found: dict[str, list[dict[str, Any]]] = {}
    for name in names:
        if name.endswith(".jsonl"):
            for entry in _entries(folder / name, None):
                found.setdefault(entry["path"], []).append(entry)
    return found


def writer_name(entry: Mapping[str, Any]) -> str:
    """``experiment=<e> variant=<v> replica=<k>``: the replica an entry names."""
    return f"experiment={entry.get('experiment')} variant={entry.get('variant')} replica={entry.get('replica')}"


def _entries(file: Path, path: Union[str, None]) -> list[dict[str, Any]]:
    try:
        data = read_regular(file, _MAX_LEDGER_BYTES, tail=True)
    except (OSError, ValueError):  # missing, unreadable, not a regular file, or too large (HostileFileError)
        return []
    lines = data.splitlines()[1 if len(data) >= _MAX_LEDGER_BYTES else 0 :]  # a tail's first line may be cut
    entries = []
    for line in lines[-_MAX_ENTRIES:]:
        try:
            entry = loads_json(line.decode("utf-8", "surrogateescape"), file)
        except ValueError:
            continue  # a line cut by a full disk or a killed writer
        if isinstance(entry, dict) and isinstance(entry.get("path"), str) and (path is None or entry["path"] == path):
            entries.append(entry)
    return entries
